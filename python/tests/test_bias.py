"""posenc.nn's learned and data-dependent biases (issue 24): Kerple, Sandwich and FoX's forget
gate against the core's tables and closed forms, and posenc.attention(bias=...) against eager
attention in float64, forward and backward (the gradient reaches r1, r2 and the gate)."""
import math

import pytest
import torch

import posenc
from test_attention import eager, inputs


@pytest.mark.parametrize("kind", ["log", "power"])
def test_kerple_table_is_the_cores_and_positive(kind):
    m = posenc.nn.Kerple(6, kind)
    core = posenc._posenc.kerple_table(m.r1.tolist(), m.r2.tolist(), kind, 300)
    assert (m.table(300).double() - torch.from_numpy(core).view(6, 300).double()).abs().max() <= 1e-6
    with torch.no_grad():
        m.raw_r1.fill_(-40.0)
        m.raw_r2.fill_(40.0)
    assert (m.r1 > 0).all() and (m.r2 > 0).all() and torch.isfinite(m.table(50)).all()
    if kind == "power":
        assert (m.r2 <= 2).all()


def test_kerple_power_starts_as_alibi_and_its_r2_gradient_is_finite_at_zero():
    m = posenc.nn.Kerple(4, "power")
    alibi = posenc.alibi_bias(4, 5, 5, causal=False)
    assert (m(5, 5) - alibi).abs().max() <= 1e-6
    m.table(20).sum().backward()
    assert torch.isfinite(m.raw_r2.grad).all()


