"""The Python API's edges (issue 33, F5 and F17): in-place writes that autograd must see, views
that alias, empty batches, torch's thread count, checks shared by every dtype and backend,
learned frequencies, double backward, and a schedule saved with its module."""
import dataclasses

import numpy as np
import pytest
import torch

import posenc
from conftest import peak_memory_ratio


def sched(**kw):
    return posenc.schedule(head_dim=8, **kw)


def test_inplace_write_bumps_the_version_so_autograd_refuses_stale_saved_tensors():
    s = sched()
    a = torch.randn(1, 4, 2, 8, requires_grad=True)
    b = a * 1.0
    loss = (b * b).sum()  # saves b for backward
    with torch.no_grad():
        before = b._version
        posenc.apply_rope(b, schedule=s, inplace=True)
        assert b._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_rope_shift_bumps_the_version_too():
    k = torch.randn(1, 4, 2, 8)
    before = k._version
    with torch.no_grad():
        posenc.rope_shift(k, 3, schedule=sched())
    assert k._version > before


def test_inplace_refuses_overlapping_views_and_accepts_fused_projections():
    s = sched()
    base = torch.randn(64)
    overlapping = base.as_strided((1, 4, 2, 8), (0, 2, 1, 1))  # rows that share elements
    with pytest.raises(ValueError, match="share memory"):
        posenc.apply_rope(overlapping, schedule=s, inplace=True)
    with pytest.raises(ValueError, match="share memory"):
        posenc.rope_shift(overlapping, 1, schedule=s)
    qkv = torch.randn(2, 5, 3, 2, 8)  # [B, S, q|k|v, H, D]
    q, k = qkv[:, :, 0], qkv[:, :, 1]
    want_q, want_k = posenc.apply_rope(q.clone(), k.clone(), schedule=s)
    with torch.no_grad():
        posenc.apply_rope(q, k, schedule=s, inplace=True)
    assert torch.equal(qkv[:, :, 0], want_q) and torch.equal(qkv[:, :, 1], want_k)


def test_empty_batch_has_an_empty_gradient():
    x = torch.zeros(0, 4, 2, 8, requires_grad=True)
    posenc.apply_rope(x, schedule=sched()).sum().backward()
    assert x.grad.shape == x.shape


def test_torch_thread_counts_past_the_kernels_limit_are_capped(monkeypatch):
    q = torch.randn(1, 4, 2, 8)
    want = posenc.apply_rope(q, schedule=sched())
    # torch accepts set_num_threads(2000) (and starts 2000 threads); the kernels take at most
    # max_threads. The count is what matters, so torch reports it without starting them.
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2000)
    assert torch.equal(posenc.apply_rope(q, schedule=sched()), want)
    out = posenc.attention(q, q, q, causal=True)
    assert out.shape == q.shape


def test_double_backward_rotates_as_the_float64_formula():
    torch.manual_seed(3)
    s = sched(rope_theta=100.0)
    w = torch.randn(1, 6, 2, 8, dtype=torch.float64)
    pos = torch.tensor([0, 5, 9, 2, 7, 40])
    for layout in ("half_split", "interleaved", "deepseek_v3"):
        second = []
        for dtype, backend in ((torch.float32, "kernels"), (torch.float64, "torch")):
            x = torch.randn(w.shape, generator=torch.Generator().manual_seed(4)).to(dtype).requires_grad_()
            wd = w.to(dtype)  # a constant (not x)
            y = posenc.apply_rope(x, schedule=s, positions=pos, layout=layout, backend=backend)
            (g,) = torch.autograd.grad((y * wd).sum() ** 2, x, create_graph=True)
            (g2,) = torch.autograd.grad((g * wd).sum(), x)
            second.append(g2.double())
        assert (second[0] - second[1]).abs().max() < 1e-3 * second[1].abs().max(), layout


