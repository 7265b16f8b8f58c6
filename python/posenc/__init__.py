"""posenc for Python: exact RoPE schedules from a model's config.json, the fast C++ kernels as
autograd ops, and the positional encodings, over posenc's C++ core (no second implementation).

    import posenc
    model = posenc.load_hf_config("config.json")
    s = posenc.schedule(model)                         # inv_freq, attention_factor, ...
    q, k = posenc.apply_rope(q, k, schedule=s)         # [B, S, H, D], differentiable
"""
from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch

from . import _posenc

__all__ = [
    "ConfigError", "Error", "Layer", "Model", "Schedule", "RopeRuntime", "load_hf_config", "schedule", "rope_fields",
    "apply_rope", "XPosScale", "rope_shift", "attention", "SelfExtend", "ReRoPE", "DualChunk",
    "sinusoidal", "alibi_slopes", "alibi_bias", "t5_buckets", "kernel_target", "check", "spec", "golden", "gguf",
    "mrope_position_ids", "qwen_omni_audio_tokens", "hf", "nn", "plot", "deberta_relative_positions", "xl_relative_sinusoid",
    "vision_2d_schedule", "vision_2d_position_ids", "vision_tower_position_ids", "resize_position_grid", "bucket_position_ids",
]

Error = _posenc.Error  # every error the C++ core raises (a ValueError)


class ConfigError(Error):
    """A config.json or RoPE parameters posenc refuses; the message names the key and value."""


@dataclass
class Layer:
    """One attention-layer type of a model: whether it rotates, and its RopeParams fields under
    HF's names (rope_type, rope_theta, ...; None where unset): posenc.schedule(**params) takes them."""
    layer_type: str
    has_rope: bool
    params: Dict[str, Any]


@dataclass
class Model:
    """A parsed config.json: one Layer per distinct layer type, and what posenc noticed."""
    model_type: str
    layers: List[Layer]
    warnings: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def select(self, layer_type: Optional[str] = None) -> Layer:
        """The layer type to use: full_attention if present (or the only one), else the first with
        RoPE (the CLI's rule, from the C++ core)."""
        try:
            return self.layers[_posenc.select_layer([(l.layer_type, l.has_rope) for l in self.layers], layer_type or "")]
        except Error as e:
            raise ConfigError(str(e)) from None


def _model(d: Dict[str, Any]) -> Model:
    layers = [Layer(l["layer_type"], l["has_rope"], dict(l["params"])) for l in d["layers"]]
    return Model(d["model_type"], layers, list(d["warnings"]), list(d["notes"]))


def load_hf_config(path: str, lenient: bool = False, hf_compatible: bool = False) -> Model:
    """Reads a Hugging Face config.json the way posenc's CLI does (strict: an unknown key inside
    the rope dict raises ConfigError; lenient=True makes it a warning). hf_compatible=True reads
    the keys HF reads and nothing more (DBRX attn_config.rope_theta, MiniMax-M2 rotary_dim)."""
    try:
        return _model(_posenc.load_hf_config(str(path), lenient, hf_compatible))
    except Error as e:
        raise ConfigError(str(e)) from None


@dataclass
class Schedule:
    """A RoPE frequency schedule: inv_freq [rotary_dim/2] (float32) and the attention factor
    that multiplies cos and sin. rotated_dim: channels with a non-zero frequency (less than
    rotary_dim only for proportional). axis_of_freq: the M-RoPE position axis of each frequency."""
    inv_freq: torch.Tensor
    attention_factor: float
    rope_type: str
    rotary_dim: int
    rotated_dim: int
    correction_range: Optional[Tuple[float, float]]
    axis_of_freq: List[int]
    params: Dict[str, Any]


def schedule(config: Union[str, Model, None] = None, *, layer_type: Optional[str] = None,
             seq_len: Optional[int] = None, hf_compatible: bool = False, **params: Any) -> Schedule:
    """The schedule of a config (a path or a loaded Model; its layer_type) or of RopeParams
    fields given as keywords under HF's names (rope_type="yarn", rope_theta=1e6, head_dim=128,
    factor=4, original_max_position_embeddings=32768, ...; every field of `posenc freqs --help`;
    rope_type defaults to "default", plain RoPE, as in HF; the older theta= and type= still work).
    seq_len: the schedule in force at that length (dynamic NTK, LongRoPE). hf_compatible=True
    replays HF's float32 arithmetic."""
    fields = rope_fields(config, layer_type=layer_type, hf_compatible=hf_compatible, **params)
    try:
        return _schedule_of(_posenc.schedule(json.dumps(fields), seq_len, hf_compatible), fields)
    except Error as e:
        raise ConfigError(str(e)) from None


