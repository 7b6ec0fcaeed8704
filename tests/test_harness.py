"""The test harness itself: what make test's parallel run relies on."""

import pytest


@pytest.mark.xdist_group("harness")
def test_a_group_stays_on_one_worker(request):
    """make test runs two workers with ``--dist loadgroup``, and each Verilator build
    folder is used by the tests of one ``xdist_group``: the group's worker builds it
    once, then runs its cases. xdist learns a test's group from a suffix it puts on the
    test's id; where pytest ignores that (pytest 9.2 with xdist 3.8, pytest-xdist
    issue 1386), groups split across workers, two of them build one folder at once,
    and builds fail at random. pyproject.toml pins a pytest that keeps the suffix."""
    if not getattr(request.config.option, "loadgroup", False):  # xdist sets it on a loadgroup worker
        pytest.skip("runs only under make test's --dist loadgroup")
    assert request.node.nodeid.endswith("@harness")
