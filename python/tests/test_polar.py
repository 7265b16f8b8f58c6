"""posenc.nn.PolarEmbedding (PoPE, arXiv 2509.10534) against its closed form written here in
float64, sum_j softplus(q_j) softplus(k_j) cos((m - n) w_j - delta_j) with w_j = 1 / base^(j/d),
against x-transformers' own PoPE transcribed below, and row by row against the core's definition
(posenc/pope.h, through the extension's pope_row)."""
import math

import pytest
import torch
import torch.nn.functional as F

import posenc

TWO_PI = 2 * math.pi


def closed_form(q, k, qpos, kpos, delta, base=10000.0):
    """Scores [B, H, Sq, Sk] of q [B, Sq, H, D], k [B, Sk, H, D] at positions [B, Sq], [B, Sk]
    with phase bias delta [H, D], term by term in float64 (softplus as log(1 + e^x), w_j by
    Python's float power)."""
    d = q.shape[-1]
    w = torch.tensor([1.0 / base ** (j / d) for j in range(d)], dtype=torch.float64)
    mq, mk = torch.log1p(torch.exp(q.double())), torch.log1p(torch.exp(k.double()))
    rel = (qpos.double()[:, :, None] - kpos.double()[:, None, :])  # [B, Sq, Sk], m - n exactly
    angle = rel[:, None, :, :, None] * w - delta.double()[None, :, None, None, :]  # [B, H, Sq, Sk, D]
    mags = mq.permute(0, 2, 1, 3)[:, :, :, None, :] * mk.permute(0, 2, 1, 3)[:, :, None, :, :]
    return (mags * torch.cos(angle)).sum(-1)


def scores(q2, k2):
    """q'.k' per head: [B, Sq, H, 2D] x [B, Sk, H, 2D] -> [B, H, Sq, Sk]."""
    return torch.einsum("bihc,bjhc->bhij", q2, k2)


def module(dim, heads, base=10000.0, dtype=torch.float64, low=-TWO_PI, high=0.0, seed=0):
    torch.manual_seed(seed)
    m = posenc.nn.PolarEmbedding(dim, heads, base).to(dtype)
    with torch.no_grad():
        m.delta.uniform_(low, high)
    return m


@pytest.mark.parametrize("dim,heads,base", [(16, 3, 10000.0), (5, 2, 500.0), (1, 1, 10000.0)])
def test_matches_the_closed_form(dim, heads, base):
    m = module(dim, heads, base)
    B, S = 2, 7
    q, k = torch.randn(B, S, heads, dim, dtype=torch.float64), torch.randn(B, S, heads, dim, dtype=torch.float64)
    pos = torch.stack((torch.randint(0, 5000, (S,)), torch.tensor([0, 1, 2, 3, 100, 4095, 4999])))
    q2, k2 = m(q, k, pos)
    assert q2.shape == k2.shape == (B, S, heads, 2 * dim) and q2.dtype == torch.float64
    ref = closed_form(q, k, pos, pos, m.delta.detach(), base)
    assert float((scores(q2, k2) - ref).abs().max()) < 1e-10
    # The layout: real parts first, imaginary parts after (x-transformers' cat((t cos, t sin))).
    w = torch.tensor([1.0 / base ** (j / dim) for j in range(dim)], dtype=torch.float64)
    phase = pos.double()[:, :, None, None] * w
    assert torch.allclose(q2[..., :dim], F.softplus(q) * torch.cos(phase), rtol=0, atol=1e-12)
    assert torch.allclose(q2[..., dim:], F.softplus(q) * torch.sin(phase), rtol=0, atol=1e-12)


def test_scores_depend_on_the_distance_only():
    m = module(12, 2)
    q, k = torch.randn(2, 9, 2, 12, dtype=torch.float64), torch.randn(2, 9, 2, 12, dtype=torch.float64)
    pos = torch.stack((torch.arange(9) * 3, torch.randint(0, 200, (9,))))
    near, far = (scores(*m(q, k, p)) for p in (pos, pos + 1000))
    assert float((near - far).abs().max()) < 1e-11 * float(near.abs().max())
    assert float((scores(*m(q, k, pos + 17)) - near).abs().max()) < 1e-11 * float(near.abs().max())


