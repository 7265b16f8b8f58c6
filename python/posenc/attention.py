"""posenc.attention: softmax(q k^T * scale + bias + mask) v with positions computed on the fly
(RoPE, ALiBi, T5, or none), never an S x T matrix: the core's fused kernel forward and backward
as a torch.autograd.Function, and the inference-time remaps of RoPE's distance (Self-Extend,
ReRoPE, leaky ReRoPE, Dual Chunk Attention)."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union

import torch

from . import Schedule, torch_ops
from .attention_native import distance_side, native_attention
from .contextual import CoPE
from .encodings import _check_scale
from .rope import _DTYPES
from .xpos_scale import XPosScale


@dataclass(frozen=True)
class SelfExtend:
    """Self-Extend (Jin et al. 2024): distances below `window` kept, beyond it
    floor(i/G) - floor(j/G) + window - floor(window/G) with G = `group`."""
    group: int
    window: int


@dataclass(frozen=True)
class ReRoPE:
    """ReRoPE (Su 2023): distance min(Delta, window); with `leak` k, window + (Delta - window) / k."""
    window: int
    leak: Optional[float] = None


@dataclass(frozen=True)
class DualChunk:
    """Dual Chunk Attention (An et al. 2024; Qwen2.5-1M's dual_chunk_attention_config): with
    c = chunk_size - local_size, keys at j mod c; a key in the query's chunk keeps its distance,
    one chunk back the query sits at min(i mod c + c, chunk_size), further back at
    min(2c - 1, chunk_size) (vLLM's dual_chunk_rope.py). chunk_size > local_size > 0."""
    chunk_size: int
    local_size: int


Remap = Union[SelfExtend, ReRoPE, DualChunk, None]


def _count(name: str, value: Any, lo: int, hi: int) -> int:
    """An integer argument in [lo, hi] (a Python or numpy integer), or a ValueError naming it and its type."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= int(value) <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {type(value).__name__} {value!r}")
    return int(value)


def _remap_fields(remap: Remap) -> Dict[str, Any]:
    """The kernel's remap fields (attention.h's PositionRemap): the defaults, then the remap's own."""
    fields = dict(remap="none", remap_window=0, remap_group=1, remap_leak=0.0, remap_chunk_size=0, remap_local_size=0)
    if remap is None:
        return fields
    if isinstance(remap, SelfExtend):
        return dict(fields, remap="self-extend", remap_window=_count("SelfExtend.window", remap.window, 0, 2**31 - 1),
                    remap_group=_count("SelfExtend.group", remap.group, 1, 2**31 - 1))
    if isinstance(remap, ReRoPE):
        window = _count("ReRoPE.window", remap.window, 0, 2**31 - 1)
        if remap.leak is None:
            return dict(fields, remap="rerope", remap_window=window)
        leak = remap.leak
        finite = isinstance(leak, numbers.Real) and not isinstance(leak, bool) and abs(leak) < 1e308 and math.isfinite(leak)
        if not finite or not float(leak) > 0:
            raise ValueError(f"ReRoPE.leak must be a finite number > 0 (None: ReRoPE without a leak), got "
                             f"{type(leak).__name__} {leak!r}"[:200])
        return dict(fields, remap="leaky-rerope", remap_window=window, remap_leak=float(leak))
    if isinstance(remap, DualChunk):
        local = _count("DualChunk.local_size", remap.local_size, 1, 2**31 - 2)
        chunk = _count("DualChunk.chunk_size", remap.chunk_size, 2, 2**31 - 1)
        if chunk <= local:
            raise ValueError(f"DualChunk.chunk_size must be > local_size = {local} (the chunk length is chunk_size - "
                             f"local_size), got {chunk}")
        return dict(fields, remap="dual-chunk", remap_chunk_size=chunk, remap_local_size=local)
    raise ValueError(f"remap must be posenc.SelfExtend, posenc.ReRoPE, posenc.DualChunk or None, got {type(remap).__name__}")


def _check_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads_dim: int) -> None:
    """The shapes the kernel's validate_attention requires, checked here for every backend and
    for empty inputs too: one B and D, k and v alike, Hq a multiple of Hk >= 1."""
    def bshd(t):
        return (t.shape[0], t.shape[1], t.shape[2], t.shape[3]) if heads_dim == 2 else (t.shape[0], t.shape[2], t.shape[1], t.shape[3])
    (b, _, hq, d), (bk, t, hk, dk), vs = bshd(q), bshd(k), bshd(v)
    if bk != b or dk != d or vs != (bk, t, hk, dk):
        raise ValueError(f"q [B, S, Hq, D] = {list(bshd(q))}, k {list(bshd(k))} and v {list(vs)} (as [B, S, H, D]) must "
                         "share B and D, and k and v their whole shape")
    if d < 1:
        raise ValueError(f"head_dim D must be >= 1, got q [B, S, Hq, D] = {list(bshd(q))}")
    if hk < 1 or hq % hk != 0:
        raise ValueError(f"query heads Hq = {hq} must be a multiple of kv heads Hk = {hk} >= 1")


