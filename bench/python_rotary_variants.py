#!/usr/bin/python3
"""posenc.nn's rotary variants against plain RoPE and against the same formula in torch eager
operations, same run, same threads, forward + backward (autograd), float32:
  XPos (the kernels) vs apply_rope (the kernels, no xPos) vs xPos in eager torch (cos, sin and the
  scales precomputed, q*cos*scale + rotate_every_two(q)*sin*scale);
  AxialRotaryEmbedding on the kernels (integer coordinates) vs its torch path (real coordinates).
Shapes [1, 4096, 16, 128] (a 64 x 64 grid for the axial rows); ratios are what to read.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_rotary_variants.py
"""
import torch

import posenc
from python_rope import timed  # this folder's: the median of repeats after one warm-up call

B, S, H, D = 1, 4096, 16, 128


def every_two(x):
    return torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)


def main():
    torch.set_num_threads(2)
    q = torch.randn(B, S, H, D, requires_grad=True)
    k = torch.randn(B, S, H, D, requires_grad=True)
    xpos = posenc.nn.XPos(D)
    s = xpos.schedule
    pos = torch.arange(S, dtype=torch.float64)
    i = torch.arange(D // 2, dtype=torch.float64)
    zeta = (2 * i / D + 0.4) / 1.4
    power = ((pos - S // 2) / 512).unsqueeze(-1)
    ang = pos.unsqueeze(-1) * s.inv_freq.double()
    cos, sin = (t.repeat_interleave(2, -1).float()[None, :, None, :] for t in (ang.cos(), ang.sin()))
    up, down = ((zeta ** (sign * power)).repeat_interleave(2, -1).float()[None, :, None, :] for sign in (1, -1))

    def train(f):
        def run():
            a, b = f()
            (a.sum() + b.sum()).backward()
        return run

    rows = {
        "rope": train(lambda: posenc.apply_rope(q, k, schedule=s, layout="interleaved")),
        "xpos": train(lambda: xpos(q, k)),
        "xpos_eager": train(lambda: (q * cos * up + every_two(q) * sin * up, k * cos * down + every_two(k) * sin * down)),
    }
    axial = posenc.nn.AxialRotaryEmbedding(D // 4, axes=2)
    grid = axial.grid(64, 64)
    rows["axial_kernels"] = train(lambda: axial(q, k, grid))
    rows["axial_torch"] = train(lambda: axial(q, k, grid.double()))
    t = {name: timed(f) for name, f in rows.items()}
    for name, seconds in t.items():
        print(f"{name}: {seconds * 1e3:.1f} ms")
    print(f"xPos / RoPE (both kernels): {t['xpos'] / t['rope']:.2f}x; eager xPos / posenc xPos: "
          f"{t['xpos_eager'] / t['xpos']:.2f}x; axial torch path / axial kernels: {t['axial_torch'] / t['axial_kernels']:.2f}x")


if __name__ == "__main__":
    main()
