"""xPos's scale (Sun et al. 2022) as apply_rope takes it: the parameters (the scales themselves are
the core's, in the kernels and in torch.ops.posenc.rope_native)."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict


@dataclasses.dataclass(frozen=True)
class XPosScale:
    """xPos (Sun et al. 2022, arXiv 2212.10554 §3.2; the core's rope_xpos.h): RoPE times a per-pair
    decay zeta_i = (2i/d + gamma) / (1 + gamma), queries times zeta_i^((m - center)/scale_base),
    keys times zeta_i^(-(n - center)/scale_base), both channels of pair i alike (torchscale's XPOS).
    apply_rope gives q the role `first` ("query"; "key" to rotate cached keys alone) and k the key's.
    The centre cancels in q.k; with cached keys, queries must use the keys' centre."""
    scale_base: float
    center: float
    gamma: float = 0.4
    first: str = "query"

    def keywords(self, role: str) -> Dict[str, Any]:
        return dict(xpos_scale_base=float(self.scale_base), xpos_gamma=float(self.gamma),
                    xpos_center=float(self.center), xpos_role=role)

