"""make reproduce's pipeline (bench/reproduce.py), quick: every study's table and figure."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from netblt.bench.reproduce import RFC1030_WIDEBAND, STUDIES, main


def test_every_study_writes_its_table_beside_the_reports_numbers_and_its_figure(tmp_path):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "reproduce.md").read_text()
    for study in STUDIES:
        assert f"## {study.title}" in report and f"figures/{study.name}.svg" in report
        svg = ElementTree.parse(tmp_path / "figures" / f"{study.name}.svg").getroot()
        assert svg.tag.endswith("svg")
    settings = {(r.burst, r.interval_ms, r.packet, r.buffers) for r in RFC1030_WIDEBAND}
    rows = [line for line in report.splitlines() if line.startswith("| 5/")]
    assert len(rows) == len(settings) == 11
    for line in rows:
        theirs, ours, ratio = (cell.strip().split()[0] for cell in line.strip("|").split("|")[1:4])
        assert 0.2 < float(ours) < 1.1 and abs(float(ours) / float(theirs) - float(ratio)) < 0.01, line
