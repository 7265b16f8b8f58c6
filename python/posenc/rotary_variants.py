"""The rotary variants of research and vision models as torch.nn modules (posenc.nn re-exports
them): xPos on the core's kernels, N-D axial RoPE with lang frequencies on the kernels (pixel and
learned frequencies in torch operations over the core's frequencies), and RoPE-Mixed in torch
operations (the core has no per-head 2-D frequencies). q, k: [B, S, H, D] (heads_dim=2) or
[B, H, S, D] (heads_dim=1), as posenc.nn.RotaryEmbedding takes them."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from . import Schedule, _posenc
from . import schedule as make_schedule
from .rope import XPosScale, _formula, apply_rope

_PAIRINGS = ("interleaved", "half_split")  # deepseek_v3 reads one pairing and writes another: not here


def _positive_int(owner: str, name: str, value, even: bool = False) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1 or (even and value % 2):
        raise ValueError(f"{owner}: {name} must be {'an even' if even else 'an'} int >= {2 if even else 1}, got {value!r}")


def _positive_number(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a finite number > 0, got {value!r}")


def _check_pairing(owner: str, layout: str) -> None:
    if layout not in _PAIRINGS:
        raise ValueError(f"{owner}: layout must be one of {', '.join(_PAIRINGS)}, got {layout!r}")


def _check_qk(owner: str, q: torch.Tensor, k: torch.Tensor, heads_dim: int, rotary_dim: int) -> int:
    """Checks q and k alike (4-D, floating, one device, the same tokens, room for rotary_dim);
    returns the token count."""
    if heads_dim not in (1, 2):
        raise ValueError(f"{owner}: heads_dim must be 1 ([B, H, S, D]) or 2 ([B, S, H, D]), got {heads_dim}")
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{owner}: {name} must be a 4-D tensor ([B, S, H, D] or [B, H, S, D]), got "
                             f"{getattr(t, 'shape', type(t))}")
        if not t.is_floating_point():
            raise ValueError(f"{owner}: {name} must be a floating tensor, got {t.dtype}")
        if t.shape[-1] < rotary_dim:
            raise ValueError(f"{owner}: rotates {rotary_dim} channels but {name}'s head_dim is {t.shape[-1]}")
    if q.device != k.device:
        raise ValueError(f"{owner}: q and k must be on one device, got {q.device} and {k.device}")
    tokens = q.shape[1 if heads_dim == 2 else 2]
    if k.shape[1 if heads_dim == 2 else 2] != tokens or k.shape[0] != q.shape[0]:
        raise ValueError(f"{owner}: q and k must have the same batch and tokens, got {list(q.shape)} and {list(k.shape)}")
    return tokens


class XPos(torch.nn.Module):
    """xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer", arXiv 2212.10554 §3.2) on the
    core's kernels (forward and backward): RoPE with the default schedule (theta) times
    zeta_i^((m - c)/scale_base) on q and zeta_i^(-(n - c)/scale_base) on k, zeta_i = (2i/dim +
    gamma)/(1 + gamma), both channels of pair i alike: torchscale's XPOS (interleaved pairs,
    duplicate_interleave) and rotary-embedding-torch's use_xpos since it repeats the scale per
    pair (versions that concatenated it gave the two channels of a pair different scales).
    forward(q, k, positions=None, center=None) -> (q, k): positions [S] or [B, S] (None: 0..S-1),
    centre c (None: floor(L/2), L = largest position + 1, rotary-embedding-torch's len(t) // 2);
    c cancels in q.k, but queries against cached keys must use the keys' c."""

    def __init__(self, dim: int, scale_base: float = 512, theta: float = 10000.0, layout: str = "interleaved",
                 gamma: float = 0.4, heads_dim: int = 2) -> None:
        super().__init__()
        _positive_int("XPos", "dim", dim, even=True)
        _positive_number("XPos", "scale_base", scale_base)
        _positive_number("XPos", "theta", theta)
        _positive_number("XPos", "gamma", gamma)
        _check_pairing("XPos", layout)
        self.dim, self.scale_base, self.theta, self.layout, self.gamma, self.heads_dim = (
            dim, float(scale_base), float(theta), layout, float(gamma), heads_dim)
        self.schedule = make_schedule(head_dim=dim, rope_theta=float(theta))
        self.register_buffer("inv_freq", self.schedule.inv_freq.clone(), persistent=False)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, scale_base={self.scale_base:g}, theta={self.theta:g}, layout={self.layout!r}, "
                f"gamma={self.gamma:g}")

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: Optional[torch.Tensor] = None,
                center: Optional[float] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        tokens = _check_qk("XPos", q, k, self.heads_dim, self.dim)
        if center is None:
            length = int(positions.max()) + 1 if positions is not None and positions.numel() else tokens
            center = length // 2
        if isinstance(center, bool) or not isinstance(center, (int, float)) or not math.isfinite(center):
            raise ValueError(f"XPos: center must be a finite number, got {center!r}")
        scale = XPosScale(self.scale_base, float(center), self.gamma)
        return apply_rope(q, k, schedule=self.schedule, positions=positions, layout=self.layout,
                          heads_dim=self.heads_dim, xpos=scale)