def test_sandwich_is_the_closed_form():
    heads, dim = 4, 16
    m = posenc.nn.Sandwich(heads, dim)
    d = torch.arange(40, dtype=torch.float64)
    k = torch.arange(1, dim // 2 + 1, dtype=torch.float64)
    inner = torch.cos(d[:, None] / 10000 ** (2 * k / dim)).sum(1) - dim / 2
    want = torch.stack([inner * heads / (8 * h) for h in range(1, heads + 1)])
    assert (m.table(40).double() - want).abs().max() <= 1e-5
    assert m(3, 3, past=2).shape == (heads, 3, 3)


def _seeded_dpb(dim, heads, **kw):
    torch.manual_seed(7)
    return posenc.nn.DynamicPositionBias(dim, heads, **kw)


@pytest.mark.parametrize("log_distance", [True, False])
def test_dynamic_position_bias_is_x_transformers_mlp_over_the_signed_distance(log_distance):
    m = _seeded_dpb(6, 3, depth=3, log_distance=log_distance).double()
    table = m.table(5)  # d = -4 .. 4
    assert table.shape == (3, 9) and table.dtype == torch.float64
    linears = [layer for layer in m.mlp if isinstance(layer, torch.nn.Linear)]
    assert [tuple(l.weight.shape) for l in linears] == [(6, 1), (6, 6), (6, 6), (3, 6)]
    for column, d in enumerate(range(-4, 5)):
        x = torch.tensor([math.copysign(math.log(1 + abs(d)), d) if log_distance else float(d)], dtype=torch.float64)
        for layer in linears[:-1]:
            x = torch.nn.functional.silu(layer.weight @ x + layer.bias)
        expected = linears[-1].weight @ x + linears[-1].bias
        assert (table[:, column] - expected).abs().max() <= 1e-12
    bias = m(3, 6, past=2)  # query i at 2 + i, key j: table[:, 2 + i - j + 4]
    assert bias.shape == (3, 3, 6)
    for i in range(3):
        for j in range(6):
            assert torch.equal(bias[:, i, j], table[:, 2 + i - j + 4])
    assert not torch.allclose(table[:, :4], table[:, 5:].flip(1))  # signed: d and -d differ
    assert torch.autograd.gradcheck(lambda w: torch.nn.utils.stateless.functional_call(  # noqa
        m, {"mlp.0.weight": w}, (2, 4)), (m.mlp[0].weight.detach().clone().requires_grad_(),))


def test_dynamic_position_bias_refuses_what_it_cannot_build():
    for kw, text in [(dict(dim=0, heads=2), "dim must be an int >= 1"), (dict(dim=4, heads=2, depth=0), "depth"),
                     (dict(dim=4, heads=2, log_distance=1), "log_distance must be a bool")]:
        with pytest.raises(ValueError, match=text):
            posenc.nn.DynamicPositionBias(**kw)
    with pytest.raises(ValueError, match="length must be an int >= 1"):
        posenc.nn.DynamicPositionBias(4, 2).table(0)


def test_forgetting_gate_bias_is_the_sum_of_log_gates_between():
    torch.manual_seed(0)
    m = posenc.nn.ForgettingGate(8, 2)
    x = torch.randn(1, 6, 8)
    b = m.bias(x)
    log_f = torch.nn.functional.logsigmoid(m.proj(x)).double()[0]  # [S, H]
    assert abs(b[0, 1, 5, 2].item() - log_f[3:6, 1].sum().item()) <= 1e-5
    assert b[0, 0, 4, 4].item() == 0


@pytest.mark.parametrize("make", [lambda: posenc.nn.Kerple(4, "log"), lambda: posenc.nn.Kerple(4, "power"),
                                  lambda: posenc.nn.Sandwich(4, 16), lambda: _seeded_dpb(8, 4),
                                  lambda: posenc.nn.FIRE(4, width=8, init_c=0.3, init_L=32.0)])
@pytest.mark.parametrize("causal", [True, False])
def test_attention_with_a_distance_bias_equals_eager_forward_and_backward(make, causal):
    m = make()
    q, k, v = inputs(S=7, T=11)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = posenc.attention(*leaves, causal=causal, bias=m)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    (out * w).sum().backward()
    mine = [t.grad.double() for t in leaves] + [p.grad.double() for p in m.parameters()]
    m.zero_grad()
    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    ref = eager(*ref_leaves, causal=causal, bias=m(7, 11, past=4).double().unsqueeze(0))
    assert (out.double() - ref).abs().max() <= 2e-5
    (ref * w.double()).sum().backward()
    theirs = [t.grad for t in ref_leaves] + [p.grad.double() for p in m.parameters()]
    for a, b in zip(mine, theirs):
        assert (a - b).abs().max() <= 1e-4 * max(1.0, b.abs().max().item())


def test_attention_with_fox_gates_equals_eager_and_trains_the_gate():
    torch.manual_seed(1)
    gate = posenc.nn.ForgettingGate(8, 4)
    x = torch.randn(2, 11, 8)
    q, k, v = inputs(S=11, T=11)
    out = posenc.attention(q, k, v, bias=gate.cumulative(x))
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    (out * w).sum().backward()
    mine = gate.proj.weight.grad.clone()
    gate.zero_grad()
    ref = eager(q.double(), k.double(), v.double(), bias=gate.bias(x).double())
    assert (out.double() - ref).abs().max() <= 2e-5
    (ref * w.double()).sum().backward()
    assert (mine.double() - gate.proj.weight.grad.double()).abs().max() <= 1e-4 * gate.proj.weight.grad.abs().max()
    with pytest.raises(ValueError, match="causal"):
        posenc.attention(q, k, v, causal=False, bias=gate.cumulative(x))
    with pytest.raises(ValueError, match=r"\[B, Hq, T\]"):
        posenc.attention(q, k, v, bias=gate.cumulative(x)[:, :2])
    with pytest.raises(ValueError, match="one of"):
        posenc.attention(q, k, v, bias=posenc.nn.Kerple(4), alibi=posenc.alibi_slopes(4))


def _hf_relative_attention(q, k, v, table, max_position_embeddings, kind):
    """HF's eager_attention_forward for the BERT family (modeling_bert.py), q, k, v [B, H, L, D]:
    distance = l - r indexes distance_embedding at distance + M - 1; the relative scores are added
    to q.k before the scaling; no mask (BERT is bidirectional)."""
    attn = q @ k.transpose(2, 3)
    l_pos, r_pos = torch.arange(q.shape[2]).view(-1, 1), torch.arange(k.shape[2]).view(1, -1)
    pe = table[l_pos - r_pos + max_position_embeddings - 1]
    attn = attn + torch.einsum("bhld,lrd->bhlr", q, pe)
    if kind == "relative_key_query":
        attn = attn + torch.einsum("bhrd,lrd->bhlr", k, pe)
    attn = attn * q.shape[-1] ** -0.5
    return torch.softmax(attn, dim=-1) @ v


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query"])
def test_shaw_relative_is_hf_berts_relative_key(kind):
    g = torch.Generator().manual_seed(11)
    mpe, length = 12, 9  # HF's max_position_embeddings: a table of 2 * 12 - 1 rows
    q, k, v = (torch.randn(2, length, 3, 8, generator=g, dtype=torch.float64) for _ in range(3))
    m = posenc.nn.ShawRelative(8, mpe - 1, values=False, key_query=kind == "relative_key_query").double()
    with torch.no_grad():
        m.rel_k.copy_(torch.randn(2 * mpe - 1, 8, generator=g, dtype=torch.float64))
    hf = _hf_relative_attention(*(t.transpose(1, 2) for t in (q, k, v)), m.rel_k.detach(), mpe, kind).transpose(1, 2)
    assert (m.attention(q, k, v, causal=False) - hf).abs().max() <= 1e-12


def test_shaw_relative_properties_zero_tables_constant_values_and_clipping():
    q, k, v = inputs(S=7, T=11)  # Hq 4, Hk 2
    m = posenc.nn.ShawRelative(16, 3)
    with torch.no_grad():
        m.rel_k.zero_()
        m.rel_v.zero_()
    for causal in (True, False):  # zero tables: plain attention
        assert (m.attention(q, k, v, causal=causal) - posenc.attention(q, k, v, causal=causal)).abs().max() <= 2e-6
    with torch.no_grad():
        m.rel_v.copy_(torch.arange(16.0).expand(7, 16))  # every row c: the output moves by c (weights sum to 1)
    shifted = m.attention(q, k, v) - posenc.attention(q, k, v)
    assert (shifted - torch.arange(16.0)).abs().max() <= 1e-5
    g = torch.Generator().manual_seed(2)
    small = posenc.nn.ShawRelative(16, 2)  # distances past 2 read the edge rows
    wide = posenc.nn.ShawRelative(16, 20)
    with torch.no_grad():
        small.rel_k.copy_(torch.randn(5, 16, generator=g))
        small.rel_v.copy_(torch.randn(5, 16, generator=g))
        for table, src in ((wide.rel_k, small.rel_k), (wide.rel_v, small.rel_v)):
            table.copy_(src[(torch.arange(-20, 21).clamp(-2, 2) + 2)])
    for causal in (True, False):
        assert (small.attention(q, k, v, causal=causal) - wide.attention(q, k, v, causal=causal)).abs().max() <= 1e-6


def test_shaw_relative_gradients_and_bad_input():
    m = posenc.nn.ShawRelative(4, 2, key_query=True).double()
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 3, 2, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda *t: m.attention(*t), (q, k, v))
    fixed = tuple(t.detach() for t in (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b: torch.nn.utils.stateless.functional_call(m, {"rel_k": a, "rel_v": b}, fixed),
                                    (m.rel_k.detach().clone().requires_grad_(), m.rel_v.detach().clone().requires_grad_()))
    for kw, says in ((dict(head_dim=0, max_relative=2), "head_dim must be an int >= 1"),
                     (dict(head_dim=4, max_relative=-1), "max_relative must be an int >= 0"),
                     (dict(head_dim=4, max_relative=2, values=1), "values must be a bool")):
        with pytest.raises(ValueError, match=says):
            posenc.nn.ShawRelative(**kw)
    with pytest.raises(ValueError, match=r"q \[B, S, Hq, D=4\]"):
        m.attention(q[..., :2], k, v)
    with pytest.raises(ValueError, match="causal must be True or False"):
        m.attention(q, k, v, causal=None)


def test_shaw_relative_refuses_a_bad_scale():
    m = posenc.nn.ShawRelative(4, 2)
    q = torch.randn(1, 3, 2, 4)
    for scale in (float("nan"), -1.0, 0, True):
        with pytest.raises(ValueError, match="scale must be a finite number > 0"):
            m.attention(q, q, q, scale=scale)


def _reference_fire(m, seq):
    """The reference FIRE (mcleish7/arithmetic cramming/architectures/embeddings.py, FIRE.forward at
    evaluation: positions arange(seq)), written out in float64 with m's weights: [heads, seq, seq]."""
    d = {k: v.detach().double() for k, v in m.state_dict().items()}
    positions = torch.arange(seq, dtype=torch.float64)
    rel = positions[:, None] - positions[None, :]
    threshold = torch.abs(d["L_multiplier"] * d["init_L"])
    normalizer = torch.max(positions, threshold)[:, None]
    rel = torch.log(torch.abs(d["c"] * rel) + 1)
    normalizer = torch.log(torch.abs(d["c"] * normalizer) + 1)
    x = (rel / (normalizer + 1e-6)).unsqueeze(-1)
    hidden = torch.relu(x @ d["mlp.0.weight"].T + d["mlp.0.bias"])
    return (hidden @ d["mlp.2.weight"].T + d["mlp.2.bias"]).permute(2, 0, 1)


@pytest.mark.parametrize("threshold", [512.0, 4.0])  # below L everywhere; past L from position 4 on
def test_fire_is_the_reference_fire(threshold):
    torch.manual_seed(3)
    m = posenc.nn.FIRE(4, width=8, init_c=0.2, init_L=threshold).double()
    got = m(12, 12)
    assert got.shape == (4, 12, 12)
    assert torch.allclose(got, _reference_fire(m, 12), rtol=0, atol=1e-12)
    # A decode step: query 11 against keys 0..11 is the last row of the whole.
    assert torch.allclose(m(1, 12, past=11)[:, 0], got[:, 11], rtol=0, atol=1e-12)
    # Explicit positions with a batch dimension: [B, Sq], [B, Sk] -> [B, H, Sq, Sk].
    pos = torch.arange(12).view(1, 12).expand(2, 12)
    assert torch.allclose(m.scores(pos, pos), got.expand(2, 4, 12, 12), rtol=0, atol=1e-12)


def test_fire_gradients_to_c_threshold_and_mlp_in_double():
    torch.manual_seed(5)
    m = posenc.nn.FIRE(2, width=3, init_L=3.0).double()
    params = {k: v.detach().clone().requires_grad_(True) for k, v in m.named_parameters()}
    names = list(params)

    def bias(*values):
        return torch.nn.utils.stateless.functional_call(m, dict(zip(names, values)), (6, 6))

    assert torch.autograd.gradcheck(bias, tuple(params.values()))


def test_fire_refuses_what_it_cannot_build_and_the_kernel_refuses_it():
    with pytest.raises(ValueError, match="heads"):
        posenc.nn.FIRE(0)
    with pytest.raises(ValueError, match="init_c"):
        posenc.nn.FIRE(2, init_c=float("nan"))
    with pytest.raises(ValueError, match="eps"):
        posenc.nn.FIRE(2, eps=0.0)
    m = posenc.nn.FIRE(2)
    with pytest.raises(ValueError, match="integer tensor"):
        m.scores(torch.zeros(3), torch.arange(3))
    with pytest.raises(ValueError, match="0, 2\\^31-1"):
        m.scores(torch.tensor([-1]), torch.arange(3))


def test_attention_with_fire_past_its_threshold_is_materialised():
    """FIRE is a table only for queries below L: with a query at or past L, backend "auto" computes
    it per pair (the torch backend), equal to eager with m's scores, gradients included; "kernels"
    refuses naming L and the position; below L the kernel runs (not the torch backend's bits)."""
    torch.manual_seed(1)
    m = posenc.nn.FIRE(2, width=6, init_c=0.5, init_L=8.0)
    q, k, v = (torch.randn(1, 12, 2, 8) for _ in range(3))
    assert m.table_covers(7) and not m.table_covers(8)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = posenc.attention(*leaves, causal=True, bias=m)
    out.sum().backward()
    mine = [t.grad for t in leaves] + [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    ref = eager(*ref_leaves, causal=True, bias=m(12, 12).double().unsqueeze(0))
    assert (out.double() - ref).abs().max() <= 2e-5
    ref.sum().backward()
    theirs = [t.grad for t in ref_leaves] + [p.grad for p in m.parameters()]
    for a, b in zip(mine, theirs):
        assert (a.double() - b.double()).abs().max() <= 1e-4 * max(1.0, b.abs().max().item())
    with pytest.raises(ValueError, match="threshold L = 8; the last query here is at position 11"):
        posenc.attention(q, k, v, causal=True, bias=m, backend="kernels")
    short = [t[:, :8] for t in (q, k, v)]
    kernel = posenc.attention(*short, causal=True, bias=m, backend="kernels")
    torch_backend = posenc.attention(*short, causal=True, bias=m, backend="torch")
    assert (kernel - torch_backend).abs().max() <= 2e-6 and not torch.equal(kernel, torch_backend)


def _reference_cope_attention(m, q, k, v):
    """The paper's SelfAttn with CoPE (facebookresearch/RAM projects/cope), one head at a time in
    float64: logits / sqrt(d) + mask.log(), CoPE over them with RAM's pos_emb layout, softmax."""
    pos_emb = m.pos_emb.detach().double().t().unsqueeze(0)  # RAM's [1, head_dim, npos_max]
    s_len, t_len = q.shape[1], k.shape[1]
    mask = (torch.arange(t_len)[None, :] <= torch.arange(s_len)[:, None] + (t_len - s_len)).double()
    outs = []
    for h in range(q.shape[2]):
        query, key, val = q[:, :, h].double(), k[:, :, h].double(), v[:, :, h].double()
        logits = torch.bmm(query, key.transpose(-1, -2)) / math.sqrt(q.shape[-1]) + mask.log()
        gates = torch.sigmoid(logits)
        pos = gates.flip(-1).cumsum(dim=-1).flip(-1).clamp(max=m.max_pos - 1)
        pos_ceil, pos_floor = pos.ceil().long(), pos.floor().long()
        logits_int = torch.matmul(query, pos_emb)
        w = pos - pos_floor
        logits = logits + logits_int.gather(-1, pos_ceil) * w + logits_int.gather(-1, pos_floor) * (1 - w)
        outs.append(torch.bmm(torch.softmax(logits, -1), val))
    return torch.stack(outs, dim=2)


def test_cope_attention_is_the_papers_self_attention():
    torch.manual_seed(11)
    m = posenc.nn.CoPE(8, max_pos=6).double()
    torch.nn.init.normal_(m.pos_emb)
    q, k, v = (torch.randn(2, 7, 3, 8, dtype=torch.float64) for _ in range(3))
    assert torch.allclose(m.attention(q, k, v), _reference_cope_attention(m, q, k, v), rtol=0, atol=1e-12)
    # A decode step (S < T: query i at T - S + i) equals the last rows of the whole.
    assert torch.allclose(m.attention(q[:, 5:], k, v), m.attention(q, k, v)[:, 5:], rtol=0, atol=1e-12)


def test_cope_with_every_gate_open_is_a_learned_relative_encoding():
    m = posenc.nn.CoPE(4, max_pos=32).double()
    torch.nn.init.normal_(m.pos_emb)
    q = torch.ones(1, 5, 1, 4, dtype=torch.float64) * 30  # q . k = 3600 / 2: every gate 1 to within e^-1800
    k = torch.ones(1, 5, 1, 4, dtype=torch.float64) * 30
    p = m.positions(q, k)[0, 0]
    i, j = torch.arange(5)[:, None], torch.arange(5)[None, :]
    assert torch.equal(p, torch.where(j <= i, (i - j + 1).double(), torch.zeros(5, 5, dtype=torch.float64)))
    term = m.bias(q, k)[0, 0]
    z = q[0, :, 0] @ m.pos_emb.t()  # [S, max_pos]
    assert torch.allclose(term[4, 0], z[4, 5]) and torch.allclose(term[2, 1], z[2, 2])
    # Clamped at max_pos - 1, interpolated between integer positions.
    small = posenc.nn.CoPE(4, max_pos=3).double()
    assert float(small.positions(q, k)[0, 0, 4, 0]) == 2.0


def test_cope_gradients_in_double_and_bad_input():
    torch.manual_seed(2)
    m = posenc.nn.CoPE(4, max_pos=5).double()
    torch.nn.init.normal_(m.pos_emb)
    q, k, v = (torch.randn(1, 4, 2, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    pos_emb = m.pos_emb.detach().clone().requires_grad_(True)
    call = torch.nn.utils.stateless.functional_call
    assert torch.autograd.gradcheck(lambda q, k, v, e: call(m, {"pos_emb": e}, (q, k, v)), (q, k, v, pos_emb))
    with pytest.raises(ValueError, match="max_pos"):
        posenc.nn.CoPE(4, 0)
    with pytest.raises(ValueError, match="Hq a multiple of Hk"):
        m.bias(torch.randn(1, 4, 3, 4), torch.randn(1, 4, 2, 4))
    with pytest.raises(ValueError, match="S <= T"):
        m.bias(torch.randn(1, 5, 2, 4), torch.randn(1, 4, 2, 4))
    with pytest.raises(ValueError, match="causal"):
        m.bias(torch.randn(1, 4, 2, 4), torch.randn(1, 4, 2, 4), causal=1)
    with pytest.raises(ValueError, match="CoPE.attention"):
        posenc.attention(*(torch.randn(1, 4, 2, 4) for _ in range(3)), causal=True, bias=m)


def test_fire_and_cope_refuse_what_would_mislead():
    """FIRE measures the distance before rounding (bfloat16 keeps distances 0 and 1 apart at position
    1000); mismatched batch shapes, work past 1 GiB and CoPE's mixed dtypes are refused by name."""
    m = posenc.nn.FIRE(4).to(torch.bfloat16)
    s = m.scores(torch.tensor([1000]), torch.tensor([999, 1000]))
    assert not torch.equal(s[:, 0, 0], s[:, 0, 1])
    with pytest.raises(ValueError, match="leading"):
        posenc.nn.FIRE(2).scores(torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="2\\^28"):
        posenc.nn.FIRE(2)(10**4, 10**4)
    with pytest.raises(ValueError, match="float32"):
        posenc.nn.FIRE(2, init_c=1e300)
    with pytest.raises(ValueError, match="one floating dtype"):
        posenc.nn.CoPE(4, 5).bias(torch.randn(1, 2, 1, 4, dtype=torch.float64), torch.randn(1, 2, 1, 4))
    with pytest.raises(ValueError, match="qwen3"):
        posenc.qwen_omni_audio_tokens(100, "yes")
    with pytest.raises(ValueError, match="2\\^24"):
        posenc.mrope_position_ids([("image", 0, 1, 65536, 65536)])
