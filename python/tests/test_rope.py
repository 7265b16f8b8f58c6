import pytest
import torch

import posenc


def eager(x, pos, s, layout, heads_dim):
    """HF's formula in float64: x*cos + rotate_half(x)*sin (rotate_every_two when interleaved)."""
    half = s.inv_freq.numel()
    ang = pos.double().unsqueeze(-1) * s.inv_freq.double()  # [B, S, half]
    c, sn = ang.cos() * s.attention_factor, ang.sin() * s.attention_factor
    c, sn = (c.unsqueeze(2), sn.unsqueeze(2)) if heads_dim == 2 else (c.unsqueeze(1), sn.unsqueeze(1))
    x = x.double()
    rot, rest = x[..., : 2 * half], x[..., 2 * half:]
    if layout == "half_split":
        a, b = rot[..., :half], rot[..., half:]
        out = torch.cat((a * c - b * sn, b * c + a * sn), -1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        oa, ob = a * c - b * sn, b * c + a * sn
        out = torch.stack((oa, ob), -1).flatten(-2) if layout == "interleaved" else torch.cat((oa, ob), -1)
    return torch.cat((out, rest), -1)


def test_golden_rope_apply(golden):
    for name in ("llama_half_split_default_d8", "neox_half_split_partial_0.5_d8"):
        case = next(c for c in golden["rope_apply"] if c["name"] == name)
        cfg = case["config_input"]
        s = posenc.schedule(head_dim=cfg["head_dim"], rope_theta=cfg["rope_theta"],
                            partial_rotary_factor=cfg.get("partial_rotary_factor", 1.0))
        q, k = torch.tensor(case["q"]), torch.tensor(case["k"])  # [B, H, S, D]
        pos = torch.tensor(case["positions"]).unsqueeze(0)
        qe, ke = posenc.apply_rope(q, k, schedule=s, positions=pos, heads_dim=1)
        assert (qe - torch.tensor(case["q_embed"])).abs().max() < 2e-6, name
        assert (ke - torch.tensor(case["k_embed"])).abs().max() < 2e-6, name


@pytest.mark.parametrize("layout", ["half_split", "interleaved", "deepseek_v3"])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 3e-2), (torch.float16, 4e-3)])
@pytest.mark.parametrize("heads_dim", [1, 2])
def test_against_eager_every_layout_dtype_and_memory_order(layout, dtype, tol, heads_dim):
    torch.manual_seed(0)
    s = posenc.schedule(rope_type="yarn", head_dim=64, partial_rotary_factor=0.5, factor=4.0,
                        original_max_position_embeddings=256, rope_theta=10000.0)
    shape = (2, 7, 3, 64) if heads_dim == 2 else (2, 3, 7, 64)
    q = torch.randn(shape).to(dtype)
    pos = torch.randint(0, 4000, (2, 7))
    got = posenc.apply_rope(q, schedule=s, positions=pos, layout=layout, heads_dim=heads_dim)
    assert got.dtype == dtype and got.shape == q.shape
    assert (got.double() - eager(q, pos, s, layout, heads_dim)).abs().max() < tol


def test_views_offset_gqa_and_inplace():
    torch.manual_seed(1)
    s = posenc.schedule(head_dim=32)
    q = torch.randn(1, 5, 4, 32)
    k = torch.randn(1, 5, 2, 32)
    view = q.transpose(1, 2)  # [B, H, S, D] view of [B, S, H, D] memory
    pos = torch.arange(5).unsqueeze(0) + 100
    a = posenc.apply_rope(view, schedule=s, offset=100, heads_dim=1)
    assert (a.double() - eager(view, pos, s, "half_split", 1)).abs().max() < 2e-5
    q2, k2 = q.clone(), k.clone()
    with torch.no_grad():
        out = posenc.apply_rope(q2, k2, schedule=s, positions=pos[0], inplace=True)
    assert out[0] is q2 and out[1] is k2
    assert (q2.double() - eager(q, pos, s, "half_split", 2)).abs().max() < 2e-5
    assert (k2.double() - eager(k, pos, s, "half_split", 2)).abs().max() < 2e-5


