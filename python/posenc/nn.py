"""posenc.nn: positional modules for PyTorch over posenc's core. Fixed tables and frequencies are
buffers (never trained), learned tables are parameters."""
from __future__ import annotations

import math
import numbers
from typing import Optional, Tuple, Union

import torch

from . import Model, RopeRuntime, Schedule, _posenc, rope_fields
from .encodings import _check_ints, _check_scale, alibi_bias, alibi_slopes, sinusoidal, t5_buckets
from .rope import apply_rope
from .rotary_variants import AxialRotaryEmbedding, MixedRotaryEmbedding, XPos  # noqa: F401  (posenc.nn's)
from .contextual import CoPE  # noqa: F401  (posenc.nn's)
from .shaw import ShawRelative  # noqa: F401  (posenc.nn's)
from .polar import PolarEmbedding  # noqa: F401  (posenc.nn's)
from .sink_cache import SinkCache  # noqa: F401  (posenc.nn's)
from .token_embedding import TokenPositionEmbedding, positions_from_mask  # noqa: F401  (posenc.nn's)


class RotaryEmbedding(torch.nn.Module):
    """RoPE with a model's exact schedule: from a config (path or Model) or RopeParams fields,
    read once. Schedules that depend on length follow HF's runtime rule (RopeRuntime): dynamic
    NTK recomputes at L = max(positions) + 1 only when L exceeds every earlier call's, and resets
    below max_position_embeddings; LongRoPE switches to its long factors past the original
    context. forward(q, k, positions) returns the rotated pair; inv_freq is the schedule in force."""

    def __init__(self, config: Union[str, Model, None] = None, *, layer_type: Optional[str] = None,
                 layout: str = "half_split", heads_dim: int = 2, hf_compatible: bool = False, **params) -> None:
        super().__init__()
        self.layout, self.heads_dim = layout, heads_dim
        self.runtime = RopeRuntime(rope_fields(config, layer_type=layer_type, hf_compatible=hf_compatible, **params),
                                   hf_compatible)
        self.register_buffer("inv_freq", self.runtime.current.inv_freq.clone(), persistent=False)

    def extra_repr(self) -> str:
        s = self.runtime.current
        return (f"rope_type={s.rope_type!r}, rotary_dim={s.rotary_dim}, attention_factor={s.attention_factor:g}, "
                f"layout={self.layout!r}, heads_dim={self.heads_dim}")

    # What determines the schedule travels in the state_dict (the fields and the arithmetic), so a
    # checkpoint trained with one schedule refuses to load into a module built with another.
    def get_extra_state(self) -> dict:
        return {"rope_fields": dict(self.runtime.fields), "hf_compatible": self.runtime.hf_compatible}

    def set_extra_state(self, state: dict) -> None:
        mine = self.get_extra_state()
        if state != mine:
            raise ValueError(f"this checkpoint's RoPE schedule {state} differs from the module's {mine}: "
                             "build the module with the checkpoint's fields")

    def schedule_for(self, seq_len: int) -> Schedule:
        """The schedule for a call of seq_len = max position id + 1 (updates the runtime state)."""
        return self.runtime.update(seq_len - 1)

    def forward(self, q: torch.Tensor, k: torch.Tensor,
                positions: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        tokens = q.shape[1] if self.heads_dim == 2 else q.shape[2]
        seq_len = int(positions.max()) + 1 if positions is not None and positions.numel() else tokens
        s = self.schedule_for(max(seq_len, 1))
        self.inv_freq.copy_(s.inv_freq)
        return apply_rope(q, k, schedule=s, positions=positions, layout=self.layout, heads_dim=self.heads_dim)


class SinusoidalPositionalEncoding(torch.nn.Module):
    """Vaswani sinusoids for any positions: [B, S] int -> [B, S, dim] float32 (no length limit)."""

    def __init__(self, dim: int, layout: str = "interleaved", base: float = 10000.0) -> None:
        super().__init__()
        self.dim, self.layout, self.base = dim, layout, base

    def extra_repr(self) -> str:
        return f"dim={self.dim}, layout={self.layout!r}, base={self.base}"

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return sinusoidal(positions, self.dim, self.layout, base=self.base)


class LearnedPositionalEmbedding(torch.nn.Embedding):
    """A trainable table [num_positions, dim], N(0, learned_init_std = 0.02) (GPT-2, posenc's
    kLearnedInitStd); a position past it raises."""

    def __init__(self, num_positions: int, dim: int) -> None:
        for name, value in (("num_positions", num_positions), ("dim", dim)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
                raise ValueError(f"LearnedPositionalEmbedding: {name} must be an int >= 1, got {value!r}")
        super().__init__(num_positions, dim)
        torch.nn.init.normal_(self.weight, std=_posenc.learned_init_std)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if positions.numel() and (int(positions.max()) >= self.num_embeddings or int(positions.min()) < 0):
            bad = int(positions.max()) if int(positions.max()) >= self.num_embeddings else int(positions.min())
            raise ValueError(f"position {bad} is outside the learned table (0 .. {self.num_embeddings - 1})")
        return super().forward(positions)


class ALiBi(torch.nn.Module):
    """ALiBi's bias [heads, q_len, k_len] to add to attention scores; slopes are a buffer."""

    def __init__(self, heads: int, causal: bool = True) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.register_buffer("slopes", alibi_slopes(heads).to(torch.float32))

    def extra_repr(self) -> str:
        return f"heads={self.heads}, causal={self.causal}"

    def forward(self, q_len: int, k_len: int, past: int = 0) -> torch.Tensor:
        return alibi_bias(self.heads, q_len, k_len, self.causal, past)


class T5RelativeBias(torch.nn.Module):
    """T5's learned bias per (bucket of key - query, head): [heads, q_len, k_len]."""

    def __init__(self, heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True) -> None:
        super().__init__()
        _check_ints("T5RelativeBias", ("heads", heads, 1), ("num_buckets", num_buckets, 1), ("max_distance", max_distance, 1))
        if bidirectional and num_buckets < 2:
            raise ValueError(f"T5RelativeBias: bidirectional buckets need num_buckets >= 2, got {num_buckets}")
        self.heads, self.num_buckets, self.max_distance, self.bidirectional = heads, num_buckets, max_distance, bidirectional
        self.table = torch.nn.Parameter(torch.randn(num_buckets, heads) * _posenc.learned_init_std)

    def extra_repr(self) -> str:
        return (f"heads={self.heads}, num_buckets={self.num_buckets}, max_distance={self.max_distance}, "
                f"bidirectional={self.bidirectional}")

    def forward(self, q_len: int, k_len: int, past: int = 0) -> torch.Tensor:
        _check_ints("T5RelativeBias", ("q_len", q_len, 0), ("k_len", k_len, 0), ("past", past, 0))
        rel = torch.arange(k_len).unsqueeze(0) - (torch.arange(q_len) + past).unsqueeze(1)
        buckets = t5_buckets(rel, self.num_buckets, self.max_distance, self.bidirectional)
        return self.table[buckets].permute(2, 0, 1)


class Kerple(torch.nn.Module):
    """Kerple (Chi et al. 2022): b_h(d) = -r1_h log(1 + r2_h |d|) ("log") or -r1_h |d|^r2_h
    ("power"), r1, r2 [heads] learned and positive by construction: r = softplus(raw) (power's
    r2 = 2 sigmoid(raw), in (0, 2)), starting at posenc's kerple_init (ALiBi's slopes: power is
    exactly ALiBi at initialisation). m(q_len, k_len, past=0) -> [heads, q_len, k_len], the bias to
    add to the scaled scores; m.table(length) -> [heads, length] over |d|, what
    posenc.attention(..., bias=m) gives the fused kernel."""

    def __init__(self, heads: int, kind: str = "log") -> None:
        super().__init__()
        if kind not in ("log", "power"):
            raise ValueError(f"Kerple: kind must be 'log' or 'power', got {kind!r}")
        r1, r2 = (torch.tensor(r, dtype=torch.float64) for r in _posenc.kerple_init(heads, kind))
        self.heads, self.kind = heads, kind
        self.raw_r1 = torch.nn.Parameter(torch.log(torch.expm1(r1)))
        self.raw_r2 = torch.nn.Parameter(torch.log(r2 / (2 - r2)) if kind == "power" else torch.log(torch.expm1(r2)))

    @property
    def r1(self) -> torch.Tensor:
        return torch.nn.functional.softplus(self.raw_r1)

    @property
    def r2(self) -> torch.Tensor:
        return 2 * torch.sigmoid(self.raw_r2) if self.kind == "power" else torch.nn.functional.softplus(self.raw_r2)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, kind={self.kind!r}"

    def table(self, length: int) -> torch.Tensor:
        d = torch.arange(length, dtype=torch.float64)
        r1, r2 = self.r1.unsqueeze(1), self.r2.unsqueeze(1)
        if self.kind == "log":
            return (-r1 * torch.log1p(r2 * d)).float()
        power = torch.where(d > 0, torch.exp(r2 * torch.log(d.clamp(min=1))), torch.zeros_like(d))  # finite grads at 0
        return (-r1 * power).float()

    def forward(self, q_len: int, k_len: int, past: int = 0) -> torch.Tensor:
        return _distance_bias(self.table(max(q_len + past, k_len)), q_len, k_len, past)


class Sandwich(torch.nn.Module):
    """Sandwich (Chi et al. 2023), parameter-free: b_h(d) = (sum_{k=1..dim/2} cos(d / 10000^(2k/dim))
    - dim/2) * heads / (8 h), h = 1..heads (NeMo's normalisation), the core's table. Called like
    Kerple."""

    def __init__(self, heads: int, dim: int = 128) -> None:
        super().__init__()
        self.heads, self.dim = heads, dim
        _posenc.sandwich_table(heads, dim, 1)  # validates

    def extra_repr(self) -> str:
        return f"heads={self.heads}, dim={self.dim}"

    def table(self, length: int) -> torch.Tensor:
        return torch.from_numpy(_posenc.sandwich_table(self.heads, self.dim, length)).view(self.heads, length)

    def forward(self, q_len: int, k_len: int, past: int = 0) -> torch.Tensor:
        return _distance_bias(self.table(max(q_len + past, k_len)), q_len, k_len, past)


class DynamicPositionBias(torch.nn.Module):
    """Dynamic position bias (x-transformers' DynamicPositionBias, norm=False; SwinV2's log-spaced
    continuous position bias, in one dimension): b_h(d) = mlp(sign(d) log(1 + |d|))_h with d =
    query - key (d itself when log_distance=False, x-transformers' own default), mlp = Linear(1, dim), SiLU, (Linear(dim, dim),
    SiLU) x (depth - 1), Linear(dim, heads); computed in the parameters' dtype. Called like Kerple;
    m.table(length) -> [heads, 2 length - 1] over d = -(length - 1) .. length - 1, a signed table
    (distance_side "signed"), what posenc.attention(..., bias=m) gives the fused kernel."""

    distance_side = "signed"

    def __init__(self, dim: int, heads: int, depth: int = 2, log_distance: bool = True) -> None:
        super().__init__()
        _check_ints("DynamicPositionBias", ("dim", dim, 1), ("heads", heads, 1), ("depth", depth, 1))
        if not isinstance(log_distance, bool):
            raise ValueError(f"DynamicPositionBias: log_distance must be a bool, got {log_distance!r}")
        layers = [torch.nn.Linear(1, dim), torch.nn.SiLU()]
        for _ in range(depth - 1):
            layers += [torch.nn.Linear(dim, dim), torch.nn.SiLU()]
        self.mlp = torch.nn.Sequential(*layers, torch.nn.Linear(dim, heads))
        self.heads, self.depth, self.log_distance = heads, depth, log_distance

    def extra_repr(self) -> str:
        return f"heads={self.heads}, depth={self.depth}, log_distance={self.log_distance}"

    def table(self, length: int) -> torch.Tensor:
        _check_ints("DynamicPositionBias.table", ("length", length, 1))
        weight = self.mlp[0].weight
        d = torch.arange(-(length - 1), length, dtype=weight.dtype, device=weight.device)
        x = torch.sign(d) * torch.log1p(d.abs()) if self.log_distance else d
        return self.mlp(x.unsqueeze(-1)).transpose(0, 1)  # [2 length - 1, heads] -> [heads, 2 length - 1]

    def forward(self, q_len: int, k_len: int, past: int = 0) -> torch.Tensor:
        return _distance_bias(self.table(max(q_len + past, k_len, 1)), q_len, k_len, past, signed=True)


class FIRE(torch.nn.Module):
    """FIRE, functional interpolation for relative positions (Li et al. 2023; the FIRE module of
    mcleish7/arithmetic, the core's fire.h): b_h(i, j) = mlp(psi(i - j) / (psi(max(L, i)) + eps))_h
    with psi(x) = log(|c x| + 1), mlp = Linear(1, width), ReLU, Linear(width, heads); c (init 0.1)
    and L_multiplier (init 1) learned, L = |L_multiplier * init_L| (init_L 512, a buffer). It
    depends on the query position as well as the distance: m(q_len, k_len, past=0) -> [heads,
    q_len, k_len] (query r at position past + r, key c at c) to add to the scaled scores, and
    m.scores(q_positions, k_positions) for explicit positions ([..., Sq], [..., Sk] -> [..., heads,
    Sq, Sk]); computed in the parameters' dtype. While every query is below L it is a table over
    |i - j| (the normaliser is psi(L)): m.table(length) -> [heads, length], which
    posenc.attention(bias=m) runs inside the kernel; past L, posenc.attention materialises it."""

    def __init__(self, heads: int, width: int = 32, init_c: float = 0.1, init_L: float = 512.0, eps: float = 1e-6) -> None:
        super().__init__()
        _check_ints("FIRE", ("heads", heads, 1), ("width", width, 1))
        for name, value in (("init_c", init_c), ("init_L", init_L), ("eps", eps)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= 3.4e38:
                raise ValueError(f"FIRE: {name} must be a number finite in float32, got {value!r}")
        if eps <= 0:
            raise ValueError(f"FIRE: eps must be > 0, got {eps}")
        self.heads, self.width, self.eps = heads, width, float(eps)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(1, width), torch.nn.ReLU(), torch.nn.Linear(width, heads))
        self.c = torch.nn.Parameter(torch.tensor(float(init_c)))
        self.L_multiplier = torch.nn.Parameter(torch.tensor(1.0))
        self.register_buffer("init_L", torch.tensor(float(init_L)))

    def extra_repr(self) -> str:
        return f"heads={self.heads}, width={self.width}"

    def threshold(self) -> torch.Tensor:
        """L = |L_multiplier * init_L| in the dtype FIRE's input is computed in (differentiable)."""
        return (self.L_multiplier * self.init_L).abs().to(torch.promote_types(self.c.dtype, torch.float32))

    def table_covers(self, largest_query_position: int) -> bool:
        """Whether queries up to this position are all below L (strictly: at i = L autograd halves
        max(L, i)'s gradient, which a table would not), compared as scores() compares them."""
        dtype = torch.promote_types(self.c.dtype, torch.float32)
        return bool(torch.tensor(float(largest_query_position), dtype=dtype) < self.threshold().detach().cpu())

    def table(self, length: int) -> torch.Tensor:
        """b_h(|i - j|) for |i - j| = 0 .. length - 1 at queries below L: [heads, length], the bits
        scores() gives such a query, differentiable in every parameter."""
        _check_ints("FIRE.table", ("length", length, 1))
        dtype = torch.promote_types(self.c.dtype, torch.float32)
        c = self.c.to(dtype)
        distance = torch.arange(length, device=self.c.device).to(dtype)
        x = torch.log((c * distance).abs() + 1) / (torch.log((c * self.threshold()).abs() + 1) + self.eps)
        return self.mlp(x.to(self.c.dtype).unsqueeze(-1)).t()

    def scores(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        for name, p in (("q_positions", q_positions), ("k_positions", k_positions)):
            if not isinstance(p, torch.Tensor) or p.dim() < 1 or p.dtype.is_floating_point or p.dtype.is_complex \
                    or p.dtype == torch.bool:
                raise ValueError(f"FIRE.scores: {name} must be an integer tensor [..., S], got {p!r:.80}")
            if p.numel() and not 0 <= int(p.min()) <= int(p.max()) <= 2**31 - 1:
                raise ValueError(f"FIRE.scores: {name} must be in [0, 2^31-1], got {int(p.min())} .. {int(p.max())}")
        if q_positions.shape[:-1] != k_positions.shape[:-1]:
            raise ValueError(f"FIRE.scores: q_positions {list(q_positions.shape)} and k_positions {list(k_positions.shape)} "
                             "must share their leading (batch) dimensions")
        cells = q_positions.numel() * k_positions.shape[-1] * max(self.width, self.heads)
        if cells > 2**28:
            raise ValueError(f"FIRE.scores: [{q_positions.shape[-1]} x {k_positions.shape[-1]}] pairs x width {self.width} "
                             f"is {cells} values (over 2^28, 1 GiB in float32): score in blocks of queries")
        # The distance in int64 before any rounding, the input in at least float32: in bfloat16 a
        # position near 1000 would make distances 0 and 1 equal. The MLP then runs in its own dtype.
        dtype = torch.promote_types(self.c.dtype, torch.float32)
        c, threshold = self.c.to(dtype), self.threshold()
        distance = (q_positions.unsqueeze(-1) - k_positions.unsqueeze(-2)).to(dtype)
        i = q_positions.to(dtype).unsqueeze(-1)
        x = torch.log((c * distance).abs() + 1) / (torch.log((c * torch.maximum(i, threshold)).abs() + 1) + self.eps)
        return self.mlp(x.to(self.c.dtype).unsqueeze(-1)).movedim(-1, -3)  # [..., Sq, Sk, H] -> [..., H, Sq, Sk]

    def forward(self, q_len: int, k_len: int, past: int = 0) -> torch.Tensor:
        _check_ints("FIRE", ("q_len", q_len, 0), ("k_len", k_len, 0), ("past", past, 0))
        if past + q_len > 2**31 or k_len > 2**31:
            raise ValueError(f"FIRE: positions past + q_len = {past + q_len} and k_len = {k_len} must be at most 2^31")
        device = self.c.device
        return self.scores(torch.arange(past, past + q_len, device=device), torch.arange(k_len, device=device))


class ForgettingGate(torch.nn.Module):
    """FoX's forget gate (Lin et al. 2025): f = sigmoid(proj(x)), proj = Linear(dim, heads) (bias
    initialised to 5, as x-transformers' DataDependentAlibi, so gates start near 1).
    m.cumulative(x) -> c [B, heads, S] = cumsum of log f (float64 sum, float32 result), what
    posenc.attention(..., bias=c) takes; m.bias(x) -> [B, heads, S, S], c_i - c_j (the causal
    mask hides j > i)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(dim, heads)
        with torch.no_grad():
            self.proj.bias.fill_(5.0)

    def cumulative(self, x: torch.Tensor) -> torch.Tensor:
        log_f = torch.nn.functional.logsigmoid(self.proj(x)).double().transpose(1, 2)  # [B, H, S]
        return log_f.cumsum(-1).float()

    def bias(self, x: torch.Tensor) -> torch.Tensor:
        c = self.cumulative(x)
        return c.unsqueeze(-1) - c.unsqueeze(-2)


def _distance_bias(table: torch.Tensor, q_len: int, k_len: int, past: int, signed: bool = False) -> torch.Tensor:
    """[heads, q_len, k_len]: table[h, |past + i - j|], or signed (table over -(L-1) .. L-1)
    table[h, past + i - j + L - 1]."""
    _check_ints("distance bias", ("q_len", q_len, 0), ("k_len", k_len, 0), ("past", past, 0))
    d = (torch.arange(q_len, device=table.device) + past).unsqueeze(1) - torch.arange(k_len, device=table.device)
    return table[:, d + (table.shape[1] - 1) // 2] if signed else table[:, d.abs()]
