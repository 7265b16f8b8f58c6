"""posenc's torch operators, torch.ops.posenc.rope and rope_qk (torch/include/posenc_torch/rope_op.h):
the C++ torch layer's library, loaded once from beside this package. Their CPU kernel is posenc's
SIMD rotation and their autograd the C++ layer's own (the backward is the same operator with the
opposite direction), so Python and C++ share one backward pass, and torch.jit.trace records them
as posenc::rope nodes."""
from __future__ import annotations

import pathlib
from typing import Any, Dict, Optional, Tuple

import torch

_LIBRARY = pathlib.Path(__file__).resolve().parent / "libposenc_torch_ops.so"
_loaded = False


def ops():
    """torch.ops.posenc, the library loaded on first use; a clear error when it was not built."""
    global _loaded
    if not _loaded:
        if not _LIBRARY.exists():
            raise RuntimeError(f"posenc's torch operators are missing ({_LIBRARY} was not built: configure posenc with "
                               "POSENC_WITH_TORCH=ON, as `make` and `pip install .` do)")
        torch.ops.load_library(str(_LIBRARY))
        _loaded = True
    return torch.ops.posenc


def rope(x: torch.Tensor, ids: Optional[torch.Tensor], s, layout: str, offset: int, heads_dim: int,
         xpos_keywords: Dict[str, Any]) -> torch.Tensor:
    """x (float32/bf16/f16, checked by apply_rope) rotated by posenc::rope at ids (None, [S], [B, S]
    or [axes, B, S], checked) plus offset; x passes as its [B, H, S, D] view (heads_dim 2: a
    transpose, no copy) and the result keeps x's memory order."""
    view = x if heads_dim == 1 else x.transpose(1, 2)
    out = ops().rope(view, ids, s.inv_freq.detach().to(torch.float32), list(s.axis_of_freq or []),
                     float(s.attention_factor), layout, offset, 1, **xpos_keywords)
    return out if heads_dim == 1 else out.transpose(1, 2)


def same_tokens(q: torch.Tensor, k: torch.Tensor, heads_dim: int) -> bool:
    """q and k share batch and tokens: rope_qk can rotate them at the same positions."""
    t = 1 if heads_dim == 2 else 2
    return q.shape[0] == k.shape[0] and q.shape[t] == k.shape[t]


def rope_qk(q: torch.Tensor, k: torch.Tensor, ids: Optional[torch.Tensor], s, layout: str, offset: int,
            heads_dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """q and k at the same positions in one call of posenc::rope_qk (each token's cos/sin formed
    once for both; its backward one call for both gradients)."""
    views = (q, k) if heads_dim == 1 else (q.transpose(1, 2), k.transpose(1, 2))
    qo, ko = ops().rope_qk(*views, ids, s.inv_freq.detach().to(torch.float32), list(s.axis_of_freq or []),
                           float(s.attention_factor), layout, offset, 1)
    return (qo, ko) if heads_dim == 1 else (qo.transpose(1, 2), ko.transpose(1, 2))
