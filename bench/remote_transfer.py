"""A model sent to a host by `--host` (engine/remote/link.py: its bytes through `ssh HOST
opscope remote put`, hashed on both sides as they pass, checked and written whole there)
against `scp` of the same file over the same link, in alternating order, three times per
size. The link: a real SSH server on localhost (tests/ssh_server.py's asyncssh, or OpenSSH's
sshd with --sshd), so both pay the same encryption and neither a network. Goal (issue 27):
at least 0.8x scp's rate. Run:
    .venv/bin/python bench/remote_transfer.py [--sizes-mb 64,256] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402
from sshd_server import sshd  # noqa: E402

from engine.remote.link import send_file  # noqa: E402
from engine.remote.target import Target  # noqa: E402
from tests.ssh_server import ssh_host  # noqa: E402

REPEATS = 3


@contextlib.contextmanager
def server(tmp: Path, real: bool) -> Iterator[tuple[int, dict[str, str], Path]]:
    """(port, client environment, the host's cache folder) of OpenSSH's sshd or asyncssh."""
    if real:
        proc, port, env = sshd(str(tmp))
        try:
            yield port, env, tmp / "host-cache"
        finally:
            proc.terminate()
            proc.wait(10)
        return
    with ssh_host(tmp) as host:
        yield host.port, host.client_env, host.cache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes-mb", default="64,256")
    ap.add_argument("--out", default=str(ROOT / "bench/results/remote_transfer.md"))
    ap.add_argument(
        "--sshd", action="store_true", help="OpenSSH's sshd, not the asyncssh test server"
    )
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes_mb.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp_text:
        tmp = Path(tmp_text)
        with server(tmp, args.sshd) as (port, env, cache):
            os.environ.update(env)
            target = Target.parse(f"127.0.0.1:{port}")
            ssh_opts = shlex.split(env["OPSCOPE_SSH_OPTS"])
            for mb in sizes:
                src = tmp / f"model-{mb}.onnx"
                with open(src, "wb") as fh:
                    for _ in range(mb):
                        fh.write(os.urandom(1 << 20))
                ours, theirs = [], []
                for k in range(2 * REPEATS):
                    if (k % 2 == 0) == (k // 2 % 2 == 0):  # alternate who goes first
                        shutil.rmtree(cache / "remote", ignore_errors=True)
                        t0 = time.perf_counter()
                        _, sent = send_file(target, src)
                        assert sent
                        ours.append(time.perf_counter() - t0)
                    else:
                        dest = tmp / f"scp-{mb}.bin"
                        dest.unlink(missing_ok=True)
                        t0 = time.perf_counter()
                        subprocess.run(["scp", "-O", "-q", *ssh_opts, "-P", str(port),
                                        str(src), f"127.0.0.1:{dest}"], check=True)  # fmt: skip
                        theirs.append(time.perf_counter() - t0)
                        assert dest.stat().st_size == src.stat().st_size
                o, s = statistics.median(ours), statistics.median(theirs)
                rows.append((mb, mb / o, mb / s, s / o))
                print(rows[-1], flush=True)
    lines = [
        f"# --host transfer against scp ({time.strftime('%Y-%m-%d')})",
        "",
        f"A random file sent to a real SSH server on localhost "
        f"({'OpenSSH sshd' if args.sshd else 'asyncssh, one process'}), by "
        "`send_file` (hashed as it is read and sent through `opscope remote put`, hashed and "
        "written whole on the host) and by `scp -O` of the same file; alternating order, "
        f"median of {REPEATS} each. MB = 2^20 bytes. Goal: at least 0.8x scp.",
        "",
        "| size | --host MB/s | scp MB/s | --host / scp |",
        "|---|---|---|---|",
        *[f"| {mb} MB | {a:.0f} | {b:.0f} | {r:.2f} |" for mb, a, b, r in rows],
        "",
        f"CPU: {os.uname().machine}, {os.cpu_count()} CPUs; load average "
        f"{os.getloadavg()[0]:.2f} at the end.",
    ]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
