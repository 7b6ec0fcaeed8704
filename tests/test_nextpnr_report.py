"""netblt.hw.nextpnr: nextpnr's JSON report read as Fmax and cell figures."""

import json

import pytest

from netblt.hw.nextpnr import read_report


def test_clocks_and_cells(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({
        "fmax": {"sys": {"achieved": 59.77, "constraint": 50}, "eth_rx": {"achieved": 120.0, "constraint": 125}},
        "utilization": {"DP16KD": {"available": 56, "used": 41}, "EHXPLLL": {"available": 2, "used": 0}},
        "critical_paths": [],
    }))
    report = read_report(path)
    assert [(c.clock, c.met) for c in report.clocks] == [("eth_rx", False), ("sys", True)]
    assert report.clocks[1].margin == pytest.approx(0.1954)
    assert report.cells == {"DP16KD": (41, 56)}


@pytest.mark.parametrize("text", ["", "{}", '{"fmax": {"clk": {}}, "utilization": {}}', "[1]"])
def test_not_a_report(tmp_path, text):
    path = tmp_path / "report.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="not a nextpnr report"):
        read_report(path)


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match="not a nextpnr report"):
        read_report(tmp_path / "absent.json")
