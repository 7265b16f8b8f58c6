"""The input layer of an absolute-position transformer: token embeddings plus a position table.
posenc.nn.TokenPositionEmbedding; positions_from_mask, the position ids Hugging Face builds for a
padded batch."""
from __future__ import annotations

import math
from typing import Optional

import torch

from .encodings import _check_ints, sinusoidal

_POSITIONS = ("sinusoidal", "learned", "none")
_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a padded batch as Hugging Face builds them (GenerationMixin.
    prepare_inputs_for_generation): attention_mask [B, S] of 0 (pad) and 1 (token) ->
    cumsum(-1) - 1, pads set to 1. Each sequence's first real token is at 0 whichever side is padded."""
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2:
        raise ValueError(f"positions_from_mask: attention_mask must be a [batch, seq] tensor, got "
                         f"{getattr(attention_mask, 'shape', type(attention_mask).__name__)}")
    if attention_mask.numel() and not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
        raise ValueError("positions_from_mask: attention_mask must hold 0 (pad) and 1 (token) only")
    ids = attention_mask.long().cumsum(-1) - 1
    return ids.masked_fill(attention_mask == 0, 1)


class TokenPositionEmbedding(torch.nn.Module):
    """x = E[tokens] * s + P(positions): [B, S] int token ids -> [B, S, dim] float32.

    positions: "sinusoidal" (Vaswani's table at `base`, any length), "learned" (a trained table of
    max_positions rows, N(0, 0.02) as GPT-2) or "none" (NoPE: the token embedding alone).
    scale=True multiplies the embeddings by s = sqrt(dim) (Vaswani et al. 2017, section 3.4). The
    scale belongs to an init: E is drawn from N(0, init_std^2) with init_std 1/sqrt(dim) when scaled
    (fairseq's Embedding: then E * sqrt(dim) has channels of size ~1, the sinusoid's amplitude) and
    1 otherwise (torch.nn.Embedding's). `posenc tour embedding-scale` measures why.
    forward(tokens, positions=None, attention_mask=None): positions [B, S] or [S] ints, else from
    attention_mask (positions_from_mask: padded batches), else 0 .. S - 1."""

    def __init__(self, vocab_size: int, dim: int, *, positions: str = "sinusoidal", max_positions: Optional[int] = None,
                 scale: bool = False, init_std: Optional[float] = None, base: float = 10000.0) -> None:
        super().__init__()
        _check_ints("TokenPositionEmbedding", ("vocab_size", vocab_size, 1), ("dim", dim, 2))
        if positions not in _POSITIONS:
            raise ValueError(f"TokenPositionEmbedding: positions must be one of {', '.join(_POSITIONS)}, got {positions!r}")
        if positions == "sinusoidal" and dim % 2:
            raise ValueError(f"TokenPositionEmbedding: a sinusoidal table needs an even dim, got {dim}")
        if (positions == "learned") != (max_positions is not None):
            raise ValueError("TokenPositionEmbedding: max_positions is the learned table's length: give it with "
                             f"positions='learned' only (positions={positions!r}, max_positions={max_positions!r})")
        if not isinstance(scale, bool):
            raise ValueError(f"TokenPositionEmbedding: scale must be True or False, got {scale!r}")
        std = (1 / math.sqrt(dim) if scale else 1.0) if init_std is None else init_std
        if isinstance(std, bool) or not isinstance(std, (int, float)) or not math.isfinite(std) or std <= 0:
            raise ValueError(f"TokenPositionEmbedding: init_std must be a finite number > 0, got {init_std!r}")
        if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) or base <= 1:
            raise ValueError(f"TokenPositionEmbedding: base must be a finite number > 1, got {base!r}")
        self.dim, self.kind, self.base = dim, positions, float(base)
        self.scale = math.sqrt(dim) if scale else 1.0
        self.tokens = torch.nn.Embedding(vocab_size, dim)
        torch.nn.init.normal_(self.tokens.weight, std=float(std))
        self.table = None
        if positions == "learned":
            from .nn import LearnedPositionalEmbedding  # posenc.nn imports this module
            _check_ints("TokenPositionEmbedding", ("max_positions", max_positions, 1))
            self.table = LearnedPositionalEmbedding(max_positions, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, positions={self.kind!r}, scale={self.scale:.6g}"

    def forward(self, tokens: torch.Tensor, positions: Optional[torch.Tensor] = None,
                attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype not in _INT_DTYPES:
            raise ValueError(f"TokenPositionEmbedding: tokens must be a [batch, seq] integer tensor, got "
                             f"{getattr(tokens, 'dtype', type(tokens).__name__)} {tuple(getattr(tokens, 'shape', ()))}")
        if positions is not None and attention_mask is not None:
            raise ValueError("TokenPositionEmbedding: give positions or attention_mask, not both")
        B, S = tokens.shape
        if attention_mask is not None:
            if tuple(attention_mask.shape) != (B, S):
                raise ValueError(f"TokenPositionEmbedding: attention_mask {tuple(attention_mask.shape)} must match "
                                 f"tokens {(B, S)}")
            positions = positions_from_mask(attention_mask)
        elif positions is None:
            positions = torch.arange(S, device=tokens.device)
        if positions.dtype not in _INT_DTYPES or tuple(positions.shape) not in ((S,), (B, S)):
            raise ValueError(f"TokenPositionEmbedding: positions must be integers of shape [{S}] or [{B}, {S}], got "
                             f"{positions.dtype} {tuple(positions.shape)}")
        x = self.tokens(tokens) * self.scale
        if self.kind == "none":
            return x
        if self.kind == "learned":
            pe = self.table(positions.to(tokens.device))
        else:  # the core's table (CPU float32), moved to where the embeddings are
            pe = sinusoidal(positions.cpu(), self.dim, base=self.base).to(x.device, x.dtype)
        return x + pe