def test_mrope_positions_read_their_axis():
    s = posenc.schedule(head_dim=16, mrope_section=[2, 3, 3])
    assert s.axis_of_freq == [0, 0, 1, 1, 1, 2, 2, 2]
    q = torch.randn(1, 4, 2, 16)
    pos = torch.stack([torch.arange(4), torch.arange(4) * 10, torch.arange(4) * 100]).unsqueeze(1)  # [3, 1, 4]
    got = posenc.apply_rope(q, schedule=s, positions=pos)
    for axis in range(3):  # each frequency at its own axis' position
        ref = eager(q, pos[axis], s, "half_split", 2)
        freqs = [j for j, a in enumerate(s.axis_of_freq) if a == axis]
        cols = freqs + [j + 8 for j in freqs]
        assert (got[..., cols].double() - ref[..., cols]).abs().max() < 2e-5


def test_gradients():
    torch.manual_seed(2)
    for layout in ("half_split", "interleaved", "deepseek_v3"):
        s = posenc.schedule(rope_type="yarn", head_dim=16, factor=4.0, original_max_position_embeddings=64,
                            partial_rotary_factor=0.5)
        pos = torch.randint(0, 500, (2, 3))
        x = torch.randn(2, 3, 2, 16, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: posenc.apply_rope(t, schedule=s, positions=pos, layout=layout), (x,))
        # float: the kernels' backward equals autograd through the eager formula
        xf = torch.randn(2, 3, 2, 16, requires_grad=True)
        g = torch.randn(2, 3, 2, 16)
        posenc.apply_rope(xf, schedule=s, positions=pos, layout=layout).backward(g)
        xe = xf.detach().double().requires_grad_(True)
        eager(xe, pos, s, layout, 2).backward(g.double())
        assert (xf.grad.double() - xe.grad).abs().max() < 2e-5, layout


def test_bad_input_raises_with_a_message():
    s = posenc.schedule(head_dim=16)
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        posenc.apply_rope(torch.zeros(1, 2, 1, 16, dtype=torch.int32), schedule=s)
    with pytest.raises(ValueError, match="4-D"):
        posenc.apply_rope(torch.zeros(2, 16), schedule=s)
    with pytest.raises(ValueError, match="negative"):
        posenc.apply_rope(torch.zeros(1, 2, 1, 16, dtype=torch.float64), schedule=s, positions=torch.tensor([[0, -1]]))
    with torch.no_grad(), pytest.raises(ValueError, match="share memory"):
        posenc.apply_rope(torch.zeros(1, 2, 1, 16).expand(3, 2, 4, 16), schedule=s, inplace=True)
    assert posenc.apply_rope(torch.zeros(0, 2, 1, 16), schedule=s).shape == (0, 2, 1, 16)
    with pytest.raises(ValueError, match="contiguous"):
        posenc.apply_rope(torch.zeros(1, 2, 1, 32)[..., ::2], schedule=s)
    with pytest.raises(ValueError, match="-1"):
        posenc.apply_rope(torch.zeros(1, 2, 1, 16), schedule=s, positions=torch.tensor([[0, -1]]))
    shared = posenc.apply_rope(torch.ones(3, 2, 1, 16), schedule=s, positions=torch.tensor([[5, 9]]))  # HF's [1, S]
    assert torch.equal(shared[0], shared[2])
    with pytest.raises(ValueError, match="positions must be"):
        posenc.apply_rope(torch.zeros(1, 2, 1, 16), schedule=s, positions=torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match="layout"):
        posenc.apply_rope(torch.zeros(1, 2, 1, 16), schedule=s, layout="neox")
    with pytest.raises(ValueError, match="head_dim"):
        posenc.apply_rope(torch.zeros(1, 2, 1, 6), schedule=s)
    with pytest.raises(ValueError, match="autograd"):
        posenc.apply_rope(torch.zeros(1, 2, 1, 16, requires_grad=True), schedule=s, inplace=True)


