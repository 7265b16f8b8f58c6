// The audit of issue 32 ("The learner's path"), item by item as the issue names them, with the
// tour step or the command that shows each now, and what is not done. The markdown of the tour
// prints it with each step's claims as measured in the same run (tour_command.cc), so a row
// cannot claim a step that does not exist or fails.
#include "tour_coverage.h"

namespace posenc::cli::tour {

const std::vector<CoverageItem>& coverage() {
  static const std::vector<CoverageItem> items = {
      {Audit::kMissing, {"self-attention without positions is permutation-invariant", "没有位置的自注意力对排列不变"},
       "permutation", "", {}},
      {Audit::kMissing, {"the raw-integer-position pitfall (two runs, loss curves side by side)", "原始整数位置的陷阱（两次训练，并排的损失曲线）"},
       "raw-integer-run", "posenc tour raw-integer", {}},
      {Audit::kMissing, {"plotting the learner's own table to debug a wrong heatmap", "画出学习者自己的表来调试错误的热图"},
       "heatmap-debug", "posenc plot heatmap --from FILE -o table.svg", {}},
      {Audit::kMissing, {"the sqrt(d_model) embedding scaling", "sqrt(d_model) 嵌入缩放"}, "embedding-scale",
       "posenc lab extrapolate --schemes sinusoidal --embed-scale; posenc.nn.TokenPositionEmbedding(vocab, dim, scale=True) in Python",
       {}},
      {Audit::kMissing, {"padding: positions of pads, the attention mask, positions from the mask",
                         "填充：填充位置、注意力掩码、由掩码计算位置"},
       "padding", "", {}},
      {Audit::kMissing, {"the position cross terms in (e + p) W_Q W_K^T (e + p)^T", "(e + p) W_Q W_K^T (e + p)^T 中的位置交叉项"},
       "cross-terms", "", {}},
      {Audit::kMissing, {"after W_Q and W_K the sinusoidal products lose their relative, monotone form",
                         "经过 W_Q 和 W_K 后正弦乘积失去相对、单调的形式"},
       "cross-terms", "", {}},
      {Audit::kMissing, {"the sinusoidal base 100 vs 10^4 vs 10^6 experiment past 512 (trained at 64, scored to 1024: training at 512 costs too much here)",
                         "正弦底数 100、10^4、10^6 在 512 之后的实验（在 64 上训练、评估到 1024：在本机上以 512 训练代价太大）"},
       "sinusoidal-bases", "posenc lab extrapolate --schemes sinusoidal --sinusoidal-bases 100,1000000", {}},
      {Audit::kWrong, {"explain, spec and freqs described BERT, BLOOM and Falcon (alibi) as RoPE models",
                       "explain、spec 和 freqs 把 BERT、BLOOM 和 Falcon（alibi）当作 RoPE 模型描述"},
       nullptr, "posenc explain --config tests/data/positions-configs/bert-base-uncased.json", {}},
      {Audit::kPartly, {"the sorting task's previous-token head, found by measurement", "排序任务中通过测量找到的前一词元注意力头"},
       "sort-heads", "posenc lab heads --model out/lab-sort/sort-rope.pt", {}},
      {Audit::kPartly, {"learned vs sinusoidal past the training length", "超出训练长度时可学习位置与正弦位置的对比"},
       "learned-vs-sinusoidal", "posenc tour learned-length", {}},
      {Audit::kPartly, {"fusion add / concat / multiply outside --full", "在 --full 之外使用 add / concat / multiply 融合"}, "fusion",
       "posenc lab extrapolate --schemes sinusoidal --fusion concat,multiply", {}},
      {Audit::kPartly, {"2-D RoPE without the mrope_section workaround", "不借助 mrope_section 的二维 RoPE"}, "rope-2d",
       "posenc freqs --vision qwen2_vl --head-dim 80 (or --vision --config FILE); posenc.vision_2d_schedule(head_dim) in Python",
       {}},
      {Audit::kPartly, {"a DeBERTa heatmap", "DeBERTa 热图"}, "deberta-buckets", "", {}},
      {Audit::kPartly, {"the heatmap of a trained learned table (--model)", "训练后可学习位置表的热图（--model）"},
       "learned-vs-sinusoidal", "posenc plot heatmap --model out/lab/learned.pt -o learned.png", {}},
      {Audit::kPartly, {"PE(p).PE(p+k) depends only on k, checked and not only drawn", "PE(p).PE(p+k) 只取决于 k：经过检验而不只是画出"},
       "sinusoidal", "", {}},
      {Audit::kPartly, {"the numerics of div_term: float32 angles vs double", "div_term 的数值：float32 角度与 double"},
       "float32-angles", "", {}},
      {Audit::kErratum, {"a tutorial loop with i stepping by two is the table of base 10^8", "i 以 2 为步长的教程循环是底数 10^8 的表"},
       "erratum-base", "", {}},
      {Audit::kErratum, {"the RoPE score stated without its sine term", "漏掉正弦项的 RoPE 分数公式"}, "rope-sine-term", "", {}},
      {Audit::kPicture, {"attention maps with token labels and a colour scale", "带词元标签和色标的注意力图"}, "sort-heads",
       "posenc plot attention --model out/lab-sort/sort-rope.pt --digits 31415926 -o map.png", {}},
      {Audit::kPicture, {"chart titles that say what the chart shows (ALiBi's curves)", "说明图中内容的标题（ALiBi 的曲线）"}, nullptr,
       "posenc plot decay --scheme alibi -o alibi.svg", {}},
  };
  return items;
}

Text audit_name(Audit a) {
  switch (a) {
    case Audit::kMissing: return {"missing", "缺失"};
    case Audit::kWrong: return {"wrong", "错误"};
    case Audit::kPartly: return {"partly", "部分"};
    case Audit::kErratum: return {"erratum", "勘误"};
    case Audit::kPicture: return {"picture", "图"};
  }
  return {"?", "?"};
}

}  // namespace posenc::cli::tour
