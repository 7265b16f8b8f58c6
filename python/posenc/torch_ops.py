"""posenc's torch operators, torch.ops.posenc.rope, rope_qk (torch/include/posenc_torch/rope_op.h) and
attention (attention_op.h): the C++ torch layer's library, loaded once from beside this package.
Their CPU kernels are posenc's SIMD kernels and their autograd the C++ layer's own (RoPE's backward
is the same operator with the opposite direction; attention's the tiled float32 backward), so
Python and C++ share one backward pass, and torch.jit.trace records them as posenc:: nodes."""
from __future__ import annotations

import pathlib
from typing import Any, Dict, Optional, Tuple

import torch

_LIBRARY = pathlib.Path(__file__).resolve().parent / "libposenc_torch_ops.so"
_loaded = False


def _registered() -> bool:
    """Whether posenc::rope has its CPU kernel already: another copy of the library (the C++
    layer's, loaded by an extension built on it) serves the same operators."""
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key("posenc::rope", "CPU"))
    except RuntimeError:  # no such operator yet
        return False


def ops():
    """torch.ops.posenc, the library loaded once (at import when it is there: a saved trace's
    posenc::rope nodes then load after `import posenc`); a clear error when it was not built."""
    global _loaded
    if not _loaded:
        if not _registered():
            if not _LIBRARY.exists():
                raise RuntimeError(f"posenc's torch operators are missing ({_LIBRARY} was not built: configure posenc "
                                   "with POSENC_WITH_TORCH=ON, as `make` and `pip install .` do)")
            torch.ops.load_library(str(_LIBRARY))
        _loaded = True
    return torch.ops.posenc


if _LIBRARY.exists() or _registered():
    ops()


def rope(x: torch.Tensor, ids: Optional[torch.Tensor], s, layout: str, offset: int, heads_dim: int,
         xpos_keywords: Dict[str, Any]) -> torch.Tensor:
    """x (float32/bf16/f16, checked by apply_rope) rotated by posenc::rope at ids (None, [S], [B, S]
    or [axes, B, S], checked) plus offset; x passes as its [B, H, S, D] view (heads_dim 2: a
    transpose, no copy) and the result keeps x's memory order."""
    view = _dense(x) if heads_dim == 1 else _dense(x).transpose(1, 2)
    out = ops().rope(view, ids, s.inv_freq.detach().to(torch.float32), list(s.axis_of_freq or []),
                     float(s.attention_factor), layout, offset, 1, **xpos_keywords)
    return out if heads_dim == 1 else out.transpose(1, 2)


def _dense(x: torch.Tensor) -> torch.Tensor:
    """x itself when its elements tile its memory (any order), else a contiguous copy in the
    caller's own layout: the operator keeps a dense tensor's order and would make a strided one
    (a slice of a fused qkv) contiguous in the [B, H, S, D] view it receives."""
    return x if x.is_contiguous() or _non_overlapping_and_dense(x) else x.contiguous()


def _non_overlapping_and_dense(x: torch.Tensor) -> bool:
    dims = sorted(range(x.dim()), key=lambda d: x.stride(d))
    expected = 1
    for d in dims:
        if x.size(d) != 1 and x.stride(d) != expected:
            return False
        expected *= x.size(d)
    return True


def same_tokens(q: torch.Tensor, k: torch.Tensor, heads_dim: int) -> bool:
    """q and k share batch and tokens: rope_qk can rotate them at the same positions."""
    t = 1 if heads_dim == 2 else 2
    return q.shape[0] == k.shape[0] and q.shape[t] == k.shape[t]


def rope_qk(q: torch.Tensor, k: torch.Tensor, ids: Optional[torch.Tensor], s, layout: str, offset: int,
            heads_dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """q and k at the same positions in one call of posenc::rope_qk (each token's cos/sin formed
    once for both; its backward one call for both gradients)."""
    q, k = _dense(q), _dense(k)
    views = (q, k) if heads_dim == 1 else (q.transpose(1, 2), k.transpose(1, 2))
    qo, ko = ops().rope_qk(*views, ids, s.inv_freq.detach().to(torch.float32), list(s.axis_of_freq or []),
                           float(s.attention_factor), layout, offset, 1)
    return (qo, ko) if heads_dim == 1 else (qo.transpose(1, 2), ko.transpose(1, 2))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **keywords: Any) -> Tuple[torch.Tensor, torch.Tensor]:
    """posenc::attention over q [B, Hq, S, D], k and v [B, Hk, T, D] views (any strides, channels
    contiguous; checked by posenc.attention): (out [B, Hq, S, D] in q's memory order, lse [B, Hq, S]).
    keywords: the operator's arguments by name (attention_op.h's AttentionOpArgs)."""
    return ops().attention(q, k, v, **keywords)