@pytest.mark.parametrize("layout", ["half_split", "interleaved", "deepseek_v3"])
def test_the_torch_native_path_equals_the_kernels(layout):
    # What a GPU tensor runs (backend="auto" off the CPU), forced here on the CPU: the same
    # schedule and angles in torch operations; values within float32 rounding of the kernels',
    # gradients likewise, for f32 and bf16, implicit, [B, S] and M-RoPE positions.
    torch.manual_seed(5)
    yarn = posenc.schedule(rope_type="yarn", head_dim=32, partial_rotary_factor=0.5, factor=4.0,
                           original_max_position_embeddings=64)
    mrope = posenc.schedule(head_dim=32, mrope_section=[4, 6, 6])
    cases = [(yarn, None, 7), (yarn, torch.randint(0, 5000, (2, 9)), 0),
             (mrope, torch.randint(0, 300, (3, 2, 9)), 0)]
    for s, positions, offset in cases:
        if layout == "deepseek_v3" and positions is not None and positions.dim() == 3:
            continue
        for dtype, tol in ((torch.float32, 2e-6), (torch.bfloat16, 1e-2)):
            q = torch.randn(2, 9, 3, 32).to(dtype).requires_grad_()
            k = torch.randn(2, 9, 1, 32).to(dtype).requires_grad_()
            outs = {}
            for backend in ("kernels", "torch"):
                rq, rk = posenc.apply_rope(q, k, schedule=s, positions=positions, layout=layout, offset=offset,
                                           backend=backend)
                (rq.float().square().sum() + (rk.float() * 3).sum()).backward()
                outs[backend] = (rq.detach().float(), rk.detach().float(), q.grad.float(), k.grad.float())
                q.grad, k.grad = None, None
            for got, want in zip(outs["torch"], outs["kernels"]):
                assert got.dtype == want.dtype and (got - want).abs().max().item() <= tol * max(1.0, want.abs().max().item())
            assert outs["torch"][0].abs().max() > 0


def test_the_backend_and_devices_are_checked():
    s = posenc.schedule(head_dim=16)
    q = torch.randn(1, 4, 2, 16)
    with pytest.raises(ValueError, match="backend must be one of auto, kernels, torch, got 'gpu'"):
        posenc.apply_rope(q, schedule=s, backend="gpu")
    meta = torch.empty(1, 4, 2, 16, device="meta")
    with pytest.raises(ValueError, match="kernels run on the CPU, got a tensor on meta"):
        posenc.apply_rope(meta, schedule=s, backend="kernels")
    with pytest.raises(ValueError, match="q and k must be on one device"):
        posenc.apply_rope(q, meta, schedule=s)
    ones = posenc.apply_rope(torch.ones(1, 4, 2, 16), schedule=s, backend="torch", inplace=False)
    assert torch.allclose(ones, posenc.apply_rope(torch.ones(1, 4, 2, 16), schedule=s), atol=1e-6)


@pytest.mark.parametrize("layout", ["half_split", "interleaved", "deepseek_v3"])
def test_rope_shift_equals_rotating_at_the_new_position(layout):
    # A key rotated at p, shifted by delta, is the key rotated at p + delta: on the kernels and on
    # the torch-native path (what a GPU runs), YaRN's attention factor applied once.
    torch.manual_seed(8)
    s = posenc.schedule(rope_type="yarn", head_dim=32, factor=4.0, original_max_position_embeddings=64)
    raw = torch.randn(2, 12, 3, 32)
    for delta in (300, -5, 1):
        for backend in ("kernels", "torch"):
            k = posenc.apply_rope(raw, schedule=s, layout=layout, offset=100)
            before = k.clone()
            if backend == "torch":  # the native path, forced: a float64 copy takes it on the CPU
                k = k.double()
            posenc.rope_shift(k, delta, schedule=s, layout=layout, begin=2, end=10)
            fresh = posenc.apply_rope(raw, schedule=s, layout=layout, offset=100 + delta)
            assert (k[:, 2:10].float() - fresh[:, 2:10]).abs().max().item() <= 2e-5, (delta, backend)
            assert torch.equal(k[:, :2].float(), before[:, :2]) and torch.equal(k[:, 10:].float(), before[:, 10:])


def test_rope_shift_refuses_bad_input_by_name():
    s = posenc.schedule(head_dim=16)
    k = torch.randn(1, 4, 2, 16)
    with pytest.raises(ValueError, match=r"token range \[3, 2\)"):
        posenc.rope_shift(k, 1, schedule=s, begin=3, end=2)
    with pytest.raises(ValueError, match="delta 4294967296"):
        posenc.rope_shift(k, 2**32, schedule=s)
    with pytest.raises(ValueError, match="delta must be an int"):
        posenc.rope_shift(k, 1.5, schedule=s)
    with pytest.raises(ValueError, match="share memory"):
        posenc.rope_shift(torch.randn(1, 1, 2, 16).expand(1, 4, 2, 16), 1, schedule=s)
    assert posenc.rope_shift(k[:, :0], 3, schedule=s).shape == (1, 0, 2, 16)  # nothing to move
    with pytest.raises(ValueError, match="without autograd"):
        posenc.rope_shift(k.requires_grad_(), 1, schedule=s)
