import json
import os
import pathlib

import pytest

REFERENCE = pathlib.Path(os.environ.get("POSENC_REFERENCE_DIR", pathlib.Path(__file__).parents[2] / "tests" / "data"))


@pytest.fixture(scope="session")
def golden():
    return json.loads((REFERENCE / "hf-golden.json").read_text())


@pytest.fixture(scope="session")
def real_configs():
    return sorted(p for p in (REFERENCE / "real-configs").glob("*.json") if p.name not in ("manifest.json", "keys-in-the-wild.json"))
