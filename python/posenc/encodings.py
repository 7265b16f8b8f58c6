"""Absolute and relative encodings as tensors, computed by posenc's core."""
from __future__ import annotations

import math
import numbers
import os
import resource
from typing import Sequence, Union

import torch
from torch.utils.dlpack import to_dlpack

from . import _posenc


def _memory_bytes() -> int:
    """What this process may allocate at most: physical memory, and its address-space limit
    (ulimit -v) where one is set."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    return min(total, limit) if limit != resource.RLIM_INFINITY else total


def _check_result_size(what: str, shape: Sequence[int], item_bytes: int) -> None:
    """A result of `shape` that cannot fit this process's memory is refused before anything is
    allocated, naming its sizes (a MemoryError from the allocator named neither)."""
    if not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in shape):
        return  # not integers: the core's own checks name them
    need = item_bytes * math.prod(int(x) for x in shape)
    have = _memory_bytes()
    if need > have:
        raise ValueError(f"{what}: a [{' x '.join(str(int(x)) for x in shape)}] result is {need / 2**30:.1f} GiB; this "
                         f"process may use {have / 2**30:.1f} GiB: ask for a smaller one")


def _ints(x: Union[torch.Tensor, Sequence[int]]) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.tensor(list(x), dtype=torch.int64)
    if t.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"positions must be integers, got {t.dtype}")
    return t.to(torch.int64)


def sinusoidal(positions: Union[torch.Tensor, Sequence[int]], dim: int, layout: str = "interleaved",
               freq: str = "vaswani", base: float = 10000.0) -> torch.Tensor:
    """Sinusoids, [*positions.shape, dim] float32: layout "interleaved" (sin, cos pairs) or
    "half_split" ([sin | cos]; the older spelling "halves" is still read); freq "vaswani"
    (base^(-2i/d)) or "fairseq" (base^(-i/(d/2 - 1)))."""
    p = _ints(positions)
    if p.numel() and int(p.min()) < 0:
        raise ValueError(f"position {int(p.min())} is negative; positions must be >= 0")
    _check_result_size("sinusoidal", (p.numel(), dim), 4)
    rows = _posenc.sinusoidal_table(p.flatten().tolist(), dim, layout, base, freq)
    return torch.from_numpy(rows).view(*p.shape, dim)  # the core's buffer, not a copy through a list


def alibi_slopes(heads: int) -> torch.Tensor:
    """ALiBi's slopes for any head count (the paper's rule; Bloom's for non-powers of two), float64."""
    return torch.tensor(_posenc.alibi_slopes(heads), dtype=torch.float64)


def _check_ints(what: str, *checks) -> None:
    """Each (name, value, least): an int (not a bool) >= least, else a ValueError naming `what`,
    the name and the value. The lengths and offsets of every bias (alibi_bias, posenc.nn's ALiBi,
    T5RelativeBias, Kerple, Sandwich) are checked here alike."""
    for name, value, least in checks:
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{what}: {name} must be an int >= {least}, got {value!r}")


def _check_scale(what: str, scale) -> None:
    """A softmax scale: None (1/sqrt(head_dim)) or a finite number > 0, not a bool; else a
    ValueError naming `what` and the value. posenc.attention and posenc.nn.ShawRelative alike."""
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale)
                              or scale <= 0):
        raise ValueError(f"{what}: scale must be a finite number > 0 (None: 1/sqrt(head_dim)), got {scale!r}")


def alibi_bias(heads: int, q_len: int, k_len: int, causal: bool = True, past: int = 0) -> torch.Tensor:
    """[heads, q_len, k_len] float32: -slope * (q - k) (causal) or -slope * |q - k|; query i sits
    at position past + i."""
    _check_ints("alibi_bias", ("heads", heads, 1), ("q_len", q_len, 0), ("k_len", k_len, 0), ("past", past, 0))
    # Each value is float64 -slope * (past + i - j) rounded once to float32, computed in blocks of
    # query rows written into the result: [heads, q, k] float64 temporaries peaked at 3.5x the
    # result (issue 33, python-018: 8 x 4096 x 4096 took 1.8 GB for 512 MiB).
    out = torch.empty(heads, q_len, k_len, dtype=torch.float32)
    slopes = -alibi_slopes(heads).view(-1, 1, 1)
    keys = torch.arange(k_len, dtype=torch.float64)
    rows = max(1, (1 << 20) // max(1, heads * k_len))  # float64 blocks of about 8 MiB
    for start in range(0, q_len, rows):
        stop = min(start + rows, q_len)
        d = (torch.arange(start, stop, dtype=torch.float64) + past).unsqueeze(1) - keys
        if not causal:
            d = d.abs_()
        out[:, start:stop].copy_(slopes * d)
    return out


def t5_buckets(relative: Union[torch.Tensor, Sequence[int]], num_buckets: int = 32, max_distance: int = 128,
               bidirectional: bool = True) -> torch.Tensor:
    """T5's bucket of each relative position (key - query), int64, as HF's T5Attention."""
    r = _ints(relative)
    if r.device.type == "meta":
        raise ValueError("t5_buckets needs the relative positions' values: got a tensor on the meta device")
    host = r.detach().cpu().resolve_neg().contiguous()  # computed on the CPU, returned on r's device
    buckets = torch.from_numpy(_posenc.t5_buckets(to_dlpack(host), num_buckets, max_distance, bidirectional))
    return buckets.view(r.shape).to(r.device)


def deberta_relative_positions(q_len: int, k_len: int, position_buckets: int = 256,
                               max_relative_positions: int = 512) -> torch.Tensor:
    """DeBERTa's relative position i - j after its log buckets, [q_len, k_len] int64 (as HF's
    build_relative_position)."""
    _check_result_size("deberta_relative_positions", (q_len, k_len), 8)
    rel = _posenc.deberta_relative_positions(q_len, k_len, position_buckets, max_relative_positions)
    return torch.from_numpy(rel).view(q_len, k_len)


def xl_relative_sinusoid(dim: int, klen: int, clamp_len: int = 0) -> torch.Tensor:
    """Transformer-XL's relative sinusoid for distances klen-1 .. 0 (HF's pos_emb, half_split
    layout [sin | cos]), [klen, dim] float32; distances past clamp_len (> 0) are clamped."""
    _check_result_size("xl_relative_sinusoid", (klen, dim), 4)
    return torch.from_numpy(_posenc.xl_relative_sinusoid(dim, klen, clamp_len)).view(klen, dim)
