"""Why llama.cpp's RoPE differs from HF's for a model (rope_table.py prints these), with the llama.cpp
source lines responsible at the commit rope.sh pins (de3ff815ea7d). Each was checked by a second run
(the command in README.md): the model agrees once the cause is removed."""

_DYNAMIC = ("HF's dynamic NTK: golden's forward pass of 131072 tokens exceeds max_position_embeddings, so HF "
            "grows the base for every position; the converter writes nothing for rope_type 'dynamic' "
            "(conversion/base.py:1445-1447) and llama.cpp has no dynamic NTK. Agrees at positions below "
            "max_position_embeddings ({ctx}).")

REASONS = {
    "MiniCPM-2B-128k": {"*": _DYNAMIC.format(ctx="0, 1, 127, 4095, 65535 checked")},
    "internlm2_5-7b-chat": {"*": _DYNAMIC.format(ctx="0, 1, 127, 4095, 32767 checked") +
                            " (InternLM2Model has no set_gguf_parameters: conversion/internlm.py)"},
    "HunyuanImage-2.1-reprompt": {"*": "HF's dynamic NTK-alpha grows the base beyond max_position_embeddings 32768; "
                                  "the converter writes the alpha-scaled base with scaling none and claims a 256K "
                                  "context (conversion/hunyuan.py:258-270). Agrees at 0, 1, 127, 4095, 32767."},
    "Qwen-1_8B": {"*": "Qwen-1's use_dynamic_ntk: HF raises the base for a 131072-token prefill "
                  "(NTK alpha from the length); no converter or loader line reads use_dynamic_ntk or "
                  "use_logn_attn (grep conversion/ src/: none). Agrees at 0, 1, 127, 4095, 8191."},
    "Kimi-K2-Instruct": {"*": "rope.scaling.yarn_beta_fast/slow = 1 are written (conversion/base.py:1437-1440) "
                         "but the deepseek2 loader never reads them (src/models/deepseek2.cpp load_arch_hparams "
                         "reads only yarn_log_multiplier, line 34), so llama.cpp ramps YaRN with the defaults "
                         "32 / 1 (src/llama-hparams.h:161-162, src/llama-context.cpp:116-117). Agrees with "
                         "beta_fast = beta_slow = 1 put in the hparams."},
    "gpt-oss-20b": {"*": "HF's YaRN with truncate: false keeps the correction range unrounded; ggml floors and "
                    "ceils it (ggml/src/ggml.c:4477-4478, ggml_rope_yarn_corr_dims), and no GGUF key says "
                    "truncate. Agrees with truncate: true in the config."},
}
