"""The private _posenc entry points take tensors, not addresses (issue 33, python-123): each
tensor crosses as a DLPack capsule whose address, shape and strides are torch's own, and every
buffer is checked against the views it goes with. A wrong argument is a ValueError naming it,
never a write through a bad pointer (which used to end the interpreter with SIGSEGV)."""
import subprocess
import sys

import pytest
import torch
from torch.utils.dlpack import to_dlpack

import posenc
from posenc import _posenc
from posenc.rope import _view


def rotate_keywords(x, **changes):
    kw = dict(_view(x, posenc.schedule(head_dim=x.shape[-1]), "half_split", 2), positions=None, offset=0, direction=1)
    kw.update(changes)
    return kw


def test_an_integer_where_a_tensor_goes_is_refused_in_a_live_interpreter():
    # Run apart: before the fix this call wrote through address 4096 and killed the interpreter.
    code = ("import posenc, torch\nfrom posenc import _posenc\nfrom posenc.rope import _view\n"
            "kw = dict(_view(torch.zeros(1, 4, 2, 8), posenc.schedule(head_dim=8), 'half_split', 2), positions=None,"
            " offset=0, direction=1)\nkw['data'] = 4096\n"
            "try:\n    _posenc.rope_rotate(**kw)\nexcept ValueError as e:\n    print('refused:', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "refused: data: expected an unconsumed DLPack capsule" in run.stdout
    assert "got int" in run.stdout


def test_positions_of_another_shape_or_type_are_refused_by_the_extension_itself():
    x = torch.zeros(2, 4, 2, 8)
    with pytest.raises(ValueError, match=r"positions must be contiguous \[S\], \[B, S\] or \[axes, B, S\] with B = 2, "
                                         r"S = 4, axes 1 to 3; got \[3\]"):
        _posenc.rope_rotate(**rotate_keywords(x, positions=to_dlpack(torch.zeros(3, dtype=torch.int64))))
    with pytest.raises(ValueError, match="positions must be int32 or int64, got float32"):
        _posenc.rope_rotate(**rotate_keywords(x, positions=to_dlpack(torch.zeros(4))))
    with pytest.raises(ValueError, match=r"got \[2, 4\]"):  # [B, S] but strided (a transposed view)
        _posenc.rope_rotate(**rotate_keywords(x, positions=to_dlpack(torch.zeros(4, 2, dtype=torch.int64).t())))
    ids = torch.arange(4, dtype=torch.int32)
    _posenc.rope_rotate(**rotate_keywords(x, positions=to_dlpack(ids)))  # [S] shared by the batch: taken


def test_a_consumed_capsule_or_an_unsupported_tensor_is_refused():
    x = torch.zeros(1, 4, 2, 8)
    capsule = to_dlpack(x)
    torch.utils.dlpack.from_dlpack(capsule)  # consumes it: torch now owns the memory
    with pytest.raises(ValueError, match="data: expected an unconsumed DLPack capsule"):
        _posenc.rope_rotate(**rotate_keywords(x, data=capsule))
    with pytest.raises(ValueError, match=r"data: expected a 4-D tensor, got \[4, 16\]"):
        _posenc.rope_rotate(**rotate_keywords(x, data=to_dlpack(torch.zeros(4, 16))))
    with pytest.raises(ValueError, match="data: expected float32, bfloat16 or float16, got int32"):
        _posenc.rope_rotate(**rotate_keywords(x, data=to_dlpack(torch.zeros(1, 4, 2, 8, dtype=torch.int32))))
    with pytest.raises(ValueError, match="heads_dim must be 1 or 2, got 3"):
        _posenc.rope_rotate(**rotate_keywords(x, heads_dim=3))


def attention_call(q, **param_changes):
    params = dict(scale=0.0, causal=True, past=-1, window=0, chunk=0, positions="none", q_offset=0, k_offset=0,
                  key_padding=None, remap="none", remap_window=0, remap_group=1, remap_leak=0.0, remap_chunk_size=0,
                  remap_local_size=0)
    params.update(param_changes)
    return params


def test_attention_buffers_are_checked_against_the_views():
    q = torch.randn(1, 4, 2, 8)
    out = torch.empty_like(q)
    views = [to_dlpack(t) for t in (q, q, q, out)]
    small_lse = torch.empty(1, 2, 3)
    with pytest.raises(ValueError, match=r"lse: expected a contiguous float32 \[1, 2, 4\] tensor, got float32 \[1, 2, 3\]"):
        _posenc.attention(*views, 2, attention_call(q), to_dlpack(small_lse), 1, False)
    mask = torch.ones(1, 3, dtype=torch.uint8)  # [B, T] with T = 4 expected
    with pytest.raises(ValueError, match=r"key_padding: expected a contiguous uint8 \[1, 4\] tensor"):
        _posenc.attention(*views, 2, attention_call(q, key_padding=to_dlpack(mask)), None, 1, False)
    table = torch.zeros(8, 2)  # 8 buckets given, 32 claimed
    t5 = dict(positions="t5", t5_table=to_dlpack(table), t5_num_buckets=32, t5_max_distance=128, t5_bidirectional=False)
    with pytest.raises(ValueError, match=r"t5_table: expected a contiguous float32 \[32, 2\] tensor, got float32 \[8, 2\]"):
        _posenc.attention(*views, 2, attention_call(q, **t5), None, 1, False)
    with pytest.raises(ValueError, match="key_padding: expected an unconsumed DLPack capsule"):
        _posenc.attention(*views, 2, attention_call(q, key_padding=12345), None, 1, False)
    _posenc.attention(*views, 2, attention_call(q), to_dlpack(torch.empty(1, 2, 4)), 1, False)  # the right sizes
    assert torch.isfinite(out).all()


def test_the_backward_checks_its_bias_gradient_buffer():
    q = torch.randn(1, 4, 2, 8)
    f = [to_dlpack(torch.randn(1, 4, 2, 8)) for _ in range(5)]
    views = dict(zip(("q", "k", "v", "out", "dout"), f))
    grads = {name: to_dlpack(torch.zeros(1, 4, 2, 8)) for name in ("dq", "dk", "dv")}
    lse = to_dlpack(torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="a bias_grad without a bias input"):
        _posenc.attention_backward(views, 2, lse, grads, to_dlpack(torch.zeros(4)), attention_call(q), 1)
    table = to_dlpack(torch.zeros(2, 8))
    kerple = dict(positions="distance-table", distance_table=table, distance_length=8, distance_side="absolute")
    with pytest.raises(ValueError, match=r"bias_grad: expected a contiguous float32 \[2, 8\] tensor"):
        _posenc.attention_backward(views, 2, lse, grads, to_dlpack(torch.zeros(2, 7)), attention_call(q, **kerple), 1)


def test_hostile_keywords_are_errors_naming_them():
    q = torch.randn(1, 4, 2, 8)
    views = [to_dlpack(t) for t in (q, q, q, torch.empty_like(q))]
    with pytest.raises(ValueError, match="alibi_slopes: 1 slopes for 2 query heads"):  # read past the end before
        _posenc.attention(*views, 2, attention_call(q, positions="alibi", alibi_slopes=[0.5], alibi_symmetric=False),
                          None, 1, False)
    with pytest.raises(ValueError, match="key 'window' cannot be read from 'big'"):
        _posenc.attention(*views, 2, attention_call(q, window="big"), None, 1, False)
    with pytest.raises(ValueError, match="keyword 'offset' cannot be read from 18446744073709551616"):
        _posenc.rope_rotate(**rotate_keywords(q, offset=2**64))
    axial = to_dlpack(torch.zeros(3, 1, 4, dtype=torch.int64))  # [axes, B, S] with a plain schedule
    with pytest.raises(ValueError, match="3 position axes, but the schedule has no M-RoPE axis map"):
        _posenc.rope_rotate(**rotate_keywords(q, positions=axial))
    big = dict(positions="distance-table", distance_table=to_dlpack(torch.zeros(2, 3)), distance_length=2**62,
               distance_side="signed")
    with pytest.raises(ValueError, match=r"distance_length must be in \[1, 2\^31\], got 4611686018427387904"):
        _posenc.attention(*views, 2, attention_call(q, **big), None, 1, False)


def test_a_written_tensor_whose_elements_alias_is_refused():
    expanded = torch.zeros(1, 1, 2, 8).expand(1, 4, 2, 8)  # 4 tokens sharing one row
    with pytest.raises(ValueError, match="data is written, but its elements share memory .* dimension 1 steps 0 elements"):
        _posenc.rope_rotate(**rotate_keywords(torch.zeros(1, 4, 2, 8), data=to_dlpack(expanded)))
    overlapping = torch.zeros(64).as_strided((1, 4, 2, 8), (0, 8, 4, 1))  # each head's 8 channels overlap the next's
    with pytest.raises(ValueError, match="dimension 2 steps 4 elements, inside the 8 of the dimensions before it"):
        _posenc.rope_rotate(**rotate_keywords(torch.zeros(1, 4, 2, 8), data=to_dlpack(overlapping)))
    heads_first = torch.zeros(1, 2, 4, 8).transpose(1, 2)  # [B, H, S, D] memory seen as [B, S, H, D]: its own elements
    _posenc.rope_rotate(**rotate_keywords(heads_first, data=to_dlpack(heads_first)))
    q = torch.randn(1, 4, 2, 8)
    views = [to_dlpack(t) for t in (q, q, q)] + [to_dlpack(expanded)]
    with pytest.raises(ValueError, match="out is written, but its elements share memory"):
        _posenc.attention(*views, 2, attention_call(q), None, 1, False)
    q_read = torch.randn(1, 1, 2, 8).expand(1, 4, 2, 8)  # an expanded input is only read: taken
    out = torch.empty(1, 4, 2, 8)
    _posenc.attention(*(to_dlpack(t) for t in (q_read, q_read, q_read, out)), 2, attention_call(q), None, 1, False)
