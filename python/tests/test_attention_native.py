"""posenc.attention's torch-native path (any device; forced here on the CPU with backend="torch")
against the fused kernel: the same values and gradients for every positional scheme, mask,
layout and remap, so a model on a GPU trains with posenc's exact positions."""
import pytest
import torch

import posenc
from test_attention import REMAP_CASES, eager, inputs


def both(q, k, v, leaves_grad=True, **kw):
    """(kernel out, lse, grads), (native out, lse, grads) for the same call; grads of q, k, v and
    of any tensor or module parameters in kw ('t5', 'bias')."""
    results = []
    w = None
    for backend in ("kernels", "torch"):
        leaves = [t.clone().requires_grad_(leaves_grad) for t in (q, k, v)]
        extra = {}
        params = []
        for name, value in kw.items():
            if isinstance(value, torch.Tensor) and value.is_floating_point() and name in ("t5",):
                value = value.clone().requires_grad_()
                params.append(value)
            extra[name] = value
        if isinstance(kw.get("bias"), torch.nn.Module):
            kw["bias"].zero_grad()
            params += list(kw["bias"].parameters())
        out, lse = posenc.attention(*leaves, backend=backend, return_lse=True, **extra)
        grads = []
        if leaves_grad:
            if w is None:
                w = torch.randn(out.shape, generator=torch.Generator().manual_seed(11))
            (out.float() * w).sum().backward()
            grads = [t.grad.clone() for t in leaves] + [p.grad.clone() for p in params]
        results.append((out, lse, grads))
    return results


def close(a, b, tol):
    return (a.double() - b.double()).abs().max().item() <= tol * max(1.0, b.double().abs().max().item())


SCHEMES = {
    "none": lambda: dict(),
    "rope": lambda: dict(rope=posenc.schedule(rope_type="yarn", head_dim=16, factor=4.0,
                                              original_max_position_embeddings=8)),
    "rope-interleaved": lambda: dict(rope=posenc.schedule(head_dim=16), rope_layout="interleaved"),
    "alibi": lambda: dict(alibi=posenc.alibi_slopes(4)),
    "t5": lambda: dict(t5=torch.randn(32, 4, generator=torch.Generator().manual_seed(1)), scale=1.0, t5_max_distance=20),
    "kerple": lambda: dict(bias=posenc.nn.Kerple(4, "log")),
    "sandwich": lambda: dict(bias=posenc.nn.Sandwich(4, 16)),
    "dpb": lambda: dict(bias=posenc.nn.DynamicPositionBias(8, 4)),  # a signed table: non-causal reads both sides
}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("causal", [True, False])
def test_the_native_path_equals_the_kernel_values_and_gradients(scheme, causal):
    q, k, v = inputs(S=7, T=11)
    padding = torch.ones(2, 11, dtype=torch.bool)
    padding[1, :4] = False
    (ko, kl, kg), (no, nl, ng) = both(q, k, v, causal=causal, kv_offset=5, key_padding_mask=padding, **SCHEMES[scheme]())
    assert close(no, ko, 2e-5) and close(nl, kl, 2e-5), scheme
    assert len(kg) == len(ng) >= 3
    for a, b in zip(ng, kg):
        assert close(a, b, 1e-4), scheme


def test_fox_gates_window_chunk_gqa_and_heads_first():
    torch.manual_seed(2)
    gate = posenc.nn.ForgettingGate(8, 4)
    x = torch.randn(2, 11, 8)
    q, k, v = inputs(S=11, T=11)
    (ko, kl, _), (no, nl, _) = both(q, k, v, leaves_grad=False, bias=gate.cumulative(x).detach())
    assert close(no, ko, 2e-5) and close(nl, kl, 2e-5)
    for masks in (dict(window=3), dict(chunk=4), dict(window=5, chunk=6)):
        (ko, kl, kg), (no, nl, ng) = both(q, k, v, alibi=posenc.alibi_slopes(4), **masks)
        assert close(no, ko, 2e-5) and close(nl, kl, 2e-5) and all(close(a, b, 1e-4) for a, b in zip(ng, kg)), masks
    first = [t.transpose(1, 2).contiguous() for t in (q, k, v)]
    (ko, _, _), (no, _, _) = both(*first, leaves_grad=False, heads_dim=1, rope=posenc.schedule(head_dim=16))
    assert close(no, ko, 2e-5)


def test_a_query_that_sees_no_key_gets_zeros_and_minus_infinity():
    q, k, v = inputs(S=3, T=3)
    padding = torch.zeros(2, 3, dtype=torch.bool)
    padding[0] = True
    out, lse = posenc.attention(q, k, v, key_padding_mask=padding, backend="torch", return_lse=True)
    assert torch.equal(out[1], torch.zeros_like(out[1])) and torch.isinf(lse[1]).all()
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("remap,distance", REMAP_CASES)
def test_remaps_on_the_native_path_equal_eager_attention_and_have_a_gradient(remap, distance):
    q, k, v = inputs(S=12, T=30, seed=4)
    s = posenc.schedule(head_dim=16)
    got = posenc.attention(q, k, v, rope=s, remap=remap, backend="torch")
    kernel = posenc.attention(q, k, v, rope=s, remap=remap)
    want = eager(q.double(), k.double(), v.double(), inv_freq=s.inv_freq.double(), distance=distance)
    assert close(got, want, 2e-5) and close(got, kernel, 2e-5)
    # float64 on the native path: a gradient check in double, at a size gradcheck affords
    small_q, small_k, small_v = (t.double() for t in inputs(B=1, S=4, T=12, Hq=2, Hk=1, D=8, seed=5))
    small = posenc.schedule(head_dim=8)
    assert torch.autograd.gradcheck(lambda x: posenc.attention(x, small_k, small_v, rope=small, remap=remap,
                                                               backend="torch"), (small_q.requires_grad_(),))


def test_float64_gradcheck_of_the_native_path():
    q, k, v = (t.double().requires_grad_() for t in inputs(B=1, S=4, T=6, Hq=2, Hk=1, D=8))
    s = posenc.schedule(head_dim=8)
    assert torch.autograd.gradcheck(lambda a, b, c: posenc.attention(a, b, c, rope=s, backend="torch"), (q, k, v))
    table = torch.randn(32, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: posenc.attention(q, k, v, t5=t, backend="torch"), (table,))


def test_backend_is_checked_and_the_kernel_refuses_float64():
    q, k, v = inputs()
    with pytest.raises(ValueError, match="backend"):
        posenc.attention(q, k, v, backend="cuda")
    with pytest.raises(ValueError, match="float64 with backend='torch'"):
        posenc.attention(q.double(), k.double(), v.double(), backend="kernels")
    with pytest.raises(ValueError, match="one device"):
        posenc.attention(q, k.to("meta"), v, backend="torch")
