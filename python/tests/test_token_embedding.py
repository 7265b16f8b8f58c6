"""posenc.nn.TokenPositionEmbedding (x = E[tokens] * s + P(positions)) and posenc.nn.positions_from_mask
(Hugging Face's position ids of a padded batch), against their formulas written here."""
import math

import pytest
import torch

import posenc
from posenc.nn import TokenPositionEmbedding, positions_from_mask


def vaswani(positions, dim, base=10000.0):
    """PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i + 1) = cos(.), in float64 (Vaswani et al. 2017, 3.5)."""
    p = positions.double()[..., None]
    w = torch.tensor([base ** (-2 * (c // 2) / dim) for c in range(dim)], dtype=torch.float64)
    angle = p * w
    return torch.where(torch.arange(dim) % 2 == 0, torch.sin(angle), torch.cos(angle))


def test_sinusoidal_and_scaled_are_the_formula():
    torch.manual_seed(0)
    tokens = torch.randint(0, 50, (2, 9))
    for scale in (False, True):
        m = TokenPositionEmbedding(50, 16, scale=scale)
        s = math.sqrt(16) if scale else 1.0
        want = m.tokens.weight.double()[tokens] * s + vaswani(torch.arange(9), 16)
        assert torch.allclose(m(tokens).double(), want, atol=2e-6), scale
    none = TokenPositionEmbedding(50, 16, positions="none", scale=True)
    assert torch.equal(none(tokens), none.tokens.weight[tokens] * 4.0)


# Vaswani's scale with fairseq's init: E * sqrt(d) has channels of size ~1, and a sinusoid's row
# (norm sqrt(d/2)) is sqrt(1/2) of a token's -- what `posenc tour embedding-scale` measures.
def test_scale_goes_with_its_init():
    torch.manual_seed(1)
    d = 512
    scaled, plain = TokenPositionEmbedding(512, d, scale=True), TokenPositionEmbedding(512, d)
    assert abs(scaled.tokens.weight.std().item() * math.sqrt(d) - 1) < 0.02
    assert abs(plain.tokens.weight.std().item() - 1) < 0.02
    e = (scaled.tokens.weight * math.sqrt(d)).norm(dim=-1).mean()
    pe = vaswani(torch.arange(512), d).norm(dim=-1).mean()
    assert abs(pe.item() / e.item() / math.sqrt(0.5) - 1) < 0.05
    assert TokenPositionEmbedding(8, 4, scale=True, init_std=0.5).tokens.weight.std().item() > 0.2


def test_positions_from_mask_is_hugging_faces_rule():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    assert positions_from_mask(mask).tolist() == [[1, 1, 0, 1, 2], [0, 1, 2, 1, 1], [0, 1, 2, 3, 4]]
    with pytest.raises(ValueError, match="0 \\(pad\\) and 1"):
        positions_from_mask(torch.tensor([[0, 2]]))
    with pytest.raises(ValueError, match="\\[batch, seq\\]"):
        positions_from_mask(torch.tensor([1, 1]))


# Left padding: with the mask's positions the real tokens get the unpadded run's vectors.
def test_left_padding_keeps_the_real_tokens_positions():
    torch.manual_seed(2)
    for kind, extra in (("sinusoidal", {}), ("learned", {"max_positions": 16})):
        m = TokenPositionEmbedding(30, 8, positions=kind, **extra)
        real = torch.randint(1, 30, (1, 5))
        padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), real], 1)
        mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])
        assert torch.equal(m(padded, attention_mask=mask)[:, 3:], m(real)), kind
        assert not torch.allclose(m(padded)[:, 3:], m(real)), kind  # naive ids 0..7 move them


def test_learned_table_trains_and_refuses_past_its_end():
    m = TokenPositionEmbedding(10, 4, positions="learned", max_positions=6)
    m(torch.randint(0, 10, (2, 6))).square().sum().backward()
    assert m.table.weight.grad is not None and m.table.weight.grad.abs().sum() > 0
    assert m.tokens.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="position 6 is outside the learned table"):
        m(torch.zeros(1, 7, dtype=torch.long))
    given = m(torch.zeros(2, 3, dtype=torch.long), positions=torch.tensor([5, 0, 2]))
    assert torch.equal(given[0, 0], m.tokens.weight[0] + m.table.weight[5])


@pytest.mark.parametrize("kwargs, match", [
    ({"positions": "rope"}, "positions must be one of sinusoidal, learned, none, got 'rope'"),
    ({"positions": "learned"}, "max_positions is the learned table's length"),
    ({"max_positions": 4}, "max_positions is the learned table's length"),
    ({"scale": 1}, "scale must be True or False"),
    ({"init_std": float("nan")}, "init_std must be a finite number > 0"),
    ({"base": 1.0}, "base must be a finite number > 1"),
])
def test_bad_construction_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TokenPositionEmbedding(10, 8, **kwargs)
    with pytest.raises(ValueError, match="even dim, got 7"):
        TokenPositionEmbedding(10, 7)
    with pytest.raises(ValueError, match="vocab_size must be an int >= 1, got 0"):
        TokenPositionEmbedding(0, 8)


def test_bad_forward_raises():
    m = TokenPositionEmbedding(10, 8)
    t = torch.zeros(2, 3, dtype=torch.long)
    for bad in (torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bool)):
        with pytest.raises(ValueError, match="integer tensor"):
            m(bad)
    with pytest.raises(ValueError, match="not both"):
        m(t, positions=torch.arange(3), attention_mask=torch.ones(2, 3))
    with pytest.raises(ValueError, match="must match tokens"):
        m(t, attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="shape \\[3\\] or \\[2, 3\\]"):
        m(t, positions=torch.arange(4))
    with pytest.raises(ValueError, match="position -1 is negative"):
        m(t, positions=torch.tensor([0, -1, 2]))
    assert posenc.nn.TokenPositionEmbedding is TokenPositionEmbedding
