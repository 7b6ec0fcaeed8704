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


def pytest_collection_modifyitems(items):
    """The bitstream build first: it takes a worker for most of the run (make test's -n 2)."""
    items.sort(key=lambda item: "test_bitstream" not in item.nodeid)
