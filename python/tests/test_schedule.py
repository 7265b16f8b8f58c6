import json

import pytest
import torch

import posenc


def write(tmp_path, config):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_every_golden_schedule(golden, tmp_path):
    for case in golden["rope_inv_freq"]:
        s = posenc.schedule(str(write(tmp_path, case["config_input"])))
        expected = torch.tensor(case["spec_f64_inv_freq"], dtype=torch.float64)
        got = s.inv_freq.to(torch.float64)
        assert got.shape == expected.shape, case["name"]
        rel = ((got - expected).abs() / expected.abs().clamp_min(1e-30)).max().item()
        assert rel <= 6e-8, (case["name"], rel)
        assert s.attention_factor == pytest.approx(case["spec_f64_attention_factor"], rel=1e-12), case["name"]
        assert s.rotated_dim == case["rotary_dim"], case["name"]
        hf = posenc.schedule(str(write(tmp_path, case["config_input"])), hf_compatible=True)
        hf_rel = ((hf.inv_freq.double() - torch.tensor(case["inv_freq"]).double()).abs()
                  / torch.tensor(case["inv_freq"]).double().abs().clamp_min(1e-30)).max().item()
        assert hf_rel <= 2.5e-7, (case["name"], hf_rel)  # HF's float32 steps: bits or 1 ulp


def test_every_real_config_loads(real_configs):
    assert len(real_configs) > 30
    for path in real_configs:
        model = posenc.load_hf_config(str(path))
        assert model.layers, path.name
        if any(layer.has_rope for layer in model.layers):
            s = posenc.schedule(model)
            assert s.inv_freq.dtype == torch.float32 and s.inv_freq.numel() * 2 == s.rotary_dim, path.name
            assert torch.isfinite(s.inv_freq).all(), path.name


def test_keywords_equal_the_config(tmp_path):
    config = {"hidden_size": 512, "num_attention_heads": 4, "max_position_embeddings": 4096, "rope_theta": 1e6,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}}
    from_config = posenc.schedule(str(write(tmp_path, config)))
    from_keywords = posenc.schedule(rope_type="yarn", rope_theta=1e6, head_dim=128, factor=4.0,
                                    original_max_position_embeddings=1024, max_position_embeddings=4096)
    assert torch.equal(from_config.inv_freq, from_keywords.inv_freq)
    old_names = posenc.schedule(type="yarn", theta=1e6, head_dim=128, factor=4.0,  # posenc's names before HF's
                                original_max_position_embeddings=1024, max_position_embeddings=4096)
    assert torch.equal(old_names.inv_freq, from_keywords.inv_freq)
    params = posenc.load_hf_config(str(write(tmp_path, config))).select().params
    assert params["rope_theta"] == 1e6 and params["rope_type"] == "yarn" and params["attention_factor"] is None
    assert "theta" not in params and "llama_4_scaling_beta" in params
    assert torch.equal(posenc.schedule(**params).inv_freq, from_config.inv_freq)
    assert from_config.attention_factor == from_keywords.attention_factor > 1
    assert from_config.correction_range is not None and len(from_config.correction_range) == 2


def test_dynamic_grows_with_seq_len():
    short = posenc.schedule(rope_type="dynamic", head_dim=64, factor=2.0, max_position_embeddings=128, seq_len=100)
    long = posenc.schedule(rope_type="dynamic", head_dim=64, factor=2.0, max_position_embeddings=128, seq_len=1000)
    assert torch.equal(short.inv_freq[:1], long.inv_freq[:1])  # the first frequency stays 1
    assert (long.inv_freq[1:] < short.inv_freq[1:]).all()


def test_errors_name_the_key(tmp_path):
    bad = {"hidden_size": 64, "num_attention_heads": 2, "rope_scaling": {"rope_type": "linear", "factor": 2, "fctor": 3}}
    with pytest.raises(posenc.ConfigError, match="fctor"):
        posenc.load_hf_config(str(write(tmp_path, bad)))
    assert isinstance(posenc.ConfigError("x"), ValueError)
    lenient = posenc.load_hf_config(str(write(tmp_path, bad)), lenient=True)
    assert any("fctor" in w for w in lenient.warnings)
    with pytest.raises(posenc.ConfigError, match="factor"):
        posenc.schedule(rope_type="linear", head_dim=64, factor=-2.0)
    with pytest.raises(posenc.ConfigError, match="unknown key params.fator .did you mean 'factor'"):
        posenc.schedule(rope_type="linear", head_dim=64, factor=2.0, fator=1.0)
    with pytest.raises(posenc.ConfigError, match="did you mean 'head_dim'"):
        posenc.schedule(dim=64)
    with pytest.raises(posenc.ConfigError, match=r"params.zzz$"):  # nothing close: no guess
        posenc.schedule(head_dim=64, zzz=1)
    with pytest.raises(posenc.ConfigError):
        posenc.load_hf_config(str(tmp_path / "missing.json"))


def test_select_follows_the_cores_rule(real_configs):
    by_name = {p.stem: p for p in real_configs}
    qwen = posenc.load_hf_config(str(by_name["Qwen3.5-9B"]))  # linear_attention layers rotate nothing
    assert [l.layer_type for l in qwen.layers] == ["linear_attention", "full_attention"]
    assert qwen.select().layer_type == "full_attention"
    with pytest.raises(posenc.ConfigError, match="'linear_attention' have no rotary embedding"):
        qwen.select("linear_attention")
    with pytest.raises(posenc.ConfigError, match="'sliding_attention' is not in this config; it has: "
                                                 "linear_attention, full_attention"):
        qwen.select("sliding_attention")
    gemma = posenc.load_hf_config(str(by_name["gemma-3-1b-it"]))
    assert gemma.select("sliding_attention").params["rope_theta"] == 10000.0
