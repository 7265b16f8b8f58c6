"""posenc.plot: the same pictures as `posenc plot`, written to files (PNG in a labelled SVG, or SVG)."""
from __future__ import annotations

import json
from typing import Any, Dict, List

from . import _posenc


def heatmap(scheme: str, out: str, *, dim: int = 64, first: int = 0, count: int = 128, heads: int = 8, head: int = 0,
            base: float = 10000.0) -> List[str]:
    """positions x dimensions (sinusoidal, learned, rope), query x key (alibi, t5) or distance x
    dimensions (xl). out ending in .png also writes the .svg figure beside it; returns the paths."""
    return list(_posenc.plot_heatmap(scheme, dim, first, count, heads, head, base, str(out)))


def decay(scheme: str, out: str, *, dim: int = 128, heads: int = 8, max_distance: int = 1024,
          base: float = 10000.0) -> str:
    """Expected score against relative distance (rope, alibi, t5, sinusoidal), SVG."""
    return _posenc.plot_chart("decay", scheme, dim, heads, max_distance, base, str(out))


def wavelengths(params: Dict[str, Any], out: str) -> str:
    """Wavelength of every frequency before and after scaling, SVG; params: Schedule.params or
    RopeParams fields (a Layer's .params)."""
    return _posenc.plot_chart("wavelengths", json.dumps(params), 0, 0, 0, 0.0, str(out))
