// The literature's claims beside the leaderboard: each one a comparison of measured means, with
// its verdict. A difference smaller than the two rows' spreads added (sample standard deviations
// over seeds) is not called either way. Disagreement is a result to report, not to tune away.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "leaderboard_files.h"

namespace posenc::lab {
namespace {

constexpr const char* kAgrees = "agrees";
constexpr const char* kDisagrees = "disagrees";
constexpr const char* kTie = "within the seeds' spread";
constexpr const char* kNotMeasured = "not measured";

struct Board {
  const LeaderboardResult& r;
  const std::string& corpus;

  // The measured text of a claim whose rows are missing.
  static std::string needs(std::initializer_list<const char*> rows) {
    std::string s = "needs rows of";
    for (const char* r : rows) s += std::string(" ") + r;
    return s;
  }
  const Aggregate* at(const std::string& row, const std::string& metric, double multiple) const {
    const Aggregate* a = find_aggregate(r, corpus, row, metric, multiple);
    return a && a->seeds ? a : nullptr;
  }
  // The longest multiple with this metric (0: none).
  double longest(const std::string& metric) const {
    double m = 0;
    for (const Aggregate& a : r.aggregates)
      if (a.metric == metric && (a.corpus == corpus || metric.rfind("sort_", 0) == 0)) m = std::max(m, a.multiple);
    return m;
  }
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string times(double multiple) {  // "4x", "1.5x"
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gx", multiple);
  return buf;
}

// "a is better than b": agrees, disagrees, or a tie within the spread.
const char* compare(const Aggregate& a, const Aggregate& b, bool lower_is_better) {
  const double gap = lower_is_better ? b.mean - a.mean : a.mean - b.mean;
  if (std::fabs(gap) <= a.spread + b.spread) return kTie;
  return gap > 0 ? kAgrees : kDisagrees;
}

// Combines verdicts: any disagreement disagrees; else any tie ties; else agrees.
std::string all_of(std::initializer_list<std::string> verdicts) {
  std::string out = kAgrees;
  for (const std::string& v : verdicts) {
    if (v == kDisagrees) return kDisagrees;
    if (v == kTie) out = kTie;
  }
  return out;
}

ClaimCheck alibi_flat(const Board& b) {
  ClaimCheck c{"ALiBi's loss stays flat past the training length, while sinusoidal's grows", "Press et al. 2022 (ALiBi)",
               Board::needs({"alibi", "sinusoidal"}), kNotMeasured};
  const double x = b.longest("bpc");
  const Aggregate *a1 = b.at("alibi", "bpc", 1), *ax = b.at("alibi", "bpc", x), *s1 = b.at("sinusoidal", "bpc", 1),
                  *sx = b.at("sinusoidal", "bpc", x);
  if (!a1 || !ax || !s1 || !sx || x <= 1) return c;
  const double da = ax->mean - a1->mean, ds = sx->mean - s1->mean;
  c.measured = "bpc from 1x to " + times(x) + ": ALiBi " + num(a1->mean) + " → " + num(ax->mean) + " (" + (da >= 0 ? "+" : "") + num(da) +
               "), sinusoidal " + num(s1->mean) + " → " + num(sx->mean) + " (" + (ds >= 0 ? "+" : "") + num(ds) + ")";
  // Flat: within 0.1 bit (5% of ~2 bits); grows: by more than 0.3 bit. A change within the
  // seeds' spread of either threshold is not called.
  const double sa = a1->spread + ax->spread, ss = s1->spread + sx->spread;
  if (std::fabs(da - 0.1) <= sa || std::fabs(ds - 0.3) <= ss) c.verdict = kTie;
  else c.verdict = da <= 0.1 && ds > 0.3 ? kAgrees : kDisagrees;
  return c;
}

ClaimCheck yarn_ntk_pi(const Board& b) {
  ClaimCheck c{"Zero-shot past the training length: YaRN beats NTK-aware scaling, which beats PI", "Peng et al. 2023 (YaRN); Chen et al. 2023 (PI)",
               Board::needs({"rope+yarn", "rope+ntk", "rope+pi"}), kNotMeasured};
  const Aggregate *y = b.at("rope+yarn", "bpc", 4), *n = b.at("rope+ntk", "bpc", 4), *p = b.at("rope+pi", "bpc", 4);
  if (!y || !n || !p) return c;
  c.measured = "bpc at 4x: YaRN " + cell_text(y) + ", NTK " + cell_text(n) + ", PI " + cell_text(p);
  c.verdict = all_of({compare(*y, *n, true), compare(*n, *p, true)});
  return c;
}

ClaimCheck pi_finetune(const Board& b) {
  ClaimCheck c{"PI recovers after a short fine-tune", "Chen et al. 2023 (PI)", "needs fine-tuned rows (--full)", kNotMeasured};
  // Retrieval at 2x (passkey's fine-tune length), else bits per character at 4x (extrapolate's).
  const Aggregate *zero = b.at("rope+pi", "passkey", 2), *tuned = b.at("rope+pi+ft", "passkey", 2);
  if (zero && tuned) {
    c.measured = "passkey exact match at 2x: zero-shot " + cell_text(zero) + ", fine-tuned " + cell_text(tuned);
    c.verdict = compare(*tuned, *zero, false);
    return c;
  }
  zero = b.at("rope+pi", "bpc", 4);
  tuned = b.at("rope+pi+ft", "bpc", 4);
  if (zero && tuned) {
    c.measured = "bpc at 4x: zero-shot " + cell_text(zero) + ", fine-tuned " + cell_text(tuned);
    c.verdict = compare(*tuned, *zero, true);
  }
  return c;
}

ClaimCheck nope_sort(const Board& b) {
  ClaimCheck c{"NoPE generalises to longer inputs better than RoPE and ALiBi on a synthetic task", "Kazemnejad et al. 2023",
               "needs sorting rows of nope rope alibi", kNotMeasured};
  const double x = b.longest("sort_tokens");
  const Aggregate *n = b.at("nope", "sort_tokens", x), *r = b.at("rope", "sort_tokens", x), *a = b.at("alibi", "sort_tokens", x);
  if (!n || !r || !a || x <= 1) return c;
  c.measured = "sorting, token accuracy at " + times(x) + ": NoPE " + cell_text(n) + ", RoPE " + cell_text(r) + ", ALiBi " + cell_text(a);
  c.verdict = all_of({compare(*n, *r, false), compare(*n, *a, false)});
  return c;
}

ClaimCheck better_than(const Board& b, const std::string& row, const std::string& than, const std::string& claim, const std::string& source) {
  ClaimCheck c{claim, source, "needs rows of " + row + " " + than, kNotMeasured};
  const double x = b.longest("bpc");
  const Aggregate *p = b.at(row, "bpc", x), *q = b.at(than, "bpc", x);
  if (!p || !q) return c;
  c.measured = "bpc at " + times(x) + ": " + row + " " + cell_text(p) + ", " + than + " " + cell_text(q);
  c.verdict = compare(*p, *q, true);
  return c;
}

ClaimCheck fox_rope(const Board& b) {
  ClaimCheck c = better_than(b, "fox", "rope", "The Forgetting Transformer beats RoPE at and past the training length", "Lin et al. 2025 (FoX)");
  const Aggregate *f1 = b.at("fox", "bpc", 1), *r1 = b.at("rope", "bpc", 1);
  if (c.verdict == kNotMeasured || !f1 || !r1) return c;
  c.measured = "bpc at 1x: fox " + cell_text(f1) + ", rope " + cell_text(r1) + "; " + c.measured;
  c.verdict = all_of({compare(*f1, *r1, true), c.verdict});
  return c;
}

ClaimCheck fire_better(const Board& b) {
  ClaimCheck c{"FIRE extrapolates better than ALiBi and Kerple", "Li et al. 2023 (FIRE)", Board::needs({"fire", "alibi", "kerple"}),
               kNotMeasured};
  const double x = b.longest("bpc");
  const Aggregate *f = b.at("fire", "bpc", x), *a = b.at("alibi", "bpc", x), *k = b.at("kerple", "bpc", x);
  if (!f || !a || !k) return c;
  c.measured = "bpc at " + times(x) + ": fire " + cell_text(f) + ", alibi " + cell_text(a) + ", kerple " + cell_text(k);
  c.verdict = all_of({compare(*f, *a, true), compare(*f, *k, true)});
  return c;
}

// Stable: bits per character from 1x to the longest length rise by at most 0.1 bit (ALiBi's
// flatness threshold above), RoPE's rise beside it; within the spread of the threshold: a tie.
ClaimCheck xpos_stable(const Board& b) {
  ClaimCheck c{"xPos stays stable past its training length", "Sun et al. 2022 (xPos)", Board::needs({"xpos"}), kNotMeasured};
  const double x = b.longest("bpc");
  const Aggregate *x1 = b.at("xpos", "bpc", 1), *xx = b.at("xpos", "bpc", x), *r1 = b.at("rope", "bpc", 1), *rx = b.at("rope", "bpc", x);
  if (!x1 || !xx || x <= 1) return c;
  const double dx = xx->mean - x1->mean;
  c.measured = "bpc from 1x to " + times(x) + ": xPos " + num(x1->mean) + " → " + num(xx->mean) + " (" + (dx >= 0 ? "+" : "") + num(dx) + ")";
  if (r1 && rx) {
    const double dr = rx->mean - r1->mean;
    c.measured += ", RoPE " + num(r1->mean) + " → " + num(rx->mean) + " (" + (dr >= 0 ? "+" : "") + num(dr) + ")";
  }
  if (std::fabs(dx - 0.1) <= x1->spread + xx->spread) c.verdict = kTie;
  else c.verdict = dx <= 0.1 ? kAgrees : kDisagrees;
  return c;
}

}  // namespace

std::vector<ClaimCheck> check_claims(const LeaderboardResult& r, const std::string& corpus) {
  const Board b{r, corpus};
  return {alibi_flat(b),
          yarn_ntk_pi(b),
          pi_finetune(b),
          nope_sort(b),
          better_than(b, "kerple", "alibi", "Kerple extrapolates better than ALiBi", "Chi et al. 2022 (KERPLE)"),
          fire_better(b),
          xpos_stable(b),
          fox_rope(b)};
}

}  // namespace posenc::lab
