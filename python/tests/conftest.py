import json
import os
import pathlib
import subprocess
import sys

import pytest

REFERENCE = pathlib.Path(os.environ.get("POSENC_REFERENCE_DIR", pathlib.Path(__file__).parents[2] / "tests" / "data"))


@pytest.fixture(scope="session")
def golden():
    return json.loads((REFERENCE / "hf-golden.json").read_text())


@pytest.fixture(scope="session")
def real_configs():
    return sorted(p for p in (REFERENCE / "real-configs").glob("*.json") if p.name not in ("manifest.json", "keys-in-the-wild.json"))


def peak_memory_ratio(expression: str) -> float:
    """The peak resident memory that evaluating `expression` (a float32 tensor, posenc and torch
    imported) adds, over the result's size, measured in a fresh interpreter."""
    code = ("import resource, torch, posenc\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            f"t = {expression}\n"
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 / t.numel() / 4)\n")
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
