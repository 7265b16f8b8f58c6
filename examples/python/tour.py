#!/usr/bin/env python3
"""A learner's walk through positional encodings with posenc, in the order a tutorial teaches.

    python3 examples/python/tour.py [--out DIR] [--config path/to/config.json]

Each step prints what it shows and a measured claim (PASS/FAIL); pictures go to DIR (default
./posenc-tour). Exits 1 if any claim fails. Every number comes from posenc's own functions.
"""
from __future__ import annotations

import argparse
import math
import os
import pathlib
import sys

import torch

import posenc

failures = []


def claim(text: str, ok: bool, measured: str) -> None:
    print(f"  [{'PASS' if ok else 'FAIL'}] {text}: {measured}")
    if not ok:
        failures.append(text)


def step(title: str) -> None:
    print(f"\n== {title}")


def sinusoidal_table(out: pathlib.Path) -> None:
    step("1. The sinusoidal table (Vaswani et al. 2017): PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(...)")
    d = 64
    table = posenc.sinusoidal(list(range(128)), d).double()  # [128, 64], interleaved sin/cos
    print(f"  table {tuple(table.shape)}; row 0 = {table[0, :4].tolist()} ...")
    claim("every row has norm sqrt(d/2) (each sin/cos pair has norm 1)",
          torch.allclose(table.norm(dim=1), torch.full((128,), math.sqrt(d / 2), dtype=torch.float64), atol=1e-5),
          f"norms in [{table.norm(dim=1).min():.6f}, {table.norm(dim=1).max():.6f}], sqrt(d/2) = {math.sqrt(d / 2):.6f}")
    # PE(p) . PE(p + k) = sum_i cos(k w_i): it depends on the offset k only, not on p.
    dots = torch.stack([table[p] @ table[p + 10] for p in range(0, 100)])
    claim("PE(p) . PE(p+10) is the same for every p", float(dots.max() - dots.min()) < 1e-4,
          f"spread {float(dots.max() - dots.min()):.2e} over p = 0..99")
    for path in posenc.plot.heatmap("sinusoidal", str(out / "sinusoidal.png"), dim=d, count=128):
        print(f"  drew {path}")


def rotation_identity() -> None:
    step("2. The rotation property: PE(p + k) is a fixed rotation of PE(p), per frequency pair")
    d, k = 64, 7
    table = posenc.sinusoidal(list(range(64)), d).double()
    w = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    worst = 0.0
    for p in range(50):
        for i in range(d // 2):
            c, s = math.cos(k * w[i]), math.sin(k * w[i])
            sin_p, cos_p = table[p, 2 * i], table[p, 2 * i + 1]
            rotated = torch.tensor([sin_p * c + cos_p * s, cos_p * c - sin_p * s])
            worst = max(worst, float((rotated - table[p + k, 2 * i:2 * i + 2]).abs().max()))
    claim("[sin, cos](p + k) = R(k w_i) [sin, cos](p) for every pair", worst < 1e-5, f"max error {worst:.2e}")


def rope_relative() -> None:
    step("3. RoPE (Su et al. 2021): q_m . k_n depends on m - n only")
    s = posenc.schedule(rope_theta=10000.0, head_dim=64)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 1, 64, generator=g), torch.randn(1, 1, 1, 64, generator=g)

    def score(m: int, n: int) -> float:
        qm, _ = posenc.apply_rope(q.clone(), q.clone(), schedule=s, positions=torch.tensor([m]))
        kn, _ = posenc.apply_rope(k.clone(), k.clone(), schedule=s, positions=torch.tensor([n]))
        return float((qm * kn).sum())

    scores = [score(m, m - 5) for m in (5, 100, 1000, 20000)]
    spread = max(scores) - min(scores)
    claim("score(m, m-5) is the same at m = 5, 100, 1000, 20000", spread < 1e-3 * max(1.0, abs(scores[0])),
          f"scores {', '.join(f'{v:.5f}' for v in scores)}")


def biases(out: pathlib.Path) -> None:
    step("4. ALiBi (Press et al. 2021) and T5's buckets (Raffel et al. 2020): a bias on the scores, not a vector")
    slopes = posenc.alibi_slopes(8)
    print(f"  ALiBi slopes for 8 heads: {[round(float(x), 6) for x in slopes]}")
    claim("ALiBi's slopes are 2^(-8h/H), h = 1..H", torch.allclose(
        slopes.double(), torch.tensor([2.0 ** (-h) for h in range(1, 9)], dtype=torch.float64)), "H = 8")
    bias = posenc.alibi_bias(8, 6, 6)
    claim("the bias is -slope x distance, zero on the diagonal", float(bias[0, 5, 2]) == -3 * float(slopes[0]) and
          float(bias[3].diagonal().abs().max()) == 0.0, f"head 0, query 5, key 2: {float(bias[0, 5, 2]):.4f}")
    buckets = posenc.t5_buckets(list(range(-200, 201, 25)), num_buckets=32, max_distance=128, bidirectional=True)
    print(f"  T5 buckets of -200..200 step 25: {buckets.tolist()}")
    claim("T5's buckets are monotone in the distance on each side",
          all(int(a) <= int(b) for a, b in zip(buckets[8:], buckets[9:])), "keys after the query")
    print(f"  drew {posenc.plot.decay('alibi', str(out / 'alibi-decay.svg'), heads=8, max_distance=256)}")


def yarn_schedule(config: str, out: pathlib.Path) -> None:
    step(f"5. A length-extension schedule from a real config: {os.path.basename(config)}")
    model = posenc.load_hf_config(config)
    s = posenc.schedule(model)
    params = model.select().params
    print(f"  rope_type {s.rope_type}, rotary_dim {s.rotary_dim}, attention factor {s.attention_factor:.6f}")
    base = posenc.schedule(rope_theta=params["rope_theta"], head_dim=s.rotary_dim)
    ratio = (base.inv_freq.double() / s.inv_freq.double())
    print(f"  inv_freq divided by {float(ratio[0]):.3f} (highest frequency) ... {float(ratio[-1]):.3f} (lowest)")
    claim("the highest frequencies are kept, the lowest interpolated", float(ratio[0]) < 1.001 and float(ratio[-1]) > 1.5,
          f"ratios {float(ratio[0]):.4f} and {float(ratio[-1]):.4f}")
    print(f"  drew {posenc.plot.wavelengths(s.params, str(out / 'wavelengths.svg'))}")


def main() -> int:
    here = pathlib.Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="posenc-tour", help="folder for the pictures")
    parser.add_argument("--config", default=str(here.parent / "configs" / "qwen2.5-yarn-128k.json"),
                        help="a config.json with a length-extension rope_scaling")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sinusoidal_table(out)
    rotation_identity()
    rope_relative()
    biases(out)
    yarn_schedule(args.config, out)
    print(f"\n{'all claims hold' if not failures else f'{len(failures)} claim(s) FAILED'}; pictures in {out}/")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
