"""The test harness itself: what make test's parallel run relies on."""

import pytest


@pytest.mark.xdist_group("harness")
def test_a_group_stays_on_one_worker(request):
    """make test runs two workers with ``--dist loadgroup``; an ``xdist_group`` keeps a
    component's cases on the worker that built it, and a module's tests with the
    simulated board its fixture started. xdist learns a test's group from a suffix it
    puts on the test's id; where pytest ignores that (pytest 9.2 with xdist 3.8,
    pytest-xdist issue 1386), groups split across workers. (Builds stay whole even so:
    sim/hdl.py lets one process at a time build a folder. Before it did, split groups
    had two workers build one folder at once, and builds failed at random.)
    pyproject.toml pins a pytest that keeps the suffix."""
    if not getattr(request.config.option, "loadgroup", False):  # xdist sets it on a loadgroup worker
        pytest.skip("runs only under make test's --dist loadgroup")
    assert request.node.nodeid.endswith("@harness")
