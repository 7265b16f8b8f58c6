"""The engine kit from Python: the structures `posenc spec --json`, `posenc golden` and
`posenc gguf --json` give, computed by the same C++ functions (no second implementation).

    import posenc
    s = posenc.spec("config.json")           # dict: schedules, layers (one per layer), positions, ...
    g = posenc.golden("config.json", "out")   # {"manifest": dict, "tensors": {name: Tensor}}; writes out/
    r = posenc.gguf("model.gguf", config="config.json")   # r["agrees_with_hf"], r["mismatches"]

A config is a path to a config.json, a dict, or an object with to_dict() (HF's PretrainedConfig).
"""
from __future__ import annotations

import json
import numbers
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from . import ConfigError, Error, _posenc
from .hf import _config_text


def _source(config: Any) -> Tuple[str, bool]:
    """(path, True) for a path, so the core reads it bounded and names it in errors; else
    (JSON text, False)."""
    if isinstance(config, (str, os.PathLike)):
        return os.fspath(config), True
    return _config_text(config), False


_MAX_POSITIONS = 4096  # golden.h: at most 4096 positions


def _positions(positions: Optional[Sequence[int]]) -> List[int]:
    if positions is None:
        return []  # the default positions: 0, 1, 127, 4095, the original context, 4x it, 131071
    if isinstance(positions, (str, bytes)) or not hasattr(positions, "__iter__"):
        raise ConfigError(f"positions must be a sequence of integers, got {type(positions).__name__}")
    if hasattr(positions, "__len__") and len(positions) > _MAX_POSITIONS:  # range(10**9): refused before listing
        raise ConfigError(f"positions has {len(positions)} entries; at most {_MAX_POSITIONS} (logits are [P, P])")
    out = []
    for p in positions:
        if isinstance(p, bool) or not isinstance(p, numbers.Integral) or not 0 <= int(p) <= 2**31 - 1:
            raise ConfigError(f"positions must be integers in [0, 2^31-1], got {type(p).__name__} {p!r}"[:200])
        out.append(int(p))
        if len(out) > _MAX_POSITIONS:
            raise ConfigError(f"positions has more than {_MAX_POSITIONS} entries (logits are [P, P])")
    if not out:
        raise ConfigError("positions is empty: give at least one position, or None for the defaults")
    return out


def spec(config: Any, *, lenient: bool = False, hf_compatible: bool = False) -> Dict[str, Any]:
    """A model's per-layer positional semantics, as `posenc spec --json` prints them: model_type,
    positions (the scheme per stack; learned, sinusoidal, ALiBi or T5 when not RoPE), schedules
    (per layer type: rope_type, rotary_dim, attention_factor, inv_freq), layers (one entry per
    layer: rope, pairing, rotated_channels, attention kind and window, query and softmax scale,
    kv_shared_from, and DeepSeek-V3.2's DSA `indexer`), every_layer, mrope_section, warnings, notes."""
    source, is_path = _source(config)
    try:
        return json.loads(_posenc.spec_json(source, is_path, lenient, hf_compatible))
    except Error as e:
        raise ConfigError(str(e)) from None


def golden(config: Any, out_dir: Optional[str] = None, *, positions: Optional[Sequence[int]] = None,
           seed: int = 0, shift: Optional[int] = None, remap: Any = None, lenient: bool = False,
           hf_compatible: bool = False) -> Dict[str, Any]:
    """An engine's test vectors, as `posenc golden` writes them: {"manifest": the manifest.json
    dict, "tensors": {"<layer_type>.<what>": float32 Tensor}} with cos, sin [P, rotary_dim], q, k,
    q_out, k_out [P, head_dim] and logits [P, P] per layer type (P = len(positions)).
    shift: also k_shifted, k_out re-rotated by that many positions (`--shift`). remap
    (posenc.SelfExtend, posenc.ReRoPE or posenc.DualChunk): also v, remap_logits [P, P] and
    remap_out [P, head_dim], the causal attention with RoPE's distances remapped, in double
    (`--remap`; the manifest's "remap" entry says how).
    out_dir: also write golden.safetensors and manifest.json there (both or neither)."""
    from .attention import DualChunk, ReRoPE, SelfExtend, _remap_fields  # posenc.attention imports the package root
    source, is_path = _source(config)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ConfigError(f"seed must be an integer in [0, 2^64-1], got {seed!r}")
    if shift is not None and (isinstance(shift, bool) or not isinstance(shift, numbers.Integral)
                              or not -2**31 < int(shift) < 2**31):
        raise ConfigError(f"shift must be an integer in (-2^31, 2^31) or None, got {type(shift).__name__} {shift!r}")
    shift = None if shift is None else int(shift)
    if remap is not None and not isinstance(remap, (SelfExtend, ReRoPE, DualChunk)):
        raise ConfigError(f"remap must be posenc.SelfExtend, posenc.ReRoPE, posenc.DualChunk or None, got "
                          f"{type(remap).__name__}")
    try:
        remap_fields = _remap_fields(remap) if remap is not None else None
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if out_dir is not None and not isinstance(out_dir, (str, os.PathLike)):
        raise ConfigError(f"out_dir must be a path or None, got {type(out_dir).__name__}")
    try:
        manifest, tensors = _posenc.golden(source, is_path, lenient, hf_compatible, _positions(positions), seed,
                                           os.fspath(out_dir) if out_dir is not None else "", shift, remap_fields)
    except Error as e:
        raise ConfigError(str(e)) from None
    out = {}
    for name, shape, data in tensors:
        t = torch.frombuffer(bytearray(data), dtype=torch.float32) if data else torch.empty(0)
        out[name] = t.reshape(shape)
    return {"manifest": json.loads(manifest), "tensors": out}


def gguf(path: Any, config: Any = None, *, lenient: bool = False, hf_compatible: bool = False) -> Dict[str, Any]:
    """A GGUF file's positional keys and the schedule llama.cpp computes from them, as
    `posenc gguf --json` prints them (architecture, rope_keys, n_rot, freq_base, scaling_type,
    factor, ..., inv_freq, attention_factor). With config: also agrees_with_hf (bool) and
    mismatches ([{"key", "message"}], each naming the GGUF key responsible). Only the header and
    the small positional tensors are read, whatever the model's size."""
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"path must be the path of a .gguf file, got {type(path).__name__}")
    source, is_path = ("", True) if config is None else _source(config)
    try:
        return json.loads(_posenc.gguf_json(os.fspath(path), source, is_path, lenient, hf_compatible))
    except Error as e:
        raise ConfigError(str(e)) from None
