"""The 2-D RoPE of the vision towers from the core (vision_rope.h; mrope.h's vision_2d_position_ids),
in Python: Qwen2-VL's schedule, its ids, and apply_rope over [2, S] positions against HF's formula
written out in float64 (VisionRotaryEmbedding, rotate_half over the head); then Pixtral, Llama 4
and MoonViT against their own constructions."""
import math

import pytest
import torch

import posenc


def test_the_schedule_is_hfs_quarter_frequencies_on_each_axis():
    s = posenc.vision_2d_schedule(16, theta=10000.0)
    quarter = [1 / 10000.0 ** (2 * k / 8) for k in range(4)]  # HF: dim = head_dim / 2, 1 / theta^(2k / dim)
    assert torch.allclose(s.inv_freq.double(), torch.tensor(quarter * 2, dtype=torch.float64), rtol=1e-7)
    assert s.axis_of_freq == [0, 0, 0, 0, 1, 1, 1, 1]


def test_ids_are_block_major_rows_and_columns():
    ids = posenc.vision_2d_position_ids(1, 4, 4, 2)
    assert ids.shape == (2, 16)
    assert ids[:, :4].tolist() == [[0, 0, 1, 1], [0, 1, 0, 1]]  # the first 2 x 2 merge block
    assert ids[:, 4:8].tolist() == [[0, 0, 1, 1], [2, 3, 2, 3]]  # the block to its right
    assert torch.equal(posenc.vision_2d_position_ids(2, 4, 4, 2)[:, 16:], ids)  # frames repeat the grid


