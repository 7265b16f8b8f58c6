"""torch.ops.posenc.rope and rope_qk (torch/include/posenc_torch/rope_op.h): the operators apply_rope
runs on the CPU, with the C++ torch layer's autograd; torch.jit.trace records them."""
import pathlib

import pytest
import torch

import posenc
from posenc import torch_ops

S = posenc.schedule(rope_type="yarn", head_dim=32, rope_theta=10000.0, factor=4.0, original_max_position_embeddings=64)


def formula(x, positions, sign=1.0):
    """The rotation written out in float64 (half_split pairs, the schedule's attention factor)."""
    inv = S.inv_freq.double()
    ang = positions.double()[..., None] * inv  # [B, S, F]
    c, s = ang.cos() * S.attention_factor, ang.sin() * S.attention_factor * sign
    c, s = c[:, :, None], s[:, :, None]  # over [B, S, H, D]
    half = inv.numel()
    a, b = x.double()[..., :half], x.double()[..., half:2 * half]
    return torch.cat((a * c - b * s, b * c + a * s, x.double()[..., 2 * half:]), -1)


def test_apply_rope_runs_the_operator_with_its_autograd():
    torch.manual_seed(0)
    q = torch.randn(2, 5, 4, 32, requires_grad=True)
    pos = torch.randint(0, 300, (2, 5))
    out = posenc.apply_rope(q, schedule=S, positions=pos)
    # heads_dim 2 passes the [B, H, S, D] transpose: the operator's node sits under it, a C++ one.
    assert type(out.grad_fn.next_functions[0][0]).__name__ == "CppFunction"
    direct = torch.ops.posenc.rope(q.detach().transpose(1, 2), pos, S.inv_freq.float(), [], S.attention_factor,
                                   "half_split", 0, 1).transpose(1, 2)
    assert torch.equal(out.detach(), direct)
    assert torch.allclose(out.double(), formula(q.detach(), pos), atol=1e-5)
    w = torch.randn_like(q)
    (g,) = torch.autograd.grad((out * w).sum(), q, create_graph=True)
    assert torch.allclose(g.double(), formula(w, pos, -1.0), atol=1e-5)  # R^T w
    # double backward: d/dw of sum(R^T w . v) is R v -- the operator differentiated again
    w.requires_grad_(True)
    (g,) = torch.autograd.grad((posenc.apply_rope(q, schedule=S, positions=pos) * w).sum(), q, create_graph=True)
    v = torch.randn_like(q)
    (gw,) = torch.autograd.grad((g * v).sum(), w)
    assert torch.allclose(gw.double(), formula(v, pos), atol=1e-5)


def test_rope_qk_is_two_ropes_forward_and_backward():
    torch.manual_seed(1)
    for dtype in (torch.float32, torch.bfloat16):
        q0, k0 = torch.randn(2, 6, 4, 32).to(dtype), torch.randn(2, 6, 2, 32).to(dtype)
        q1, k1 = q0.clone().requires_grad_(), k0.clone().requires_grad_()
        q2, k2 = q0.clone().requires_grad_(), k0.clone().requires_grad_()
        qo, ko = posenc.apply_rope(q1, k1, schedule=S, offset=7)  # one rope_qk call
        qr, kr = posenc.apply_rope(q2, schedule=S, offset=7), posenc.apply_rope(k2, schedule=S, offset=7)
        assert torch.equal(qo, qr) and torch.equal(ko, kr)
        (qo.float().square().sum() + ko.float().sum()).backward()
        (qr.float().square().sum() + kr.float().sum()).backward()
        assert torch.equal(q1.grad, q2.grad) and torch.equal(k1.grad, k2.grad)


def test_jit_trace_records_the_operator_and_replays_it():
    pos = torch.arange(6)[None].expand(2, 6)

    def f(q, positions):
        return posenc.apply_rope(q, schedule=S, positions=positions)

    with pytest.warns(torch.jit.TracerWarning):
        traced = torch.jit.trace(f, (torch.randn(2, 6, 4, 32), pos), check_trace=False)
    assert "posenc::rope" in [n.kind() for n in traced.graph.nodes()]
    q, other = torch.randn(2, 6, 4, 32), torch.randint(0, 1000, (2, 6))
    assert torch.equal(traced(q, other), f(q, other))  # the positions are the trace's input, not a constant