def test_gradcheck_q_k_and_delta():
    m = module(3, 2, low=-TWO_PI + 0.2, high=-0.2)  # inside the clamp: finite differences see one side
    q = torch.randn(2, 3, 2, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 3, 2, 3, dtype=torch.float64, requires_grad=True)
    delta = m.delta.detach().clone().requires_grad_(True)
    pos = torch.tensor([[0, 5, 2], [7, 1, 1000]])
    call = getattr(getattr(torch, "func", None), "functional_call", None) or torch.nn.utils.stateless.functional_call

    def f(q, k, delta):
        return call(m, {"delta": delta}, (q, k, pos))
    assert torch.autograd.gradcheck(f, (q, k, delta))
    assert torch.autograd.gradgradcheck(f, (q, k, delta))
    assert torch.autograd.gradcheck(lambda q, k: m(q, k), (q, k))


def test_positions_none_s_and_bs_agree():
    m = module(8, 4, dtype=torch.float32)
    B, S = 3, 6
    q, k = torch.randn(B, S, 4, 8), torch.randn(B, S, 4, 8)
    ref = m(q, k)
    for pos in (torch.arange(S), torch.arange(S, dtype=torch.int32), torch.arange(S).expand(B, S),
                torch.arange(S, dtype=torch.int32).repeat(B, 1)):
        got = m(q, k, pos)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    # [B, S] rows are each sequence's own [S].
    rows = torch.randint(0, 3000, (B, S))
    q2, k2 = m(q, k, rows)
    for b in range(B):
        qb, kb = m(q[b:b + 1], k[b:b + 1], rows[b])
        assert torch.equal(q2[b:b + 1], qb) and torch.equal(k2[b:b + 1], kb)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 5e-7), (torch.bfloat16, 4e-3), (torch.float16, 1e-3)])
def test_low_precision_inputs(dtype, tol):
    """float32 compute for float32, bfloat16 and float16 inputs, each result in its input's dtype;
    positions near 10^6 keep their phase (angles reduced modulo 2 pi in float64). Relative to the
    largest value, within half a unit in the last place of the output dtype (bfloat16 2^-8,
    float16 2^-11) plus float32 arithmetic."""
    m = module(16, 2, dtype=torch.float64)
    q, k = torch.randn(2, 5, 2, 16, dtype=torch.float64), torch.randn(2, 5, 2, 16, dtype=torch.float64)
    q, k = q.to(dtype).double(), k.to(dtype).double()  # inputs exactly representable in dtype
    pos = torch.tensor([[0, 1, 2, 3, 4], [999_990, 999_997, 1_000_000, 1_000_003, 2**31 - 1]])
    ref_q, ref_k = m(q, k, pos)
    low = module(16, 2, dtype=torch.float32)
    with torch.no_grad():
        low.delta.copy_(m.delta)
    q2, k2 = low(q.to(dtype), k.to(dtype), pos)
    assert q2.dtype == k2.dtype == dtype
    for got, ref in ((q2, ref_q), (k2, ref_k)):
        assert float((got.double() - ref).abs().max() / ref.abs().max()) < tol


def test_delta_is_clamped_and_initialised_as_x_transformers():
    m = posenc.nn.PolarEmbedding(4, 3)
    assert m.delta.shape == (3, 4) and torch.equal(m.delta, torch.zeros(3, 4))
    assert list(m.state_dict()) == ["delta"]
    u = posenc.nn.PolarEmbedding(4, 3, bias_uniform_init=True)
    assert float(u.delta.min()) >= -TWO_PI and float(u.delta.max()) <= 0 and u.delta.requires_grad
    q, k = torch.randn(1, 4, 3, 4, dtype=torch.float64), torch.randn(1, 4, 3, 4, dtype=torch.float64)
    m = m.double()
    base = m(q, k)
    with torch.no_grad():
        m.delta.fill_(0.7)  # above 0: used as 0
    assert torch.equal(m(q, k)[1], base[1])
    with torch.no_grad():
        m.delta.fill_(-9.0)  # below -2 pi: used as -2 pi, a full turn
    assert torch.allclose(m(q, k)[1], base[1], rtol=0, atol=1e-12)


# x-transformers' PoPE, transcribed from lucidrains/x-transformers at commit
# 9252ed7838021ee61e6c5be0930b3a9a88efdf06, x_transformers/x_transformers.py: PolarEmbedding
# (lines 880-911), apply_polar_pos_emb (lines 913-924) and Attention.forward's use (lines
# 2368-2371: q with freqs, k with freqs + bias), on [b, h, n, d] tensors. einops' rearrange
# 'n -> 1 n' is unsqueeze(0) here; the rest is its code.
def xt_polar_embedding_forward(inv_freq, learned_bias, t):
    if t.ndim == 1:
        t = t.unsqueeze(0)
    freqs = torch.einsum("b i , j -> b i j", t.type_as(inv_freq), inv_freq)
    bias = learned_bias.clamp(-2. * math.pi, 0.)
    return freqs, bias


