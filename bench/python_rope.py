#!/usr/bin/python3
"""posenc.apply_rope against HF's eager formula (q*cos + rotate_half(q)*sin), same run, same
threads: forward in place, and forward + backward (autograd). Shapes [1, 8192, 32 (+8 kv), 128].

    PYTHONPATH=build/python /usr/bin/python3 bench/python_rope.py
"""

import torch

import posenc
from python_timing import rotate_half, timed

B, S, HQ, HK, D = 1, 8192, 32, 8, 128


def main():
    s = posenc.schedule(head_dim=D, theta=500000.0)
    emb = torch.cat((s.inv_freq, s.inv_freq)).unsqueeze(0) * torch.arange(S, dtype=torch.float32).unsqueeze(1)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for dtype in (torch.float32, torch.bfloat16):
            cos, sin = emb.cos().to(dtype)[None, :, None, :], emb.sin().to(dtype)[None, :, None, :]
            q, k = torch.randn(B, S, HQ, D).to(dtype), torch.randn(B, S, HK, D).to(dtype)

            def eager():
                return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

            def fused_inplace():
                with torch.no_grad():
                    posenc.apply_rope(q, k, schedule=s, inplace=True)

            qg, kg = q.clone().requires_grad_(True), k.clone().requires_grad_(True)

            def eager_train():
                a, b = qg * cos + rotate_half(qg) * sin, kg * cos + rotate_half(kg) * sin
                (a.float().sum() + b.float().sum()).backward()

            def fused_train():
                a, b = posenc.apply_rope(qg, kg, schedule=s)
                (a.float().sum() + b.float().sum()).backward()

            te, tf = timed(eager), timed(fused_inplace)
            tet, tft = timed(eager_train), timed(fused_train)
            name = str(dtype).replace("torch.", "")
            print(f"threads={threads} {name}: forward eager {te * 1e3:.1f} ms, posenc in place {tf * 1e3:.2f} ms, "
                  f"speed-up {te / tf:.1f}x; forward+backward eager {tet * 1e3:.1f} ms, posenc {tft * 1e3:.1f} ms, "
                  f"speed-up {tet / tft:.1f}x")


if __name__ == "__main__":
    main()
