"""posenc.attention's torch-native path: the same attention in torch operations on the tensors'
device (a GPU), differentiable by autograd, built from the same schedule and bias values as the
fused kernel (rope._formula's angles, the core's T5 buckets, the bias modules' tables), so a model
off the CPU trains with posenc's exact positions. It materialises the [B, H, S, T] scores; the
CPU kernel never does. The conventions are the kernel's (core/include/posenc/attention.h): query i
at key index past + i (past = T - S) and position kv_offset + past + i, key j at kv_offset + j;
masks by key index, positional terms by position."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import math

import torch

from .encodings import t5_buckets


def _heads_first(x: torch.Tensor, heads_dim: int) -> torch.Tensor:
    return x.transpose(1, 2) if heads_dim == 2 else x  # [B, H, S, D]


def _rotated(x: torch.Tensor, schedule, layout: str, positions: Optional[torch.Tensor], offset: int,
             heads_dim: int, xpos: Any = None) -> torch.Tensor:
    """x rotated as the kernel rotates it; xpos: (posenc.XPosScale, "query" or "key") or None."""
    from .rope import _formula  # the torch-native rotation apply_rope(backend="torch") uses
    return _formula(x, positions, schedule, layout, offset, heads_dim, 1.0, xpos)


def _remap_positions(remap, pos: torch.Tensor, is_query: bool) -> torch.Tensor:
    """The far branch's position of each query or key (attention.h): Self-Extend floor(p/G) (+ w -
    floor(w/G) for queries); ReRoPE w and 0; leaky ReRoPE p/k (+ w - w/k)."""
    from .attention import ReRoPE, SelfExtend
    w = remap.window
    if isinstance(remap, SelfExtend):
        far = torch.div(pos, remap.group, rounding_mode="floor")
        return far + (w - w // remap.group) if is_query else far
    if isinstance(remap, ReRoPE) and remap.leak is None:
        return torch.full_like(pos, w if is_query else 0)
    if isinstance(remap, ReRoPE):
        k = float(remap.leak)
        return pos.double() / k + (w - w / k) if is_query else pos.double() / k
    raise ValueError(f"the torch-native path has no {type(remap).__name__} remap: use CPU tensors (the kernel)")


def _scores(q: torch.Tensor, k: torch.Tensor, heads_dim: int, group: int, scale: float) -> torch.Tensor:
    qh, kh = _heads_first(q, heads_dim), _heads_first(k, heads_dim)
    kh = kh.repeat_interleave(group, dim=1) if group > 1 else kh  # GQA: query head h reads kv head h / group
    return (qh @ kh.transpose(-1, -2)) * scale  # [B, Hq, S, T]


def distance_side(bias: Any) -> str:
    """How a distance-bias module's table is indexed: "absolute" (over |Delta|: Kerple, Sandwich)
    or "signed" (over Delta = query - key from -(L-1) to L-1: DynamicPositionBias)."""
    return getattr(bias, "distance_side", "absolute")


def native_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, scale: Optional[float],
                     rope, rope_layout: str, alibi: Optional[torch.Tensor], t5: Optional[torch.Tensor],
                     t5_max_distance: int, window: int, chunk: int, key_padding_mask: Optional[torch.Tensor],
                     kv_offset: int, heads_dim: int, remap, bias: Any, xpos: Any = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out like q, lse [B, Hq, S] float32); the arguments already checked by posenc.attention."""
    from .attention import DualChunk
    dev = q.device
    work = torch.float64 if q.dtype == torch.float64 else torch.float32  # the kernel's math is float32
    batch, s_len, heads = q.shape[0], q.shape[1 if heads_dim == 2 else 2], q.shape[2 if heads_dim == 2 else 1]
    t_len, kv_heads = k.shape[1 if heads_dim == 2 else 2], k.shape[2 if heads_dim == 2 else 1]
    group, past = heads // kv_heads, t_len - s_len
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    qw, kw, vw = q.to(work), k.to(work), v.to(work)
    q_index = torch.arange(s_len, device=dev) + past  # key index of each query
    k_index = torch.arange(t_len, device=dev)
    q_pos, k_pos = q_index + kv_offset, k_index + kv_offset
    delta = q_pos[:, None] - k_pos[None, :]  # [S, T] query position - key position
    if rope is not None:
        q_role, k_role = (None, None) if xpos is None else ((xpos, "query"), (xpos, "key"))
        near = _scores(_rotated(qw, rope, rope_layout, None, kv_offset + past, heads_dim, q_role),
                       _rotated(kw, rope, rope_layout, None, kv_offset, heads_dim, k_role), heads_dim, group, scale)
        def far(q_at: torch.Tensor, k_at: torch.Tensor) -> torch.Tensor:  # scores at remapped positions
            return _scores(_rotated(qw, rope, rope_layout, q_at, 0, heads_dim),
                           _rotated(kw, rope, rope_layout, k_at, 0, heads_dim), heads_dim, group, scale)

        if remap is None:
            scores = near
        elif isinstance(remap, DualChunk):  # by chunk of position: own (or later), previous, earlier
            c, size = remap.chunk_size - remap.local_size, remap.chunk_size
            q_chunk, k_chunk = torch.div(q_pos, c, rounding_mode="floor"), torch.div(k_pos, c, rounding_mode="floor")
            k_at = k_pos % c
            previous = far(torch.clamp(q_pos % c + c, max=size), k_at)
            earlier = far(torch.full_like(q_pos, min(2 * c - 1, size)), k_at)
            back = q_chunk[:, None] - k_chunk[None, :]
            scores = torch.where(back <= 0, near, torch.where(back == 1, previous, earlier))
        else:
            scores = torch.where(delta < remap.window, near,  # the papers' merge: near below w
                                 far(_remap_positions(remap, q_pos, True), _remap_positions(remap, k_pos, False)))
    else:
        scores = _scores(qw, kw, heads_dim, group, scale)
    if alibi is not None:
        slopes = torch.as_tensor(alibi).to(device=dev, dtype=work)[:, None, None]
        scores = scores - slopes * (delta if causal else delta.abs()).to(work)
    if t5 is not None:
        relative = -delta  # key position - query position
        lo = int(relative.min())
        table = t5_buckets(torch.arange(lo, int(relative.max()) + 1), t5.shape[0], t5_max_distance, not causal).to(dev)
        scores = scores + t5.to(work)[table[relative - lo]].permute(2, 0, 1)  # table [buckets, Hq] -> [Hq, S, T]
    if bias is not None and hasattr(bias, "table_covers"):  # FIRE
        if bias.table_covers(kv_offset + t_len - 1):  # every query below L: its table over |Delta|
            scores = scores + bias.table(s_len + t_len).to(device=dev, dtype=work)[:, delta.abs()]
        else:  # per (query, key) pair, in blocks of queries within FIRE.scores' bound
            rows = max(1, 2**28 // max(1, t_len * max(bias.width, bias.heads)))
            scores = scores + torch.cat([bias.scores(q_pos[a:a + rows], k_pos) for a in range(0, s_len, rows)],
                                        dim=-2).to(device=dev, dtype=work)
    elif bias is not None and hasattr(bias, "table"):  # Kerple, Sandwich: [Hq, L] over |Delta|; DPB: [Hq, 2L - 1] over Delta
        length = s_len + t_len
        values = bias.table(length).to(device=dev, dtype=work)
        scores = scores + values[:, delta + (length - 1) if distance_side(bias) == "signed" else delta.abs()]
    elif bias is not None:  # FoX's cumulative gate c [B, Hq, T]: c[past + i] - c[j]
        c = bias.to(device=dev, dtype=work)
        scores = scores + c[:, :, q_index, None] - c[:, :, None, :]
    visible = torch.ones(s_len, t_len, dtype=torch.bool, device=dev)
    if causal:
        visible &= k_index[None, :] <= q_index[:, None]
    if window:
        visible &= (q_index[:, None] - k_index[None, :]) < window
    if chunk:
        visible &= torch.div(k_index, chunk, rounding_mode="floor")[None, :] == torch.div(q_index, chunk, rounding_mode="floor")[:, None]
    visible = visible.expand(batch, 1, s_len, t_len)
    if key_padding_mask is not None:
        visible = visible & (key_padding_mask.to(dev) != 0)[:, None, None, :]
    scores = scores.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # -inf for a query that sees no key
    probs = torch.exp(scores - lse.masked_fill(lse == float("-inf"), 0.0)[..., None])  # 0 where masked
    vh = _heads_first(vw, heads_dim)
    vh = vh.repeat_interleave(group, dim=1) if group > 1 else vh
    out = probs @ vh  # [B, Hq, S, D]; zeros for a query that sees no key, as the kernel
    out = out.transpose(1, 2) if heads_dim == 2 else out
    return out.to(q.dtype), lse.float()
