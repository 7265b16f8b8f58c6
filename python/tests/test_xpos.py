"""posenc.nn.XPos against xPos's definition (Sun et al. 2022 §3.2) written here in float64:
zeta_i = (2i/d + gamma)/(1 + gamma), q x zeta^((m - c)/B), k x zeta^(-(n - c)/B), both channels of a
pair alike (torchscale's XPOS, rotary-embedding-torch's use_xpos with its per-pair repeat)."""
import math

import pytest
import torch

import posenc
from rotary_reference import rotate_pairs


def xpos_reference(x, pos, dim, center, role, layout, scale_base=512.0, theta=10000.0, gamma=0.4):
    """x [B, S, H, D] float64 at positions pos [S] or [B, S]. The frequencies rounded to float32,
    as every RoPE schedule is (HF's inv_freq); the rest in float64."""
    i = torch.arange(dim // 2, dtype=torch.float64)
    inv = (theta ** (-2 * i / dim)).float().double()
    zeta = (2 * i / dim + gamma) / (1 + gamma)
    p = pos.double().expand(x.shape[0], x.shape[1]).unsqueeze(-1)  # [B, S, 1]
    power = (p - center) / scale_base * (1 if role == "query" else -1)
    return rotate_pairs(x.double(), (p * inv).unsqueeze(2), layout, (zeta ** power).unsqueeze(2))


def torchscale_xpos(x, scale_base, downscale):
    """torchscale's XPOS.forward(x, offset=0, downscale) on x [N, L, D], transcribed in float64:
    scale (arange(0, D, 2) + 0.4 D) / (1.4 D), positions min_pos = -L // 2 .. (the centre is
    ceil(L/2)), sin/cos of arange(L) x 1/10000^(arange(D/2)/(D/2)), duplicate_interleave, rotate_every_two."""
    length, dim = x.shape[1], x.shape[2]
    scale = (torch.arange(0, dim, 2, dtype=torch.float64) + 0.4 * dim) / (1.4 * dim)
    min_pos = -length // 2
    scale = scale ** (torch.arange(min_pos, length + min_pos, dtype=torch.float64) / scale_base)[:, None]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim // 2, dtype=torch.float64) / (dim // 2)))
    ang = torch.arange(length, dtype=torch.float64)[:, None] * inv_freq
    if downscale:
        scale = 1 / scale
    sin, cos = (t.repeat_interleave(2, -1) for t in (ang.sin() * scale, ang.cos() * scale))
    every_two = torch.stack((-x[:, :, 1::2], x[:, :, 0::2]), -1).flatten(-2)
    return x * cos + every_two * sin


@pytest.mark.parametrize("layout", ["interleaved", "half_split"])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 3e-7), (torch.float64, 1e-7)])
def test_xpos_matches_the_definition(layout, dtype, tol):
    """Relative to the largest value: float32 kernels round each product; the float64 path
    differs from the definition only by the kernels' float32 xPos scales (2^-24 relative)."""
    torch.manual_seed(0)
    m = posenc.nn.XPos(32, layout=layout)
    q, k = torch.randn(2, 40, 3, 32, dtype=dtype), torch.randn(2, 40, 3, 32, dtype=dtype)

    def close(got, ref):
        return float((got.double() - ref).abs().max() / ref.abs().max()) < tol
    pos = torch.arange(40)
    qx, kx = m(q, k)  # centre floor(40/2) = 20, rotary-embedding-torch's len(t) // 2
    assert close(qx, xpos_reference(q, pos, 32, 20, "query", layout))
    assert close(kx, xpos_reference(k, pos, 32, 20, "key", layout))
    bpos = torch.randint(0, 3000, (2, 40))  # explicit [B, S] positions, centre floor((max + 1)/2)
    qx, kx = m(q, k, bpos)
    c = (int(bpos.max()) + 1) // 2
    assert close(qx, xpos_reference(q, bpos, 32, c, "query", layout))
    assert close(kx, xpos_reference(k, bpos, 32, c, "key", layout))
    heads_first = posenc.nn.XPos(32, layout=layout, heads_dim=1)  # [B, H, S, D] views, the same numbers
    qt, kt = heads_first(q.transpose(1, 2), k.transpose(1, 2), bpos)
    assert torch.equal(qt.transpose(1, 2), qx) and torch.equal(kt.transpose(1, 2), kx)


