"""posenc.spec, posenc.golden and posenc.gguf: the engine kit's structures from Python, computed by
the CLI's own functions, checked against HF's numbers (hf-golden.json), the kernels and the files."""
import json
import math
import pathlib

import pytest
import torch

import posenc
from conftest import REFERENCE

GGUF_DIR = pathlib.Path(__file__).parents[2] / "fuzz" / "corpus" / "gguf"
LLAMA31 = REFERENCE / "real-configs" / "Llama-3.1-8B-Instruct.json"


def test_spec_reads_a_path_a_dict_and_a_to_dict_object_alike():
    by_path = posenc.spec(LLAMA31)
    config = json.loads(LLAMA31.read_text())

    class Pretrained:  # HF's PretrainedConfig offers to_dict()
        def to_dict(self):
            return config

    assert posenc.spec(config) == by_path == posenc.spec(Pretrained())
    assert by_path["model_type"] == "llama"
    assert len(by_path["layers"]) == config["num_hidden_layers"]
    assert all(layer["rope"] for layer in by_path["layers"])


def test_spec_schedules_are_the_schedules_posenc_computes():
    s = posenc.spec(LLAMA31)
    (sched,) = s["schedules"]
    expected = posenc.schedule(str(LLAMA31))
    assert sched["rope_type"] == expected.rope_type == "llama3"
    assert sched["rotary_dim"] == expected.rotary_dim == 128
    assert torch.equal(torch.tensor(sched["inv_freq"], dtype=torch.float32), expected.inv_freq)


def test_spec_describes_models_without_rope():
    config = {"model_type": "bloom", "n_head": 8, "hidden_size": 64, "n_layer": 2}
    s = posenc.spec(config)
    assert s["positions"]["rope"] is False
    (stack,) = s["positions"]["stacks"]
    assert stack["scheme"] == "alibi"
    assert stack["slopes"] == pytest.approx(posenc.alibi_slopes(8).tolist(), rel=1e-12)


def test_spec_refuses_bad_configs_by_name():
    with pytest.raises(posenc.ConfigError, match="fator"):
        posenc.spec({"model_type": "llama", "head_dim": 64, "rope_scaling": {"rope_type": "linear", "fator": 2.0}})
    with pytest.raises(posenc.ConfigError, match="int"):
        posenc.spec(12)
    with pytest.raises(posenc.ConfigError, match="no-such-config.json"):
        posenc.spec("/nonexistent/no-such-config.json")


def test_golden_cos_sin_are_hfs(golden):
    checked = 0
    for case in golden["rope_cos_sin_tables"]:
        if "runtime" in case["name"]:  # a table after a longer call: golden's seq_len is max(positions) + 1
            continue
        # HF's rope functions over a Llama config (the tables were made with LlamaRotaryEmbedding).
        config = dict(case["config_input"], model_type="llama")
        positions = [int(p) for p in case["positions"]]
        g = posenc.golden(config, positions=positions, hf_compatible=True)
        (layer,) = {name.split(".")[0] for name in g["tensors"] if name.endswith(".cos")}
        cos, sin = g["tensors"][layer + ".cos"], g["tensors"][layer + ".sin"]
        expected_cos = torch.tensor(case["cos"], dtype=torch.float32)
        expected_sin = torch.tensor(case["sin"], dtype=torch.float32)
        assert cos.shape == expected_cos.shape, case["name"]
        bound = 2e-7 * max(1, max(positions)) + 1e-7  # one float32 ulp of the angle (see test_hf.py)
        assert (cos - expected_cos).abs().max().item() <= bound, case["name"]
        assert (sin - expected_sin).abs().max().item() <= bound, case["name"]
        checked += 1
    assert checked >= 8


