import pytest
import torch

import posenc
import posenc.nn
from conftest import peak_memory_ratio


def test_sinusoidal_golden(golden):
    # Whisper evaluates its angles in float32 (up to ~3e-5 off at position 1000); the others in float64.
    for name, layout, freq, tol in (("xlm_distilbert_interleaved_d8", "interleaved", "vaswani", 1e-6),
                                    ("marian_halves_d8", "halves", "vaswani", 1e-6),
                                    ("whisper_d8", "halves", "fairseq", 5e-5)):
        case = next(c for c in golden["sinusoidal"] if c["name"] == name)
        got = posenc.sinusoidal(case["positions"], case["d_model"], layout, freq)
        assert (got - torch.tensor(case["table"])).abs().max() < tol, name


def test_deberta_and_xl_helpers():
    rel = posenc.deberta_relative_positions(3, 20, position_buckets=8, max_relative_positions=32)
    assert rel.shape == (3, 20) and rel[0, 0] == 0 and rel[2, 0] == 2 and rel[0, 2] == -2
    assert rel[0, 19] < 0 and abs(int(rel[0, 19])) < 19  # log-bucketed far away
    r = posenc.xl_relative_sinusoid(8, 5)
    assert r.shape == (5, 8)
    assert torch.allclose(r[-1], torch.tensor([0.0] * 4 + [1.0] * 4))  # distance 0: sin 0, cos 1
    assert torch.allclose(r[0], posenc.sinusoidal([4], 8, "halves")[0])  # distance 4


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


def test_checks_pass_and_can_fail():
    results = {r["name"]: r for r in posenc.check(dim=32, positions=2000)}
    assert "rope.relative" in results and len(results) >= 5
    assert all(r["passed"] for r in results.values()), [r for r in results.values() if not r["passed"]]
    # The claim of rope.relative, measured through apply_rope at the C++ check's tolerance: it
    # holds for the real rotation and fails when k is rotated by another schedule (a wrong value).
    tolerance = results["rope.relative"]["tolerance"]
    torch.manual_seed(3)
    q, k = torch.randn(1, 1, 1, 32, dtype=torch.float64), torch.randn(1, 1, 1, 32, dtype=torch.float64)

    def deviation(k_schedule):
        s = posenc.schedule(head_dim=32)
        worst = 0.0
        for m, n in ((5, 2), (100, 0), (37, 4000)):
            scores = [(posenc.apply_rope(q, schedule=s, offset=m + shift)
                       * posenc.apply_rope(k, schedule=k_schedule, offset=n + shift)).sum().item() for shift in (0, 1000)]
            worst = max(worst, abs(scores[0] - scores[1]))
        return worst

    assert deviation(posenc.schedule(head_dim=32)) <= tolerance
    assert deviation(posenc.schedule(head_dim=32, rope_theta=500.0)) > tolerance
    with pytest.raises(posenc.ConfigError):
        posenc.check(dim=-4)


def test_learned_tables_start_at_the_cores_init_std():
    assert posenc._posenc.learned_init_std == 0.02
    torch.manual_seed(0)
    table = posenc.nn.LearnedPositionalEmbedding(4096, 64).weight
    assert abs(table.std().item() - posenc._posenc.learned_init_std) < 1e-3


def test_pictures_are_written(tmp_path):
    paths = posenc.plot.heatmap("rope", str(tmp_path / "rope.png"), dim=32, count=64)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["rope.png", "rope.svg"]
    assert (tmp_path / "rope.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "rope.svg").read_text()
    posenc.plot.decay("alibi", str(tmp_path / "decay.svg"))
    s = posenc.schedule(rope_type="llama3", head_dim=64, rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                        high_freq_factor=4.0, original_max_position_embeddings=8192)
    posenc.plot.wavelengths(s.params, str(tmp_path / "wave.svg"))
    assert "<svg" in (tmp_path / "wave.svg").read_text()
    with pytest.raises(ValueError, match="png or .svg"):
        posenc.plot.heatmap("rope", str(tmp_path / "x.jpg"))


def test_bias_decay_charts_from_python(tmp_path):
    # Kerple's power kind and a user's table, one polyline per head as the CLI draws them.
    posenc.plot.decay("kerple", str(tmp_path / "k.svg"), heads=6, kind="power")
    assert (tmp_path / "k.svg").read_text().count('class="series"') == 6
    dpb = posenc.nn.DynamicPositionBias(16, 4)
    with torch.no_grad():
        table = dpb(1, 65, past=64)[:, 0, :].flip(-1)  # [heads, 65]: the query at 64, key j is 64 - j back
    posenc.plot.decay("table", str(tmp_path / "t.svg"), table=table)
    svg = (tmp_path / "t.svg").read_text()
    assert svg.count('class="series"') == 4
    with pytest.raises(ValueError, match="kind"):
        posenc.plot.decay("kerple", str(tmp_path / "x.svg"), kind="cubic")
    with pytest.raises(ValueError, match="2-D"):
        posenc.plot.decay("table", str(tmp_path / "x.svg"), table=torch.zeros(4))
    with pytest.raises(ValueError, match="finite"):
        posenc.plot.decay("table", str(tmp_path / "x.svg"), table=torch.tensor([[0.0, float("nan")]]))


def test_mrope_position_ids_text_image_text():
    ids, delta = posenc.mrope_position_ids([("text", 3, 1, 1, 1), ("image", 0, 1, 4, 4), ("text", 2, 1, 1, 1)])
    assert ids.shape == (3, 3 + 4 + 2)  # a 4x4 grid merged 2x2: 4 tokens
    assert ids[:, :3].tolist() == [[0, 1, 2]] * 3
    assert ids[0, 3:7].tolist() == [3] * 4 and ids[1, 3:7].tolist() == [3, 3, 4, 4] and ids[2, 3:7].tolist() == [3, 4, 3, 4]
    assert delta == int(ids.max()) + 1 - ids.shape[1]


def test_large_encodings_cost_their_own_size_not_a_python_list():
    # A [100000, 1024] float32 table is 390 MiB; through a Python list it peaked at ~12x that.
    ratio = peak_memory_ratio("posenc.sinusoidal(torch.arange(100000), 1024)")
    assert ratio < 2.5, f"peak memory {ratio:.1f}x the result's size"
