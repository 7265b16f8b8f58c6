"""posenc.plot: the same pictures as `posenc plot`, written to files (PNG in a labelled SVG, or SVG)."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import numpy as np

from . import _posenc


def heatmap(scheme: str, out: str, *, dim: int = 64, first: int = 0, count: int = 128, heads: int = 8, head: int = 0,
            base: float = 10000.0) -> List[str]:
    """positions x dimensions (sinusoidal, learned, rope), query x key (alibi, t5) or distance x
    dimensions (xl). out ending in .png also writes the .svg figure beside it; returns the paths."""
    return list(_posenc.plot_heatmap(scheme, dim, first, count, heads, head, base, str(out)))


def decay(scheme: str, out: str, *, dim: int = 128, heads: int = 8, max_distance: Optional[int] = None,
          base: float = 10000.0, kind: str = "log", table: Any = None) -> str:
    """Expected score against relative distance (rope, alibi, t5, sinusoidal), or a bias per head
    against distance: "kerple" (kind "log" or "power", at the core's initialisation), "sandwich" (dim
    its d'), or "table" with table a [heads, distances] array or tensor (column d is distance d: a
    trained Kerple, DynamicPositionBias or FIRE evaluated by you). SVG. max_distance: 1024, or for a
    table its last column."""
    values = None
    if table is not None:
        values = np.asarray(table.detach().cpu() if hasattr(table, "detach") else table, dtype=np.float64)
        if values.ndim != 2:
            raise ValueError(f"table must be 2-D [heads, distances], got shape {values.shape}")
    if max_distance is None:
        max_distance = values.shape[1] - 1 if values is not None else 1024
    return _posenc.plot_chart("decay", scheme, dim, heads, max_distance, base, str(out), kind, values)


def wavelengths(params: Dict[str, Any], out: str) -> str:
    """Wavelength of every frequency before and after scaling, SVG; params: Schedule.params or
    RopeParams fields (a Layer's .params)."""
    return _posenc.plot_chart("wavelengths", json.dumps(params), 0, 0, 0, 0.0, str(out), "log", None)