def test_checks_are_the_same_on_every_path():
    s = sched()
    q = torch.randn(1, 4, 2, 8)
    for x in (q, q.double()):
        with pytest.raises(ValueError, match="M-RoPE"):
            posenc.apply_rope(x, schedule=s, positions=torch.zeros(3, 1, 4, dtype=torch.long))
        with pytest.raises(ValueError, match=r"2\^31-1"):
            posenc.apply_rope(x, schedule=s, positions=torch.full((4,), 2**40))
        with pytest.raises(ValueError, match="offset"):
            posenc.apply_rope(x, schedule=s, offset=2**40)
        with pytest.raises(ValueError, match="offset"):
            posenc.apply_rope(x, schedule=s, offset=True)
        with pytest.raises(ValueError, match="attention_factor"):
            posenc.apply_rope(x, schedule=dataclasses.replace(s, attention_factor=float("inf")))
    with pytest.raises(ValueError, match="heads_dim=1"):  # [B, H, S, D] given as [B, S, H, D]
        posenc.apply_rope(torch.randn(1, 2, 6, 8), schedule=s, positions=torch.arange(6))


def test_learned_frequencies_get_their_gradient():
    s = sched()
    inv = s.inv_freq.double().clone().requires_grad_()
    q = torch.randn(1, 5, 2, 8, dtype=torch.float64)
    pos = torch.tensor([1, 3, 8, 20, 100])

    def rotate(freqs):
        return posenc.apply_rope(q, schedule=dataclasses.replace(s, inv_freq=freqs), positions=pos)

    assert torch.autograd.gradcheck(rotate, (inv,))
    learned = dataclasses.replace(s, inv_freq=s.inv_freq.clone().requires_grad_())
    posenc.apply_rope(q.float(), schedule=learned, positions=pos).sum().backward()
    assert learned.inv_freq.grad is not None and learned.inv_freq.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="no gradient"):
        posenc.apply_rope(q.float(), schedule=learned, backend="kernels")


def test_fields_and_encodings_refuse_what_they_would_misread():
    with pytest.raises(posenc.ConfigError, match="factor=nan"):
        posenc.schedule(head_dim=8, rope_type="linear", factor=float("nan"))
    with pytest.raises(posenc.ConfigError, match=r"\*\*fields"):
        posenc.schedule({"rope_theta": 1e4})
    with pytest.raises(ValueError, match="past"):
        posenc.alibi_bias(4, 4, 4, past=-10)
    with pytest.raises(ValueError, match="negative"):
        posenc.sinusoidal(torch.tensor([-1, 2]), 8)
    with pytest.raises(ValueError, match="heads"):
        posenc.nn.T5RelativeBias(heads=0)


def test_rotary_module_saves_its_schedule_and_refuses_another():
    a = posenc.nn.RotaryEmbedding(head_dim=8, rope_theta=1e4)
    b = posenc.nn.RotaryEmbedding(head_dim=8, rope_theta=1e4)
    b.load_state_dict(a.state_dict())
    c = posenc.nn.RotaryEmbedding(head_dim=8, rope_theta=5e5)
    with pytest.raises(ValueError, match="differs"):
        c.load_state_dict(a.state_dict())
    assert "rope_type='default'" in repr(a)


def test_head_dims_and_schedules_are_checked_alike_on_every_path():
    # python-033/035/036: the kernels' "rotary dim" check on the float64 and torch paths and for
    # D = 0; python-049/061/062: a schedule that is not one is named.
    s = posenc.schedule(head_dim=64)
    for q, backend in ((torch.randn(1, 4, 2, 0), "auto"), (torch.randn(1, 4, 2, 32, dtype=torch.float64), "auto"),
                       (torch.randn(1, 4, 2, 32), "torch"), (torch.randn(1, 4, 2, 32), "kernels")):
        with pytest.raises(ValueError, match=rf"rotary dim 2\*32 must be in \[2, head_dim={q.shape[-1]}\]"):
            posenc.apply_rope(q, schedule=s, backend=backend)
    with pytest.raises(ValueError, match="rotary dim"):
        with torch.no_grad():
            posenc.rope_shift(torch.randn(1, 4, 2, 32, dtype=torch.float64), 3, schedule=s)
    q = torch.randn(1, 2, 2, 64)
    for bad, says in (("config.json", "schedule must be a posenc.Schedule, got str"),
                      (None, "schedule must be a posenc.Schedule, got NoneType"),
                      (dataclasses.replace(s, inv_freq=torch.ones(4, 8, dtype=torch.float64)), r"1-D .* shape \[4, 8\]"),
                      (dataclasses.replace(s, inv_freq=torch.ones(32, dtype=torch.int64)), "1-D float tensor"),
                      (dataclasses.replace(s, attention_factor="1"), "attention_factor must be a finite number")):
        with pytest.raises(ValueError, match=says):
            posenc.apply_rope(q, schedule=bad)
    assert posenc.apply_rope(torch.randn(1, 0, 2, 64), schedule=s).shape == (1, 0, 2, 64)  # S = 0 stays valid


