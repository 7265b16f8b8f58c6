"""PoPE, polar coordinate positional embeddings (Gopalakrishnan, Csordás, Schmidhuber, Mozer 2025,
"Decoupling the 'What' and 'Where' With Polar Coordinate Positional Embeddings", arXiv 2509.10534),
with the conventions of lucidrains' x-transformers (x_transformers/x_transformers.py, PolarEmbedding
and apply_polar_pos_emb; read at commit 9252ed7838021ee61e6c5be0930b3a9a88efdf06). posenc.nn
re-exports it. Each channel j of a head is one complex number: magnitude softplus(x_j) (the "what"),
phase p w_j at position p (the "where"), w_j = 1 / base^(j/d) for all d channels (RoPE's d/2 pair
frequencies, doubled), and on keys a learned phase bias delta_j. Written out as real and imaginary
parts, an ordinary dot product of the results is the real part of the complex one:

    q'_m . k'_n = sum_j softplus(q_j) softplus(k_j) cos((m - n) w_j - delta_j),

which depends on the positions through m - n only. Torch operations on any device, differentiable in
q, k and delta; the core has no PoPE kernel."""
from __future__ import annotations

import math
import numbers
from typing import Optional, Tuple

import torch

_MAX_POSITION = 2**31 - 1  # posenc's kMaxPosition, as every RoPE path bounds positions
_TWO_PI = 2.0 * math.pi


