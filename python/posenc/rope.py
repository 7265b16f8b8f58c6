"""apply_rope: the C++ kernels through torch.ops.posenc.rope, whose autograd is the C++ torch layer's
(backward = the transposed rotation), and the same rotation as torch operations on any device."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch.utils.dlpack import to_dlpack

from . import _posenc
from .rope_blocks import _blocks, apply_blocks
from . import torch_ops
from .xpos_scale import XPosScale

_LAYOUTS = ("half_split", "interleaved", "deepseek_v3")
_BACKENDS = ("auto", "kernels", "torch")
_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
_MAX_POSITION = 2**31 - 1  # the core's kMaxPosition: every path refuses a position past it


_NO_XPOS = dict(xpos_scale_base=0.0, xpos_gamma=0.4, xpos_center=0.0, xpos_role="query")


def _threads() -> int:
    """torch's thread count for the kernels, capped at theirs (torch accepts set_num_threads(2000))."""
    return max(1, min(torch.get_num_threads(), _posenc.max_threads()))


def _check_offset(offset: Any) -> None:
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= _MAX_POSITION:
        raise ValueError(f"offset must be an int in [0, 2^31-1], got {offset!r}")


def _check_schedule(s) -> None:
    """What the kernels check of a schedule, for every path (the float64 and torch paths too). A
    str (a config path), None or a Schedule whose inv_freq is not a 1-D float tensor raised
    AttributeError or pybind11's cast error (issue 33, python-049/061/062)."""
    from . import Schedule  # posenc/__init__.py defines it before importing this module's users
    if not isinstance(s, Schedule):
        hint = ": build one with posenc.schedule(path) first" if isinstance(s, str) else ""
        raise ValueError(f"schedule must be a posenc.Schedule, got {type(s).__name__} {s!r}"[:200] + hint)
    inv = s.inv_freq
    if not isinstance(inv, torch.Tensor) or inv.dim() != 1 or inv.numel() < 1 or not inv.is_floating_point():
        raise ValueError("the schedule's inv_freq must be a 1-D float tensor of rotary_dim / 2 >= 1 frequencies, got "
                         f"{f'{inv.dtype} of shape {list(inv.shape)}' if isinstance(inv, torch.Tensor) else type(inv).__name__}")
    if not isinstance(s.attention_factor, (int, float)) or isinstance(s.attention_factor, bool) \
            or not math.isfinite(s.attention_factor):
        raise ValueError(f"the schedule's attention_factor must be a finite number, got {s.attention_factor!r}")
    if not bool(torch.isfinite(inv.detach()).all()):
        raise ValueError("the schedule's inv_freq must be finite")


def _layout_of(s, layout: Optional[str]) -> str:
    """The pairing: the one asked for, else the schedule's own (a vision tower's params['layout']),
    else half_split; a request that contradicts the schedule's own is refused."""
    own = s.params.get("layout") if isinstance(getattr(s, "params", None), dict) else None
    if layout is not None and own is not None and layout != own:
        raise ValueError(f"layout '{layout}' contradicts the schedule's own pairing '{own}' (its params['layout'])")
    layout = layout or own or "half_split"
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(_LAYOUTS)}, got '{layout}'")
    return layout


def _check_head_dim(x: torch.Tensor, s) -> None:
    """The kernels' check (core/src/rope_apply.cc, validate) with their message, for every path:
    the rotated channels must fit in the head. The float64 and torch paths sliced past it (torch's
    'size of tensor a (0) must match', python-035/036), and D = 0 was accepted as an empty
    result because the kernels are skipped for empty tensors (python-033)."""
    half = s.inv_freq.numel()
    if 2 * half > x.shape[-1]:
        raise ValueError(f"rotary dim 2*{half} must be in [2, head_dim={x.shape[-1]}]: the schedule rotates "
                         f"{2 * half} channels, the tensor's last dimension has {x.shape[-1]}")


def _check_writable(t: torch.Tensor, what: str) -> None:
    """Refuses an in-place rotation of a view whose elements share memory: each alias would be
    rotated once per alias. torch's own in-place ops refuse what _debug_has_internal_overlap
    proves (1); for what it cannot decide (2, e.g. as_strided) the strides must nest: sorted by
    stride, each dimension steps past the whole extent of the ones before it (sufficient for
    no overlap; the views q/k/v of a fused projection and [B, H, S, D] transposes pass)."""
    verdict = torch._debug_has_internal_overlap(t)
    extent = 0
    nested = True
    for stride, size in sorted((st, n) for st, n in zip(t.stride(), t.shape) if n > 1):
        nested = nested and stride > extent
        extent += stride * (size - 1)
    if verdict == 1 or (verdict == 2 and not nested):
        raise ValueError(f"{what} on a tensor whose elements share memory (an expanded or overlapping view) would "
                         "rotate them more than once: pass a tensor that owns its elements")


