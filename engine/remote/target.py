"""A remote machine as the user names it, `[USER@]HOST[:PORT]` (HOST may be an alias in
~/.ssh/config), and the OpenSSH client command that reaches it.

OpenSSH's own client rather than an SSH library: it reads the user's configuration, keys,
agent, jump hosts and known hosts as every other tool on their machine does, and OpScope
holds no credentials. Options for every connection can be added with $OPSCOPE_SSH_OPTS
(e.g. `-i ~/.ssh/gpu_key`); the OpScope command on the host, when it is not `opscope` on
the login shell's PATH, with $OPSCOPE_REMOTE_COMMAND (e.g. `/opt/opscope/bin/opscope`)."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from engine.errors import ConfigError

CONNECT_TIMEOUT_S = 10
_NAME = re.compile(
    r"^(?:(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]{0,63})@)?(?P<host>[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{1,5}))?$"
)


@dataclass(frozen=True)
class Target:
    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        """`[USER@]HOST[:PORT]`; a ConfigError in one line otherwise (never passed to a
        shell: no spaces, quotes or options)."""
        m = _NAME.match(str(text).strip())
        if m is None or m.group("host").startswith("-"):
            raise ConfigError(f"--host {text!r}: expected [USER@]HOST[:PORT]")
        port = int(m.group("port")) if m.group("port") else None
        if port is not None and not 1 <= port <= 65535:
            raise ConfigError(f"--host {text!r}: port must be 1 to 65535")
        return cls(m.group("host").strip("[]"), m.group("user"), port)

    def __str__(self) -> str:
        who = f"{self.user}@" if self.user else ""
        return f"{who}{self.host}" + (f":{self.port}" if self.port else "")

    def ssh(self, *remote_args: str, stop_on_eof: bool = False) -> list[str]:
        """The ssh command that runs `opscope REMOTE_ARGS...` on the host: no terminal,
        never a password prompt (BatchMode), a bounded connect. `stop_on_eof`: the command
        stops as Ctrl+C stops it when its stdin closes (Ctrl+C here, a dropped link)."""
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]
        argv += shlex.split(os.environ.get("OPSCOPE_SSH_OPTS", ""))
        if self.port:
            argv += ["-p", str(self.port)]
        if self.user:
            argv += ["-l", self.user]
        remote = shlex.split(os.environ.get("OPSCOPE_REMOTE_COMMAND", "opscope"))
        if stop_on_eof:
            remote = ["env", "OPSCOPE_STOP_ON_EOF=1", *remote]
        argv += ["--", self.host, " ".join(shlex.quote(a) for a in [*remote, *remote_args])]
        return argv
