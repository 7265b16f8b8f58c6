"""Schedules whose head splits into equal blocks of channels, each its own RoPE (the core's
VisionRope::blocks): Gemma 4's vision tower rotates channels [0, D/2) by the column and [D/2, D)
by the row, rotate_half pairs (c, c + D/4) inside each half (HF's apply_multidimensional_rope).
Such a schedule has params["blocks"] = n; its inv_freq and axis_of_freq list block 0's
frequencies, then block 1's, ... apply_rope rotates each block's channels with its own."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import torch


def _blocks(s: Any) -> int:
    params = getattr(s, "params", None)
    return int(params.get("blocks", 1)) if isinstance(params, dict) else 1


def block_schedule(s: Any, block: int) -> Any:
    """Block `block`'s own schedule: its frequencies and axes over head_dim / blocks channels."""
    n = _blocks(s)
    freqs = s.inv_freq.numel() // n
    width = s.rotary_dim // n
    axes = list(s.axis_of_freq[block * freqs:(block + 1) * freqs]) if s.axis_of_freq else []
    params = {key: value for key, value in s.params.items() if key != "blocks"}
    return dataclasses.replace(s, inv_freq=s.inv_freq[block * freqs:(block + 1) * freqs], rotary_dim=width,
                               rotated_dim=width, axis_of_freq=axes, params=params)


def apply_blocks(apply: Callable[..., Any], q: torch.Tensor, k: Optional[torch.Tensor], s: Any, **kwargs: Any) -> Any:
    """apply (apply_rope) on each block's channels with the block's schedule: new tensors joined
    along the channels (differentiable), or, with inplace=True, each block rotated in its own
    memory (q and k returned)."""
    n = _blocks(s)
    if s.inv_freq.numel() % n or s.rotary_dim % n or s.rotary_dim != 2 * s.inv_freq.numel():
        raise ValueError(f"a schedule of {n} blocks needs rotary_dim = 2 x its {s.inv_freq.numel()} frequencies, both "
                         f"divisible by {n}; got rotary_dim {s.rotary_dim}")
    tensors = [q] if k is None else [q, k]
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.dim() != 4 or t.shape[-1] != s.rotary_dim:
            raise ValueError(f"this schedule rotates {n} blocks of {s.rotary_dim // n} channels: q and k must be 4-D "
                             f"with head_dim {s.rotary_dim}, got {getattr(t, 'shape', type(t))}")
    width = s.rotary_dim // n
    parts = []
    for b in range(n):
        sub = block_schedule(s, b)
        sliced = [t[..., b * width:(b + 1) * width] for t in tensors]
        out = apply(sliced[0], None if k is None else sliced[1], schedule=sub, **kwargs)
        parts.append(out if isinstance(out, tuple) else (out,))
    if kwargs.get("inplace"):
        return q if k is None else (q, k)
    joined = [torch.cat([p[i] for p in parts], dim=-1) for i in range(len(tensors))]
    return joined[0] if k is None else (joined[0], joined[1])
