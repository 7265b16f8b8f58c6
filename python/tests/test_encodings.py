import pytest
import torch

import posenc
import posenc.nn


def test_sinusoidal_golden(golden):
    case = next(c for c in golden["sinusoidal"] if c["name"] == "xlm_distilbert_interleaved_d8")
    got = posenc.sinusoidal(case["positions"], case["d_model"])
    assert (got - torch.tensor(case["table"])).abs().max() < 1e-6


def test_alibi_slopes_golden(golden):
    a = golden["alibi"]
    for n, expected in zip(a["n_heads"], a["paper_slopes_f64"]):
        assert posenc.alibi_slopes(n).tolist() == pytest.approx(expected, rel=1e-15), n
    bias = posenc.alibi_bias(4, 3, 5, causal=True, past=2)
    slopes = posenc.alibi_slopes(4)
    assert bias[1, 0, 0].item() == pytest.approx(-slopes[1].item() * 2, rel=1e-6)  # query at 2, key 0


def test_t5_buckets_golden(golden):
    t5 = golden["t5_relative_bias"]
    rel = t5["relative_positions"]
    for case in t5["bucket_cases"]:
        got = posenc.t5_buckets(rel, case["num_buckets"], case["max_distance"], case["bidirectional"])
        assert got.tolist() == case["buckets"], case


def test_modules_keep_fixed_tables_as_buffers():
    rotary = posenc.nn.RotaryEmbedding(head_dim=32)
    alibi = posenc.nn.ALiBi(8)
    for module in (rotary, alibi, posenc.nn.SinusoidalPositionalEncoding(16)):
        assert not list(module.parameters())
    assert "slopes" in dict(alibi.named_buffers())
    t5 = posenc.nn.T5RelativeBias(4, num_buckets=8, max_distance=20, bidirectional=False)
    assert [n for n, _ in t5.named_parameters()] == ["table"]
    assert t5(3, 5).shape == (4, 3, 5)
    q, k = torch.randn(1, 6, 2, 32), torch.randn(1, 6, 2, 32)
    rq, rk = rotary(q, k)
    assert rq.shape == q.shape and rk.shape == k.shape
    learned = posenc.nn.LearnedPositionalEmbedding(8, 4)
    with pytest.raises(ValueError, match="position 8"):
        learned(torch.tensor([[1, 8]]))


def test_dynamic_rotary_follows_the_length():
    rotary = posenc.nn.RotaryEmbedding(rope_type="dynamic", head_dim=32, factor=2.0, max_position_embeddings=16)
    q = torch.randn(1, 40, 1, 32)
    rotary(q, q, torch.arange(40).unsqueeze(0))
    grown = rotary.inv_freq.clone()
    assert (grown[1:] < posenc.schedule(head_dim=32).inv_freq[1:]).all()