def _wrote(t: torch.Tensor) -> None:
    """Bumps t's version counter after the kernels wrote through its data pointer, as torch's
    in-place ops do (views share the counter): autograd then refuses a backward that saved t
    before the write instead of silently using the rotated values."""
    with torch.no_grad():
        t.narrow(-1, 0, 0).zero_()  # an in-place op on an empty view: no data touched


def _positions(positions: Optional[torch.Tensor], batch: int, tokens: int, device: torch.device = torch.device("cpu"),
               schedule=None, offset: int = 0, heads_dim: int = 2, heads: int = 0):
    """The positions as the kernels take them (None: implicit; else a contiguous int tensor [S],
    [B, S] or [axes, B, S], the C++ side checking that shape again); checks that
    positions are on `device` (the CPU for the kernels, q's device for the torch-native path),
    that position + offset stays within 2^31-1, and (given the schedule) that [axes, B, S]
    positions meet an M-RoPE schedule."""
    if positions is None:
        if tokens and offset + tokens - 1 > _MAX_POSITION:
            raise ValueError(f"offset {offset} + {tokens} tokens passes position 2^31-1")
        return None
    if not isinstance(positions, torch.Tensor) or positions.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"positions must be an int32 or int64 tensor, got {getattr(positions, 'dtype', type(positions))}")
    if positions.device != device:
        raise ValueError(f"positions must be on {device} (where q and k are rotated), got {positions.device}")
    p = positions.contiguous()
    if p.numel() and int(p.min()) < 0:
        raise ValueError(f"position {int(p.min())} is negative; positions must be >= 0")
    if p.numel() and int(p.max()) + offset > _MAX_POSITION:
        raise ValueError(f"position {int(p.max())} + offset {offset} must be in [0, 2^31-1]")
    if p.dim() == 3 and schedule is not None and not schedule.axis_of_freq and (schedule.params or {}).get("mrope_xdrope"):
        raise ValueError(f"[{p.shape[0]}, B, S] positions are XD-RoPE's (HunYuan-VL), whose rotate_half pairs can read two position "
                         "axes: pass [S] or [B, S] positions for text tokens; `posenc golden` has HF's image-token vectors")
    if p.dim() < 3 and schedule is not None and max(schedule.axis_of_freq or [0]) > 0:  # both backends alike
        raise ValueError(f"this schedule's frequencies read {max(schedule.axis_of_freq) + 1} position axes (M-RoPE or a vision "
                         f"tower): positions must be [axes, B, S], got {list(p.shape)}")
    if p.dim() == 3 and schedule is not None and not schedule.axis_of_freq:
        raise ValueError(f"[{p.shape[0]}, B, S] positions are M-RoPE's, but this schedule has no mrope_section: "
                         "pass [S] or [B, S] positions, or a schedule with M-RoPE sections")
    if p.dim() == 2 and p.shape[0] == 1 and batch > 1:  # [1, S] (HF's position_ids): shared
        p = p[0]
    if p.dim() == 1 and p.shape[0] == tokens:  # [S]: the same for every batch row
        return p
    if p.dim() == 2 and tuple(p.shape) == (batch, tokens):
        return p
    if p.dim() == 3 and p.shape[1:] == (batch, tokens) and 1 <= p.shape[0] <= 3:
        return p
    hint = ""
    if heads_dim == 2 and heads and p.shape[-1] == heads != tokens:
        hint = f": q looks like [B, H, S, D] (its axis 2 has {heads}); pass heads_dim=1"
    raise ValueError(f"positions must be [S], [B, S] or [axes, B, S] with B={batch}, S={tokens}; got "
                     f"{list(p.shape)}{hint}")


