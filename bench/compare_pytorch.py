#!/usr/bin/env python3
"""posenc's RoPE kernel against the PyTorch eager formula Hugging Face uses, same run.

For each shape, dtype and thread count this alternates timing HF's
    q_embed = q * cos + rotate_half(q) * sin     (and the same for k; cos/sin given)
in PyTorch eager with `posenc bench rope --json` on the same shape, threads and dtype, and
prints one line per case ending in the speed-up, e.g.
    T=8192 threads=2 f32: torch 80.1 ms, posenc 6.5 ms, speed-up 12.3x

Run with Debian's /usr/bin/python3 (python3-torch). Medians over --rounds alternating rounds.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def hf_apply(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [B, S, D] -> [B, 1, S, D]
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def time_torch(q, k, cos, sin):
    start = time.perf_counter()
    hf_apply(q, k, cos, sin)
    return time.perf_counter() - start


def time_posenc(posenc, args, tokens, threads, dtype):
    cmd = [posenc, "bench", "rope", "--json", "--tokens", str(tokens), "--heads", str(args.heads),
           "--kv-heads", str(args.kv_heads), "--head-dim", str(args.head_dim), "--dtype", dtype,
           "--threads", str(threads), "--repeats", "7"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["seconds"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--posenc", default=os.path.join(HERE, "..", "build", "cli", "posenc"))
    p.add_argument("--tokens", default="8192")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    if not os.path.exists(args.posenc):
        sys.exit(f"no posenc binary at {args.posenc}; build it first (make demo)")
    for tokens in map(int, args.tokens.split(",")):
        for threads in map(int, args.threads.split(",")):
            torch.set_num_threads(threads)
            for name in args.dtypes.split(","):
                dt = DTYPES[name]
                q = torch.randn(1, args.heads, tokens, args.head_dim).to(dt)
                k = torch.randn(1, args.kv_heads, tokens, args.head_dim).to(dt)
                angles = torch.randn(1, tokens, args.head_dim)
                cos, sin = angles.cos().to(dt), angles.sin().to(dt)
                time_torch(q, k, cos, sin)  # warm-up
                torch_times, posenc_times = [], []
                for _ in range(args.rounds):
                    torch_times.append(time_torch(q, k, cos, sin))
                    posenc_times.append(time_posenc(args.posenc, args, tokens, threads, name))
                t, s = statistics.median(torch_times), statistics.median(posenc_times)
                print(f"T={tokens} threads={threads} {name}: torch {t * 1e3:.1f} ms, posenc {s * 1e3:.2f} ms, "
                      f"speed-up {t / s:.1f}x", flush=True)


if __name__ == "__main__":
    main()
