"""posenc.attention against eager attention in float64: scores, the positional bias or RoPE's
rotation by (remapped) distance, masks, softmax, values; gradients against autograd through the
eager version."""
import math

import pytest
import torch

import posenc


def rotate(x, angle):
    """Half-split RoPE of x [..., D] by angle [..., D/2] (float64)."""
    half = angle.shape[-1]
    a, b = x[..., :half], x[..., half:2 * half]
    c, s = angle.cos(), angle.sin()
    return torch.cat((a * c - b * s, b * c + a * s, x[..., 2 * half:]), dim=-1)


def eager(q, k, v, *, causal=True, scale=None, inv_freq=None, factor=1.0, distance=None, slopes=None, t5=None,
          t5_max_distance=128, window=0, padding=None, bias=None):
    """q [B, S, Hq, D], k, v [B, T, Hk, D] in float64; distance(i, j) -> the distance RoPE sees;
    bias [B or 1, Hq, S, T] added to the scaled scores."""
    B, S, Hq, D = q.shape
    T, Hk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(Hq // Hk, dim=2)
    v = v.repeat_interleave(Hq // Hk, dim=2)
    past = T - S
    scores = torch.empty(B, Hq, S, T, dtype=torch.float64)
    for i in range(S):
        for j in range(T):
            qi, kj = q[:, i], k[:, j]
            if inv_freq is not None:
                d = distance(past + i, j) if distance else past + i - j
                qi = rotate(qi, d * inv_freq) * factor
                kj = kj * factor
            scores[:, :, i, j] = (qi * kj).sum(-1)
    scores = scores * (1 / math.sqrt(D) if scale is None else scale)
    rel = torch.arange(T)[None, :] - (torch.arange(S)[:, None] + past)  # key - query
    if slopes is not None:
        scores = scores - slopes.view(1, Hq, 1, 1) * (-rel if causal else rel.abs())
    if t5 is not None:
        buckets = posenc.t5_buckets(rel, t5.shape[0], t5_max_distance, not causal)
        scores = scores + t5[buckets].permute(2, 0, 1).unsqueeze(0)
    if bias is not None:
        scores = scores + bias
    visible = torch.ones(S, T, dtype=torch.bool)
    if causal:
        visible &= rel <= 0
    if window:
        visible &= -rel < window
    visible = visible.expand(B, 1, S, T)
    if padding is not None:
        visible = visible & padding.bool()[:, None, None, :]
    scores = scores.masked_fill(~visible, float("-inf"))
    return torch.einsum("bhst,bthd->bshd", scores.softmax(-1), v)


def inputs(B=2, S=9, T=13, Hq=4, Hk=2, D=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, S, Hq, D, generator=g), torch.randn(B, T, Hk, D, generator=g),
            torch.randn(B, T, Hk, D, generator=g))


def test_every_position_scheme_and_mask_equals_eager_attention():
    q, k, v = inputs()
    s = posenc.schedule(rope_type="yarn", head_dim=16, factor=4.0, original_max_position_embeddings=8)
    inv = s.inv_freq.double()
    slopes = posenc.alibi_slopes(4).double()
    table = torch.randn(32, 4, generator=torch.Generator().manual_seed(1))
    padding = torch.ones(2, 13, dtype=torch.bool)
    padding[0, :3] = False
    d = {k_: t.double() for k_, t in zip("qkv", (q, k, v))}
    for causal in (True, False):
        cases = [
            (dict(), dict()),
            (dict(rope=s), dict(inv_freq=inv, factor=s.attention_factor)),
            (dict(alibi=slopes), dict(slopes=slopes)),
            (dict(t5=table, scale=1.0), dict(t5=table.double(), scale=1.0)),
            (dict(rope=s, key_padding_mask=padding), dict(inv_freq=inv, factor=s.attention_factor, padding=padding)),
        ]
        if causal:  # a sliding window is causal (refused with causal=False)
            cases.append((dict(rope=s, window=4), dict(inv_freq=inv, factor=s.attention_factor, window=4)))
        for mine, theirs in cases:
            got = posenc.attention(q, k, v, causal=causal, **mine)
            want = eager(d["q"], d["k"], d["v"], causal=causal, **theirs)
            assert (got.double() - want).abs().max().item() <= 2e-5, (causal, list(mine))


def test_heads_first_layout_and_bf16():
    q, k, v = inputs()
    out = posenc.attention(q, k, v, alibi=posenc.alibi_slopes(4))
    heads_first = posenc.attention(q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous(),
                                   v.transpose(1, 2).contiguous(), alibi=posenc.alibi_slopes(4), heads_dim=1)
    assert torch.allclose(heads_first.transpose(1, 2), out, atol=1e-6)
    low = posenc.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), alibi=posenc.alibi_slopes(4))
    assert low.dtype == torch.bfloat16 and (low.float() - out).abs().max().item() <= 3e-2


