"""A real SSH server for the --host tests, on localhost only: asyncssh in this process (a
thread with its own event loop), a throwaway host key, one client key authorized; each
command runs as a subprocess in the project folder with the host's own cache folder (a
"machine" of its own), its stdin, stdout and stderr piped through the SSH channel."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

ROOT = Path(__file__).resolve().parent.parent
HOST_NAME = "gpu-box"  # what the host's OpScope calls its machine (not this one's name)


@dataclass
class SSHHost:
    port: int
    cache: Path  # the host's OPSCOPE_CACHE_DIR
    client_env: dict[str, str]  # what the workstation's side needs to reach it


@contextmanager
def ssh_host(tmp: Path) -> Iterator[SSHHost]:
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    key_file = tmp / "client_key"
    key_file.write_bytes(client_key.export_private_key())
    key_file.chmod(0o600)
    authorized = tmp / "authorized_keys"
    authorized.write_bytes(client_key.export_public_key())
    cache = tmp / "host-cache"
    env = {**os.environ, "OPSCOPE_CACHE_DIR": str(cache), "OPSCOPE_HOST_NAME": HOST_NAME}
    procs: list[asyncio.subprocess.Process] = []  # every command run, reaped at the end

    async def handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
        proc = await asyncio.create_subprocess_shell(
            process.command or "true", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
        )  # fmt: skip
        procs.append(proc)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        sink = proc.stdin

        async def pump_in() -> None:
            with contextlib.suppress(ConnectionError, asyncssh.Error):
                while data := await process.stdin.read(1 << 16):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        async def pump_out(src: asyncio.StreamReader, dst: asyncssh.SSHWriter[bytes]) -> None:
            while data := await src.read(1 << 16):
                dst.write(data)

        feeding = asyncio.ensure_future(pump_in())
        await asyncio.gather(pump_out(proc.stdout, process.stdout),
                             pump_out(proc.stderr, process.stderr))  # fmt: skip
        code = await proc.wait()
        feeding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await feeding
        process.exit(code)

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-sshd", daemon=True)
    thread.start()

    async def start() -> asyncssh.SSHAcceptor:
        return await asyncssh.create_server(
            asyncssh.SSHServer, "127.0.0.1", 0, server_host_keys=[host_key],
            authorized_client_keys=str(authorized), process_factory=handle, encoding=None,
        )  # fmt: skip

    server = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    port = server.sockets[0].getsockname()[1]
    opts = (f"-i {key_file} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no "
            "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR")  # fmt: skip
    client_env = {
        "OPSCOPE_SSH_OPTS": opts,
        "OPSCOPE_REMOTE_COMMAND": f"{sys.executable} -m app.entry",
    }

    async def reap() -> None:
        """Every command still running ended (SIGTERM, then SIGKILL after 10 s) and waited
        for, its pipes' transports closed with it: left to the loop's close, a host still
        ending on a busy machine left them to the garbage collector, whose ResourceWarning
        then failed a later Qt test's teardown in the same worker."""
        for proc in procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        for proc in procs:
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    try:
        yield SSHHost(port, cache, client_env)
    finally:
        server.close()
        asyncio.run_coroutine_threadsafe(server.wait_closed(), loop).result(30)
        asyncio.run_coroutine_threadsafe(reap(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def reach(host: SSHHost, monkeypatch: pytest.MonkeyPatch) -> str:
    """`--host` for `host`: the client's ssh options and remote command set for this test."""
    for k, v in host.client_env.items():
        monkeypatch.setenv(k, v)
    return f"127.0.0.1:{host.port}"
