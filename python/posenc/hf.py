"""posenc.hf: drop-ins for Hugging Face models' rotary modules, computed from posenc's schedule.

    rotary = posenc.hf.RotaryEmbedding("config.json")      # or a dict, or a PretrainedConfig
    cos, sin = rotary(x, position_ids)                      # [B, S, rotary_dim], x's dtype
    q, k = posenc.hf.apply_rotary_pos_emb(q, k, cos, sin)   # q, k [B, H, S, D] (unsqueeze_dim=1)

A user swaps `model.model.rotary_emb` for it to try another schedule, or checks an engine's cos
and sin against it. The arithmetic is HF's: inv_freq from posenc's schedule in HF's float32 steps
(Numerics::kHfFloat32, the bits of HF's rope_init_fn or within 1 ulp; dynamic NTK at some
lengths within 2 ulps, posenc the closer to the exact value), the angles as one float32 product (HF's inv_freq @ position_ids), cos and sin times attention_scaling, cast to x's dtype.
Dynamic NTK and LongRoPE follow dynamic_rope_update's rule (posenc's RopeRuntime). Half-split
(rotate_half) families only: M-RoPE position ids ([3, B, S]) are refused here; posenc.apply_rope
takes them.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Optional, Tuple

import torch

from . import ConfigError, Error, Model, RopeRuntime, _model, _posenc


def _config_text(config: Any) -> str:
    """config.json text from a path, a dict or an object with to_dict() (HF's PretrainedConfig)."""
    if isinstance(config, (str, os.PathLike)):
        with open(config, encoding="utf-8") as f:
            return f.read()
    if isinstance(config, dict):
        return _dumps(config)
    if hasattr(config, "to_dict"):
        return _dumps(config.to_dict())
    raise ConfigError(f"config must be a path, a dict or an object with to_dict(), got {type(config).__name__}")


def _non_finite(value: Any, path: str) -> Optional[str]:
    """The path of the first float in value that is NaN or infinite, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{path} is {value}"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _non_finite(item, f"{path}[{key!r}]")
        if found:
            return found
    return None


def _dumps(config: dict) -> str:
    """config.json text of a dict; NaN and infinities (which JSON has no spelling for, and which
    json.dumps would write as bare NaN) are refused naming the key."""
    found = _non_finite(config, "config")
    if found:
        raise ConfigError(f"{found}: a config holds finite numbers only (JSON has no NaN or infinity)")
    return json.dumps(config)


class RotaryEmbedding(torch.nn.Module):
    """HF's XRotaryEmbedding for one layer type of a model: forward(x, position_ids) -> (cos, sin),
    each [B, S, rotary_dim] in x's dtype with attention_scaling applied. Attributes as HF's:
    inv_freq (buffer), original_inv_freq, attention_scaling, max_seq_len_cached,
    original_max_seq_len, rope_type."""

    def __init__(self, config: Any, *, layer_type: Optional[str] = None, lenient: bool = False) -> None:
        super().__init__()
        try:
            model: Model = _model(_posenc.parse_hf_config(_config_text(config), lenient, True))
        except Error as e:
            raise ConfigError(str(e)) from None
        fields = model.select(layer_type).params
        self.runtime = RopeRuntime(fields, hf_compatible=True)  # HF's float32 arithmetic
        s = self._schedule = self.runtime.current
        self.rope_type = s.rope_type
        self.register_buffer("inv_freq", s.inv_freq.clone(), persistent=False)
        self.original_inv_freq = s.inv_freq.clone()
        self.attention_scaling = s.attention_factor
        self.original_max_seq_len = fields.get("max_position_embeddings")
        self.max_seq_len_cached = self.runtime.max_seq_len_cached

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(position_ids, torch.Tensor) or position_ids.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"position_ids must be an int32 or int64 tensor, got {getattr(position_ids, 'dtype', type(position_ids))}")
        if position_ids.dim() != 2:
            raise ValueError(f"position_ids must be [B, S] (M-RoPE's [3, B, S]: use posenc.apply_rope), got "
                             f"{list(position_ids.shape)}")
        if position_ids.numel() and int(position_ids.min()) < 0:
            raise ValueError(f"position {int(position_ids.min())} is negative; position_ids must be >= 0")
        if position_ids.numel():  # dynamic_rope_update: the schedule for max(position_ids) + 1
            s = self.runtime.update(int(position_ids.max()))
            if s is not self._schedule:  # the runtime returns the same Schedule until it changes
                self._schedule = s
                self.inv_freq = s.inv_freq.to(self.inv_freq.device)
                self.attention_scaling = s.attention_factor
            self.max_seq_len_cached = self.runtime.max_seq_len_cached
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1).to(x.device)
        freqs = (inv @ position_ids[:, None, :].float().to(x.device)).transpose(1, 2)  # [B, S, rotary_dim/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """HF's rotate_half: [x1, x2] -> [-x2, x1] over the last dimension's halves."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         position_ids: Optional[torch.Tensor] = None,
                         unsqueeze_dim: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    """HF's apply_rotary_pos_emb: q * cos + rotate_half(q) * sin, cos and sin [B, S, rotary_dim]
    unsqueezed at unsqueeze_dim (1 for q, k [B, H, S, D]; 2 for [B, S, H, D]). With rotary_dim < D
    the first rotary_dim channels rotate and the rest pass through (GPT-NeoX, Phi, StableLM).
    position_ids is accepted and unused, as in HF."""
    del position_ids
    if cos.shape != sin.shape or cos.shape[-1] % 2:
        raise ValueError(f"cos and sin must share one shape with an even last dimension, got {list(cos.shape)} "
                         f"and {list(sin.shape)}")
    rot = cos.shape[-1]
    for name, t in (("q", q), ("k", k)):
        if t.shape[-1] < rot:
            raise ValueError(f"{name} has {t.shape[-1]} channels, fewer than the {rot} that cos and sin rotate")
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)

    def rotate(t: torch.Tensor) -> torch.Tensor:
        if rot == t.shape[-1]:
            return (t * cos) + (rotate_half(t) * sin)
        t_rot, t_pass = t[..., :rot], t[..., rot:]
        return torch.cat(((t_rot * cos) + (rotate_half(t_rot) * sin), t_pass), dim=-1)

    return rotate(q), rotate(k)


__all__ = ["RotaryEmbedding", "apply_rotary_pos_emb", "rotate_half"]
