"""The suite's own order (tests/conftest.py): the files holding its longest items are
collected first, so pytest-xdist's workers start on them and the run ends on short items."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import LONGEST_FIRST, ROOT


def test_the_longest_files_are_collected_first() -> None:
    files = ["tests/test_docs_links.py", "tests/test_packaging.py"]  # light imports, both
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", *files],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},  # -v: other lines
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    order = [ln.split("::")[0].split("/")[-1] for ln in proc.stdout.splitlines() if "::" in ln]
    runs = [name for i, name in enumerate(order) if i == 0 or order[i - 1] != name]
    assert "test_packaging.py" in LONGEST_FIRST
    assert runs == ["test_packaging.py", "test_docs_links.py"], runs  # each file in one piece
