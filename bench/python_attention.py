#!/usr/bin/python3
"""posenc.attention (the fused kernel: positions on the fly, no S x T matrix) against eager
PyTorch attention (scores, positional bias or rotated q/k, causal mask, softmax, matmul), same
run, same threads: forward, and forward + backward (autograd). S = 2048, 8 heads, D = 64,
causal, ALiBi and RoPE. Prints the median time of each and eager / posenc (the speed-up).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_attention.py [--seq 2048] [--repeats 5]
"""
import argparse
import math

import torch

import posenc
from python_timing import rotate_half, timed

B, H, D = 1, 8, 64


def eager(q, k, v, scheme, slopes, cos, sin):
    """HF-style eager attention, [B, S, H, D] in and out."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, S, D]
    if scheme == "rope":
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    s = q.shape[2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    i = torch.arange(s)
    distance = (i[:, None] - i[None, :]).to(q.dtype)
    if scheme == "alibi":
        scores = scores - slopes.to(q.dtype)[:, None, None] * distance
    scores = scores.masked_fill(distance < 0, float("-inf"))
    return (scores.softmax(-1) @ v).transpose(1, 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    S = args.seq
    slopes = posenc.alibi_slopes(H)
    schedule = posenc.schedule(rope_theta=10000.0, head_dim=D)
    emb = torch.cat((schedule.inv_freq, schedule.inv_freq))[None, :] * torch.arange(S, dtype=torch.float32)[:, None]
    cos, sin = emb.cos()[None, None], emb.sin()[None, None]
    print(f"posenc.attention vs eager PyTorch, B={B} S={S} H={H} D={D} causal, float32, "
          f"kernels {posenc.kernel_target()}, median of {args.repeats}")
    print(f"{'threads':>7} {'scheme':>6} {'pass':>16} {'eager ms':>9} {'posenc ms':>9} {'speed-up':>8}")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for scheme in ("alibi", "rope"):
            g = torch.Generator().manual_seed(0)
            q, k, v = (torch.randn(B, S, H, D, generator=g) for _ in range(3))
            kw = {"alibi": slopes} if scheme == "alibi" else {"rope": schedule}
            # The same numbers from both before timing: a bench of a wrong kernel measures nothing.
            ref = eager(q.double(), k.double(), v.double(), scheme, slopes.double(), cos.double(), sin.double())
            err = (posenc.attention(q, k, v, **kw).double() - ref).abs().max().item()
            assert err < 1e-4, f"{scheme}: posenc.attention differs from eager attention by {err}"
            for name, grad in (("forward", False), ("forward+backward", True)):
                qs, ks, vs = (t.clone().requires_grad_(grad) for t in (q, k, v))

                def run_eager():
                    out = eager(qs, ks, vs, scheme, slopes, cos, sin)
                    if grad:
                        out.sum().backward()

                def run_posenc():
                    out = posenc.attention(qs, ks, vs, **kw)
                    if grad:
                        out.sum().backward()

                with torch.set_grad_enabled(grad):
                    te, tp = timed(run_eager, args.repeats), timed(run_posenc, args.repeats)
                print(f"{threads:>7} {scheme:>6} {name:>16} {te * 1e3:9.1f} {tp * 1e3:9.1f} {te / tp:7.2f}x")


if __name__ == "__main__":
    main()
