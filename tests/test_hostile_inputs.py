"""Inputs from the #16 probe that took a command down: an absurd thread count (thousands of
threads exhaust the process limit), a run id past SQLite's integers, a FIFO named like a
session (opening it blocked forever), a symlink loop. Each is one line and exit 2; too
many threads for the CPUs is a warning."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from engine.config import MAX_THREADS, RunConfig
from engine.errors import ConfigError
from tests.conftest import DEMO_CNN
from tests.test_cli import opscope


def _one_line(proc: object, said: str) -> None:
    rc, err = proc.returncode, proc.stderr  # type: ignore[attr-defined]
    assert rc == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_thread_counts_that_cannot_help(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="more than 1,024"):
        RunConfig(threads=MAX_THREADS + 1)
    _one_line(opscope("bench", DEMO_CNN, "--threads", "100000", "--duration", "0.1"),
              "threads 100,000 is more than 1,024")  # fmt: skip
    _one_line(opscope("tune", DEMO_CNN, "--space", "threads=1,5000"), "more than 1,024")
    crowded = (os.cpu_count() or 1) + 1
    proc = opscope("bench", DEMO_CNN, "--threads", str(crowded), "--duration", "0.2",
                   "--no-live", check=True)  # fmt: skip
    assert f"{crowded} threads on {crowded - 1} logical CPUs" in proc.stderr + proc.stdout


def test_a_run_id_past_sqlites_integers(tmp_path: Path) -> None:
    session = tmp_path / "s.opscope"
    opscope("bench", DEMO_CNN, "--duration", "0.2", "--no-live", "--session", session,
            check=True)  # fmt: skip
    huge = f"{session}:99999999999999999999"
    _one_line(opscope("session", "show", huge), "no run 99999999999999999999")
    _one_line(opscope("compare", f"{session}:1", huge), "no run 99999999999999999999")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_a_symlink_loop_is_not_a_session(tmp_path: Path) -> None:
    fifo = tmp_path / "x.opscope"
    os.mkfifo(fifo)
    for args in (("session", "show", fifo), ("report", fifo), ("export", fifo, "--trace",
                 tmp_path / "t.json"), ("compare", fifo, fifo)):  # fmt: skip
        _one_line(opscope(*args), "not a regular file")
    loop = tmp_path / "loop1"
    os.symlink(tmp_path / "loop2", loop)
    os.symlink(loop, tmp_path / "loop2")
    proc = opscope("report", loop)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and sys.platform != "win32"


def test_nan_outputs_fail_the_accuracy_check() -> None:
    """All-NaN output against a finite FP32 one: counted, cosine 0, no top-1 credit (it
    read cosine 1.0 and top-1 100%: NaNs were dropped and nothing left counted as
    perfect); the CLI line and the app's badge say FAILED; the session keeps the count."""
    import numpy as np

    from engine.measure.accuracy import compare_outputs
    from engine.session.run_fields import accuracy as _accuracy

    ref = [[np.eye(3, dtype=np.float32)]]
    got = [[np.full((3, 3), np.nan, np.float32)]]
    r = compare_outputs(["logits"], ref, got)
    assert r.nonfinite == 9 and r.cosine == 0.0 and r.top1_agreement == 0.0
    same = compare_outputs(["logits"], ref, ref)
    assert same.nonfinite == 0 and same.cosine == pytest.approx(1.0)
    kept = _accuracy(r.to_json())  # as a session reads it back
    assert kept is not None and kept.nonfinite == 9
    import io

    from engine.cli.printer import print_summary
    from engine.cli.results import RunResult

    result = RunResult()
    result.feed(r)
    out = io.StringIO()
    print_summary(result, out)
    assert "FAILED: 9 output values are NaN or infinite" in out.getvalue()


def test_the_badge_says_a_nan_output_failed(qtbot) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    from engine.measure.accuracy import compare_outputs
    from widgets.accuracy_badge import AccuracyBadge

    badge = AccuracyBadge()
    qtbot.addWidget(badge)
    nan = [[np.full((2, 3), np.nan, np.float32)]]
    badge.set_result(compare_outputs(["y"], [[np.ones((2, 3), np.float32)]], nan))
    assert badge.text().startswith("FAILED: 6 values NaN/inf") and badge._state == "bad"


def test_a_run_time_error_is_one_line_with_the_right_verb(tmp_path: Path) -> None:
    """Token ids past the vocabulary: the model loaded and failed running; ONNX Runtime's
    own log line (a raw, coloured one) never reaches the terminal."""
    import numpy as np

    from tests.conftest import DEMO_TRANSFORMER

    data = tmp_path / "oor.npz"
    np.savez(data, input_ids=np.full((1, 16), 99_999, np.int64))
    proc = opscope("bench", DEMO_TRANSFORMER, "--inputs", data, "--duration", "0.1")
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("opscope: error")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert "failed running the model" in errors[0] and "idx=99999" in errors[0]
    assert "cannot load" not in proc.stderr and "onnxruntime:" not in proc.stderr


def test_inputs_that_cannot_fit_in_memory_are_refused_before_allocating(tmp_path: Path) -> None:
    """They ended in MemoryError tracebacks (or swapped the machine first): the bytes are
    estimated from the shapes (and an .npz's headers) and compared with what is free."""
    import io
    import zipfile

    import numpy as np

    from tests.conftest import DEMO_TRANSFORMER

    _one_line(opscope("bench", DEMO_CNN, "--batch", "100000000", "--duration", "0.1"),
              "--batch: must be at least 1 and at most 1,048,576")  # fmt: skip
    # (--batch is bounded at 1,048,576 by the parser now: the batch axis set by --shape)
    _one_line(opscope("bench", DEMO_CNN, "--shape", "image=100000000x3x64x64", "--duration",
                      "0.1"), "would take 4.9 TB")  # fmt: skip
    huge_shape = "input_ids=1x1000000000000"  # 8 TB of int64 on any machine
    _one_line(opscope("bench", DEMO_TRANSFORMER, "--shape", huge_shape, "--duration", "0.1"),
              "input_ids 1x1000000000000 would take 8.0 TB")  # fmt: skip
    header = io.BytesIO()  # an .npy header that claims 8 TB, with 64 bytes behind it
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<i8", "fortran_order": False, "shape": (1, 10**12)}
    )
    header.write(b"\0" * 64)
    huge = tmp_path / "huge.npz"
    with zipfile.ZipFile(huge, "w") as z:
        z.writestr("input_ids.npy", header.getvalue())
    _one_line(opscope("bench", DEMO_TRANSFORMER, "--inputs", huge, "--duration", "0.1"),
              "would take 8.0 TB")  # fmt: skip
    proc = opscope("bench", DEMO_TRANSFORMER, "--shape", "input_ids=1x0", "--duration", "0.2",
                   "--no-live", check=True)  # fmt: skip
    assert "holds no elements" in proc.stderr + proc.stdout


def test_an_error_naming_a_path_with_a_newline_is_one_line(tmp_path: Path) -> None:
    """The path is the user's, but its newline (or an ANSI escape) split the one line."""
    odd = tmp_path / "a\nb\x1b[31m.opscope"
    _one_line(opscope("session", "show", odd), "a\\nb\\x1b[31m.opscope: file not found")
