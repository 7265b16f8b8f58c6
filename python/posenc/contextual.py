"""CoPE, contextual position encoding (Golovneva et al. 2024, arXiv 2405.18719), as the paper's
code (facebookresearch/RAM projects/cope: CoPE and SelfAttn) computes it. A key's position
relative to query i counts the keys between them that the query's gates open:

    g_ij = sigmoid(e_ij),  e_ij = q_i . k_j * scale (masked keys: g = 0),
    p_ij = min(sum_{t = j..T-1} g_it, max_pos - 1),
    z_i[p] = q_i . pos_emb[p],   bias_ij = (p - floor p) z_i[ceil p] + (1 - p + floor p) z_i[floor p],

and the attention's logits are e_ij + bias_ij. With every visible gate 1, p_ij = i - j + 1: a
learned relative encoding; fractional positions interpolate linearly. It needs the full score
row for its suffix sums, so it runs here on materialised scores, never in posenc's fused kernel."""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from .encodings import _check_ints, _check_scale


class CoPE(torch.nn.Module):
    """CoPE(head_dim, max_pos): pos_emb [max_pos, head_dim] (zeros, as the paper's code; RAM keeps
    its transpose [1, head_dim, max_pos], x-transformers this layout). q [B, S, Hq, D], k (and v)
    [B, T, Hk, D] with Hq a multiple of Hk and S <= T, query i at position T - S + i; scale None:
    head_dim^-0.5. m.positions(q, k) -> p [B, Hq, S, T]; m.bias(q, k) -> the term added to the
    scaled logits [B, Hq, S, T]; m.attention(q, k, v) (or m(q, k, v)) -> [B, S, Hq, D], the paper's SelfAttn."""

    def __init__(self, head_dim: int, max_pos: int) -> None:
        super().__init__()
        _check_ints("CoPE", ("head_dim", head_dim, 1), ("max_pos", max_pos, 1))
        if max_pos > 1 << 20:
            raise ValueError(f"CoPE: max_pos must be in [1, 2^20] (the lab's bound), got {max_pos}")
        self.head_dim, self.max_pos = head_dim, max_pos
        self.pos_emb = torch.nn.Parameter(torch.zeros(max_pos, head_dim))

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_pos={self.max_pos}"

    def _logits(self, q: torch.Tensor, k: torch.Tensor, causal: bool, scale: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
        """The scaled logits [B, Hq, S, T] and the blocked (future) keys [S, T]."""
        if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor):
            raise ValueError(f"CoPE: q and k must be tensors, got {type(q).__name__} and {type(k).__name__}")
        if q.dim() != 4 or k.dim() != 4 or q.shape[0] != k.shape[0] or q.shape[-1] != self.head_dim \
                or k.shape[-1] != self.head_dim or k.shape[2] < 1 or q.shape[2] % k.shape[2] != 0 or q.shape[1] > k.shape[1]:
            raise ValueError(f"CoPE: q [B, S, Hq, D={self.head_dim}] and k [B, T, Hk, D] with Hq a multiple of Hk and "
                             f"S <= T, got {list(q.shape)}, {list(k.shape)}")
        if not isinstance(causal, bool):
            raise ValueError(f"CoPE: causal must be True or False, got {causal!r}")
        if q.dtype != k.dtype or q.dtype != self.pos_emb.dtype or not q.dtype.is_floating_point:
            raise ValueError(f"CoPE: q, k and pos_emb must share one floating dtype, got {q.dtype}, {k.dtype} and "
                             f"{self.pos_emb.dtype} (m.to(dtype) moves pos_emb)")
        _check_scale("CoPE", scale)
        s_len, t_len, group = q.shape[1], k.shape[1], q.shape[2] // k.shape[2]
        kh = k.repeat_interleave(group, dim=2).transpose(1, 2)
        logits = q.transpose(1, 2) @ kh.transpose(-1, -2) * (self.head_dim ** -0.5 if scale is None else scale)
        query_pos = torch.arange(s_len, device=q.device).unsqueeze(1) + (t_len - s_len)
        blocked = torch.arange(t_len, device=q.device).unsqueeze(0) > query_pos if causal else \
            torch.zeros(s_len, t_len, dtype=torch.bool, device=q.device)
        return logits, blocked

    def _positions(self, logits: torch.Tensor, blocked: torch.Tensor) -> torch.Tensor:
        gates = torch.sigmoid(logits).masked_fill(blocked, 0.0)
        # A NaN score gives position 0, not a wild gather index (a device-side assert on a GPU).
        return torch.nan_to_num(gates.flip(-1).cumsum(-1).flip(-1), nan=0.0).clamp(max=self.max_pos - 1)

    def _term(self, q: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        z = q.transpose(1, 2) @ self.pos_emb.t()  # [B, Hq, S, max_pos]
        floor, ceil = pos.floor(), pos.ceil()
        w = pos - floor
        return z.gather(-1, ceil.long()) * w + z.gather(-1, floor.long()) * (1 - w)

    def positions(self, q: torch.Tensor, k: torch.Tensor, causal: bool = True, scale: Optional[float] = None) -> torch.Tensor:
        return self._positions(*self._logits(q, k, causal, scale))

    def bias(self, q: torch.Tensor, k: torch.Tensor, causal: bool = True, scale: Optional[float] = None) -> torch.Tensor:
        return self._term(q, self._positions(*self._logits(q, k, causal, scale)))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                scale: Optional[float] = None) -> torch.Tensor:
        return self.attention(q, k, v, causal, scale)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                  scale: Optional[float] = None) -> torch.Tensor:
        if not isinstance(v, torch.Tensor) or v.shape != k.shape or v.dtype != k.dtype:
            raise ValueError(f"CoPE.attention: v must be a tensor of k's shape {list(k.shape)} and dtype {k.dtype}, got {v!r:.60}")
        logits, blocked = self._logits(q, k, causal, scale)
        logits = logits + self._term(q, self._positions(logits, blocked))
        weights = torch.softmax(logits.masked_fill(blocked, float("-inf")), -1)
        vh = v.repeat_interleave(q.shape[2] // k.shape[2], dim=2).transpose(1, 2)
        return (weights @ vh).transpose(1, 2)
