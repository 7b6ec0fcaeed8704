"""The host side's types, checked: protocol/ and driver/ pass ``mypy --strict`` (with the
compiled parts' stubs, driver/_fastpath.pyi and driver/_linkpath.pyi)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("protocol", "driver")


def test_the_protocol_core_and_the_data_paths_pass_mypy_strict(tmp_path):
    # The checkout is the netblt package (pyproject.toml's package-dir): mypy finds it
    # under its name through a link, as an installed package.
    (tmp_path / "netblt").symlink_to(ROOT)
    packages = [argument for layer in CHECKED for argument in ("-p", f"netblt.{layer}")]
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(ROOT / "build" / "mypy"),
                           *packages], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "MYPYPATH": str(tmp_path)}, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr

