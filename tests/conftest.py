import json
from pathlib import Path

import pytest

VECTORS = json.loads((Path(__file__).parent / "vectors" / "packets.json").read_text())


@pytest.fixture(params=VECTORS, ids=[v["name"] for v in VECTORS])
def vector(request):
    return request.param


@pytest.fixture(autouse=True)
def no_process_outlives_its_test():
    yield
    import clitools
    while clitools.STARTED:
        proc = clitools.STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()