def test_t5_bias_refuses_lengths_as_alibi_and_kerple_do():
    # python-090/091: q_len -1 raised torch's arange error, past -5 was accepted.
    t5 = posenc.nn.T5RelativeBias(8)
    for args, says in (((-1, 4), "q_len must be an int >= 0, got -1"), ((4, -2), "k_len"),
                       ((4, 4, -5), "past must be an int >= 0, got -5"), ((4.0, 4), "q_len")):
        with pytest.raises(ValueError, match=f"T5RelativeBias: {says}"):
            t5(*args)
        if args != (4.0, 4):
            with pytest.raises(ValueError, match=says.split(",")[0]):
                posenc.nn.Kerple(8)(*args)
    assert t5(0, 4, past=2).shape == (8, 0, 4)


def test_alibi_bias_is_computed_in_blocks_with_the_same_values():
    # python-018: [heads, q, k] float64 temporaries peaked at 3.5x the result; the blocks give the
    # float64 value rounded once, as before (the reference: the whole float64 product).
    for causal in (True, False):
        got = posenc.alibi_bias(5, 300, 700, causal=causal, past=17)  # 5 * 700 > 2^20 / 300: several blocks
        d = (torch.arange(300, dtype=torch.float64) + 17).unsqueeze(1) - torch.arange(700, dtype=torch.float64)
        want = (-posenc.alibi_slopes(5).view(-1, 1, 1) * (d if causal else d.abs())).float()
        assert torch.equal(got, want)
    ratio = peak_memory_ratio("posenc.alibi_bias(8, 2048, 2048)")
    assert ratio < 1.5, f"peak memory {ratio:.1f}x the result's size"


def test_attention_checks_shapes_on_every_backend_and_for_empty_inputs():
    q, k, v = torch.randn(2, 5, 4, 8), torch.randn(2, 7, 4, 8), torch.randn(2, 7, 4, 8)
    bad = {"k, v batch 1": (q, k[:1], v[:1]), "v head_dim 4": (q, k, v[..., :4]), "Hq 4 / Hk 3": (q, k[:, :, :3], v[:, :, :3]),
           "v tokens 6": (q, k, v[:, :6]), "Hk 0": (q, k[:, :, :0], v[:, :, :0]),
           "S 0, k batch 1": (q[:, :0], k[:1], v[:1])}
    for name, args in bad.items():
        for backend in ("kernels", "torch"):
            with pytest.raises(ValueError, match="must share B and D|must be a multiple of kv heads"):
                posenc.attention(*args, backend=backend)
    inf = torch.full((1, 3, 2, 8), float("inf"))
    empty = torch.randn(1, 0, 2, 8)
    assert torch.equal(posenc.attention(inf, empty, empty), torch.zeros(1, 3, 2, 8))  # no key: zeros, not NaN
    for kw, says in ((dict(causal="no"), "causal must be True or False"), (dict(heads_dim=True), "heads_dim must be 1 or 2"),
                     (dict(scale=True), "scale must be a finite number")):
        with pytest.raises(ValueError, match=says):
            posenc.attention(q, k, v, **kw)


def test_lazily_negated_tensors_are_read_with_their_sign_and_not_written_in_place():
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 6, 2, 8, generator=g) for _ in range(3))
    negated = torch._neg_view(q)  # DLPack carries no negation bit: the kernels must see -q
    assert torch.equal(posenc.attention(negated, k, v), posenc.attention(-q, k, v))
    s = posenc.schedule(head_dim=8)
    assert torch.equal(posenc.apply_rope(negated, schedule=s), posenc.apply_rope(-q, schedule=s))
    with torch.no_grad(), pytest.raises(ValueError, match="lazily negated view"):
        posenc.apply_rope(torch._neg_view(q.clone()), schedule=s, inplace=True)