# posenc::Error from the operator arrives as posenc's own ValueError (the extension's translator).
def test_the_operator_refuses_what_its_kernels_cannot_take():
    x = torch.randn(1, 2, 3, 32)
    inv = S.inv_freq.float()
    with pytest.raises(ValueError, match="float64 takes the formula"):
        torch.ops.posenc.rope(x.double(), None, inv, [], 1.0, "half_split", 0, 1)
    with pytest.raises(ValueError, match="layout must be half_split, interleaved or deepseek_v3, got 'halves'"):
        torch.ops.posenc.rope(x, None, inv, [], 1.0, "halves", 0, 1)
    with pytest.raises(ValueError, match="positions must be \\[S\\], \\[B, S\\] or \\[axes, B, S\\]"):
        torch.ops.posenc.rope(x, torch.arange(5), inv, [], 1.0, "half_split", 0, 1)
    with pytest.raises(ValueError, match="gives no gradient to inv_freq"):
        torch.ops.posenc.rope(x, None, inv.clone().requires_grad_(), [], 1.0, "half_split", 0, 1)
    with pytest.raises(ValueError, match="direction must be 1 or -1, got 2"):
        torch.ops.posenc.rope(x, None, inv, [], 1.0, "half_split", 0, 2)
    # Another device takes the torch-native path (test_attention_op.py), which checks the same arguments.
    with pytest.raises(ValueError, match="direction must be 1 or -1, got 2"):
        torch.ops.posenc.rope(x.to("meta"), None, inv, [], 1.0, "half_split", 0, 2)


def test_a_missing_library_is_named(monkeypatch):
    monkeypatch.setattr(torch_ops, "_LIBRARY", pathlib.Path("/nonexistent/libposenc_torch_ops.so"))
    monkeypatch.setattr(torch_ops, "_loaded", False)
    monkeypatch.setattr(torch_ops, "_registered", lambda: False)  # as in a process where nothing loaded it
    with pytest.raises(RuntimeError, match="libposenc_torch_ops.so was not built"):
        torch_ops.ops()


def test_positions_changed_in_place_before_the_backward_are_an_error():
    q = torch.randn(1, 4, 2, 32, requires_grad=True)
    pos = torch.arange(4)[None]
    out = posenc.apply_rope(q, schedule=S, positions=pos.expand(1, 4).clone())
    out2 = torch.ops.posenc.rope(q.transpose(1, 2), pos, S.inv_freq.float(), [], 1.0, "half_split", 0, 1)
    pos.add_(100)  # the saved positions: the backward would rotate by other angles
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out2.sum().backward()
    out.sum().backward()  # apply_rope's own positions were not touched
    assert q.grad is not None


def test_empty_batches_and_empty_tensors_rotate_to_empty():
    q, pos = torch.randn(0, 5, 4, 32, requires_grad=True), torch.zeros(0, 5, dtype=torch.int64)
    out = posenc.apply_rope(q, schedule=S, positions=pos)
    assert out.shape == q.shape
    out.sum().backward()
    assert q.grad.shape == q.shape
    qo, ko = posenc.apply_rope(torch.randn(1, 5, 0, 32), torch.randn(1, 5, 2, 32), schedule=S)  # no query heads
    assert qo.shape == (1, 5, 0, 32) and ko.shape == (1, 5, 2, 32)


# A q sliced out of a fused [B, S, 3, H, D] projection is strided, not dense: the result is a
# plain [B, S, H, D] tensor as before (it came back head-major, and .view(B, S, H * D) failed).
def test_a_strided_slice_comes_back_in_its_own_layout():
    qkv = torch.randn(2, 5, 3, 4, 32)
    q = qkv[:, :, 0]
    out = posenc.apply_rope(q, schedule=S)
    assert out.is_contiguous()
    assert torch.equal(out.view(2, 5, 128), posenc.apply_rope(q.contiguous(), schedule=S).view(2, 5, 128))


# The C++ layer's copy of the library loaded first (an extension built on posenc::torch): posenc
# uses its operators instead of registering the namespace again, which would abort the process.
def test_a_second_copy_of_the_library_is_not_registered_again():
    import subprocess
    import sys
    other = pathlib.Path(torch_ops._LIBRARY).resolve().parent.parent.parent / "torch" / "libposenc_torch_ops.so"
    if not other.exists():
        pytest.skip("no C++ layer build beside this package (an installed package)")
    code = ("import torch; torch.ops.load_library(%r); import posenc; "
            "s = posenc.schedule(head_dim=32); print(posenc.apply_rope(torch.ones(1, 2, 1, 32), schedule=s).sum().item())"
            % str(other))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