def test_apply_rope_with_row_and_column_positions_is_hfs_rotation():
    d, s_len = 16, 16
    sched = posenc.vision_2d_schedule(d)
    ids = posenc.vision_2d_position_ids(1, 4, 4, 2)  # [2, S]
    x = torch.randn(1, s_len, 2, d, generator=torch.Generator().manual_seed(1))
    got = posenc.apply_rope(x, schedule=sched, positions=ids.unsqueeze(1))  # [2, B = 1, S]
    freqs = torch.cat([ids[0, :, None] * sched.inv_freq[:4].double(), ids[1, :, None] * sched.inv_freq[4:].double()], -1)
    emb = torch.cat([freqs, freqs], -1)[None, :, None, :]  # HF: cat(freqs, freqs), rotate_half
    xd = x.double()
    want = xd * emb.cos() + torch.cat([-xd[..., d // 2:], xd[..., :d // 2]], -1) * emb.sin()
    assert (got.double() - want).abs().max() <= 2e-6
    # q.k depends on the row and column offsets only.
    q, k = torch.randn(1, 1, 1, d), torch.randn(1, 1, 1, d)
    def score(qrc, krc):
        a = posenc.apply_rope(q, schedule=sched, positions=torch.tensor(qrc).view(2, 1, 1))
        b = posenc.apply_rope(k, schedule=sched, positions=torch.tensor(krc).view(2, 1, 1))
        return (a * b).sum().item()
    assert math.isclose(score([5, 2], [1, 7]), score([8, 7], [4, 12]), abs_tol=1e-5)


def test_bad_arguments_are_value_errors_naming_them():
    for kw, says in ((dict(head_dim=6), "divisible by 4"), (dict(head_dim=True), "head_dim must be an int"),
                     (dict(head_dim=8, theta=float("nan")), "theta must be a finite number > 0"),
                     (dict(head_dim=8, theta=-1.0), "theta must be a finite number > 0")):
        with pytest.raises(ValueError, match=says):
            posenc.vision_2d_schedule(**kw)
    with pytest.raises(ValueError, match="divisible by merge_size 2"):
        posenc.vision_2d_position_ids(1, 3, 4, 2)
    with pytest.raises(ValueError, match="at most 2\\^26"):
        posenc.vision_2d_position_ids(1024, 1024, 1024, 1)
    with pytest.raises(ValueError, match=r"t must be an int in \[1, 2\^31-1\], got 4294967296"):
        posenc.vision_2d_position_ids(2**32, 2, 2, 1)


def test_hunyuan_vl_text_positions_rotate_and_its_four_axes_are_refused_with_the_reason():
    """HunYuan-VL's XD-RoPE (mrope.h xdrope_column_axes) pairs channels that can read two position
    axes: the schedule has no per-frequency axis map, text positions rotate as 1-D RoPE (every axis
    equal), and [4, B, S] positions raise a ValueError that says why (not the M-RoPE message)."""
    from conftest import REFERENCE
    sched = posenc.schedule(str(REFERENCE / "configs-extra" / "HunyuanOCR__constructed.json"))
    assert sched.axis_of_freq == [] and sched.params["mrope_xdrope"] is True
    base = 1e4 * 1000.0 ** (128 / 126)  # NTK-alpha
    assert math.isclose(float(sched.inv_freq[1]), base ** (-1 / 64), rel_tol=1e-6)
    q = torch.randn(1, 5, 2, 128)
    out = posenc.apply_rope(q, schedule=sched, positions=torch.arange(5))
    angles = torch.arange(5, dtype=torch.float64)[:, None] * sched.inv_freq.double()[None, :]  # [S, 64]
    cos, sin = torch.cat((angles, angles), -1).cos()[None, :, None], torch.cat((angles, angles), -1).sin()[None, :, None]
    half = torch.cat((-q[..., 64:], q[..., :64]), -1).double()
    assert torch.allclose(out.double(), q.double() * cos + half * sin, rtol=0, atol=1e-5)  # 1-D RoPE, rotate_half
    with pytest.raises(ValueError, match="XD-RoPE"):
        posenc.apply_rope(q, schedule=sched, positions=torch.arange(5).repeat(4, 1, 1))


def test_qwen_omni_position_ids_count_audio_and_time_align_video():
    """Qwen2.5-Omni's get_rope_index (rule "v4.49", 25 ids per second): the same hand-worked
    sequence as the C++ test, through Python's keywords; audio token counts as HF's formulas."""
    runs = [("text", 2, 1, 1, 1), ("image", 0, 1, 4, 4), ("text", 2, 1, 1, 1), ("audio", 3, 1, 1, 1),
            ("text", 1, 1, 1, 1), ("video", 0, 2, 4, 4), ("text", 1, 1, 1, 1)]
    ids, delta = posenc.mrope_position_ids(runs, 2, rule="v4.49", time_interval=25, video_seconds_per_grid=[0.5])
    assert ids[0].tolist() == [0, 1, 2, 2, 2, 2, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10, 22, 22, 22, 22, 23]
    assert delta == 3
    assert posenc.qwen_omni_audio_tokens(100) == 25 and posenc.qwen_omni_audio_tokens(150, qwen3=True) == 20
    # HF's float32 product, against torch itself: at 0.04 s per grid frame 5 reads 4.
    frames, _ = posenc.mrope_position_ids([("video", 0, 6, 2, 2)], 2, rule="v4.49", time_interval=25,
                                          video_seconds_per_grid=[0.04])
    assert frames[0].tolist() == (torch.arange(6) * torch.tensor(0.04) * 25).long().tolist() == [0, 1, 2, 3, 4, 4]
    with pytest.raises(ValueError, match="one per video"):
        posenc.mrope_position_ids(runs, 2, rule="v4.49", video_seconds_per_grid=[0.5, 1.0])
    with pytest.raises(ValueError, match="rule"):
        posenc.mrope_position_ids(runs, 2, rule="v6")
    with pytest.raises(ValueError, match="audio"):
        posenc.mrope_position_ids([("speech", 2, 1, 1, 1)], 2)


# The other towers (issue 26), each against HF's construction written out here in torch as HF
# writes it: PixtralRotaryEmbedding, Llama4VisionRotaryEmbedding, Kimi-VL's Rope2DPosEmb.
def _hf_pixtral(d, theta, side, ids):
    freqs = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    h = torch.arange(side, dtype=torch.float64)
    freqs_h = torch.outer(h, freqs[::2])
    freqs_w = torch.outer(h, freqs[1::2])
    table = torch.cat([freqs_h[:, None, :].repeat(1, side, 1), freqs_w[None, :, :].repeat(side, 1, 1)], -1).reshape(-1, d // 2)
    return table[ids[0] * side + ids[1]]  # position_ids_in_meshgrid: h * max_width + w


def _hf_llama4(d, theta, side):
    idx = side
    img_idx = torch.arange(idx ** 2, dtype=torch.int64).reshape(idx ** 2, 1)
    img_idx = torch.cat([img_idx, img_idx[:1]], dim=0)
    img_idx[-1, -1] = -2
    fx, fy = img_idx % idx, img_idx // idx
    freq_dim = d // 2
    rope_freq = 1.0 / (theta ** (torch.arange(0, freq_dim, 2, dtype=torch.float64)[: freq_dim // 2] / freq_dim))
    freqs_x = ((fx + 1)[..., None] * rope_freq[None, None, :]).repeat_interleave(2, dim=-1)
    freqs_y = ((fy + 1)[..., None] * rope_freq[None, None, :]).repeat_interleave(2, dim=-1)
    freqs = torch.cat([freqs_x, freqs_y], dim=-1)[..., ::2]
    return freqs.masked_fill(img_idx.reshape(-1, 1, 1) < 0, 0).reshape(-1, d // 2)


def _hf_moonvit(d, theta, rows, cols):
    flat = torch.arange(rows * cols)
    x_pos, y_pos = (flat % cols).double(), (flat // cols).double()
    f = 1.0 / (theta ** (torch.arange(0, d, 4, dtype=torch.float64)[: d // 4] / d))
    return torch.stack([torch.outer(x_pos, f), torch.outer(y_pos, f)], -1).reshape(-1, d // 2)


def _rotate(x, angles, layout):
    """HF's application in float64: rotate_half over cat(freqs, freqs), or complex pairs."""
    xd = x.double()
    if layout == "half_split":
        emb = torch.cat([angles, angles], -1)[None, :, None, :]
        half = xd.shape[-1] // 2
        return xd * emb.cos() + torch.cat([-xd[..., half:], xd[..., :half]], -1) * emb.sin()
    z = torch.view_as_complex(xd.reshape(*xd.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)[None, :, None, :]).flatten(3)


@pytest.mark.parametrize("family", ["pixtral", "llama4", "moonvit"])
def test_each_tower_is_its_hf_construction(family):
    d, side, rows, cols = 16, 4, 3, 4
    sched = posenc.vision_2d_schedule(d, family=family, patches_per_side=side if family != "moonvit" else None)
    if family == "llama4":
        rows = cols = side
    ids = posenc.vision_tower_position_ids(family, rows, cols, patches_per_side=side if family != "moonvit" else None)
    want_angles = {"pixtral": lambda: _hf_pixtral(d, 1e4, side, ids), "llama4": lambda: _hf_llama4(d, 1e4, side),
                   "moonvit": lambda: _hf_moonvit(d, 1e4, rows, cols)}[family]()
    assert ids.shape == (2, want_angles.shape[0])
    layout = sched.params["layout"]
    assert layout == ("half_split" if family == "pixtral" else "interleaved")
    x = torch.randn(1, ids.shape[1], 2, d, generator=torch.Generator().manual_seed(3))
    got = posenc.apply_rope(x, schedule=sched, positions=ids.unsqueeze(1))  # the schedule's own pairing
    assert (got.double() - _rotate(x, want_angles, layout)).abs().max() <= 4e-6
    other = "half_split" if layout == "interleaved" else "interleaved"
    with pytest.raises(ValueError, match="contradicts the schedule's own pairing"):
        posenc.apply_rope(x, schedule=sched, positions=ids.unsqueeze(1), layout=other)
    if family == "llama4":  # the class token, last, is not rotated
        assert torch.equal(got[0, -1], x[0, -1])


def test_tower_arguments_are_value_errors_naming_them():
    with pytest.raises(ValueError, match="family must be one of"):
        posenc.vision_2d_schedule(16, family="siglip")
    with pytest.raises(ValueError, match="pixtral needs patches_per_side"):
        posenc.vision_2d_schedule(16, family="pixtral")
    with pytest.raises(ValueError, match="rows and columns must be in \\[1, 4\\]"):
        posenc.vision_tower_position_ids("pixtral", 5, 2, patches_per_side=4)
    with pytest.raises(ValueError, match="whole tile of 4 x 4"):
        posenc.vision_tower_position_ids("llama4", 2, 4, patches_per_side=4)
    import numpy as np  # numpy integers and floats are numbers too
    assert posenc.vision_2d_schedule(np.int64(16), theta=np.float32(100.0)).params["head_dim"] == 16
    with pytest.raises(ValueError, match="got str '16'"):
        posenc.vision_2d_schedule("16")
    sched = posenc.vision_2d_schedule(16, family="pixtral", patches_per_side=4)
    ids = posenc.vision_tower_position_ids("pixtral", 2, 3, patches_per_side=4)
    for backend in ("kernels", "torch"):  # [S] or [B, S] positions cannot feed a 2-axis schedule
        with pytest.raises(ValueError, match="read 2 position axes"):
            posenc.apply_rope(torch.zeros(2, 6, 1, 16), schedule=sched, positions=ids, backend=backend)
    assert posenc.vision_tower_position_ids("gemma4", 2, 3).tolist() == [[0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2]]
    with pytest.raises(ValueError, match="cols must be an int"):
        posenc.vision_tower_position_ids("moonvit", 2, 2.0)


def test_gemma4_rotates_each_half_of_the_head_as_hf_and_as_golden():
    d, theta = 16, 100.0
    sched = posenc.vision_2d_schedule(d, theta=theta, family="gemma4")
    assert sched.params["blocks"] == 2 and sched.axis_of_freq == [1, 1, 1, 1, 0, 0, 0, 0]
    ids = posenc.vision_tower_position_ids("gemma4", 3, 4)  # [2, S]: rows, columns
    x = torch.randn(1, 12, 3, d, generator=torch.Generator().manual_seed(4))
    # HF's apply_multidimensional_rope: channels [0, D/2) by the column (x), [D/2, D) by the row
    # (y), each half rotate_half over cat(freqs, freqs) with w_k = theta^(-2k / (D/2)), k < D/4.
    w = torch.tensor([theta ** (-2 * k / (d // 2)) for k in range(d // 4)], dtype=torch.float64)
    def half(xh, coord):
        ang = coord.double()[:, None] * w
        emb = torch.cat([ang, ang], -1)[None, :, None, :]
        return xh * emb.cos() + torch.cat([-xh[..., d // 4:], xh[..., :d // 4]], -1) * emb.sin()
    xd = x.double()
    want = torch.cat([half(xd[..., :d // 2], ids[1]), half(xd[..., d // 2:], ids[0])], -1)
    for backend in ("kernels", "torch"):
        got = posenc.apply_rope(x, schedule=sched, positions=ids.unsqueeze(1), backend=backend)
        assert (got.double() - want).abs().max() <= 2e-6, backend
    inplace = x.clone()
    posenc.apply_rope(inplace, schedule=sched, positions=ids.unsqueeze(1), inplace=True)
    assert (inplace.double() - want).abs().max() <= 2e-6
    xg = xd.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: posenc.apply_rope(t, schedule=sched, positions=ids.unsqueeze(1)), (xg,))
    with pytest.raises(ValueError, match="blocks of channels"):
        posenc.rope_shift(x.clone(), 1, schedule=sched)
    with pytest.raises(ValueError, match="head_dim 16"):
        posenc.apply_rope(torch.zeros(1, 12, 1, 24), schedule=sched, positions=ids.unsqueeze(1))
    # The core's golden vision tower (C++, vision_rope.h) rotates the same way.
    from conftest import REFERENCE
    g = posenc.golden(REFERENCE / "real-configs" / "gemma-4-31B-it.json", positions=[0])
    tower = g["manifest"]["vision_tower"]
    t = g["tensors"]
    s4 = posenc.vision_2d_schedule(tower["head_dim"], theta=tower["theta"], family="gemma4")
    pos = t["vision_tower.position_ids"].long().unsqueeze(1)  # [2, 1, N]
    q = t["vision_tower.q"][None, :, None, :]
    assert (posenc.apply_rope(q, schedule=s4, positions=pos)[0, :, 0] - t["vision_tower.q_out"]).abs().max() <= 1e-6
