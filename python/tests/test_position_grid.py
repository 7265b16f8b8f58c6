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


def _hf_idefics3_position_ids(num_patches_per_side, nb_h, nb_w, dtype):
    """Idefics3VisionEmbeddings.forward's position ids (modeling_idefics3.py, transformers v5.0.0 ..
    c49429ed), transcribed for one image with a full patch mask: torch's own arange, division,
    clamp, cast and bucketize on the CPU."""
    patch_attention_mask = torch.ones(1, nb_h, nb_w, dtype=torch.bool)
    pixel_dtype = dtype
    boundaries = torch.arange(1 / num_patches_per_side, 1.0, 1 / num_patches_per_side)
    nb_patches_h = patch_attention_mask[:, :, 0].sum(dim=1)
    nb_patches_w = patch_attention_mask[:, 0, :].sum(dim=1)
    step_h = 1.0 / nb_patches_h
    step_w = 1.0 / nb_patches_w
    h_indices = torch.arange(patch_attention_mask.size(1), dtype=torch.float32)
    w_indices = torch.arange(patch_attention_mask.size(2), dtype=torch.float32)
    fractional_coords_h = torch.clamp(h_indices[None, :] * step_h[:, None], max=(1.0 - 1e-6)).to(pixel_dtype)
    fractional_coords_w = torch.clamp(w_indices[None, :] * step_w[:, None], max=(1.0 - 1e-6)).to(pixel_dtype)
    bucket_coords_h = torch.bucketize(fractional_coords_h, boundaries, right=True)
    bucket_coords_w = torch.bucketize(fractional_coords_w, boundaries, right=True)
    pos_ids = bucket_coords_h[:, :, None] * num_patches_per_side + bucket_coords_w[:, None, :]
    return pos_ids.reshape(-1)


def test_idefics3_bucket_ids_are_hfs_in_every_pixel_dtype():
    # Idefics3-8B 364/14 = 26, SmolVLM 512/16 = 32, SmolVLM2 384/14 = 27, Idefics2 980/14 = 70, and odd sides.
    differ = 0
    for n in (26, 32, 27, 70, 19, 33, 49):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            for nb in list(range(1, n + 1)) + [n + 3]:
                got = posenc.bucket_position_ids(n, nb, max(1, nb - 1), dtype=dtype)
                want = _hf_idefics3_position_ids(n, nb, max(1, nb - 1), dtype)
                assert torch.equal(got, want), (n, nb, dtype)
            full = posenc.bucket_position_ids(n, n, n, dtype=dtype)
            differ += int(not torch.equal(full, torch.arange(n * n)))
    # the pixels' dtype matters: at Idefics3's 26 a full bfloat16 image does not read rows 0..25
    rows = posenc.bucket_position_ids(26, 26, 1, dtype=torch.bfloat16) // 26
    assert rows[:6].tolist() == [0, 1, 2, 2, 4, 5]
    assert torch.equal(posenc.bucket_position_ids(26, 26, 1) // 26, torch.arange(26))
    assert differ > 0


def test_bucket_resize_copies_the_bucketed_rows():
    table = torch.randn(26, 26, 8, generator=torch.Generator().manual_seed(3))
    for mode, dtype in (("bucket", torch.float32), ("bucket_bf16", torch.bfloat16), ("bucket_f16", torch.float16)):
        got = posenc.resize_position_grid(table, (13, 17), mode)
        ids = posenc.bucket_position_ids(26, 13, 17, dtype=dtype)
        assert torch.equal(got.reshape(-1, 8), table.reshape(-1, 8)[ids]), mode
    with pytest.raises(ValueError, match="dtype must be"):
        posenc.bucket_position_ids(26, 2, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="rows must be an int in"):
        posenc.bucket_position_ids(26, 0, 2)


def _hf_glm4v_adapted(table, h, w):
    """Glm4vVisionEmbeddings.forward's adapted position embedding for one h x w image (modeling_glm4v.py,
    transformers c49429ed), transcribed: the table [S*S, C] as [1, C, S, S] in float32, the grid
    ((coord + 0.5) / size) * 2 - 1 in float32, F.grid_sample bicubic, border, align_corners=False."""
    import torch.nn.functional as F
    s = int(table.shape[0] ** 0.5)
    pos_embed_2d = table.view(s, s, -1).permute(2, 0, 1).unsqueeze(0).to(torch.float32)
    hh, ww = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    h_coords, w_coords = hh.flatten(), ww.flatten()
    target_h = torch.full((h * w,), h, dtype=torch.float32)
    target_w = torch.full((h * w,), w, dtype=torch.float32)
    norm_w = ((w_coords + 0.5) / target_w) * 2 - 1
    norm_h = ((h_coords + 0.5) / target_h) * 2 - 1
    grid = torch.stack((norm_w, norm_h), dim=-1).unsqueeze(0).unsqueeze(2)
    out = F.grid_sample(pos_embed_2d, grid, mode="bicubic", align_corners=False, padding_mode="border")
    return out.squeeze(0).squeeze(-1).permute(1, 0).reshape(h, w, -1)


def test_glm4v_grid_sample_is_hfs_and_bicubic_to_float_rounding():
    table = torch.randn(24 * 24, 16, generator=torch.Generator().manual_seed(5))  # GLM-4.1V: 336 / 14 = 24 per side
    for h, w in ((24, 24), (36, 52), (10, 8), (98, 14), (1, 3)):
        got = posenc.resize_position_grid(table.view(24, 24, 16), (h, w), "grid_sample_bicubic")
        assert (got - _hf_glm4v_adapted(table, h, w)).abs().max() <= 1e-5, (h, w)
        bicubic = posenc.resize_position_grid(table.view(24, 24, 16), (h, w), "bicubic")
        assert (got - bicubic).abs().max() <= 1e-5, (h, w)
