"""posenc.nn.AxialRotaryEmbedding against rotary-embedding-torch's get_axial_freqs construction and
posenc.nn.MixedRotaryEmbedding against naver-ai/rope-vit's compute_mixed_cis (Heo et al. 2024),
each written here in float64."""
import math

import pytest
import torch
from torch.nn.utils.stateless import functional_call  # torch.func.functional_call in torch >= 2

import posenc
from rotary_reference import rotate_pairs


def axis_frequencies(dim, freqs_for, theta=10000.0, max_freq=10.0):
    """rotary-embedding-torch's RotaryEmbedding(dim).freqs in float64, rounded to float32 as it
    keeps them: lang 1/theta^(arange(0, dim, 2)/dim), pixel linspace(1, max_freq/2, dim/2) pi."""
    if freqs_for == "lang":
        f = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    else:
        f = torch.linspace(1.0, max_freq / 2, dim // 2, dtype=torch.float64) * math.pi
    return f.float().double()


def axial_reference(x, coords, freqs, layout):
    """get_axial_freqs: per axis a, coords[:, a] x freqs, concatenated along channels in axis order;
    x [B, S, H, D] float64, coords [S, axes]."""
    angles = torch.cat([coords[:, a, None].double() * freqs for a in range(coords.shape[1])], -1)  # [S, axes F]
    return rotate_pairs(x.double(), angles[None, :, None, :], layout)


@pytest.mark.parametrize("layout", ["interleaved", "half_split"])
@pytest.mark.parametrize("axes", [1, 2, 3, 4])
def test_axial_lang_matches_the_per_axis_construction(layout, axes):
    torch.manual_seed(axes)
    dim = 8
    m = posenc.nn.AxialRotaryEmbedding(dim, axes=axes, layout=layout)
    coords = m.grid(*([3, 5, 2, 2][:axes]))
    tokens = coords.shape[0]
    q, k = torch.randn(2, tokens, 2, dim * axes + 6), torch.randn(2, tokens, 2, dim * axes + 6)
    qa, ka = m(q, k, coords)  # axes <= 3: the kernels; 4: torch operations
    ref = axial_reference(q, coords, axis_frequencies(dim, "lang"), layout)
    assert (qa.double() - ref).abs().max() < 2e-6
    assert (ka.double() - axial_reference(k, coords, axis_frequencies(dim, "lang"), layout)).abs().max() < 2e-6
    q64, k64 = m(q.double(), k.double(), coords)  # the float64 path: the same frequencies, exact rotation
    assert (q64 - ref).abs().max() < 1e-12
    real, _ = m(q, k, coords.double())  # real coordinates take torch operations: the same numbers
    assert (real.double() - ref).abs().max() < 2e-6


def test_axial_grid_is_get_axial_freqs_grid_and_one_axis_is_plain_rope():
    m = posenc.nn.AxialRotaryEmbedding(4, axes=3)
    rows, cols, depth = torch.meshgrid(torch.arange(2), torch.arange(3), torch.arange(4), indexing="ij")
    assert torch.equal(m.grid(2, 3, 4), torch.stack((rows, cols, depth), -1).reshape(-1, 3))
    pixel = posenc.nn.AxialRotaryEmbedding(4, axes=2, freqs_for="pixel")
    y, x = torch.meshgrid(torch.linspace(-1, 1, 3), torch.linspace(-1, 1, 5), indexing="ij")
    assert (pixel.grid(3, 5) - torch.stack((y, x), -1).reshape(-1, 2)).abs().max() < 1e-7
    inv_freq, axis_of_freq = posenc._posenc.axial_kernel_frequencies(3, 4, 10000.0)  # the core's kernel view
    assert m.kernel_schedule().inv_freq.tolist() == inv_freq and m.kernel_schedule().axis_of_freq == axis_of_freq
    one = posenc.nn.AxialRotaryEmbedding(16, axes=1)
    q, k = torch.randn(1, 9, 2, 16), torch.randn(1, 9, 2, 16)
    plain = posenc.apply_rope(q, k, schedule=posenc.schedule(head_dim=16), layout="interleaved")
    axial = one(q, k, one.grid(9))
    assert torch.equal(axial[0], plain[0]) and torch.equal(axial[1], plain[1])


@pytest.mark.parametrize("layout", ["interleaved", "half_split"])
def test_axial_pixel_frequencies(layout):
    torch.manual_seed(5)
    m = posenc.nn.AxialRotaryEmbedding(8, axes=2, freqs_for="pixel", max_freq=64, layout=layout)
    coords = m.grid(4, 6)
    q = torch.randn(1, 24, 2, 16)
    ref = axial_reference(q, coords.double(), axis_frequencies(8, "pixel", max_freq=64), layout)
    assert (m(q, q, coords)[0].double() - ref).abs().max() < 2e-6


def test_axial_backward_through_the_kernels_and_learned_frequencies():
    torch.manual_seed(6)
    m = posenc.nn.AxialRotaryEmbedding(8, axes=2)
    coords = m.grid(3, 4)
    q = torch.randn(1, 12, 2, 16, requires_grad=True)
    w = torch.randn(1, 12, 2, 16)
    (m(q, q, coords)[0] * w).sum().backward()
    qd = q.detach().double().requires_grad_()
    (axial_reference(qd, coords, axis_frequencies(8, "lang"), "interleaved") * w).sum().backward()
    assert (q.grad.double() - qd.grad).abs().max() < 1e-5
    learned = posenc.nn.AxialRotaryEmbedding(8, axes=2, learned=True).double()
    assert isinstance(learned.freqs, torch.nn.Parameter)
    q64 = torch.randn(1, 12, 2, 16, dtype=torch.float64, requires_grad=True)
    freqs = learned.freqs.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, f: functional_call(learned, {"freqs": f}, (a, a, coords))[0], (q64, freqs))
    out, _ = learned(q64, q64, coords)
    out.sum().backward()
    assert learned.freqs.grad is not None and bool(learned.freqs.grad.abs().max() > 0)


