"""posenc.nn.SinkCache: StreamingLLM's KV cache (Xiao et al. 2023, "Efficient Streaming Language
Models with Attention Sinks"): the first `sinks` tokens of a stream and the most recent `window`,
keys stored after RoPE. Positions are cache slots (the paper's section 3.2): rotate a token's key
at its slot (`positions()`), and when tokens are evicted the kept window moves back by the gap, its
keys re-rotated in place by posenc.rope_shift (R(-gap) R(p) k = R(p - gap) k, the core's SIMD
kernels on the CPU), so the cache holds keys rotated at 0 .. len - 1 and no query is ever further
than sinks + window - 1 from a key. rerotate=False is the baseline of transformers #26553: keys
keep the rotation of their place in the stream, so the sinks drift ever further from the query.
The C++ twin (the same policy over a TransformerLM's KVCache) is posenc_torch/sink_cache.h."""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch

from .rope import rope_shift


def _count(name: str, value, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= 2**31 - 1:
        raise ValueError(f"SinkCache: {name} must be an int in [{low}, 2^31-1], got {value!r}")
    return value


class SinkCache:
    """sinks + window keys and values per layer. keys [B, T, H, D] (heads_dim=2) or [B, H, T, D]
    (heads_dim=1), post-RoPE with `schedule` and `layout` (as posenc.apply_rope / rope_shift take
    them). Per forward: positions(n) for the n new tokens, update(k, v, layer) for each layer
    (returns that layer's whole keys and values, for attention), then evict()."""

    def __init__(self, sinks: int, window: int, *, schedule, layout: str = "half_split", heads_dim: int = 2,
                 rerotate: bool = True) -> None:
        self.sinks = _count("sinks", sinks, 0)
        self.window = _count("window", window, 1)
        if heads_dim not in (1, 2):
            raise ValueError(f"SinkCache: heads_dim must be 1 ([B, H, T, D]) or 2 ([B, T, H, D]), got {heads_dim}")
        self.schedule, self.layout, self.heads_dim, self.rerotate = schedule, layout, heads_dim, bool(rerotate)
        self.keys: List[Optional[torch.Tensor]] = []
        self.values: List[Optional[torch.Tensor]] = []
        self.evicted = 0  # tokens dropped so far

    def _dim(self) -> int:
        return 1 if self.heads_dim == 2 else 2

    def __len__(self) -> int:
        """Tokens held (layer 0's)."""
        return 0 if not self.keys or self.keys[0] is None else self.keys[0].shape[self._dim()]

    def positions(self, n: int) -> torch.Tensor:
        """int64 [n]: where to rotate the next n tokens (call before the layers' update): their
        slots, or (rerotate=False) their places in the stream."""
        start = len(self) + (0 if self.rerotate else self.evicted)
        return torch.arange(start, start + _count("n", n, 0), dtype=torch.int64)

    def update(self, k: torch.Tensor, v: torch.Tensor, layer: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
        """Appends k (rotated at positions()) and v to the layer; returns its keys and values."""
        if not (isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor) and k.dim() == 4 and v.dim() == 4):
            raise ValueError("SinkCache.update: k and v must be 4-D tensors ([B, T, H, D] or [B, H, T, D])")
        if not isinstance(layer, int) or not 0 <= layer <= len(self.keys):
            raise ValueError(f"SinkCache.update: layer must be in [0, {len(self.keys)}] (layers are filled in order), got {layer!r}")
        if layer == len(self.keys):
            self.keys.append(None)
            self.values.append(None)
        d = self._dim()
        old_k, old_v = self.keys[layer], self.values[layer]
        self.keys[layer] = k if old_k is None else torch.cat([old_k, k], d)
        self.values[layer] = v if old_v is None else torch.cat([old_v, v], d)
        return self.keys[layer], self.values[layer]

    def evict(self) -> None:
        """Drops the oldest tokens after the sinks until sinks + window remain and (rerotate)
        shifts the kept window's keys back by the gap, in every layer."""
        held, keep, d = len(self), self.sinks + self.window, self._dim()
        if held <= keep:
            return
        gap = held - keep
        with torch.no_grad():
            for layer, (k, v) in enumerate(zip(self.keys, self.values)):
                k = torch.cat([k.narrow(d, 0, self.sinks), k.narrow(d, self.sinks + gap, self.window)], d)
                v = torch.cat([v.narrow(d, 0, self.sinks), v.narrow(d, self.sinks + gap, self.window)], d)
                if self.rerotate:  # p -> p - gap: the window's first key moves to slot `sinks`
                    rope_shift(k, -gap, schedule=self.schedule, layout=self.layout, heads_dim=self.heads_dim,
                               begin=self.sinks, end=keep)
                self.keys[layer], self.values[layer] = k, v
        self.evicted += gap