def _view(x: torch.Tensor, s, layout: str, heads_dim: int, xpos: Optional[Tuple[XPosScale, str]] = None) -> Dict[str, Any]:
    """The kernels' keywords for x, the schedule and xPos with x's role (x checked for the kernels)."""
    if x.dim() != 4:
        raise ValueError(f"q and k must be 4-D ([B, S, H, D] or [B, H, S, D]), got {x.dim()}-D")
    if x.device.type != "cpu":
        raise ValueError(f"posenc's kernels run on the CPU, got a tensor on {x.device}")
    if x.dtype not in _DTYPES:
        raise ValueError(f"RoPE kernels take float32, bfloat16 or float16 tensors, got {x.dtype}")
    if x.stride(-1) != 1:
        raise ValueError("the last dimension (head_dim) must be contiguous")
    return dict(data=_capsule(x, written=True), heads_dim=heads_dim, inv_freq=s.inv_freq.tolist(), axis_of_freq=s.axis_of_freq,
                attention_factor=s.attention_factor, layout=layout, threads=_threads(),
                **(xpos[0].keywords(xpos[1]) if xpos else _NO_XPOS))


def _capsule(x: torch.Tensor, written: bool = False) -> Any:
    """x for _posenc: a DLPack capsule sharing x's memory, through which the C++ side reads x's
    address, dtype, shape and strides from torch itself (no raw address crosses; python/src/
    tensor_arg.h). The capsule keeps x's storage alive while it lives. DLPack has no lazy
    negation or conjugation bit: a tensor read is resolved first (a copy); one written in place
    cannot be, and is refused."""
    if x.is_neg() or x.is_conj():
        if written:
            raise ValueError("this tensor is a lazily negated view (torch._neg_view / .conj()); it cannot be written in "
                             "place through posenc's kernels: pass x.resolve_neg() instead")
        x = x.resolve_neg().resolve_conj()
    return to_dlpack(x.detach())


def _rotate(x: torch.Tensor, positions: Optional[torch.Tensor], s, layout: str, offset: int, heads_dim: int,
            direction: int, xpos: Optional[Tuple[XPosScale, str]] = None) -> None:
    """Rotates x in place through the SIMD kernels (xpos: the scale and x's role)."""
    view = _view(x, s, layout, heads_dim, xpos)
    batch, tokens = x.shape[0], x.shape[1 if heads_dim == 2 else 2]
    ids = _positions(positions, batch, tokens)
    if x.numel() == 0:
        return
    _posenc.rope_rotate(positions=None if ids is None else _capsule(ids), offset=offset, direction=direction, **view)


def _formula(x: torch.Tensor, positions: Optional[torch.Tensor], s, layout: str, offset: int, heads_dim: int,
             sign: float, xpos: Optional[Tuple[XPosScale, str]] = None) -> torch.Tensor:
    """The torch-native rotation, on x's device, differentiable by autograd (and in a learned
    inv_freq): torch.ops.posenc.rope_native, the C++ torch layer's own (rope_op.h rope_native), so
    one formula serves C++ and Python. Angles p * inv_freq in float64 (float32 on MPS, which has no
    float64), cos and sin times the attention factor (and xPos's scales of x's role: the kernels'
    float32 bits at integer positions, in double for a float64 x), the rotation in float32 (float64
    for a float64 x) as the kernels compute it, the result in x's dtype. sign -1 is the transpose
    (the backward pass: the same scale, rotated back). positions may be real ([axes, B, S] of axial
    coordinates: posenc.nn.AxialRotaryEmbedding)."""
    view = x.transpose(1, 2) if heads_dim == 2 else x  # [B, H, S, D]
    out = torch_ops.ops().rope_native(view, positions, s.inv_freq, [int(a) for a in (s.axis_of_freq or [])],
                                      float(s.attention_factor), layout, int(offset), -1 if sign < 0 else 1,
                                      **(xpos[0].keywords(xpos[1]) if xpos is not None else _NO_XPOS))
    return out.transpose(1, 2) if heads_dim == 2 else out


def _kernel_rope(x: torch.Tensor, positions: Optional[torch.Tensor], s, layout: str, offset: int, heads_dim: int,
                 xpos: Optional[Tuple[XPosScale, str]] = None) -> torch.Tensor:
    """x rotated by the kernels through torch.ops.posenc.rope, differentiable by the operator's own
    autograd (torch_ops.py); float64 takes the eager formula, which autograd differentiates."""
    if x.dtype == torch.float64:
        return _formula(x, positions, s, layout, offset, heads_dim, 1.0, xpos)
    ids = _positions(positions, x.shape[0], x.shape[1 if heads_dim == 2 else 2])
    return torch_ops.rope(x, ids, s, layout, offset, heads_dim, xpos[0].keywords(xpos[1]) if xpos else _NO_XPOS)


