#!/usr/bin/env bash
# `pip install .` as the README says, into a fresh virtual environment that sees Debian's torch
# (--system-site-packages), offline (--no-index); then the README's Python example runs from a
# folder outside the checkout, importing the installed package. Usage: pip_install.sh SRC WORK
set -euo pipefail
src=$1
work=$2
rm -rf "$work"
mkdir -p "$work/elsewhere"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
POSENC_PIP_BUILD_DIR="$work/build" "$work/venv/bin/python" -m pip install --no-build-isolation --no-index -q "$src"
cd "$work/elsewhere"
POSENC_EXAMPLES="$src/examples/configs" POSENC_VENV="$work/venv" "$work/venv/bin/python" - <<'PY'
import os, pathlib
import torch, posenc

here = pathlib.Path(posenc.__file__).resolve()
assert pathlib.Path(os.environ["POSENC_VENV"]).resolve() in here.parents, f"posenc imported from {here}, not the venv"
configs = pathlib.Path(os.environ["POSENC_EXAMPLES"])
s = posenc.schedule(str(configs / "llama3-128k.json"))
q, k = torch.randn(1, 16, 32, 128), torch.randn(1, 16, 8, 128)
q, k = posenc.apply_rope(q, k, schedule=s)
out = posenc.attention(q, k, torch.randn(1, 16, 8, 128), alibi=posenc.alibi_slopes(32))
posenc.rope_shift(k.detach().clone(), -4, schedule=s)
qx, kx = posenc.nn.XPos(128)(q, k)  # the rotary variants' module (rotary_variants.py) is installed too
axial = posenc.nn.AxialRotaryEmbedding(32, axes=2)
assert axial(q, k, axial.grid(4, 4))[0].shape == q.shape
cos, sin = posenc.hf.RotaryEmbedding(str(configs / "llama3-128k.json"))(q, torch.arange(16)[None, :])
assert cos.shape == (1, 16, 128)
assert not [c["name"] for c in posenc.check() if not c["passed"]]
assert (here.parent / "py.typed").exists()
print("pip install: posenc imported from", here.parent)
PY
