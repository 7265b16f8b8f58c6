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


def test_hostile_keywords_are_errors_naming_them():
    q = torch.randn(1, 4, 2, 8)
    with pytest.raises(ValueError, match="keyword 'offset' cannot be read from 18446744073709551616"):
        _posenc.rope_rotate(**rotate_keywords(q, offset=2**64))
    axial = to_dlpack(torch.zeros(3, 1, 4, dtype=torch.int64))  # [axes, B, S] with a plain schedule
    with pytest.raises(ValueError, match="3 position axes, but the schedule has no M-RoPE axis map"):
        _posenc.rope_rotate(**rotate_keywords(q, positions=axial))


def test_a_written_tensor_whose_elements_alias_is_refused():
    expanded = torch.zeros(1, 1, 2, 8).expand(1, 4, 2, 8)  # 4 tokens sharing one row
    with pytest.raises(ValueError, match="data is written, but its elements share memory .* dimension 1 steps 0 elements"):
        _posenc.rope_rotate(**rotate_keywords(torch.zeros(1, 4, 2, 8), data=to_dlpack(expanded)))
    overlapping = torch.zeros(64).as_strided((1, 4, 2, 8), (0, 8, 4, 1))  # each head's 8 channels overlap the next's
    with pytest.raises(ValueError, match="dimension 2 steps 4 elements, inside the 8 of the dimensions before it"):
        _posenc.rope_rotate(**rotate_keywords(torch.zeros(1, 4, 2, 8), data=to_dlpack(overlapping)))
    heads_first = torch.zeros(1, 2, 4, 8).transpose(1, 2)  # [B, H, S, D] memory seen as [B, S, H, D]: its own elements
    _posenc.rope_rotate(**rotate_keywords(heads_first, data=to_dlpack(heads_first)))