def rope_fields(config: Union[str, Model, None] = None, *, layer_type: Optional[str] = None,
                hf_compatible: bool = False, **params: Any) -> Dict[str, Any]:
    """The RopeParams fields (HF's names) of a config's layer type, or of the keywords given;
    what schedule() and the rotary modules compute from."""
    if config is not None and params:
        raise ConfigError("pass a config or RopeParams fields, not both")
    if config is not None and not isinstance(config, (str, os.PathLike, Model)):
        hint = " (RopeParams fields as a dict: pass them as keywords, **fields)" if isinstance(config, dict) else ""
        raise ConfigError(f"config must be a path to a config.json or a Model, got {type(config).__name__}{hint}")
    for key, value in params.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(v, float) and not math.isfinite(v) for v in values):
            raise ConfigError(f"{key}={value!r}: RopeParams fields must be finite numbers")
    if config is not None:
        model = config if isinstance(config, Model) else load_hf_config(config, hf_compatible=hf_compatible)
        return dict(model.select(layer_type).params)
    fields = dict(params)
    if "rope_type" not in fields and "type" not in fields:
        fields["rope_type"] = "default"  # HF's type when a config names none; a record must name it
    return fields


def _schedule_of(d: Dict[str, Any], fields: Dict[str, Any]) -> Schedule:
    return Schedule(torch.tensor(d["inv_freq"], dtype=torch.float32), d["attention_factor"], d["rope_type"],
                    d["rotary_dim"], d["rotated_dim"], d["correction_range"], list(d["axis_of_freq"]), fields)


class RopeRuntime:
    """HF's runtime rule over a schedule (the C++ RopeRuntime): update(max_position_id) returns the
    Schedule in force for a call whose largest position id that is. Dynamic NTK grows its cache
    when a call is longer than any before and resets below max_position_embeddings; LongRoPE uses
    its long factors for a call past original_max_position_embeddings; other types are fixed."""

    def __init__(self, fields: Dict[str, Any], hf_compatible: bool = False) -> None:
        try:
            self._runtime = _posenc.RopeRuntime(json.dumps(fields), hf_compatible)
            self._fields = dict(fields)
            self.hf_compatible = hf_compatible
            self._last = self._runtime.update(0)
        except Error as e:
            raise ConfigError(str(e)) from None
        self.current = _schedule_of(self._last, self._fields)

    @property
    def fields(self) -> Dict[str, Any]:
        """The RopeParams fields this runtime was built from (HF's names)."""
        return dict(self._fields)

    @property
    def max_seq_len_cached(self) -> int:
        """HF's max_seq_len_cached (dynamic NTK): max_position_embeddings until a longer call."""
        return self._runtime.max_seq_len_cached

    def update(self, max_position_id: int) -> Schedule:
        if self.current.rope_type not in ("dynamic", "longrope"):
            return self.current  # fixed: nothing to recompute
        try:
            d = self._runtime.update(int(max_position_id))
        except Error as e:
            raise ConfigError(str(e)) from None
        if d["inv_freq"] != self._last["inv_freq"] or d["attention_factor"] != self._last["attention_factor"]:
            self._last, self.current = d, _schedule_of(d, self._fields)
        return self.current


from .rope import XPosScale, apply_rope, rope_shift  # noqa: E402  (needs Schedule)
from .attention import DualChunk, ReRoPE, SelfExtend, attention  # noqa: E402
from .encodings import (_check_result_size, alibi_bias, alibi_slopes, deberta_relative_positions, sinusoidal, t5_buckets,  # noqa: E402
                        xl_relative_sinusoid)


def check(dim: int = 64, positions: int = 100000, seed: int = 1234) -> List[Dict[str, Any]]:
    """The properties each scheme claims, measured live (what `posenc check` prints): a list of
    {name, claim, measured, tolerance, passed}."""
    try:
        return list(_posenc.check(dim, positions, seed))
    except Error as e:
        raise ConfigError(str(e)) from None