def test_xpos_is_torchscales_xpos():
    torch.manual_seed(1)
    q, k = torch.randn(1, 33, 1, 16), torch.randn(1, 33, 1, 16)
    qx, kx = posenc.nn.XPos(16, scale_base=64)(q, k, center=math.ceil(33 / 2))
    assert (qx[:, :, 0].double() - torchscale_xpos(q[:, :, 0].double(), 64, False)).abs().max() < 3e-6
    assert (kx[:, :, 0].double() - torchscale_xpos(k[:, :, 0].double(), 64, True)).abs().max() < 3e-6


def test_xpos_scores_depend_on_distance_only_and_cached_keys_take_the_keys_centre():
    torch.manual_seed(2)
    m = posenc.nn.XPos(64, scale_base=128)
    q, k = torch.randn(1, 1, 1, 64), torch.randn(1, 1, 1, 64)

    def score(mq, nk, center):
        qx, _ = m(q, q, torch.tensor([mq]), center=center)
        _, kx = m(k, k, torch.tensor([nk]), center=center)
        return float((qx * kx).sum())
    base = score(300, 200, 100)
    for shift, center in ((0, 2000), (1000, 100), (5000, 5100)):
        assert score(300 + shift, 200 + shift, center) == pytest.approx(base, rel=2e-5)
    assert abs(score(300, 200, 100) - score(300, 290, 100)) > 1e-3 * abs(base)  # the distance matters
    # a decode step: the new query at position 15 against keys cached at 0..15 with their centre 8
    qs, ks = torch.randn(1, 16, 2, 64), torch.randn(1, 16, 2, 64)
    full_q, full_k = m(qs, ks)
    step_q, _ = m(qs[:, 15:], qs[:, 15:], torch.tensor([15]), center=8)
    assert torch.equal(step_q, full_q[:, 15:])
    with_own_centre, _ = m(qs[:, 15:], qs[:, 15:], torch.tensor([15]))  # centre 8 too only because L = 16
    assert torch.equal(with_own_centre, step_q)


def test_xpos_backward_through_the_kernels_and_gradcheck():
    torch.manual_seed(3)
    m = posenc.nn.XPos(16, scale_base=32, layout="half_split")
    q = torch.randn(2, 9, 2, 16, requires_grad=True)
    k = torch.randn(2, 9, 2, 16, requires_grad=True)
    wq, wk = torch.randn(2, 9, 2, 16), torch.randn(2, 9, 2, 16)
    qx, kx = m(q, k)
    ((qx * wq).sum() + (kx * wk).sum()).backward()
    qd, kd = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    pos = torch.arange(9)
    ref = (xpos_reference(qd, pos, 16, 4, "query", "half_split", 32) * wq).sum() + \
        (xpos_reference(kd, pos, 16, 4, "key", "half_split", 32) * wk).sum()
    ref.backward()
    assert (q.grad.double() - qd.grad).abs().max() < 1e-5
    assert (k.grad.double() - kd.grad).abs().max() < 1e-5
    q64 = torch.randn(1, 5, 2, 16, dtype=torch.float64, requires_grad=True)
    k64 = torch.randn(1, 5, 2, 16, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: m(a, b, torch.tensor([3, 90, 7, 400, 12])), (q64, k64))
    assert torch.autograd.gradgradcheck(lambda a, b: m(a, b), (q64, k64))


def test_xpos_through_apply_rope_rotates_cached_keys_alone():
    torch.manual_seed(4)
    s = posenc.schedule(head_dim=16)
    k = torch.randn(1, 6, 2, 16)
    pos = torch.arange(6) + 10
    alone = posenc.apply_rope(k, schedule=s, positions=pos, layout="interleaved",
                              xpos=posenc.XPosScale(512, 12.0, first="key"))
    assert (alone.double() - xpos_reference(k, pos, 16, 12.0, "key", "interleaved")).abs().max() < 3e-6
    # backend="torch" (what a GPU runs, here forced on the CPU) scales by the same float32 scales
    q = torch.randn(1, 6, 2, 16)
    scale = posenc.XPosScale(64, 3.0)
    kernels = posenc.apply_rope(q, k, schedule=s, positions=pos, xpos=scale)
    formula = posenc.apply_rope(q, k, schedule=s, positions=pos, xpos=scale, backend="torch")
    for a, b in zip(kernels, formula):
        assert (a - b).abs().max() < 2e-6