def test_golden_q_out_is_the_kernels_rotation_and_the_files_are_written(tmp_path):
    positions = [0, 1, 127, 4095, 8192]
    g = posenc.golden(LLAMA31, tmp_path / "out", positions=positions, seed=7)
    t = g["tensors"]
    q, q_out = t["full_attention.q"], t["full_attention.q_out"]
    assert q.shape == q_out.shape == (len(positions), 128)
    # q_out is HF's apply_rotary_pos_emb with golden's own cos/sin (HF's float32 angles) ...
    hf_q, _ = posenc.hf.apply_rotary_pos_emb(q[None, None], q[None, None], t["full_attention.cos"][None],
                                             t["full_attention.sin"][None])
    assert (hf_q[0, 0] - q_out).abs().max().item() < 1e-6
    # ... and the kernels' rotation (accurate angles) within float32's angle rounding at p.
    rotated, _ = posenc.apply_rope(q[None, :, None, :].clone(), q[None, :, None, :].clone(),
                                   schedule=posenc.schedule(str(LLAMA31)), positions=torch.tensor(positions))
    for row, p in enumerate(positions):
        assert (rotated[0, row, 0] - q_out[row]).abs().max().item() <= 1e-6 + 2e-7 * p, p
    logits = t["full_attention.logits"]
    assert torch.allclose(logits, (q_out @ t["full_attention.k_out"].T) / math.sqrt(128), atol=1e-5)
    assert json.loads((tmp_path / "out" / "manifest.json").read_text()) == g["manifest"]
    assert g["manifest"]["positions"] == positions and g["manifest"]["seed"] == 7
    assert (tmp_path / "out" / "golden.safetensors").stat().st_size > 4 * sum(x.numel() for x in t.values())


def test_golden_refuses_bad_arguments_and_writes_nothing(tmp_path):
    for positions, pattern in (([], "empty"), ([-1], "-1"), ([0, "1"], "'1'"), ("0,1", "sequence")):
        with pytest.raises(posenc.ConfigError, match=pattern):
            posenc.golden(LLAMA31, tmp_path / "x", positions=positions)
    with pytest.raises(posenc.ConfigError, match="seed"):
        posenc.golden(LLAMA31, seed=-1)
    with pytest.raises(posenc.ConfigError, match="out_dir"):
        posenc.golden(LLAMA31, out_dir=3)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("remap", [posenc.SelfExtend(group=4, window=16), posenc.ReRoPE(window=16),
                                   posenc.ReRoPE(window=16, leak=3.5), posenc.DualChunk(chunk_size=48, local_size=16)],
                         ids=["self-extend", "rerope", "leaky-rerope", "dual-chunk"])
def test_golden_remap_out_is_the_fused_kernels_and_shift_moves_keys(remap):
    g = posenc.golden(LLAMA31, positions=list(range(150)), seed=2, shift=3 if isinstance(remap, posenc.SelfExtend) else None,
                      remap=remap)
    t, entry = g["tensors"], g["manifest"]["layer_types"][0]
    q, k, v = (t["full_attention." + n][None, :, None, :] for n in "qkv")
    out = posenc.attention(q, k, v, rope=posenc.schedule(str(LLAMA31)), scale=entry["softmax_scale"], remap=remap)
    assert (out[0, :, 0] - t["full_attention.remap_out"]).abs().max().item() < 2e-6
    plain = posenc.attention(q, k, v, rope=posenc.schedule(str(LLAMA31)), scale=entry["softmax_scale"])
    assert (plain[0, :, 0] - t["full_attention.remap_out"]).abs().max().item() > 1e-2  # the remap did something
    assert entry["remap"]["tensors"] == ["full_attention.v", "full_attention.remap_logits", "full_attention.remap_out"]
    if isinstance(remap, posenc.SelfExtend):
        assert entry["remap"]["settings"] == {"kind": "self-extend", "group": 4, "window": 16}
        assert entry["k_shifted"]["delta"] == 3
        k_out, shifted = t["full_attention.k_out"], t["full_attention.k_shifted"]
        assert (shifted - k_out).abs().max().item() > 0.1  # moved ...
        rotated, _ = posenc.apply_rope(k.clone(), k.clone(), schedule=posenc.schedule(str(LLAMA31)),
                                       positions=torch.arange(150) + 3)
        # ... to p + 3, within float32 angle rounding (golden: HF's float32 angles at p, then the shift)
        assert (rotated[0, :, 0] - shifted).abs().max().item() < 1e-6 + 2e-7 * 153