def test_bf16_training_reads_its_inputs_in_f32_so_the_backward_matches_the_forward():
    # The backward recomputes scores in f32 from the forward's lse: with a gradient to take, the
    # forward is the f32 kernel on the bf16 values (on a CPU with AVX512-BF16, inference takes its
    # bf16 dot products instead, whose lse differs within their bound).
    torch.manual_seed(3)
    q, k, v = (torch.randn(1, 70, 4, 32).bfloat16() for _ in range(3))
    slopes = posenc.alibi_slopes(4)
    _, lse32 = posenc.attention(q.float(), k.float(), v.float(), alibi=slopes, return_lse=True)
    qg = q.clone().requires_grad_()
    out, lse = posenc.attention(qg, k, v, alibi=slopes, return_lse=True)
    assert torch.equal(lse, lse32)
    out.float().sum().backward()
    assert torch.isfinite(qg.grad).all()


def test_gradients_equal_autograd_through_eager_attention():
    q, k, v = inputs(S=7, T=11)
    s = posenc.schedule(head_dim=16)
    table = torch.randn(32, 4, generator=torch.Generator().manual_seed(2))
    for mine, theirs in ((dict(rope=s), dict(inv_freq=s.inv_freq.double())), (dict(t5=table), dict(t5=table))):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        t5 = mine.pop("t5", None)
        t5_leaf = t5.clone().requires_grad_() if t5 is not None else None
        out = posenc.attention(*leaves, t5=t5_leaf, **mine)
        weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
        (out * weights).sum().backward()
        ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
        ref_t5 = theirs.pop("t5", None)
        ref_t5 = ref_t5.double().requires_grad_() if ref_t5 is not None else None
        ref = eager(*ref_leaves, t5=ref_t5, **theirs)
        (ref * weights.double()).sum().backward()
        for mine_leaf, ref_leaf in zip(leaves + ([t5_leaf] if t5_leaf is not None else []),
                                       ref_leaves + ([ref_t5] if ref_t5 is not None else [])):
            assert (mine_leaf.grad.double() - ref_leaf.grad).abs().max().item() <= 1e-4


def self_extend(group, window):
    def distance(i, j):
        return i - j if i - j < window else i // group - j // group + window - window // group
    return distance


def dual_chunk(chunk_size, local_size):
    """vLLM's dual_chunk_rope.py: keys at j mod c; the query at i mod c in its own chunk, at
    min(i mod c + c, chunk_size) one chunk back, at min(2c - 1, chunk_size) further back."""
    c = chunk_size - local_size

    def distance(i, j):
        if j // c >= i // c:
            return i - j
        if j // c == i // c - 1:
            return min(i % c + c, chunk_size) - j % c
        return min(2 * c - 1, chunk_size) - j % c
    return distance


# Each remap with the distance it gives (query index i, key index j).
REMAP_CASES = [
    (posenc.SelfExtend(group=3, window=4), self_extend(3, 4)),
    (posenc.DualChunk(chunk_size=12, local_size=4), dual_chunk(12, 4)),  # c = 8: 4 chunks, clamped at 12
    (posenc.ReRoPE(window=5), lambda i, j: min(i - j, 5)),
    (posenc.ReRoPE(window=5, leak=2.5), lambda i, j: i - j if i - j < 5 else 5 + (i - j - 5) / 2.5),
]