def mrope_position_ids(runs: List[Tuple[str, int, int, int, int]], merge_size: int = 2, *, rule: str = "v5",
                       time_interval: float = 1.0, video_seconds_per_grid: Sequence[float] = (),
                       seconds_per_chunk: Optional[float] = None) -> Tuple[torch.Tensor, Union[int, float]]:
    """HF's get_rope_index for one sequence: runs of ("text" | "audio", length, 1, 1, 1),
    ("image" | "video", 0, t, h, w) with the grid in patches before merging, and
    ("video_with_audio", audio_tokens, t, h, w): a video and its audio track (HF's
    use_audio_in_video; audio_tokens = qwen_omni_audio_tokens(mel_frames)), holding its own
    <|vision_bos|><|audio_bos|> ... <|audio_eos|><|vision_eos|> (4 + t h' w' + audio_tokens tokens;
    every other bos and eos is a text token). A sequence's videos all carry audio or none does.
    Returns the ids [3, seq] (T, H, W) and rope_delta (a decode step at cache position c uses
    c + rope_delta).

    rule "v5": after a vision run the next starts at pos + max(h', w') (Qwen2-VL in HF v5);
    "v4.49": at the last piece's max id + 1 (HF <= 4.49, and Qwen2.5-Omni). Temporal patch f of a
    vision run has T id start + trunc(f * seconds_per_grid * time_interval) in float32 (HF's
    tensors): Qwen2.5-VL videos time_interval = tokens_per_second; Qwen2.5-Omni (rule "v4.49")
    time_interval = position_id_per_seconds (25) for images and videos, video_seconds_per_grid one
    value per video (default 1), audio runs between their bos and eos text tokens. Its video with
    audio gives both bos one id, cuts video and audio into chunks of int(time_interval *
    seconds_per_chunk) T ids (seconds_per_chunk: the thinker config's, default 2) and interleaves
    them (video chunk j, audio chunk j), both eos one id after the last chunk's max.

    rule "qwen3-omni" (modeling_qwen3_omni_moe.py; time_interval = position_id_per_seconds, 13 in
    the released checkpoint): the ids are HF's float32 values, never truncated (a step of 12.5 stays
    12.5), returned as a float64 tensor with a float rope_delta; a video with audio gets consecutive
    bos and eos ids and its tokens merged by T id (video first on a tie), without chunks. Float ids
    are not for apply_rope and the kernels, which take integer positions."""
    if seconds_per_chunk is None:
        seconds_per_chunk = 2.0
    else:
        if isinstance(seconds_per_chunk, bool) or not isinstance(seconds_per_chunk, numbers.Real) \
                or not math.isfinite(seconds_per_chunk) or seconds_per_chunk <= 0:
            raise ValueError(f"seconds_per_chunk must be a finite number > 0, got {seconds_per_chunk!r}")
        if rule != "v4.49":
            raise ValueError(f"seconds_per_chunk is Qwen2.5-Omni's (rule 'v4.49'); rule {rule!r} does not cut "
                             "videos with audio into chunks")
    ids, seq_len, delta = _posenc.mrope_position_ids(list(runs), merge_size, rule, float(time_interval),
                                                     [float(x) for x in video_seconds_per_grid], float(seconds_per_chunk))
    return torch.from_numpy(ids).view(3, seq_len), delta


def qwen_omni_audio_tokens(mel_frames: int, qwen3: bool = False) -> int:
    """Audio tokens of an audio segment with `mel_frames` valid mel frames: Qwen2.5-Omni's
    ((L - 1) // 2 + 1 - 2) // 2 + 1, or Qwen3-Omni's (qwen3=True), as HF computes them."""
    if isinstance(mel_frames, bool) or not isinstance(mel_frames, int):
        raise ValueError(f"mel_frames must be an int, got {mel_frames!r}")
    if not isinstance(qwen3, bool):
        raise ValueError(f"qwen3 must be True or False, got {qwen3!r}")
    return _posenc.qwen_omni_audio_tokens(mel_frames, qwen3)


_VISION_FAMILIES = ("qwen2_vl", "pixtral", "llama4", "moonvit", "gemma4")


def _integer(value: Any) -> Optional[int]:
    """value as an int when it is one (a Python or numpy integer, not a bool), else None."""
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else None


