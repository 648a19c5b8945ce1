"""tests/built_once.py: what several test processes ask for at once is built by one of them,
and every one of them gets that build; a build that failed is built again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.built_once import Built, built_in
from tests.conftest import ROOT

# a worker of the test run: asks for the build "thing" in the shared folder argv[1]
WORKER = """
import sys, time
from pathlib import Path
from tests.built_once import built_in

root = Path(sys.argv[1])

def build(folder):
    with open(root / "builds.log", "a") as log:
        log.write("built\\n")
    time.sleep(1.0)  # the other worker asks meanwhile
    (folder / "thing.txt").write_text("made once")
    return folder / "thing.txt", {"by": sys.argv[2]}

path, notes = built_in(root, "thing", build)
print(path, notes["by"], path.read_text())
"""


def test_two_processes_share_one_build(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), f"gw{i}"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]  # fmt: skip
    said = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], said
    assert (tmp_path / "builds.log").read_text() == "built\n"  # one build, not one each
    outs = {out.strip() for out, _ in said}
    assert len(outs) == 1, outs  # the same file and notes for both
    assert outs.pop().endswith("made once")


def test_a_failed_build_is_built_again(tmp_path: Path) -> None:
    def broken(folder: Path) -> Built:
        (folder / "half.txt").write_text("half")
        raise RuntimeError("the recording failed")

    with pytest.raises(RuntimeError):
        built_in(tmp_path, "thing", broken)

    def good(folder: Path) -> Built:
        assert not (folder / "half.txt").exists()  # nothing of the failed try is kept
        (folder / "thing.txt").write_text("ok")
        return folder / "thing.txt", {"n": 1}

    path, notes = built_in(tmp_path, "thing", good)
    assert path.read_text() == "ok" and notes == {"n": 1}
    assert json.loads((tmp_path / "built-thing.json").read_text())["file"] == "thing.txt"