def apply_rope(q: torch.Tensor, k: Optional[torch.Tensor] = None, *, schedule, positions: Optional[torch.Tensor] = None,
               layout: Optional[str] = None, offset: int = 0, heads_dim: int = 2, inplace: bool = False,
               backend: str = "auto", xpos: Optional[XPosScale] = None) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Rotates q (and k) by RoPE at the given positions.

    q, k: [B, S, H, D] (heads_dim=2, the default) or [B, H, S, D] (heads_dim=1), float32,
    bfloat16 or float16 (on the CPU for the kernels, any device for backend "torch"), the last
    dimension contiguous (any other strides: views work without copies). k may have its own
    head count (GQA).
    positions: None (0 .. S-1, plus offset), int32/int64 [S], [B, S], or [3, B, S] for M-RoPE
    (the schedule's axis_of_freq says which axis each frequency reads). offset is added to
    every position (a KV-cache length).
    layout: "half_split" (NeoX / LLaMA / HF rotate_half), "interleaved" (GPT-J / RoFormer),
    "deepseek_v3" (reads pairs, writes halves); None: the schedule's own (a vision tower's
    schedule.params["layout"]), else half_split. Channels past schedule.rotary_dim pass through.
    Returns new tensors, differentiable (the backward pass is the transposed rotation in the
    same kernels; float64 takes the eager formula both ways). inplace=True rotates q and k in
    their own memory, without autograd, as inference engines do, and returns them.
    backend: "kernels" (posenc's SIMD kernels, CPU tensors), "torch" (the same schedule, the
    same angles, in torch operations on the tensors' device: a GPU), "auto" (the kernels on the
    CPU, torch elsewhere). positions must be on q's device.
    xpos: an XPosScale (posenc.nn.XPos builds it): q takes xpos.first's power, k the key's;
    positions [S] or [B, S] (one axis).
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(_BACKENDS)}, got '{backend}'")
    layout = _layout_of(schedule, layout)
    if _blocks(schedule) > 1:  # Gemma 4's vision tower: each block of channels its own RoPE
        return apply_blocks(apply_rope, q, k, schedule, positions=positions, offset=offset, heads_dim=heads_dim,
                            inplace=inplace, backend=backend, xpos=xpos)
    if heads_dim not in (1, 2):
        raise ValueError(f"heads_dim must be 1 ([B, H, S, D]) or 2 ([B, S, H, D]), got {heads_dim}")
    _check_offset(offset)
    _check_schedule(schedule)
    roles = [None, None]
    if xpos is not None:
        if not isinstance(xpos, XPosScale) or xpos.first not in ("query", "key"):
            raise ValueError(f"xpos must be an XPosScale whose first is 'query' or 'key', got {xpos!r}")
        if positions is not None and positions.dim() == 3:
            raise ValueError(f"xPos scales by one position per token: positions must be [S] or [B, S], got "
                             f"{list(positions.shape)}")
        _posenc.validate_xpos(xpos.scale_base, xpos.gamma, xpos.center, 0, -1)  # the parameters alone
        roles = [(xpos, xpos.first), (xpos, "key")]
    tensors = [q] if k is None else [q, k]
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"q and k must be 4-D tensors ([B, S, H, D] or [B, H, S, D]), got {getattr(t, 'shape', type(t))}")
    if k is not None and k.device != q.device:
        raise ValueError(f"q and k must be on one device, got {q.device} and {k.device}")
    # Frequencies that require grad (learned, as rotary-embedding-torch's learned_freq) take the
    # torch formula, which autograd differentiates in inv_freq; the kernels would give them none.
    learned = schedule.inv_freq.requires_grad and torch.is_grad_enabled()
    native = backend == "torch" or (backend == "auto" and (q.device.type != "cpu" or learned))
    if learned and not native:
        raise ValueError("backend='kernels' gives no gradient to a schedule whose inv_freq requires grad: "
                         "use backend='auto' or 'torch'")
    if not native and q.device.type != "cpu":
        raise ValueError(f"posenc's kernels run on the CPU, got a tensor on {q.device}: use backend='torch' or 'auto'")
    for t in tensors:
        if t.stride(-1) != 1:
            raise ValueError("the last dimension (head_dim) must be contiguous (stride 1): call .contiguous() first")
        _check_head_dim(t, schedule)
        batch, tokens = t.shape[0], t.shape[1] if heads_dim == 2 else t.shape[2]
        # shape, dtype, device, sign, range and M-RoPE axes, for every path alike
        _positions(positions, batch, tokens, t.device, schedule, offset, heads_dim, t.shape[2])
        if inplace:
            _check_writable(t, "inplace=True")
    if inplace:
        if torch.is_grad_enabled() and (learned or any(t.requires_grad for t in tensors)):
            raise ValueError("inplace=True rotates without autograd: use torch.no_grad() or inplace=False")
        for t, role in zip(tensors, roles):
            if native or t.dtype == torch.float64:
                t.copy_(_formula(t, positions, schedule, layout, offset, heads_dim, 1.0, role))
            elif t.numel():
                _rotate(t, positions, schedule, layout, offset, heads_dim, +1, role)
                _wrote(t)
        return q if k is None else (q, k)
    if native:
        out = [_formula(t, positions, schedule, layout, offset, heads_dim, 1.0, r) for t, r in zip(tensors, roles)]
    elif k is not None and xpos is None and q.dtype == k.dtype != torch.float64 and torch_ops.same_tokens(q, k, heads_dim):
        ids = _positions(positions, q.shape[0], q.shape[1 if heads_dim == 2 else 2])
        out = list(torch_ops.rope_qk(q, k, ids, schedule, layout, offset, heads_dim))
    else:
        out = [_kernel_rope(t, positions, schedule, layout, offset, heads_dim, r) for t, r in zip(tensors, roles)]
    return out[0] if k is None else (out[0], out[1])