@pytest.mark.parametrize("make,match", [
    (lambda: posenc.nn.XPos(32, scale_base=-1), "scale_base must be a finite number > 0, got -1"),
    (lambda: posenc.nn.XPos(32, scale_base=0), "scale_base must be a finite number > 0, got 0"),
    (lambda: posenc.nn.XPos(31), "dim must be an even int >= 2, got 31"),
    (lambda: posenc.nn.XPos(32, gamma=float("nan")), "gamma must be a finite number > 0, got nan"),
    (lambda: posenc.nn.XPos(32, layout="deepseek_v3"), "layout must be one of interleaved, half_split, got 'deepseek_v3'"),
])
def test_xpos_refuses_bad_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_xpos_refuses_bad_inputs():
    m = posenc.nn.XPos(16, scale_base=8)
    q = torch.randn(1, 4, 2, 16)
    with pytest.raises(ValueError, match=r"q must be a 4-D tensor"):
        m(q[0], q)
    with pytest.raises(ValueError, match=r"q must be a floating tensor, got torch.int64"):
        m(q.long(), q)
    with pytest.raises(ValueError, match=r"rotates 16 channels but q's head_dim is 8"):
        m(q[..., :8], q[..., :8])
    with pytest.raises(ValueError, match=r"the same batch and tokens"):
        m(q, q[:, :3])
    with pytest.raises(ValueError, match=r"positions must be \[S\] or \[B, S\], got \[3, 1, 4\]"):
        m(q, q, torch.zeros(3, 1, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"center must be a finite number, got inf"):
        m(q, q, center=float("inf"))
    for x in (q, q.double()):  # the kernels and the float64 path refuse alike, naming the position
        with pytest.raises(ValueError, match=r"xPos at position 100000 with center 0 and scale_base 8"):
            m(x, x, torch.tensor([0, 1, 2, 100000]), center=0)


@pytest.mark.parametrize("backend", ["kernels", "torch"])
def test_attention_with_xpos_is_rotating_first_then_attending(backend):
    """posenc.attention(rope=, xpos=) applies xPos inside the kernel (q the query's scale, k the
    key's): the output and every gradient equal apply_rope(xpos=) followed by attention without
    positions, past a KV offset and with GQA; the torch backend the same."""
    torch.manual_seed(9)
    sched = posenc.schedule(head_dim=16)
    xpos = posenc.XPosScale(scale_base=64.0, center=40.0)
    q = torch.randn(2, 70, 4, 16, requires_grad=True)
    k, v = (torch.randn(2, 90, 2, 16, requires_grad=True) for _ in range(2))
    out = posenc.attention(q, k, v, rope=sched, xpos=xpos, kv_offset=7, backend=backend)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    qr = posenc.apply_rope(q, schedule=sched, positions=torch.arange(27, 97), xpos=xpos)
    kr = posenc.apply_rope(k, schedule=sched, positions=torch.arange(7, 97), xpos=posenc.XPosScale(64.0, 40.0, first="key"))
    expected = posenc.attention(qr, kr, v, backend=backend)
    expected_grads = torch.autograd.grad(expected.square().sum(), (q, k, v))
    assert (out - expected).abs().max() < 1e-5
    for g, e in zip(grads, expected_grads):
        assert (g - e).abs().max() < 2e-4 * e.abs().max()
    plain = posenc.attention(q, k, v, rope=sched, kv_offset=7, backend=backend)
    assert (out - plain).abs().max() > 1e-2  # the scales change the output


def test_attention_refuses_xpos_without_rope_or_with_a_remap():
    q = torch.randn(1, 4, 2, 16)
    xpos = posenc.XPosScale(scale_base=64.0, center=0.0)
    with pytest.raises(ValueError, match="xpos is a posenc.XPosScale.* on RoPE"):
        posenc.attention(q, q, q, xpos=xpos)
    with pytest.raises(ValueError, match="xpos is a posenc.XPosScale.* on RoPE"):
        posenc.attention(q, q, q, rope=posenc.schedule(head_dim=16), xpos=xpos, remap=posenc.ReRoPE(window=2))
    with pytest.raises(ValueError, match="xpos is a posenc.XPosScale"):
        posenc.attention(q, q, q, rope=posenc.schedule(head_dim=16), xpos=512)
    with pytest.raises(ValueError, match="first='query'"):  # the kernel gives q the query's scale: a key role is not read
        posenc.attention(q, q, q, rope=posenc.schedule(head_dim=16), xpos=posenc.XPosScale(64.0, 0.0, first="key"))