def _int_at_least(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < least:
        raise ValueError(f"PolarEmbedding: {name} must be an int >= {least}, got {type(value).__name__} {value!r}")
    return int(value)


class PolarEmbedding(torch.nn.Module):
    """PoPE for q and k of [B, S, H, D] (heads_dim 2, as posenc.nn.RotaryEmbedding's default):
    m = PolarEmbedding(dim, heads, base=10000); q2, k2 = m(q, k, positions) -> q2, k2 [B, S, H, 2 dim],
    channels 0..dim-1 the real parts softplus(x_j) cos(phase_j), dim..2 dim-1 the imaginary parts
    softplus(x_j) sin(phase_j) (x-transformers' cat((t cos, t sin), -1)); phase p w_j on queries,
    p w_j + delta_h,j on keys. Use q2 and k2 as the attention's q and k (their head dim is 2 dim; the
    values keep theirs); the softmax scale is the caller's (x-transformers keeps dim_head^-0.5).

      dim    channels per head, any int >= 1 (every channel is a frequency: no pairs, odd dims work)
      heads  query heads; delta [heads, dim] is one phase bias per head and frequency
      base   w_j = 1 / base^(j/dim), j = 0..dim-1 (x-transformers' inv_freq), a finite number > 0
      bias_uniform_init  delta starts at 0 (default, x-transformers' and the paper's choice for length
             extrapolation) or, True, uniform in [-2 pi, 0] (the paper's other initialisation)

    delta is used clamped to [-2 pi, 0] (x-transformers' learned_bias.clamp(-2 pi, 0), the paper's
    constraint); as in torch's clamp, no gradient reaches a delta outside that range. x-transformers
    stores the bias as [heads, 1, dim]; here it is [heads, dim].

    forward(q, k, positions=None): q and k [B, S, heads, dim] alike (same shape; floating dtypes,
    complex refused); positions None (0..S-1), or an int32/int64 tensor [S] (every sequence) or
    [B, S], in [0, 2^31-1] (moved to q's device). Grouped-query attention is refused (k must have
    `heads` heads): delta belongs to a query head but sits on the key, so one shared key head would
    need a different k' per query head; repeat k to `heads` heads first
    (k.repeat_interleave(heads // kv_heads, dim=2)), which is what such a k' costs anyway.

    Precision: the angles p w_j in float64 (float32 on MPS, which has no float64), reduced modulo
    2 pi before rounding, so a position near 10^6 keeps its phase to float32 rounding
    (x-transformers multiplies in float32: a few hundredths of a radian off there); frequencies
    w_j in float64 (x-transformers rounds them to float32); softplus, cos, sin and the products
    in float32 for float16, bfloat16 and float32 inputs, in float64 for float64 inputs
    (x-transformers computes float64 inputs in float32); each result returned in its input's dtype
    (x-transformers' out.type(orig_dtype)). Autocast changes nothing here (x-transformers disables
    it around the same steps).

    Differences from x-transformers, where the paper decides: none in the formula. The paper's score
    sum_c mu_q mu_k cos((s - t) theta_c + delta_c), with s the key's position and t the query's, is
    cos((m - n) w_j - delta_j) here and is what x-transformers' key-side bias computes. x-transformers
    (at the commit above) mis-broadcasts [B, S] positions against [B, H, S, D] (its rotary path
    rearranges them, its polar path does not), and its bias_uniform_init=True raises (uniform_ on a
    leaf that requires grad): both work here."""

    def __init__(self, dim: int, heads: int, base: float = 10000.0, *, bias_uniform_init: bool = False) -> None:
        super().__init__()
        self.dim = _int_at_least("dim", dim, 1)
        self.heads = _int_at_least("heads", heads, 1)
        if isinstance(base, bool) or not isinstance(base, numbers.Real) or not math.isfinite(float(base)) \
                or float(base) <= 0:
            raise ValueError(f"PolarEmbedding: base must be a finite number > 0, got {type(base).__name__} {base!r}")
        if not isinstance(bias_uniform_init, bool):
            raise ValueError(f"PolarEmbedding: bias_uniform_init must be True or False, got {bias_uniform_init!r}")
        self.base, self.bias_uniform_init = float(base), bias_uniform_init
        delta = torch.zeros(self.heads, self.dim)
        if bias_uniform_init:
            delta.uniform_(-_TWO_PI, 0.0)
        self.delta = torch.nn.Parameter(delta)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, heads={self.heads}, base={self.base:g}, bias_uniform_init={self.bias_uniform_init}"

    def inv_freq(self, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
        """w_j = 1 / base^(j/dim), j = 0..dim-1, [dim]. Computed from (dim, base) on each call rather
        than kept as a buffer, so module.half() or .to(bfloat16) cannot round them."""
        j = torch.arange(self.dim, dtype=torch.float64 if dtype == torch.float64 else torch.float32, device=device)
        return (1.0 / self.base ** (j / self.dim)).to(dtype)

    def _positions(self, positions: Optional[torch.Tensor], batch: int, tokens: int,
                   device: torch.device) -> torch.Tensor:
        """[1, S] or [B, S] int64 on `device`."""
        if positions is None:
            if tokens and tokens - 1 > _MAX_POSITION:
                raise ValueError(f"PolarEmbedding: {tokens} tokens pass position 2^31-1")
            return torch.arange(tokens, device=device).unsqueeze(0)
        if not isinstance(positions, torch.Tensor) or positions.dtype not in (torch.int32, torch.int64):
            what = positions.dtype if isinstance(positions, torch.Tensor) else type(positions).__name__
            raise ValueError(f"PolarEmbedding: positions must be an int32 or int64 tensor [S] or [B, S] "
                             f"(None: 0..S-1), got {what}")
        shape = list(positions.shape)
        if shape != [tokens] and shape != [batch, tokens]:
            raise ValueError(f"PolarEmbedding: positions must be [S={tokens}] or [B={batch}, S={tokens}], got {shape}")
        if positions.numel():
            low, high = int(positions.min()), int(positions.max())
            if low < 0 or high > _MAX_POSITION:
                bad = low if low < 0 else high
                raise ValueError(f"PolarEmbedding: positions must be in [0, 2^31-1], got {bad}")
        p = positions.to(device=device, dtype=torch.int64)
        return p.unsqueeze(0) if p.dim() == 1 else p

    def _check(self, q: torch.Tensor, k: torch.Tensor) -> None:
        for name, t in (("q", q), ("k", k)):
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"PolarEmbedding: {name} must be a torch.Tensor [B, S, H, D], got {type(t).__name__}")
            if t.dim() != 4:
                raise ValueError(f"PolarEmbedding: {name} must be [B, S, H={self.heads}, D={self.dim}], got "
                                 f"{list(t.shape)}")
            if not t.is_floating_point():
                raise ValueError(f"PolarEmbedding: {name} must be a floating tensor (float32, bfloat16, float16, "
                                 f"float64), got {t.dtype}")
            if t.shape[-1] != self.dim:
                raise ValueError(f"PolarEmbedding: {name}'s head dim is {t.shape[-1]}, the module's dim {self.dim}")
            if t.shape[2] != self.heads:
                hint = (" (grouped-query keys: repeat k to the query heads first, k.repeat_interleave(heads // "
                        "kv_heads, dim=2))" if name == "k" else "")
                raise ValueError(f"PolarEmbedding: {name} has {t.shape[2]} heads, the module {self.heads}{hint}")
        if q.shape != k.shape:
            raise ValueError(f"PolarEmbedding: q and k must have the same shape [B, S, H, D], got {list(q.shape)} "
                             f"and {list(k.shape)}")
        if q.device != k.device or q.device != self.delta.device:
            raise ValueError(f"PolarEmbedding: q, k and delta must be on one device, got {q.device}, {k.device} and "
                             f"{self.delta.device} (m.to(q.device) moves delta)")

    def phases(self, positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The query phases p w_j mod 2 pi [..., dim] in `dtype` for int64 positions [...]: the product
        in float64 (float32 on MPS), reduced before rounding."""
        angle = torch.float32 if positions.device.type == "mps" else torch.float64
        theta = positions.to(angle).unsqueeze(-1) * self.inv_freq(angle, positions.device)
        return torch.remainder(theta, _TWO_PI).to(dtype)

    def forward(self, q: torch.Tensor, k: torch.Tensor,
                positions: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        self._check(q, k)
        batch, tokens = q.shape[0], q.shape[1]
        pos = self._positions(positions, batch, tokens, q.device)  # [1 or B, S]
        work = torch.promote_types(torch.promote_types(q.dtype, k.dtype), torch.float32)
        theta = self.phases(pos, work).unsqueeze(2)  # [1 or B, S, 1, D]
        delta = self.delta.to(work).clamp(-_TWO_PI, 0.0)  # [H, D]
        key_phase = theta + delta  # [1 or B, S, H, D]
        q_mag = torch.nn.functional.softplus(q.to(work))
        k_mag = torch.nn.functional.softplus(k.to(work))
        q_out = torch.cat((q_mag * theta.cos(), q_mag * theta.sin()), dim=-1)
        k_out = torch.cat((k_mag * key_phase.cos(), k_mag * key_phase.sin()), dim=-1)
        return q_out.to(q.dtype), k_out.to(k.dtype)