def mixed_reference(x, freqs, coords):
    """rope-vit's compute_mixed_cis and apply_rotary_emb in float64: angle[t, h, j] = fx[h, j] x_t +
    fy[h, j] y_t, x's interleaved pairs as complex numbers times polar(1, angle). x [B, S, H, D]."""
    ang = coords[:, 0, None, None].double() * freqs[0].double() + coords[:, 1, None, None].double() * freqs[1].double()
    cis = torch.polar(torch.ones_like(ang), ang)  # [S, H, D/2]
    xc = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * cis).flatten(-2)


def test_mixed_matches_rope_vit_and_its_initialisation():
    torch.manual_seed(7)
    m = posenc.nn.MixedRotaryEmbedding(16, heads=3, theta=10)
    coords = torch.stack((torch.arange(12) % 4, torch.arange(12) // 4), -1)  # rope-vit's t_x, t_y on a 3 x 4 grid
    q, k = torch.randn(2, 12, 3, 16), torch.randn(2, 12, 3, 16)
    qm, km = m(q, k, coords)
    assert (qm.double() - mixed_reference(q, m.freqs, coords)).abs().max() < 2e-6
    assert (km.double() - mixed_reference(k, m.freqs, coords)).abs().max() < 2e-6
    fx, fy = m.freqs.detach().double()
    mag = 1.0 / 10 ** (torch.arange(0, 16, 4, dtype=torch.float64) / 16)
    norms = torch.sqrt(fx ** 2 + fy ** 2)  # [heads, 8]: magnitude 1/theta^(4k/d) in both halves
    assert (norms - torch.cat((mag, mag))).abs().max() < 1e-6
    phi = torch.atan2(fy, fx)
    turn = torch.remainder(phi[:, 4:] - phi[:, :4], 2 * math.pi)  # the second half at phi + pi/2
    assert (turn - math.pi / 2).abs().max() < 1e-5
    assert len({round(float(p), 4) for p in phi[:, 0]}) == 3  # a random angle per head
    bhsd = posenc.nn.MixedRotaryEmbedding(16, heads=3, heads_dim=1)
    with torch.no_grad():
        bhsd.freqs.copy_(m.freqs)
    qt = bhsd(q.transpose(1, 2), k.transpose(1, 2), coords)[0]
    assert torch.equal(qt.transpose(1, 2), qm)


def test_mixed_without_rotation_is_rope_axial():
    torch.manual_seed(8)
    mixed = posenc.nn.MixedRotaryEmbedding(16, heads=2, theta=100, rotate=False)
    axial = posenc.nn.AxialRotaryEmbedding(8, axes=2, theta=100)
    coords = axial.grid(3, 5).flip(-1)  # (x, y): x the column, the grid's fast axis
    q, k = torch.randn(1, 15, 2, 16), torch.randn(1, 15, 2, 16)
    qm, km = mixed(q, k, coords)
    qa, ka = axial(q, k, coords)
    assert (qm - qa).abs().max() < 2e-6 and (km - ka).abs().max() < 2e-6


def test_mixed_gradcheck_in_q_k_and_frequencies():
    torch.manual_seed(9)
    m = posenc.nn.MixedRotaryEmbedding(8, heads=2).double()
    coords = torch.tensor([[0, 0], [1, 0], [0, 1], [2, 3]])
    q = torch.randn(1, 4, 2, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 4, 2, 8, dtype=torch.float64, requires_grad=True)
    f = m.freqs.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, g: functional_call(m, {"freqs": g}, (a, b, coords)), (q, k, f))


@pytest.mark.parametrize("make,match", [
    (lambda: posenc.nn.AxialRotaryEmbedding(7), "dim must be an even int >= 2, got 7"),
    (lambda: posenc.nn.AxialRotaryEmbedding(8, axes=0), "axes must be an int >= 1, got 0"),
    (lambda: posenc.nn.AxialRotaryEmbedding(8, freqs_for="spacetime"), "freqs_for must be 'lang' or 'pixel', got 'spacetime'"),
    (lambda: posenc.nn.AxialRotaryEmbedding(8, theta=-1.0), "theta must be a finite number > 0, got -1.0"),
    (lambda: posenc.nn.AxialRotaryEmbedding(8, max_freq=0), "max_freq must be a finite number > 0, got 0"),
    (lambda: posenc.nn.MixedRotaryEmbedding(6, heads=2), "dim must be an int multiple of 4 .*, got 6"),
    (lambda: posenc.nn.MixedRotaryEmbedding(8, heads=0), "heads must be an int >= 1, got 0"),
])
def test_refuses_bad_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_refuses_bad_inputs():
    m = posenc.nn.AxialRotaryEmbedding(4, axes=2)
    q = torch.randn(1, 6, 2, 8)
    with pytest.raises(ValueError, match=r"coords must be \[S=6, axes=2\], got \[6, 3\]"):
        m(q, q, torch.zeros(6, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"rotates 8 channels but q's head_dim is 6"):
        m(q[..., :6], q[..., :6], m.grid(2, 3))
    with pytest.raises(ValueError, match=r"position -1 is negative"):
        m(q, q, m.grid(2, 3) - 1)
    with pytest.raises(ValueError, match=r"coords must be finite"):
        m(q, q, torch.full((6, 2), float("nan")))
    pixel = posenc.nn.AxialRotaryEmbedding(4, axes=2, freqs_for="pixel")
    with pytest.raises(ValueError, match=r"pixel frequencies take coordinates in \[-1, 1\], got 2"):
        pixel(q, q, pixel.grid(2, 3) * 2)
    mixed = posenc.nn.MixedRotaryEmbedding(8, heads=3)
    with pytest.raises(ValueError, match=r"q has 2 heads, the module 3"):
        mixed(q, q, m.grid(2, 3))
    with pytest.raises(ValueError, match=r"coords must be \[S=6, 2\] \(x, y\), got \[6\]"):
        posenc.nn.MixedRotaryEmbedding(8, heads=2)(q, q, torch.zeros(6))
    with pytest.raises(ValueError, match=r"q must be a floating tensor, got torch.int32"):
        mixed(q.int(), q.int(), m.grid(2, 3))