def xt_apply_polar_pos_emb(t, freqs):
    seq_len, orig_dtype = t.shape[-2], t.dtype
    freqs = freqs[:, -seq_len:]
    t = t.float()
    t = F.softplus(t)
    out = torch.cat((t * freqs.cos(), t * freqs.sin()), dim=-1)
    return out.type(orig_dtype)


def xt_pope(q, k, pos, delta, dim, base=10000):
    """q, k [b, h, n, d]; pos [n] (x-transformers' polar path takes one row of positions)."""
    inv_freq = 1. / (base ** (torch.arange(0, dim).float() / dim))
    freqs, bias = xt_polar_embedding_forward(inv_freq, delta.unsqueeze(1), pos)  # learned_bias [heads, 1, dim]
    return xt_apply_polar_pos_emb(q, freqs), xt_apply_polar_pos_emb(k, freqs + bias)


@pytest.mark.parametrize("dtype,tol,score_tol", [(torch.float32, 1e-5, 1e-6), (torch.bfloat16, 8e-3, 1e-2)])
def test_matches_x_transformers(dtype, tol, score_tol):
    m = module(32, 4, dtype=torch.float32)
    q, k = torch.randn(2, 50, 4, 32).to(dtype), torch.randn(2, 50, 4, 32).to(dtype)
    for pos in (torch.arange(50), torch.arange(50) + 60):
        q2, k2 = m(q, k, pos)
        xq, xk = xt_pope(q.transpose(1, 2), k.transpose(1, 2), pos, m.delta.detach(), 32)
        assert xq.dtype == q2.dtype == dtype
        for got, ref in ((q2, xq.transpose(1, 2)), (k2, xk.transpose(1, 2))):
            # Relative to the largest value: x-transformers rounds w_j and p w_j to float32 (in
            # bfloat16 the two may round to neighbours: one unit in the last place, 2^-7).
            assert float((got.double() - ref.double()).abs().max() / ref.double().abs().max()) < tol
        # and the scores, once more against the closed form
        b_pos = pos.expand(2, -1)
        ref = closed_form(q.double(), k.double(), b_pos, b_pos, m.delta.detach())
        assert float((scores(q2.double(), k2.double()) - ref).abs().max() / ref.abs().max()) < score_tol