def rope_shift(k: torch.Tensor, delta: int, *, schedule, layout: str = "half_split", heads_dim: int = 2,
               begin: int = 0, end: Optional[int] = None) -> torch.Tensor:
    """Re-rotates post-RoPE keys in place by `delta` positions: a key rotated at p becomes the key
    rotated at p + delta (llama.cpp's K-shift sign; a negative delta closes a gap of evicted
    positions, as a sinks + window cache does). Tokens [begin, end) move (end None: to the last).
    The attention factor is not applied again (it was, at p); deepseek_v3 keys move as the
    half-split pairs they are stored in; every M-RoPE axis moves by delta. k: [B, T, H, D]
    (heads_dim=2) or [B, H, T, D]; on the CPU the SIMD kernels (the core's rope_shift), elsewhere
    torch operations with the same angles. Returns k."""
    layout = _layout_of(schedule, layout)
    if _blocks(schedule) > 1:
        raise ValueError("rope_shift moves a text model's cached keys; this schedule rotates blocks of channels "
                         f"on their own ({schedule.params.get('family')}'s vision tower)")
    if heads_dim not in (1, 2):
        raise ValueError(f"heads_dim must be 1 ([B, H, T, D]) or 2 ([B, T, H, D]), got {heads_dim}")
    if not isinstance(delta, int) or isinstance(delta, bool):
        raise ValueError(f"delta must be an int, got {delta!r}")
    if not isinstance(k, torch.Tensor) or k.dim() != 4:
        raise ValueError(f"k must be a 4-D tensor ([B, T, H, D] or [B, H, T, D]), got {getattr(k, 'shape', type(k))}")
    if torch.is_grad_enabled() and k.requires_grad:
        raise ValueError("rope_shift rotates k in place, without autograd: use torch.no_grad()")
    tokens = k.shape[1] if heads_dim == 2 else k.shape[2]
    stop = tokens if end is None else end
    if not (isinstance(begin, int) and isinstance(stop, int) and 0 <= begin <= stop <= tokens):
        raise ValueError(f"the token range [{begin}, {end}) must lie in [0, {tokens}] with begin <= end")
    _check_writable(k, "rope_shift")
    _check_schedule(schedule)
    _check_head_dim(k, schedule)
    if abs(delta) > 2**31 - 1:
        raise ValueError(f"delta {delta} must be in [-(2^31-1), 2^31-1]")
    if k.numel() == 0 or begin == stop or delta == 0:
        return k
    if k.device.type == "cpu" and k.dtype != torch.float64:
        _posenc.rope_shift(delta, begin, stop, positions=None, offset=0, direction=1, **_view(k, schedule, layout, heads_dim))
        _wrote(k)
        return k
    part = k.narrow(1 if heads_dim == 2 else 2, begin, stop - begin)
    pure = dataclasses.replace(schedule, attention_factor=1.0, axis_of_freq=[])  # a pure rotation, every axis alike
    at = torch.full((stop - begin,), abs(delta), dtype=torch.int64, device=k.device)
    moved = _formula(part, at, pure, "half_split" if layout == "deepseek_v3" else layout, 0, heads_dim,
                     1.0 if delta >= 0 else -1.0)
    with torch.no_grad():
        part.copy_(moved)
    return k

