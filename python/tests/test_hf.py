"""posenc.hf against Hugging Face's own numbers (hf-golden.json, made with transformers' sources;
transformers itself is not needed), and the runtime rule of posenc.nn.RotaryEmbedding."""
import json

import pytest
import torch

import posenc
import posenc.hf


def as_tensor(value):
    return torch.tensor(json.loads(value) if isinstance(value, str) else value)


def test_cos_sin_equal_hfs_rotary_modules(golden):
    cases = golden["rope_cos_sin_tables"]
    assert len(cases) >= 10
    for case in cases:
        rotary = posenc.hf.RotaryEmbedding(case["config_input"])
        positions = as_tensor(case["positions"]).to(torch.int64)[None, :]
        cos, sin = rotary(torch.zeros(1, dtype=torch.float32), positions)
        expected_cos, expected_sin = as_tensor(case["cos"]).float(), as_tensor(case["sin"]).float()
        assert cos.shape == (1,) + expected_cos.shape and cos.dtype == torch.float32, case["name"]
        assert rotary.attention_scaling == pytest.approx(case["attention_scaling"], rel=1e-12), case["name"]
        # inv_freq carries HF's bits or differs by 1 ulp (Numerics::kHfFloat32); the angle is one
        # float32 product as in HF, so cos and sin differ at most by that ulp times the position.
        largest = int(positions.max())
        bound = 2e-7 * max(1, largest) + 1e-7
        assert (cos[0] - expected_cos).abs().max().item() <= bound, case["name"]
        assert (sin[0] - expected_sin).abs().max().item() <= bound, case["name"]


def test_cos_sin_take_the_inputs_dtype_and_scale_once(golden):
    case = next(c for c in golden["rope_cos_sin_tables"] if c["name"] == "yarn_small_d8")
    rotary = posenc.hf.RotaryEmbedding(case["config_input"])
    cos32, _ = rotary(torch.zeros(1), torch.arange(11)[None, :])
    cos16, sin16 = rotary(torch.zeros(1, dtype=torch.bfloat16), torch.arange(11)[None, :].expand(2, -1))
    assert cos16.dtype == torch.bfloat16 and cos16.shape == (2, 11, 8)
    assert torch.equal(cos16[1], cos32[0].to(torch.bfloat16))
    assert cos32[0, 0, 0].item() == pytest.approx(case["attention_scaling"], rel=1e-7)  # cos 0 = 1, scaled


def test_apply_rotary_pos_emb_equals_hf(golden):
    for case in golden["rope_apply"]:
        if "cos" not in case:  # GPT-J pairs: not what HF's apply_rotary_pos_emb does
            continue
        q, k = as_tensor(case["q"]).float(), as_tensor(case["k"]).float()
        cos, sin = as_tensor(case["cos"]).float(), as_tensor(case["sin"]).float()
        q_embed, k_embed = posenc.hf.apply_rotary_pos_emb(q, k, cos, sin)
        assert torch.allclose(q_embed, as_tensor(case["q_embed"]).float(), atol=1e-6), case["name"]
        assert torch.allclose(k_embed, as_tensor(case["k_embed"]).float(), atol=1e-6), case["name"]
        # and the cos/sin of the drop-in module reproduce HF's for that config
        rotary = posenc.hf.RotaryEmbedding(case["config_input"])
        mine_cos, mine_sin = rotary(q, as_tensor(case["positions"]).to(torch.int64)[None, :])
        assert torch.allclose(mine_cos, cos, atol=1e-6) and torch.allclose(mine_sin, sin, atol=1e-6), case["name"]


def test_partial_rotary_passes_the_other_channels_through():
    q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 1, 5, 16)
    rotary = posenc.hf.RotaryEmbedding({"hidden_size": 32, "num_attention_heads": 2, "partial_rotary_factor": 0.5})
    cos, sin = rotary(q, torch.arange(5)[None, :])
    assert cos.shape == (1, 5, 8)
    rq, rk = posenc.hf.apply_rotary_pos_emb(q, k, cos, sin)
    assert torch.equal(rq[..., 8:], q[..., 8:]) and torch.equal(rk[..., 8:], k[..., 8:])
    full = posenc.apply_rope(q[..., :8].transpose(1, 2).contiguous(), schedule=posenc.schedule(head_dim=8))
    assert torch.allclose(rq[..., :8], full.transpose(1, 2), atol=1e-5)


def test_the_runtime_rule_is_hfs_call_by_call(golden, tmp_path):
    case = golden["rope_runtime"][0]
    rotary = posenc.hf.RotaryEmbedding(case["config_input"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(case["config_input"]))
    module = posenc.nn.RotaryEmbedding(str(path), hf_compatible=True)
    assert module.runtime.max_seq_len_cached == 64
    for call in case["calls"]:
        n = call["seq_len_of_call"]
        positions = torch.arange(n)[None, :]
        cos, sin = rotary(torch.zeros(1), positions)
        expected = torch.tensor(call["inv_freq_after_call"])
        assert rotary.max_seq_len_cached == call["max_seq_len_cached_after_call"], n
        assert (rotary.inv_freq - expected).abs().max().item() <= 2e-7, n
        assert (cos[0, -1] - torch.tensor(call["cos_last_position"])).abs().max().item() <= 2e-7 * n, n
        assert (sin[0, -1] - torch.tensor(call["sin_last_position"])).abs().max().item() <= 2e-7 * n, n
        q = torch.randn(1, n, 1, case["head_dim"])
        module(q, q, positions)
        assert module.runtime.max_seq_len_cached == call["max_seq_len_cached_after_call"], n
        assert (module.inv_freq - expected).abs().max().item() <= 2e-7, n


def test_the_rotary_module_reads_its_config_once(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 16,
                                "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}))
    module = posenc.nn.RotaryEmbedding(str(path))
    path.unlink()  # a forward after this must not need the file
    q = torch.randn(1, 40, 1, 32)
    module(q, q, torch.arange(40)[None, :])
    assert module.runtime.max_seq_len_cached == 40


def test_bad_input_raises_with_the_value_named():
    with pytest.raises(posenc.ConfigError, match="to_dict"):
        posenc.hf.RotaryEmbedding(42)
    with pytest.raises(posenc.ConfigError, match="fctor"):
        posenc.hf.RotaryEmbedding({"hidden_size": 64, "num_attention_heads": 2,
                                   "rope_scaling": {"rope_type": "linear", "factor": 2.0, "fctor": 3}})
    rotary = posenc.hf.RotaryEmbedding({"hidden_size": 64, "num_attention_heads": 2})
    with pytest.raises(ValueError, match=r"\[3, 1, 4\]"):
        rotary(torch.zeros(1), torch.zeros(3, 1, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="position -2"):
        rotary(torch.zeros(1), torch.tensor([[0, -2]]))
    with pytest.raises(ValueError, match="float32"):
        rotary(torch.zeros(1), torch.zeros(1, 4))
    with pytest.raises(ValueError, match="fewer than the 32"):
        cos, sin = rotary(torch.zeros(1), torch.arange(4)[None, :])
        posenc.hf.apply_rotary_pos_emb(torch.zeros(1, 1, 4, 16), torch.zeros(1, 1, 4, 16), cos, sin)
