"""What the Python benches share: the median of timed calls after a warm-up, and HF's
rotate_half (the eager RoPE formula's other half)."""
import statistics
import time

import torch


def timed(f, repeats=5):
    f()
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
