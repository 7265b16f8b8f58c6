"""Learned position grids resized to the image (position_grid.h) against torch's own
F.interpolate, which is what the HF code of each tower calls: bicubic (ViTEmbeddings.
interpolate_pos_encoding) and bilinear with antialias (Siglip2VisionEmbeddings.
resize_positional_embeddings), both align_corners=False."""
import pytest
import torch
import torch.nn.functional as F

import posenc


def _torch_resize(table, size, mode):
    x = table.permute(2, 0, 1).unsqueeze(0)  # [1, dim, rows, cols], as HF permutes it
    if mode == "bicubic":
        y = F.interpolate(x, size=size, mode="bicubic", align_corners=False)
    else:
        y = F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)
    return y[0].permute(1, 2, 0)


@pytest.mark.parametrize("mode", ["bicubic", "bilinear_antialias"])
@pytest.mark.parametrize("grid, size", [((16, 16), (24, 37)), ((16, 16), (5, 9)), ((14, 14), (14, 14)),
                                        ((7, 5), (1, 13)), ((1, 1), (3, 2)), ((16, 16), (64, 3))])
def test_resize_is_torchs_interpolate(mode, grid, size):
    table = torch.randn(*grid, 8, generator=torch.Generator().manual_seed(sum(grid) + sum(size)), dtype=torch.float64)
    want = _torch_resize(table, size, mode)  # float64: torch's own kernel, exact to double
    got = posenc.resize_position_grid(table.float(), size, mode)
    assert got.shape == (size[0], size[1], 8) and got.dtype == torch.float32
    # posenc rounds once to float32 from a float32 table: a few float32 ulps of values ~1
    assert (got.double() - _torch_resize(table.float().double(), size, mode)).abs().max() <= 2e-6
    assert (got.double() - want).abs().max() <= 1e-5


def test_siglip2_shape_and_dtype_path():
    # SigLIP2 NaFlex: a 16 x 16 table resized to each image's patch grid, in float32 on the CPU.
    table = torch.randn(16, 16, 32, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    got = posenc.resize_position_grid(table, (12, 20), "bilinear_antialias")
    exact = _torch_resize(table.double(), (12, 20), "bilinear_antialias")
    assert (got.double() - exact).abs().max() <= 5e-7  # one float32 rounding of values up to ~4
    # HF's own float32 kernel accumulates its roundings: a few ulps from the exact value
    assert (got - _torch_resize(table.float(), (12, 20), "bilinear_antialias")).abs().max() <= 1e-5


def test_bad_arguments_are_value_errors():
    t = torch.zeros(4, 4, 2)
    for kw, says in ((dict(mode="nearest"), "mode must be one of"), (dict(size=(0, 3)), "in \\[1, 65536\\]"),
                     (dict(size=(2,)), "size must be"), (dict(size=(2.0, 3)), "size must be")):
        args = dict(table=t, size=(3, 3), mode="bicubic")
        args.update(kw)
        with pytest.raises(ValueError, match=says):
            posenc.resize_position_grid(**args)
    with pytest.raises(ValueError, match="rows, cols, dim"):
        posenc.resize_position_grid(torch.zeros(4, 4), (2, 2))
    with pytest.raises(ValueError, match="floating-point"):
        posenc.resize_position_grid(torch.zeros(4, 4, 2, dtype=torch.int64), (2, 2))
    with pytest.raises(ValueError, match="without gradients"):
        posenc.resize_position_grid(torch.zeros(4, 4, 2, requires_grad=True), (2, 2))
    with pytest.raises(ValueError, match="expected finite values"):
        posenc.resize_position_grid(torch.full((2, 2, 1), float("nan")), (3, 3))
