import json
from pathlib import Path

import pytest

VECTORS = json.loads((Path(__file__).parent / "vectors" / "packets.json").read_text())


@pytest.fixture(params=VECTORS, ids=[v["name"] for v in VECTORS])
def vector(request):
    return request.param