def _vision_args(family: str, head_dim: int, theta: float, patches_per_side: Optional[int], merge_size: int):
    if family not in _VISION_FAMILIES:
        raise ValueError(f"family must be one of {', '.join(_VISION_FAMILIES)}, got {family!r}")
    if _integer(head_dim) is None or not 4 <= _integer(head_dim) <= 2**16:
        raise ValueError(f"head_dim must be an int in [4, 65536] divisible by 4, got {type(head_dim).__name__} {head_dim!r}")
    if (isinstance(theta, bool) or not isinstance(theta, numbers.Real) or not math.isfinite(float(theta))
            or float(theta) <= 0):
        raise ValueError(f"theta must be a finite number > 0, got {type(theta).__name__} {theta!r}")
    head_dim, theta = _integer(head_dim), float(theta)
    if patches_per_side is None:
        if family in ("pixtral", "llama4"):
            raise ValueError(f"{family} needs patches_per_side (vision_config image_size // patch_size)")
        patches_per_side = 512 if family == "moonvit" else 1
    for name, value in (("patches_per_side", patches_per_side), ("merge_size", merge_size)):
        if _integer(value) is None or not 1 <= _integer(value) <= 2**31 - 1:
            raise ValueError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r}")
    return family, head_dim, theta, _integer(patches_per_side), _integer(merge_size)


def vision_2d_schedule(head_dim: int, theta: float = 10000.0, family: str = "qwen2_vl",
                       patches_per_side: Optional[int] = None) -> Schedule:
    """The 2-D RoPE of a vision tower, as HF's tower builds it (the core's vision_rope.h):
    "qwen2_vl" (VisionRotaryEmbedding, also Qwen2.5-VL, Qwen3-VL, GLM-4V): head_dim / 4
    frequencies theta^(-4k / head_dim) read the row, the same again the column; "pixtral"
    (PixtralRotaryEmbedding): 1-D RoPE's even frequencies on the row, odd on the column;
    "llama4" (Llama4VisionRotaryEmbedding): columns first, then rows, GPT-J pairs; "moonvit"
    (Kimi-VL's Rope2DPosEmb): each frequency on the column then the row, GPT-J pairs; "gemma4"
    (Gemma4VisionRotaryEmbedding, theta 100 in its configs): channels [0, D/2) by the column and
    [D/2, D) by the row, each half its own rotate_half RoPE (params["blocks"] = 2).
    Rotate [B, S, H, D] with apply_rope(x, schedule=s, positions=ids.unsqueeze(1)) (ids [2, S]
    from vision_tower_position_ids, as [2, 1, S] or [2, B, S]; the pairing is s.params["layout"]);
    q.k then depends on the row and column offsets only. patches_per_side: image_size // patch_size (Pixtral, Llama 4)."""
    family, head_dim, theta, side, _ = _vision_args(family, head_dim, theta, patches_per_side, 2)
    inv_freq, axes, layout, summary, blocks = _posenc.vision_rope(family, head_dim, theta, side, 2)
    params = {"rope_theta": theta, "head_dim": head_dim, "family": family, "layout": layout, "summary": summary}
    if blocks > 1:  # Gemma 4: each half of the head its own RoPE (rope_blocks.py)
        params["blocks"] = blocks
    return Schedule(torch.tensor(inv_freq, dtype=torch.float32), 1.0, "default", head_dim, head_dim, None, list(axes),
                    params)


def vision_tower_position_ids(family: str, rows: int, cols: int, patches_per_side: Optional[int] = None,
                              merge_size: int = 2) -> torch.Tensor:
    """The (row, column) coordinates [2, N] of one image of rows x cols patches in the order the
    tower takes its tokens: Qwen2-VL merge blocks of merge_size, Pixtral, MoonViT and Gemma 4
    row-major from 0 (at most patches_per_side per side), Llama 4 its whole patches_per_side^2 tile from 1,
    then the class token at (0, 0), unrotated."""
    for name, value in (("rows", rows), ("cols", cols)):
        if _integer(value) is None or not 1 <= _integer(value) <= 2**31 - 1:
            raise ValueError(f"vision_tower_position_ids: {name} must be an int in [1, 2^31-1], got "
                             f"{type(value).__name__} {value!r}")
    rows, cols = _integer(rows), _integer(cols)
    family, _, _, side, merge = _vision_args(family, 4, 10000.0, patches_per_side, merge_size)
    return torch.from_numpy(_posenc.vision_rope_position_ids(family, 4, 10000.0, side, merge, rows, cols)).view(2, -1)


