"""make reproduce's pipeline (bench/reproduce.py), quick: every study's table and figure."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree

import pytest

from netblt.bench import reproduce
from netblt.bench.reproduce import (
    HAYSTACK_TCP, KECK, RFC1030_ETHERNET, RFC1030_TOKEN_RING, RFC1030_WIDEBAND, STUDIES, Study, main,
)
from netblt.sim.wan.tun_path import TunError


@pytest.mark.skipif(os.geteuid() != 0, reason="the real-time studies need root (network namespaces)")
def test_every_study_writes_its_table_beside_the_reports_numbers_and_its_figure(tmp_path):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "reproduce.md").read_text()
    for study in STUDIES:
        assert f"## {study.title}" in report and f"figures/{study.name}.svg" in report
        svg = ElementTree.parse(tmp_path / "figures" / f"{study.name}.svg").getroot()
        assert svg.tag.endswith("svg")
    for study in STUDIES:
        rows = _rows_of(report, study.title)
        assert len(rows) == ROWS[study.name], study.name
        for theirs, ours, ratio in rows:
            assert ours is None or ours > 0, (study.name, ours)
            if ratio is not None:
                assert abs(ours / theirs - ratio) < 0.01, (study.name, theirs, ours, ratio)
        assert any(ours for _, ours, _ in rows), study.name


ROWS = {"rfc1030_wideband": len({r.setting for r in RFC1030_WIDEBAND}),
        "rfc1030_token_ring": len({r.setting for r in RFC1030_TOKEN_RING}),
        "rfc1030_ethernet": len({r.setting for r in RFC1030_ETHERNET}), "keck_acts": len(KECK),
        "rig_hops": 1, "keck_ber": 1, "haystack_mtu": len(HAYSTACK_TCP), "haystack_cpu": 2, "rig_forwarding": 2}
"""Each study's rows, quick: one a setting; across satellite hops and bit error rates the
first setting only, Haystack's runs at 1,500 bytes only, the gateware at RIG's two
largest frames."""


def _rows_of(report: str, title: str) -> list[tuple[float, float, float]]:
    """(report, netblt, ratio) of each row of the study's table."""
    section = report.split(f"## {title}")[1].split("![")[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return [tuple(None if cell.strip() == "-" else float(cell.split()[0]) for cell in row[1:4]) for row in rows[1:]]


def test_a_study_that_cannot_run_ends_the_run_with_one_line(tmp_path, monkeypatch, capsys):
    """Namespaces a killed run left behind (``ip netns add`` refuses the name), or a transfer
    that failed: one line naming the study, no traceback, and no reproduce.md half written."""
    def leftover(quick):
        raise TunError("ip netns add nb-repro-a: Cannot create namespace file: File exists")
    monkeypatch.setattr(reproduce, "STUDIES", (Study("rig_hops", 1991, "RIG", "Mb/s", "hops", leftover, ""),))
    assert main(["--quick", "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err == "reproduce: rig_hops: ip netns add nb-repro-a: Cannot create namespace file: " \
                                      "File exists\n"
    assert not (tmp_path / "reproduce.md").exists()
