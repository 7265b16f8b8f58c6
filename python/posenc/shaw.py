"""Shaw's relative keys and values (Shaw et al. 2018) and Huang et al.'s key-query variant, as HF's
BERT family computes them: posenc.nn.ShawRelative."""
from __future__ import annotations

from typing import Optional

import torch

from .encodings import _check_ints, _check_scale


class ShawRelative(torch.nn.Module):
    """Relative keys and values (Shaw et al. 2018) and the key-query variant (Huang et al. 2020),
    as HF's BERT family computes position_embedding_type "relative_key" / "relative_key_query"
    (modeling_bert.py, eager_attention_forward): with d = query position - key position,
    e_ij = (q_i.k_j + q_i.a_K[d] (+ k_j.a_K[d] with key_query)) * scale, and with values=True
    z_i = sum_j softmax(e)_ij (v_j + a_V[d]) (Shaw's value term; HF has none). a[d] is row
    clip(d, +-max_relative) + max_relative of rel_k / rel_v [2 max_relative + 1, head_dim]: HF's
    distance_embedding [2 M - 1, head_dim] with M = max_relative + 1 (HF does not clip: it fails
    past M - 1). m.attention(q, k, v, causal=True, scale=None) -> [B, S, Hq, D] with q [B, S, Hq, D],
    k, v [B, T, Hk, D], query i at position T - S + i; it materialises the [B, Hq, S, T] scores
    (not in the fused kernel)."""

    def __init__(self, head_dim: int, max_relative: int, values: bool = True, key_query: bool = False) -> None:
        super().__init__()
        _check_ints("ShawRelative", ("head_dim", head_dim, 1), ("max_relative", max_relative, 0))
        for name, flag in (("values", values), ("key_query", key_query)):
            if not isinstance(flag, bool):
                raise ValueError(f"ShawRelative: {name} must be a bool, got {flag!r}")
        self.head_dim, self.max_relative, self.key_query = head_dim, max_relative, key_query
        rows = 2 * max_relative + 1
        self.rel_k = torch.nn.Parameter(torch.randn(rows, head_dim) * 0.02)  # HF's initializer_range
        self.rel_v = torch.nn.Parameter(torch.randn(rows, head_dim) * 0.02) if values else None

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_relative={self.max_relative}, values={self.rel_v is not None}, " \
               f"key_query={self.key_query}"

    def distances(self, s_len: int, t_len: int) -> torch.Tensor:
        """[S, T] query position - key position, query i at T - S + i."""
        _check_ints("ShawRelative", ("q_len", s_len, 0), ("k_len", t_len, 0))
        return ((torch.arange(s_len) + (t_len - s_len)).unsqueeze(1) - torch.arange(t_len)).to(self.rel_k.device)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                  scale: Optional[float] = None) -> torch.Tensor:
        if q.dim() != 4 or k.dim() != 4 or v.shape != k.shape or q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1] \
                or q.shape[-1] != self.head_dim or k.shape[2] < 1 or q.shape[2] % k.shape[2] != 0 \
                or q.shape[1] > k.shape[1]:
            raise ValueError(f"ShawRelative.attention: q [B, S, Hq, D={self.head_dim}] and k, v [B, T, Hk, D] with Hq a "
                             f"multiple of Hk and S <= T, got {list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
        if not isinstance(causal, bool):
            raise ValueError(f"ShawRelative.attention: causal must be True or False, got {causal!r}")
        _check_scale("ShawRelative.attention", scale)
        s_len, t_len, group = q.shape[1], k.shape[1], q.shape[2] // k.shape[2]
        qh = q.transpose(1, 2)  # [B, Hq, S, D]
        kh, vh = (x.repeat_interleave(group, dim=2).transpose(1, 2) for x in (k, v))
        d = self.distances(s_len, t_len)
        rows = d.clamp(-self.max_relative, self.max_relative) + self.max_relative
        # Through the 2M + 1 rows, never an [S, T, D] tensor: q . rel_k^T gathered at each (i, j)'s
        # row; the key-query term k_j . rel_k[row] likewise over the keys.
        rel_k, index = self.rel_k.to(q.dtype), rows.expand(*qh.shape[:2], -1, -1)
        scores = qh @ kh.transpose(-1, -2) + (qh @ rel_k.T).gather(-1, index)
        if self.key_query:
            scores = scores + (kh @ rel_k.T).transpose(-1, -2).gather(-2, index)
        scores = scores * (self.head_dim ** -0.5 if scale is None else scale)
        if causal:
            scores = scores.masked_fill(d < 0, float("-inf"))  # keys after the query
        probs = torch.softmax(scores, dim=-1)
        out = probs @ vh
        if self.rel_v is not None:  # the weights summed per row, times rel_v
            per_row = probs.new_zeros(*probs.shape[:3], self.rel_v.shape[0]).scatter_add(-1, index, probs)
            out = out + per_row @ self.rel_v.to(q.dtype)
        return out.transpose(1, 2)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                scale: Optional[float] = None) -> torch.Tensor:
        return self.attention(q, k, v, causal, scale)