_GRID_MODES = ("bicubic", "bilinear_antialias", "bucket", "bucket_bf16", "bucket_f16", "grid_sample_bicubic")
_BUCKET_DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def bucket_position_ids(patches_per_side: int, rows: int, cols: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Idefics3's (Idefics2's, SmolVLM's) position ids [rows * cols] (row-major) of an image of rows x
    cols patches over its table of patches_per_side^2 rows (image_size // patch_size per side), as
    Idefics3VisionEmbeddings.forward (HF v5) buckets them: the fractional coordinate i / n, computed
    in float32 and rounded to the pixels' dtype, then bucketize(..., arange(1/N, 1, 1/N), right=True).
    dtype: the model's (pixel_values') dtype, float32, bfloat16 or float16: it changes the ids."""
    if dtype not in _BUCKET_DTYPES:
        raise ValueError(f"dtype must be torch.float32, torch.bfloat16 or torch.float16, got {dtype!r}")
    for name, value in (("patches_per_side", patches_per_side), ("rows", rows), ("cols", cols)):
        if _integer(value) is None or not 1 <= _integer(value) <= 65536:
            raise ValueError(f"{name} must be an int in [1, 65536], got {type(value).__name__} {value!r}")
    n = _integer(patches_per_side)
    _check_result_size("bucket_position_ids", (_integer(rows), _integer(cols)), 8)
    h = torch.tensor(_posenc.bucket_rows(n, _integer(rows), _BUCKET_DTYPES[dtype]), dtype=torch.int64)
    w = torch.tensor(_posenc.bucket_rows(n, _integer(cols), _BUCKET_DTYPES[dtype]), dtype=torch.int64)
    return (h[:, None] * n + w[None, :]).reshape(-1)


def resize_position_grid(table: torch.Tensor, size: Tuple[int, int], mode: str = "bicubic") -> torch.Tensor:
    """A learned position grid [rows, cols, dim] resized to size = (rows', cols') as the vision
    towers' HF code does it, F.interpolate with align_corners=False: "bicubic" (ViT's
    interpolate_pos_encoding, DINOv2, CLIP, Kimi-VL's MoonViT), "bilinear_antialias" (SigLIP2's
    resize_positional_embeddings), or Idefics3's rows at bucketised coordinates, "bucket" for a
    float32 model, "bucket_bf16" / "bucket_f16" for half-precision pixels (bucket_position_ids;
    rows copied, not interpolated), or GLM-4V's "grid_sample_bicubic" (F.grid_sample at its
    normalised float32 coordinates). Computed by the core (position_grid.h) in double, returned in
    float32 [rows', cols', dim] on the CPU; the class token, where a model has one, is the caller's."""
    if mode not in _GRID_MODES:
        raise ValueError(f"mode must be one of {', '.join(_GRID_MODES)}, got {mode!r}")
    if not isinstance(table, torch.Tensor) or table.dim() != 3:
        raise ValueError(f"table must be a [rows, cols, dim] torch.Tensor, got {type(table).__name__} of shape "
                         f"{tuple(getattr(table, 'shape', ()))}")
    if not table.dtype.is_floating_point:
        raise ValueError(f"table must be a floating-point tensor, got {table.dtype}")
    if table.requires_grad:
        raise ValueError("resize_position_grid gives the reference values without gradients: pass table.detach(), or "
                         "train through torch's F.interpolate")
    if not isinstance(size, (tuple, list)) or len(size) != 2 or any(_integer(v) is None for v in size):
        raise ValueError(f"size must be (rows, cols) as two ints, got {size!r}")
    rows, cols = _integer(size[0]), _integer(size[1])
    if not (1 <= rows <= 65536 and 1 <= cols <= 65536):
        raise ValueError(f"size must be (rows, cols) in [1, 65536], got {size!r}")
    values = table.detach().to(device="cpu", dtype=torch.float32).contiguous().numpy()
    out = _posenc.resize_position_grid(values, rows, cols, mode)
    return torch.from_numpy(out).view(rows, cols, table.shape[2])


def vision_2d_position_ids(t: int, h: int, w: int, merge_size: int = 2) -> torch.Tensor:
    """The (row, column) ids [2, t h w] of a t x h x w patch grid in the vision tower's order (m x m
    merge blocks, block-major; the t frames repeat the grid), as HF's Qwen2-VL rot_pos_emb."""
    for name, value in (("t", t), ("h", h), ("w", w), ("merge_size", merge_size)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**31 - 1:
            raise ValueError(f"vision_2d_position_ids: {name} must be an int in [1, 2^31-1], got {value!r}")
    return torch.from_numpy(_posenc.vision_2d_position_ids(t, h, w, merge_size)).view(2, -1)


def kernel_target() -> str:
    """The SIMD target the kernels use on this machine ("AVX3", "AVX2", ...)."""
    return _posenc.kernel_target()
from . import hf, nn, plot  # noqa: E402,F401  (posenc.hf, posenc.nn, posenc.plot after import posenc)
from .engine import golden, gguf, spec  # noqa: E402  (the engine kit: needs hf)
