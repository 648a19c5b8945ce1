"""Output paths never destroy what they name (#30): every writer (--json, -o, --trace,
--junit, --summary) against every kind of target. A file is replaced atomically, a
symlink followed (the link stays), a FIFO, a device or our own stdout written to in
place, a folder refused, `-` is standard output. Before, `--junit /dev/full` exited 0
and turned /dev/full into a regular file."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.errors import OpScopeError
from engine.files import write_atomic
from tests.conftest import DEMO_CNN
from tests.recorded_sessions import forget_load

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="device nodes need root")


def _device(folder: Path, name: str, minor: int) -> Path:
    """A private character device: 1,3 is /dev/null, 1,7 is /dev/full."""
    path = folder / name
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    return path


class FifoReader:
    """A FIFO with a reader draining it on a thread."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path, self.data = path, b""
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # the reader is there now
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        chunks, seen = [], False
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                threading.Event().wait(0.01)
                continue
            if chunk:
                chunks.append(chunk)
                seen = True
            elif seen:  # the writer closed
                break
            else:
                threading.Event().wait(0.01)
        os.close(self.fd)
        self.data = b"".join(chunks)

    def wait(self) -> bytes:
        self.thread.join(10)
        return self.data


def test_a_file_is_replaced_and_a_symlink_followed(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_atomic(link, lambda fh: fh.write("new"))
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "made.json")
    write_atomic(dangling, lambda fh: fh.write("made"))
    assert dangling.is_symlink() and (tmp_path / "made.json").read_text() == "made"


def test_folders_and_links_to_them_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    link = tmp_path / "to-folder"
    link.symlink_to(folder)
    for path in (folder, link):
        with pytest.raises(OpScopeError, match="is a folder"):
            write_atomic(path, lambda fh: fh.write("x"))
    assert link.is_symlink() and folder.is_dir()


def test_a_fifo_is_written_to_and_one_without_a_reader_refused(tmp_path: Path) -> None:
    reader = FifoReader(tmp_path / "pipe")
    write_atomic(reader.path, lambda fh: fh.write("through the pipe"))
    assert reader.wait() == b"through the pipe"
    assert stat.S_ISFIFO(os.stat(reader.path).st_mode)
    lonely = tmp_path / "lonely"
    os.mkfifo(lonely)
    with pytest.raises(OpScopeError, match="FIFO with no reader"):
        write_atomic(lonely, lambda fh: fh.write("x"))
    assert stat.S_ISFIFO(os.stat(lonely).st_mode)


@root_only
def test_devices_are_written_to_not_replaced(tmp_path: Path) -> None:
    null, full = _device(tmp_path, "null", 3), _device(tmp_path, "full", 7)
    write_atomic(null, lambda fh: fh.write("gone"))
    with pytest.raises(OpScopeError, match="No space left"):
        write_atomic(full, lambda fh: fh.write("x" * 10_000))
    for dev in (null, full):
        assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_dev_stdout_and_dash_are_standard_output(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")  # how /dev/stdout is laid out
    write_atomic(link, lambda fh: fh.write("via the link\n"))
    write_atomic("-", lambda fh: fh.write("via dash\n"))
    out = capfd.readouterr().out
    assert "via the link" in out and "via dash" in out
    assert link.is_symlink()


# -- every writer of the CLI ---------------------------------------------------------------


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("outputs") / "s.opscope"
    for _ in range(2):
        assert main(["bench", str(DEMO_CNN), "--duration", "0.2", "--threads", "1",
                     "--no-accuracy", "--session", str(path)]) == 0  # fmt: skip
    assert main(["profile", str(DEMO_CNN), "--duration", "0.2", "--runs", "2", "--threads", "1",
                 "--session", str(path)]) == 0  # fmt: skip
    forget_load(path)  # `compare --json` here is about where it writes, not its verdict
    return path


WRITERS: dict[str, Callable[[Path, str], list[str]]] = {
    "bench --json": lambda s, out: ["bench", str(DEMO_CNN), "--duration", "0.2",
                                    "--threads", "1", "--no-accuracy", "--json", out],
    "session show --json": lambda s, out: ["session", "show", str(s), "--json", out],
    "compare --json": lambda s, out: [  # (no verdict: this is about where it writes)
        "compare", f"{s}:1", f"{s}:2", "--max-regression", "1e6", "--json", out,
    ],
    "report -o": lambda s, out: ["report", str(s), "-o", out],
    "export --trace": lambda s, out: ["export", str(s), "--trace", out],
}  # fmt: skip


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse
        return int(exc.code or 0)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_against_every_kind_of_target(
    writer: str, session: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    argv = WRITERS[writer]
    # a symlink to a file: the target written, the link kept
    target = tmp_path / "target.out"
    target.write_text("old")
    link = tmp_path / "link.out"
    link.symlink_to(target)
    assert _run(argv(session, str(link))) == 0
    assert link.is_symlink() and target.read_text() != "old"
    # a FIFO with a reader: written through
    reader = FifoReader(tmp_path / "fifo")
    assert _run(argv(session, str(reader.path))) == 0
    assert reader.wait() and stat.S_ISFIFO(os.stat(reader.path).st_mode)
    # a folder, or a link to one: refused in one line, left as it was
    folder = tmp_path / "folder"
    folder.mkdir()
    capfd.readouterr()
    assert _run(argv(session, str(folder))) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert err and "is a folder" in err[-1] and "Traceback" not in "\n".join(err)
    assert folder.is_dir()
    # /dev/stdout: our output, written to
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")
    assert _run(argv(session, str(stdout))) == 0
    assert capfd.readouterr().out.strip() and stdout.is_symlink()
    if os.geteuid() == 0:  # a full device: one line, exit 2, the device still a device
        full = _device(tmp_path, "full", 7)
        assert _run(argv(session, str(full))) == 2
        assert "No space left" in capfd.readouterr().err
        assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_dash_writes_json_to_stdout(session: Path, capfd: pytest.CaptureFixture[str]) -> None:
    capfd.readouterr()
    assert _run(["session", "show", str(session), "--json", "-"]) == 0
    out = capfd.readouterr().out
    assert json.loads(out[out.index("{") :])["runs"]


@root_only
def test_the_gates_session_never_lands_beside_a_device(session: Path, tmp_path: Path) -> None:
    from engine.cli.gate_cmds import session_path
    from engine.cli.main import build_parser

    full = _device(tmp_path, "full", 7)
    args = build_parser().parse_args(["gate", str(session), str(DEMO_CNN), "--junit", str(full)])
    assert session_path(args).parent != tmp_path
    args = build_parser().parse_args(
        ["gate", str(session), str(DEMO_CNN), "--junit", str(tmp_path / "r.xml")]
    )
    assert session_path(args) == tmp_path / "r.opscope"