def test_dynamic_position_bias_edges_match_on_both_backends():
    m = posenc.nn.DynamicPositionBias(8, 2)
    assert m(0, 0).shape == (2, 0, 0) and m(0, 3).shape == (2, 0, 3)  # empty, as Kerple's
    q = torch.randn(1, 4, 2, 8)
    with torch.no_grad():
        m.mlp[-1].bias[0] = float("nan")
    for backend in ("kernels", "torch"):
        with pytest.raises(ValueError, match=r"bias's table \(DynamicPositionBias\) holds a value that is not finite"):
            posenc.attention(q, q, q, bias=m, backend=backend)
    with pytest.raises(ValueError, match="DynamicPositionBias or FIRE module \\(an instance\\)"):
        posenc.attention(q, q, q, bias=posenc.nn.DynamicPositionBias)
    with pytest.raises(ValueError, match=r"DynamicPositionBias\) is on meta, q on cpu"):
        posenc.attention(q, q, q, bias=posenc.nn.DynamicPositionBias(8, 2).to("meta"))
    with pytest.raises(ValueError, match="head_dim D must be >= 1"):
        posenc.attention(q[..., :0], q[..., :0], q[..., :0], backend="torch")


def test_t5_buckets_at_the_ends_of_int64_and_off_the_cpu():
    ends = torch.tensor([-2**63, 2**63 - 1])
    assert posenc.t5_buckets(ends).tolist() == [15, 31]
    assert posenc.t5_buckets(ends, bidirectional=False).tolist() == [31, 0]
    with pytest.raises(ValueError, match="meta device"):
        posenc.t5_buckets(torch.zeros(3, dtype=torch.int64, device="meta"))


def test_results_that_cannot_fit_are_refused_naming_their_sizes(monkeypatch):
    """Issue 33's second re-run: these failed in the allocator (MemoryError: std::bad_alloc, or
    torch's own for 32 GiB) after every argument had passed its range check. The process's memory
    is set to 16 GiB here, so the test does not depend on the machine's."""
    monkeypatch.setattr(posenc.encodings, "_memory_bytes", lambda: 16 * 2**30)
    for call, shape in ((lambda: posenc.sinusoidal(torch.arange(2**22), 65536), "4194304 x 65536"),
                        (lambda: posenc.deberta_relative_positions(2**20, 2**20), "1048576 x 1048576"),
                        (lambda: posenc.bucket_position_ids(65536, 65536, 65536), "65536 x 65536"),
                        (lambda: posenc.xl_relative_sinusoid(2**20, 2**20), "1048576 x 1048576")):
        with pytest.raises(ValueError, match=rf"a \[{shape}\] result is [0-9.]+ GiB; this process may use"):
            call()
    with pytest.raises(ValueError, match="num_positions must be an int >= 1, got 0"):
        posenc.nn.LearnedPositionalEmbedding(0, 8)
    assert posenc.sinusoidal(torch.arange(3), 4).shape == (3, 4)
    assert posenc.sinusoidal(torch.arange(3), np.int64(4)).shape == (3, 4)  # numpy integers as before
    assert posenc.nn.LearnedPositionalEmbedding(np.int64(8), 4).num_embeddings == 8


def test_a_config_dict_with_nan_or_infinity_is_refused_naming_the_key():
    """json.dumps wrote NaN bare, and the core then said the config "is not valid JSON"."""
    base = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2}
    with pytest.raises(posenc.ConfigError, match=r"config\['rope_theta'\] is nan: a config holds finite numbers only"):
        posenc.spec(dict(base, rope_theta=float("nan")))
    with pytest.raises(posenc.ConfigError, match=r"config\['rope_scaling'\]\['factor'\] is inf"):
        posenc.hf.RotaryEmbedding(dict(base, rope_scaling={"rope_type": "linear", "factor": float("inf")}))
    posenc.spec(base)


def test_head_dim_past_its_range_names_that_range():
    """It said "[-2147483647, 2147483647]", the reader's generic int range, for 2^31."""
    with pytest.raises(posenc.ConfigError, match=r"head_dim must be in \[0, 65536\], got 2147483648"):
        posenc.schedule(rope_type="default", rope_theta=1e4, head_dim=2**31)
