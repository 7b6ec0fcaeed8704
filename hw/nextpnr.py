"""nextpnr-ecp5's JSON report (``--report``) as figures: each clock's Fmax, cells used."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ClockTiming:
    clock: str
    achieved_mhz: float
    constraint_mhz: float

    @property
    def met(self) -> bool:
        return self.achieved_mhz >= self.constraint_mhz

    @property
    def margin(self) -> float:
        """How far Fmax is above (or below, negative) the constraint, as a fraction."""
        return self.achieved_mhz / self.constraint_mhz - 1


@dataclass(frozen=True)
class NextpnrReport:
    clocks: list[ClockTiming]
    cells: dict[str, tuple[int, int]]
    """Cell type: (used, available on the part); only the types used."""


def read_report(path: Path) -> NextpnrReport:
    try:
        raw = json.loads(path.read_text())
        clocks = [ClockTiming(name, float(entry["achieved"]), float(entry["constraint"]))
                  for name, entry in sorted(raw["fmax"].items())]
        cells = {name: (int(entry["used"]), int(entry["available"]))
                 for name, entry in raw["utilization"].items() if entry["used"]}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a nextpnr report ({error})") from error
    return NextpnrReport(clocks, cells)