class AxialRotaryEmbedding(torch.nn.Module):
    """N-D axial RoPE (rotary-embedding-torch's RotaryEmbedding(dim, freqs_for=...) with
    get_axial_freqs; EVA-02, timm; the core's axial_rope.h): each of `axes` coordinate axes
    rotates its own block of `dim` channels (dim: the channels per axis, rotary-embedding-torch's
    dim; the module rotates axes * dim channels, the rest pass through) with one axis's
    frequencies, blocks in axis order: interleaved pair a*dim/2 + i is axis a's frequency i
    (rotary-embedding-torch's and rope-vit's order).
      lang   1/theta^(2i/dim), integer coordinates (on the core's kernels, at most 3 axes)
      pixel  linspace(1, max_freq/2, dim/2) * pi, coordinates in [-1, 1] (torch operations)
    learned=True makes the frequencies [dim/2] a parameter (rotary-embedding-torch's learned_freq;
    torch operations). forward(q, k, coords) -> (q, k), coords [S, axes] (grid(*sizes) gives a
    grid's, as get_axial_freqs does). Which axes a model gives which heads is the caller's."""

    def __init__(self, dim: int, axes: int = 2, freqs_for: str = "lang", max_freq: float = 10.0,
                 theta: float = 10000.0, learned: bool = False, layout: str = "interleaved", heads_dim: int = 2) -> None:
        super().__init__()
        _positive_int("AxialRotaryEmbedding", "dim", dim, even=True)
        _positive_int("AxialRotaryEmbedding", "axes", axes)
        if freqs_for not in ("lang", "pixel"):
            raise ValueError(f"AxialRotaryEmbedding: freqs_for must be 'lang' or 'pixel', got {freqs_for!r}")
        _positive_number("AxialRotaryEmbedding", "theta", theta)
        _positive_number("AxialRotaryEmbedding", "max_freq", max_freq)
        _check_pairing("AxialRotaryEmbedding", layout)
        self.dim, self.axes, self.freqs_for, self.max_freq, self.theta, self.learned = (
            dim, axes, freqs_for, float(max_freq), float(theta), learned)
        self.layout, self.heads_dim = layout, heads_dim
        freqs = torch.tensor(_posenc.axial_frequencies(axes, dim, freqs_for, float(theta), float(max_freq)),
                             dtype=torch.float32)
        if learned:
            self.freqs = torch.nn.Parameter(freqs)
        else:
            self.register_buffer("freqs", freqs, persistent=False)  # rebuilt from the arguments, as RotaryEmbedding's
        self.axis_of_freq = [a for a in range(axes) for _ in range(dim // 2)]

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, axes={self.axes}, freqs_for={self.freqs_for!r}, theta={self.theta:g}, "
                f"max_freq={self.max_freq:g}, learned={self.learned}, layout={self.layout!r}")

    def grid(self, *sizes: int) -> torch.Tensor:
        """The coordinates [prod(sizes), axes] of a grid, row-major (the last axis fastest): lang
        arange(n) (int64), pixel linspace(-1, 1, n) (float32; n = 1: -1), the core's."""
        coords = _posenc.axial_grid(self.axes, self.dim, self.freqs_for, [int(n) for n in sizes])
        out = torch.tensor(coords, dtype=torch.float64).view(-1, self.axes)
        return out.to(torch.int64) if self.freqs_for == "lang" else out.to(torch.float32)

    def kernel_schedule(self) -> Schedule:
        """The kernels' view: inv_freq [axes * dim/2] (each axis's block), axis_of_freq."""
        rotary = self.axes * self.dim
        return Schedule(self.freqs.repeat(self.axes), 1.0, "default", rotary, rotary, None, list(self.axis_of_freq),
                        {"axial": self.extra_repr()})

    def forward(self, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        tokens = _check_qk("AxialRotaryEmbedding", q, k, self.heads_dim, self.axes * self.dim)
        if not isinstance(coords, torch.Tensor) or coords.dim() != 2 or tuple(coords.shape) != (tokens, self.axes):
            raise ValueError(f"AxialRotaryEmbedding: coords must be [S={tokens}, axes={self.axes}], got "
                             f"{list(getattr(coords, 'shape', [type(coords).__name__]))}")
        integral = not coords.is_floating_point()
        if coords.numel() and not bool(torch.isfinite(coords.double()).all()):
            raise ValueError("AxialRotaryEmbedding: coords must be finite")
        if self.freqs_for == "pixel" and coords.numel() and float(coords.double().abs().max()) > 1:
            raise ValueError(f"AxialRotaryEmbedding: pixel frequencies take coordinates in [-1, 1], got "
                             f"{float(coords.double().abs().max()):g}")
        batch = q.shape[0]
        s = self.kernel_schedule()
        ids = coords.to(q.device).t().unsqueeze(1).expand(self.axes, batch, tokens).contiguous()  # [axes, B, S]
        if integral and self.freqs_for == "lang" and self.axes <= 3:
            return apply_rope(q, k, schedule=s, positions=ids, layout=self.layout, heads_dim=self.heads_dim)
        # Real coordinates (pixel, fractional lang) or more than 3 axes: the same angles p * freq
        # in torch operations (float64 angles), differentiable by autograd.
        return tuple(_formula(t, ids, s, self.layout, 0, self.heads_dim, 1.0) for t in (q, k))  # type: ignore


class MixedRotaryEmbedding(torch.nn.Module):
    """RoPE-Mixed (Heo et al. 2024, "Rotary Position Embedding for Vision Transformer", ECCV;
    naver-ai/rope-vit's init_random_2d_freqs and compute_mixed_cis): learned per-head 2-D
    frequencies freqs [2, heads, dim/2] (x then y), angle[h, t, j] = fx[h, j] x_t + fy[h, j] y_t on
    interleaved pairs (rope-vit's complex view). Initialised as the paper: magnitudes
    1/theta^(4k/dim), k < dim/4, for the first dim/4 pairs at a random per-head angle phi (uniform
    in [0, 2 pi), torch's generator), the other dim/4 at phi + pi/2. RoPE-Axial is the case phi = 0
    (fx = [mag, 0], fy = [0, mag]). Torch operations (angles in the frequencies' dtype, as rope-vit's
    float32), differentiable in q, k and freqs; the core has no per-head frequency table.
    forward(q, k, coords) -> (q, k), coords [S, 2] = (x, y) per token (rope-vit: x = t mod W,
    y = t div W)."""

    def __init__(self, dim: int, heads: int, theta: float = 10.0, layout: str = "interleaved",
                 heads_dim: int = 2, rotate: bool = True) -> None:
        super().__init__()
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 4 or dim % 4:
            raise ValueError(f"MixedRotaryEmbedding: dim must be an int multiple of 4 (x and y pairs), got {dim!r}")
        _positive_int("MixedRotaryEmbedding", "heads", heads)
        _positive_number("MixedRotaryEmbedding", "theta", theta)
        _check_pairing("MixedRotaryEmbedding", layout)
        self.dim, self.heads, self.theta, self.layout, self.heads_dim = dim, heads, float(theta), layout, heads_dim
        mag = 1.0 / (float(theta) ** (torch.arange(0, dim, 4, dtype=torch.float64) / dim))  # [dim/4]
        phi = (torch.rand(heads, 1, dtype=torch.float64) * 2 * math.pi) if rotate else torch.zeros(heads, 1,
                                                                                                   dtype=torch.float64)
        fx = torch.cat((mag * torch.cos(phi), mag * torch.cos(phi + math.pi / 2)), dim=-1)  # [heads, dim/2]
        fy = torch.cat((mag * torch.sin(phi), mag * torch.sin(phi + math.pi / 2)), dim=-1)
        self.freqs = torch.nn.Parameter(torch.stack((fx, fy)).float())  # [2, heads, dim/2]

    def extra_repr(self) -> str:
        return f"dim={self.dim}, heads={self.heads}, theta={self.theta:g}, layout={self.layout!r}"

    def forward(self, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        tokens = _check_qk("MixedRotaryEmbedding", q, k, self.heads_dim, self.dim)
        head_axis = 2 if self.heads_dim == 2 else 1
        for name, t in (("q", q), ("k", k)):
            if t.shape[head_axis] != self.heads:
                raise ValueError(f"MixedRotaryEmbedding: {name} has {t.shape[head_axis]} heads, the module {self.heads}")
        if not isinstance(coords, torch.Tensor) or tuple(coords.shape) != (tokens, 2):
            raise ValueError(f"MixedRotaryEmbedding: coords must be [S={tokens}, 2] (x, y), got "
                             f"{list(getattr(coords, 'shape', [type(coords).__name__]))}")
        c = coords.to(device=self.freqs.device, dtype=self.freqs.dtype)
        ang = c[:, 0, None, None] * self.freqs[0] + c[:, 1, None, None] * self.freqs[1]  # [S, heads, dim/2]
        if self.heads_dim == 1:
            ang = ang.transpose(0, 1)  # [heads, S, dim/2]
        return _rotate_by_angles(q, ang, self.layout), _rotate_by_angles(k, ang, self.layout)


def _rotate_by_angles(x: torch.Tensor, ang: torch.Tensor, layout: str) -> torch.Tensor:
    """x [..., D] rotated by angles broadcasting to x[..., :D/2 pairs] in x's (promoted) dtype;
    channels past 2 * pairs pass through. Interleaved pairs (2j, 2j+1), half-split (j, j + pairs)."""
    pairs = ang.shape[-1]
    work = torch.promote_types(x.dtype, ang.dtype)
    cos, sin = ang.cos().to(work), ang.sin().to(work)
    xw = x.to(work)
    rot, rest = xw[..., : 2 * pairs], xw[..., 2 * pairs:]
    a, b = (rot[..., 0::2], rot[..., 1::2]) if layout == "interleaved" else (rot[..., :pairs], rot[..., pairs:])
    oa, ob = a * cos - b * sin, b * cos + a * sin
    out = torch.stack((oa, ob), -1).flatten(-2) if layout == "interleaved" else torch.cat((oa, ob), -1)
    return torch.cat((out, rest), -1).to(x.dtype)