def _bias_params(bias: Any, params: Dict[str, Any], batch: int, heads: int, s_len: int, t_len: int,
                 causal: bool, device: torch.device) -> torch.Tensor:
    """The kernel's parameters for a posenc.nn distance bias or FoX's c; returns the differentiable
    input (the table [Hq, L], or c [B, Hq, T])."""
    # Kerple, Sandwich and FIRE (its queries below L: posenc.attention checks) over |Delta|, DPB over Delta
    if isinstance(bias, torch.nn.Module) and hasattr(bias, "table"):
        length = s_len + t_len  # |Delta| < S + T whatever the offsets (queries sit at T - S + i)
        side = distance_side(bias)
        table = bias.table(length)
        width = 2 * length - 1 if side == "signed" else length
        if table.dim() != 2 or table.shape != (heads, width):
            raise ValueError(f"bias's table is {list(table.shape)}; the kernel reads [Hq = {heads}, {width}] ({side} "
                             f"distances up to {length - 1})")
        if table.device != device:
            raise ValueError(f"bias ({type(bias).__name__}) is on {table.device}, q on {device}: move it to q's device")
        data = table.detach().float().contiguous()
        if not torch.isfinite(data).all():
            raise ValueError(f"bias's table ({type(bias).__name__}) holds a value that is not finite")
        params.update(positions="distance-table", distance_length=length, distance_side=side)
        return table
    if isinstance(bias, torch.Tensor):  # FoX's cumulative gate
        if not causal:
            raise ValueError("FoX's gate bias is causal: pass causal=True")
        if bias.dim() != 3 or tuple(bias.shape) != (batch, heads, t_len):
            raise ValueError(f"a gate bias must be FoX's c [B, Hq, T] = [{batch}, {heads}, {t_len}], got {list(bias.shape)}")
        if bias.device != device or not bias.dtype.is_floating_point:
            raise ValueError(f"FoX's c must be a floating tensor on q's device {device}, got {bias.dtype} on {bias.device}")
        params.update(positions="forget-gate")
        return bias
    if isinstance(bias, CoPE):
        raise ValueError("bias (CoPE) counts each query's open gates over its whole score row: it has no table for the "
                         "kernel; use CoPE.attention(q, k, v)")
    raise ValueError("bias must be a posenc.nn.Kerple, Sandwich, DynamicPositionBias or FIRE module (an instance), or "
                     f"FoX's c [B, Hq, T], got {bias!r:.80}")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True, scale: Optional[float] = None,
              rope: Optional[Schedule] = None, rope_layout: str = "half_split", alibi: Optional[torch.Tensor] = None,
              t5: Optional[torch.Tensor] = None, t5_max_distance: int = 128, window: Optional[int] = None,
              chunk: Optional[int] = None, key_padding_mask: Optional[torch.Tensor] = None, kv_offset: int = 0,
              heads_dim: int = 2, remap: Remap = None, bias: Any = None, xpos: Optional[XPosScale] = None,
              return_lse: bool = False, backend: str = "auto") -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Fused attention, differentiable: on the CPU the core's kernel (tiled backward, float32 math).

    q [B, S, Hq, D], k and v [B, T, Hk, D] (heads_dim=2; heads_dim=1 for [B, H, S, D]), float32,
    bfloat16 or float16, channels contiguous; Hq a multiple of Hk (GQA). Query i sits at key index
    T - S + i (prefill, or decode after a cache); key j at position kv_offset + j.
    Positions, one of: rope (a posenc.Schedule; q and k are rotated as they load, not modified;
    rope_layout as apply_rope's; with xpos, a posenc.XPosScale, q times its query scale and k
    times its key scale as apply_rope gives them: xPos inside the kernel), alibi (slopes [Hq], e.g. posenc.alibi_slopes(H); symmetric when
    causal=False), t5 (the bucket table [num_buckets, Hq], learnable: it gets a gradient;
    bidirectional buckets when causal=False; T5 adds its bias to raw q.k: pass scale=1), or none.
    Masks: causal, window (sliding), chunk (Llama 4), key_padding_mask [B, T] (bool or 0/1, True
    = a real key). scale: 1/sqrt(D) when None. remap (RoPE; differentiable): posenc.SelfExtend,
    posenc.ReRoPE or posenc.DualChunk. bias: a posenc.nn distance bias (Kerple, Sandwich: its table
    over |distance|; DynamicPositionBias: over the signed distance; differentiable in its
    parameters; FIRE too, as its table, while every query is below its threshold L, and past L
    through backend "torch" under "auto") or FoX's cumulative gate c [B, Hq, T]
    (ForgettingGate.cumulative, differentiable; causal only), inside the kernel with their
    gradients, never an S x T matrix.
    backend: "kernels" (the fused CPU kernel), "torch" (the same attention in torch operations on
    the tensors' device, differentiable by autograd; it materialises the [B, Hq, S, T] scores; also
    float64), or "auto" (the kernel on the CPU, torch elsewhere).
    Returns out [like q, in q's memory order] and, with return_lse, each row's log-sum-exp
    [B, Hq, S] (no gradient flows through it). On the CPU this is the operator
    torch.ops.posenc.attention (the C++ layer's too; traced as posenc::attention): its backward
    runs the kernels once, and differentiating its gradients again (create_graph, e.g. a gradient
    penalty) raises; backend="torch" is differentiable to any order."""
    if backend not in ("auto", "kernels", "torch"):
        raise ValueError(f"backend must be one of auto, kernels, torch, got {backend!r}")
    native = backend == "torch" or (backend == "auto" and isinstance(q, torch.Tensor) and q.device.type != "cpu")
    tensors = {"q": q, "k": k, "v": v}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be a 4-D tensor, got {getattr(t, 'shape', type(t))}")
        if not native and t.device.type != "cpu":
            raise ValueError(f"posenc.attention's kernel runs on the CPU, got {name} on {t.device}: use backend='auto' "
                             "or 'torch'")
        if t.device != q.device:
            raise ValueError(f"q, k and v must be on one device, got {name} on {t.device} and q on {q.device}")
        if t.dtype not in _DTYPES and not (native and t.dtype == torch.float64):
            raise ValueError(f"{name} must be float32, bfloat16 or float16 (float64 with backend='torch'), got {t.dtype}")
    if type(heads_dim) is not int or heads_dim not in (1, 2):
        raise ValueError(f"heads_dim must be 1 or 2, got {heads_dim!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    _check_shapes(q, k, v, heads_dim)
    if sum(x is not None for x in (rope, alibi, t5, bias)) > 1:
        raise ValueError("give one of rope, alibi, t5 and bias")
    if remap is not None and rope is None:
        raise ValueError("remap changes RoPE's distances: it needs rope=")
    if xpos is not None and (rope is None or remap is not None or not isinstance(xpos, XPosScale) or xpos.first != "query"):
        raise ValueError("xpos is a posenc.XPosScale(first='query') on RoPE (rope=, no remap): q takes its query scale, k its key "
                         f"scale; got xpos={xpos!r} with rope={rope!r}, remap={remap!r}")
    _check_scale("posenc.attention", scale)
    kv_offset = _count("kv_offset", kv_offset, 0, 2**31 - 1)
    window = _count("window", window, 1, 2**31 - 1) if window is not None else 0
    chunk = _count("chunk", chunk, 1, 2**31 - 1) if chunk is not None else 0
    if window and not causal:
        raise ValueError("window is a causal sliding window (the W keys up to the query); with causal=False it "
                         "would be one-sided: not supported")
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    batch, s_len, heads = q.shape[0], q.shape[1 if heads_dim == 2 else 2], q.shape[2 if heads_dim == 2 else 1]
    t_len = k.shape[1 if heads_dim == 2 else 2]
    if batch * s_len * t_len == 0:  # nothing to attend: an empty output, or zeros for queries that see no key
        # zeros (not q * 0, NaN where q is inf), connected to q, k and v for autograd
        out = q.masked_fill(torch.ones((), dtype=torch.bool, device=q.device), 0) + (k.sum() + v.sum()) * 0
        lse = torch.full((batch, heads, s_len), float("-inf"))
        return (out, lse) if return_lse else out
    params: Dict[str, Any] = dict(scale=0.0 if scale is None else float(scale), causal=bool(causal), past=-1,
                                  window=window, chunk=chunk, positions="none", q_offset=kv_offset + t_len - s_len,
                                  k_offset=kv_offset, **_remap_fields(remap))
    if key_padding_mask is not None:
        if not isinstance(key_padding_mask, torch.Tensor) or tuple(key_padding_mask.shape) != (batch, t_len):
            raise ValueError(f"key_padding_mask must be [B, T] = [{batch}, {t_len}], got "
                             f"{list(getattr(key_padding_mask, 'shape', [type(key_padding_mask).__name__]))}")
        if key_padding_mask.device != q.device:
            raise ValueError(f"key_padding_mask must be on q's device {q.device}, got {key_padding_mask.device}")
        if key_padding_mask.dtype.is_floating_point or key_padding_mask.dtype.is_complex:
            raise ValueError(f"key_padding_mask must be bool or integer 0/1 (True, 1: a real key; the opposite of "
                             f"nn.MultiheadAttention's), got {key_padding_mask.dtype}")
        if key_padding_mask.dtype != torch.bool and ((key_padding_mask != 0) & (key_padding_mask != 1)).any():
            raise ValueError("key_padding_mask holds values other than 0 and 1 (1: a real key)")
        params["key_padding"] = key_padding_mask
    if rope is not None:
        if rope.axis_of_freq:
            raise ValueError("posenc.attention takes 1-D positions: an M-RoPE schedule (mrope_section) is not supported")
        params.update(positions="rope", inv_freq=rope.inv_freq.detach().to(torch.float32),
                      attention_factor=float(rope.attention_factor), rope_layout=rope_layout)
        if xpos is not None:
            params.update(xpos_scale_base=float(xpos.scale_base), xpos_gamma=float(xpos.gamma),
                          xpos_center=float(xpos.center))
    if alibi is not None:
        slopes = torch.as_tensor(alibi)
        if slopes.dim() != 1 or slopes.numel() != heads:
            raise ValueError(f"alibi must be the {heads} slopes of the query heads ([Hq]), got {list(slopes.shape)}")
        params.update(positions="alibi", alibi_slopes=[float(x) for x in slopes], alibi_symmetric=not causal)
    if t5 is not None:
        if not isinstance(t5, torch.Tensor) or t5.dim() != 2 or t5.shape[1] != heads:
            raise ValueError(f"t5 must be the bucket table [num_buckets, Hq={heads}], got {getattr(t5, 'shape', type(t5))}")
        if t5.device != q.device:
            raise ValueError(f"the t5 table must be on q's device {q.device}, got {t5.device}")
        params.update(positions="t5", t5_num_buckets=int(t5.shape[0]),
                      t5_max_distance=_count("t5_max_distance", t5_max_distance, 1, 2**31 - 1),
                      t5_bidirectional=not causal)
    if not native and isinstance(bias, torch.nn.Module) and hasattr(bias, "table_covers") \
            and not bias.table_covers(kv_offset + t_len - 1):
        # FIRE with a query at or past its threshold L: no table; the torch backend computes it per pair.
        if backend == "kernels":
            raise ValueError(f"bias (FIRE) is a distance table only for queries below its threshold L = "
                             f"{float(bias.threshold()):g}; the last query here is at position {kv_offset + t_len - 1} "
                             "(past L the bias depends on the query position): use backend='auto' or 'torch', which "
                             "materialise the [B, Hq, S, T] scores")
        native = True
    bias_input = t5
    if bias is not None:
        bias_input = _bias_params(bias, params, batch, heads, s_len, t_len, causal, q.device)
    if native:
        out, lse = native_attention(q, k, v, causal=causal, scale=scale, rope=rope, rope_layout=rope_layout, alibi=alibi,
                                    t5=t5, t5_max_distance=t5_max_distance, window=window, chunk=chunk,
                                    key_padding_mask=key_padding_mask, kv_offset=kv_offset, heads_dim=heads_dim,
                                    remap=remap, bias=bias, xpos=xpos)
    else:
        views = (q, k, v) if heads_dim == 1 else (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        out, lse = torch_ops.attention(*views, bias=bias_input, **params)
        out = out if heads_dim == 1 else out.transpose(1, 2)
    return (out, lse) if return_lse else out