@pytest.mark.parametrize("remap,distance", REMAP_CASES)
def test_remaps_equal_eager_attention_at_the_remapped_distance(remap, distance):
    q, k, v = inputs(S=12, T=30, seed=4)
    s = posenc.schedule(head_dim=16)
    got = posenc.attention(q, k, v, rope=s, remap=remap)
    want = eager(q.double(), k.double(), v.double(), inv_freq=s.inv_freq.double(), distance=distance)
    assert (got.double() - want).abs().max().item() <= 2e-5
    plain = posenc.attention(q, k, v, rope=s)
    assert (got - plain).abs().max().item() > 1e-3  # the remap changes what far keys contribute
    # The backward (the core's, under the remap) against autograd through the eager reference.
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    weights = torch.randn(got.shape, generator=torch.Generator().manual_seed(5))
    (posenc.attention(*leaves, rope=s, remap=remap) * weights).sum().backward()
    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    (eager(*ref_leaves, inv_freq=s.inv_freq.double(), distance=distance) * weights.double()).sum().backward()
    for mine, theirs in zip(leaves, ref_leaves):
        assert (mine.grad.double() - theirs.grad).abs().max().item() <= 1e-4


def test_bad_input_raises_with_the_value_named():
    q, k, v = inputs()
    with pytest.raises(ValueError, match="one of rope, alibi, t5 and bias"):
        posenc.attention(q, k, v, rope=posenc.schedule(head_dim=16), alibi=posenc.alibi_slopes(4))
    with pytest.raises(ValueError, match="needs rope="):
        posenc.attention(q, k, v, remap=posenc.ReRoPE(window=4))
    with pytest.raises(ValueError, match=r"t5 must be the bucket table \[num_buckets, Hq=4\]"):
        posenc.attention(q, k, v, t5=torch.zeros(32, 3))
    with pytest.raises(ValueError, match=r"key_padding_mask must be \[B, T\] = \[2, 13\]"):
        posenc.attention(q, k, v, key_padding_mask=torch.ones(2, 9))
    with pytest.raises(ValueError, match="one device, got k on cpu and q on meta"):
        posenc.attention(q.to("meta"), k, v)
    with pytest.raises(ValueError, match="heads"):  # Hq not a multiple of Hk: the core names it
        posenc.attention(q[:, :, :3], k, v)
    with pytest.raises(ValueError, match=r"SelfExtend.window must be an integer in \[0, 2147483647\], got int -1"):
        posenc.attention(q, k, v, rope=posenc.schedule(head_dim=16), remap=posenc.SelfExtend(group=2, window=-1))
    with pytest.raises(ValueError, match=r"DualChunk.chunk_size must be > local_size = 4 \(the chunk length"):
        posenc.attention(q, k, v, rope=posenc.schedule(head_dim=16), remap=posenc.DualChunk(chunk_size=4, local_size=4))
    with pytest.raises(ValueError, match=r"DualChunk.local_size must be an integer in \[1, 2147483646\], got int 0"):
        posenc.attention(q, k, v, rope=posenc.schedule(head_dim=16), remap=posenc.DualChunk(chunk_size=4, local_size=0))
    with pytest.raises(ValueError, match=r"alibi must be the 4 slopes of the query heads \(\[Hq\]\), got \[1\]"):
        posenc.attention(q, k, v, alibi=torch.tensor([0.5]))
    with pytest.raises(ValueError, match="key_padding_mask must be bool or integer 0/1"):
        posenc.attention(q, k, v, key_padding_mask=torch.zeros(2, 13))
    with pytest.raises(ValueError, match="values other than 0 and 1"):
        posenc.attention(q, k, v, key_padding_mask=torch.full((2, 13), 2))
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        posenc.attention(q, k, v, scale=0.0)
    with pytest.raises(ValueError, match="with causal=False it would be one-sided"):
        posenc.attention(q, k, v, causal=False, window=3)
    with pytest.raises(ValueError, match=r"kv_offset must be an integer in \[0, 2147483647\], got float 1.5"):
        posenc.attention(q, k, v, kv_offset=1.5)


def test_empty_inputs_give_empty_or_zero_outputs():
    q, k, v = inputs()
    assert posenc.attention(q[:, :0], k, v).shape == (2, 0, 4, 16)
    out, lse = posenc.attention(q, k[:, :0], v[:, :0], return_lse=True)
    assert torch.equal(out, torch.zeros_like(q)) and torch.isinf(lse).all()
