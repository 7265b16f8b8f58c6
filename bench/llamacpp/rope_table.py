#!/usr/bin/env python3
"""rope.sh's table: one row per model and golden layer type (README.md here).

  rope_table.py OUT_DIR COMMIT TAG  ->  markdown on stdout

OUT_DIR holds one directory per model: keys.json (rope_keys.py), results.jsonl (rope_vs_hf), or a
golden_error. The reasons for the differences are in REASONS, each with the llama.cpp source
lines responsible, as read at the commit rope.sh pins; a difference without one says so.
"""
import json
import os
import sys

REASONS = {}
try:
    from rope_reasons import REASONS  # noqa: F401  (beside this file)
except ImportError:
    pass


def fmt(x):
    return "%.2g" % x


def main(argv):
    out, commit, tag = argv[1], argv[2], argv[3]
    print("llama.cpp %s (%s); positions 0, 1, 127, 4095, C, 4C, 131071 (C: the original context); "
          "n_ctx 131072.\n" % (commit, tag))
    print("| model | llama.cpp arch, rope type | layer type | q | k | max abs error (position, channel) | "
          "first beyond f32 rounding (position, channel) | why |")
    print("|---|---|---|---|---|---|---|---|")
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        if not os.path.isdir(d):
            continue
        res = os.path.join(d, "results.jsonl")
        rows = [json.loads(l) for l in open(res)] if os.path.exists(res) else []
        if rows and "golden_error" in rows[0]:
            print("| %s | | | | | | | posenc golden: %s |" % (name, rows[0]["golden_error"].replace("|", "/")))
            continue
        keys = json.load(open(os.path.join(d, "keys.json")))
        if "not_converted" in keys:
            print("| %s | not converted | | | | | | %s |" % (name, keys["not_converted"]))
            continue
        by_layer = {}
        for r in rows:  # golden's vision sequence (M-RoPE, 3-axis ids) gets its own row
            vision = r["tensor"].startswith("vision.")
            lt = r["layer_type"] + (", vision ids" if vision else "")
            by_layer.setdefault(lt, {})[r["tensor"].split(".")[-1]] = r
        for lt, t in by_layer.items():
            q, k = t["q"], t["k"]
            worst = max((q, k), key=lambda r: r["max_abs_error"])
            first = q.get("first_difference") or k.get("first_difference")
            verdict = lambda r: "agrees" if r["agrees"] else "differs"
            why = REASONS.get(name, {}).get(lt, REASONS.get(name, {}).get("*", "")) if not (q["agrees"] and k["agrees"]) else ""
            if not why and not (q["agrees"] and k["agrees"]):
                why = "(not yet explained)"
            print("| %s | %s, %s | %s | %s | %s | %s (%d, %d) | %s | %s |" % (
                name, keys["arch"], keys["rope_type"], lt, verdict(q), verdict(k), fmt(worst["max_abs_error"]),
                worst["max_error_at"]["position"], worst["max_error_at"]["channel"],
                "(%d, %d): %s > %s" % (first["position"], first["channel"], fmt(first["abs_error"]), fmt(first["tolerance"]))
                if first else "", why))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
