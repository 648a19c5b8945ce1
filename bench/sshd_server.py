"""OpenSSH's sshd for the remote benchmarks: a real server on a free localhost port with
throwaway keys, the host's commands run by the project's own opscope with a cache folder of
their own (the tests use asyncssh in-process instead: tests/ssh_server.py)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sshd(tmp: str) -> tuple[subprocess.Popen[bytes], int, dict[str, str]]:
    """OpenSSH's sshd on a free localhost port with throwaway keys (where it is installed):
    the server a real host runs."""
    d = Path(tmp)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                       check=True)  # fmt: skip
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPasswordAuthentication no\n"
        f"UsePAM no\nStrictModes no\nPidFile {d / 'sshd.pid'}\nPermitRootLogin yes\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")])
    time.sleep(1.0)
    cache = d / "host-cache"
    env = {
        "OPSCOPE_SSH_OPTS": f"-i {d / 'client_key'} -o IdentitiesOnly=yes "
        "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
        "OPSCOPE_REMOTE_COMMAND": f"env OPSCOPE_CACHE_DIR={cache} {ROOT / '.venv/bin/opscope'}",
    }
    return proc, port, env