def test_golden_takes_numpy_integers_and_floats():
    import numpy as np
    g = posenc.golden(LLAMA31, positions=np.arange(4), shift=np.int64(2),
                      remap=posenc.ReRoPE(window=np.int64(2), leak=np.float32(2.0)))
    assert g["manifest"]["layer_types"][0]["remap"]["settings"] == {"kind": "leaky-rerope", "window": 2, "leak": 2.0}
    assert g["manifest"]["layer_types"][0]["k_shifted"]["delta"] == 2


def test_golden_refuses_a_bad_remap_or_shift(tmp_path):
    for kwargs, pattern in ((dict(remap="rerope"), "remap must be posenc.SelfExtend"),
                            (dict(remap=posenc.SelfExtend(group=0, window=3)), "SelfExtend.group"),
                            (dict(remap=posenc.ReRoPE(window=1, leak=1e-300)), "beyond 2\\^31 radians"),
                            (dict(shift=True), "shift must be an integer"), (dict(shift=-10), "shift -10 moves"),
                            (dict(remap=posenc.ReRoPE(window=1, leak=10**400)), "leak must be a finite number"),
                            (dict(positions=range(10**9)), "1000000000 entries; at most 4096"),
                            (dict(positions=[0, 2**63]), "integers in \\[0, 2\\^31-1\\], got int")):
        with pytest.raises(posenc.ConfigError, match=pattern):
            posenc.golden(LLAMA31, tmp_path / "x", **dict(dict(positions=[0, 9]), **kwargs))
    assert not (tmp_path / "x").exists()


def test_gguf_reports_llama_cpps_schedule_and_its_agreement_with_a_config():
    r = posenc.gguf(GGUF_DIR / "qwen2_yarn.gguf")
    assert r["architecture"] == "qwen2" and r["scaling_type"] == "yarn"
    assert "agrees_with_hf" not in r
    assert len(r["inv_freq"]) == r["n_rot"] // 2
    config = {"model_type": "qwen2", "rope_theta": r["freq_base"], "hidden_size": r["n_rot"] * 4,
              "num_attention_heads": 4, "max_position_embeddings": r["n_ctx_orig"] * int(r["factor"]),
              "rope_scaling": {"rope_type": "yarn", "factor": r["factor"],
                               "original_max_position_embeddings": r["n_ctx_orig"]}}
    agreed = posenc.gguf(GGUF_DIR / "qwen2_yarn.gguf", config=config)
    assert agreed["agrees_with_hf"] is True and agreed["mismatches"] == []
    expected = posenc.schedule(**config["rope_scaling"], rope_theta=r["freq_base"], head_dim=r["n_rot"])
    assert torch.allclose(torch.tensor(r["inv_freq"], dtype=torch.float64), expected.inv_freq.double(), rtol=1e-6)
    config["rope_theta"] = 2 * r["freq_base"]
    differs = posenc.gguf(GGUF_DIR / "qwen2_yarn.gguf", config=config)
    assert differs["agrees_with_hf"] is False
    assert any("freq_base" in m["key"] for m in differs["mismatches"])


def test_gguf_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(posenc.ConfigError, match="missing.gguf"):
        posenc.gguf(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    with pytest.raises(posenc.ConfigError, match="bad.gguf|tensor|count"):
        posenc.gguf(bad)
    with pytest.raises(posenc.ConfigError, match="path"):
        posenc.gguf(None)