@pytest.mark.parametrize("args,message", [
    ((0, 2), "dim must be an int >= 1, got int 0"),
    ((-4, 2), "dim must be an int >= 1, got int -4"),
    ((2.0, 2), "dim must be an int >= 1, got float 2.0"),
    ((True, 2), "dim must be an int >= 1, got bool True"),
    ((8, 0), "heads must be an int >= 1, got int 0"),
    ((8, False), "heads must be an int >= 1, got bool False"),
    ((8, 2, 0.0), "base must be a finite number > 0, got float 0.0"),
    ((8, 2, -10), "base must be a finite number > 0, got int -10"),
    ((8, 2, float("nan")), "base must be a finite number > 0, got float nan"),
    ((8, 2, float("inf")), "base must be a finite number > 0, got float inf"),
    ((8, 2, True), "base must be a finite number > 0, got bool True"),
    ((8, 2, "10000"), "base must be a finite number > 0, got str '10000'"),
])
def test_bad_construction(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        posenc.nn.PolarEmbedding(*args)
    with pytest.raises(ValueError, match="bias_uniform_init must be True or False, got 1"):
        posenc.nn.PolarEmbedding(8, 2, bias_uniform_init=1)


def test_bad_calls():
    m = posenc.nn.PolarEmbedding(8, 2)
    q, k = torch.randn(2, 5, 2, 8), torch.randn(2, 5, 2, 8)

    def refused(message, q=q, k=k, positions=None):
        with pytest.raises(ValueError, match=message):
            m(q, k, positions)
    refused(r"q must be a torch.Tensor \[B, S, H, D\], got list", q=[[1.0]])
    refused(r"k must be \[B, S, H=2, D=8\], got \[5, 2, 8\]", k=k[0])
    refused(r"q's head dim is 6, the module's dim 8", q=q[..., :6])
    refused(r"q has 3 heads, the module 2", q=torch.randn(2, 5, 3, 8))
    refused(r"k has 1 heads, the module 2 \(grouped-query keys", k=k[:, :, :1])
    refused(r"q must be a floating tensor .*, got torch.int64", q=q.long())
    refused(r"k must be a floating tensor .*, got torch.complex64", k=torch.complex(k, k))
    refused(r"q and k must have the same shape \[B, S, H, D\], got \[2, 5, 2, 8\] and \[2, 4, 2, 8\]", k=k[:, :4])
    refused(r"q and k must have the same shape .* \[1, 5, 2, 8\]", k=k[:1])
    refused(r"positions must be an int32 or int64 tensor .*, got torch.float32", positions=torch.arange(5.0))
    refused(r"positions must be an int32 or int64 tensor .*, got torch.bool", positions=torch.ones(5, dtype=torch.bool))
    refused(r"positions must be an int32 or int64 tensor .*, got torch.int16", positions=torch.arange(5).short())
    refused(r"positions must be an int32 or int64 tensor .*, got list", positions=[0, 1, 2, 3, 4])
    refused(r"positions must be \[S=5\] or \[B=2, S=5\], got \[6\]", positions=torch.arange(6))
    refused(r"positions must be \[S=5\] or \[B=2, S=5\], got \[3, 5\]", positions=torch.zeros(3, 5, dtype=torch.long))
    refused(r"positions must be \[S=5\] or \[B=2, S=5\], got \[1, 2, 5\]",
            positions=torch.zeros(1, 2, 5, dtype=torch.long))
    refused(r"positions must be in \[0, 2\^31-1\], got -1", positions=torch.tensor([0, 1, -1, 2, 3]))
    refused(r"positions must be in \[0, 2\^31-1\], got 2147483648", positions=torch.tensor([0, 1, 2**31, 2, 3]))
    if torch.device("meta").type == "meta":  # a device q is on and delta is not
        refused(r"q, k and delta must be on one device, got meta, meta and cpu",
                q=torch.empty(2, 5, 2, 8, device="meta"), k=torch.empty(2, 5, 2, 8, device="meta"))


def test_empty_and_module_dtype_changes():
    m = posenc.nn.PolarEmbedding(6, 2)
    q2, k2 = m(torch.randn(2, 0, 2, 6), torch.randn(2, 0, 2, 6))
    assert q2.shape == k2.shape == (2, 0, 2, 12)
    half = posenc.nn.PolarEmbedding(6, 2).half()  # the frequencies are not a buffer: nothing rounds them
    assert half.inv_freq().dtype == torch.float64 and torch.equal(half.inv_freq(), m.inv_freq())
    assert half(torch.randn(1, 3, 2, 6).half(), torch.randn(1, 3, 2, 6).half())[0].dtype == torch.float16
    assert "dim=6, heads=2, base=10000" in repr(m)


def test_rows_equal_the_cores_pope_in_float64():
    """Each query and key row of PolarEmbedding in float64 equals the core's pope_row (the C++
    definition `posenc check` measures and the libtorch module is tested against), delta clamped."""
    from posenc import _posenc
    torch.manual_seed(11)
    dim, heads = 7, 2
    m = posenc.nn.PolarEmbedding(dim, heads, base=500.0)
    with torch.no_grad():
        m.delta.copy_(torch.tensor([[-1.0, 0.5, -7.0, -3.0, 0.0, -0.1, -6.0],
                                    [-5.0, -4.0, -0.5, -1.5, 2.0, -6.5, -2.0]]))
    q, k = torch.randn(1, 3, heads, dim, dtype=torch.float64), torch.randn(1, 3, heads, dim, dtype=torch.float64)
    pos = torch.tensor([0, 17, 1000003])
    q2, k2 = m(q, k, pos)
    for t in range(3):
        for h in range(heads):
            want_q = _posenc.pope_row(q[0, t, h].tolist(), int(pos[t]), 500.0)
            want_k = _posenc.pope_row(k[0, t, h].tolist(), int(pos[t]), 500.0, m.delta[h].tolist())
            assert torch.allclose(q2[0, t, h], torch.tensor(want_q, dtype=torch.float64), rtol=0, atol=1e-12)
            assert torch.allclose(k2[0, t, h], torch.tensor(want_k, dtype=torch.float64), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="PoPE position must be in"):
        _posenc.pope_row([0.5], -1)
    with pytest.raises(ValueError, match="delta must have the row's 2 channels, got 1"):
        _posenc.pope_row([0.5, 1.0], 3, 10.0, [0.0])

