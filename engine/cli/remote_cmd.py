"""`--host [USER@]HOST[:PORT]` for the commands that run work (bench, profile, memory,
graph, load and simulate so far; a trace file of --traffic is sent too):
the model and its data files sent to the host once by content hash, the same command run
there over the user's own SSH, its output relayed as it comes, its JSON result taken back
and named with the host. And `opscope remote ...`, what a host answers (host_side.py)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.cli.common import EXIT_OK, write_json
from engine.errors import ConfigError, ModelError, OpScopeError
from engine.serve.traffic.schedule import with_trace_file

DATA_FLAGS = ("--inputs", "--calibration", "--labels", "--prompts")


def add_remote_parser(sub: Any) -> None:
    p = sub.add_parser(
        "remote",
        help="what a host answers over SSH for --host (version, files by hash, results); "
        "not for typing",
    )
    p.add_argument("action", choices=("version", "put", "take"))
    p.add_argument("rest", nargs="*")
    p.set_defaults(handler=_cmd_remote)


def add_host_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host", metavar="[USER@]HOST[:PORT]",
        help="run it on another machine over your own SSH (keys, agent, ~/.ssh/config): "
        "the model and data files go once by content hash, timing happens there",
    )  # fmt: skip


def _cmd_remote(args: argparse.Namespace) -> int:
    from engine.remote.host_side import main_remote

    return main_remote(args.action, list(args.rest))


def rewrite(argv: list[str], positionals: dict[str, str], files: dict[str, str],
            json_path: str) -> list[str]:  # fmt: skip
    """The command line for the host: `--host` gone, the model (and gate's baseline:
    `positionals`, each once) and data files replaced by their paths there, the JSON result
    written where the host keeps results."""
    out: list[str] = []
    i, left = 0, dict(positionals)
    while i < len(argv):
        tok = argv[i]
        flag = tok.split("=", 1)[0]
        if flag in ("--host", "--json"):
            i += 1 if "=" in tok else 2
            continue
        if flag in files:
            out += [flag, files[flag]]
            i += 1 if "=" in tok else 2
            continue
        if tok in left:
            out.append(left.pop(tok))
        else:
            out.append(tok)
        i += 1
    return [*out, "--json", json_path]


LOCAL_FILES = {  # flags that write a file here or reach elsewhere: refused with --host
    "explorer": "the Model Explorer file is not brought back yet; use --json",
    "junit": "the JUnit file is not brought back yet; use --json",
    "summary": "the summary file is not brought back yet; use --json",
    "ray": "run the tune where the cluster is reached from instead",
}


def cmd_remote(args: argparse.Namespace) -> int:
    """The command as typed, run on `args.host` (see the module's doc)."""
    from engine.remote.link import hello, run_relayed, take_result
    from engine.remote.target import Target
    from engine.remote.window_host import external_data_files

    target = Target.parse(args.host)
    for flag, why in LOCAL_FILES.items():
        if getattr(args, flag, None):
            raise ConfigError(f"--{flag} with --host: {why}")
    model = Path(args.model) if getattr(args, "model", None) else None  # none: `system`
    if model is not None:
        if not model.exists():
            raise ModelError("file not found", model)
        external_data_files(model)  # a missing weights file: one line before connecting
    info = hello(target)
    send = _sender(target)
    remote_model = send(model) if model is not None else ""
    files = {}
    positionals = {args.model: remote_model} if model is not None else {}
    baseline = getattr(args, "baseline", None)
    if baseline:  # gate's baseline session: read there
        if not Path(baseline).is_file():
            raise ConfigError(f"{baseline}: no such session file")
        positionals[baseline] = send(Path(baseline))
    for flag in DATA_FLAGS:
        value = getattr(args, flag[2:], None)
        if value:
            path = Path(value)
            if not path.exists():
                raise ConfigError(f"{flag} {value}: no such file or folder")
            files[flag] = send(path)
    traffic = getattr(args, "traffic", None)
    if traffic:  # a trace goes too, its path swapped

        def trace(path_text: str) -> str:
            if not Path(path_text).is_file():
                raise ConfigError(f"--traffic {traffic}: no such trace file")
            return send(Path(path_text))

        swapped = with_trace_file(str(traffic), trace)
        if swapped != traffic:
            files["--traffic"] = swapped
    run_id = uuid.uuid4().hex
    result_path = f"{info['results']}/{run_id}.json"
    if getattr(args, "session", None):  # recorded there, then copied into the local file
        files["--session"] = f"{info['results']}/{run_id}.opscope"
    argv = rewrite(list(args.argv), positionals, files, result_path)
    try:
        code = run_relayed(target, argv)
    finally:  # what the host recorded comes back even when the run stopped early
        if "--session" in files:
            _bring_session(target, files["--session"], Path(args.session),
                           {remote_model: str(args.model)} if model else {})  # fmt: skip
    if code != 0:  # a gate's regression (3) has its result too
        with contextlib.suppress(OpScopeError):
            if code == 3 and args.json:
                write_json(args.json, _with_host(take_result(target, result_path), target, info))
        return code
    result = _with_host(take_result(target, result_path), target, info)
    h = result["host"]
    print(f"host       {h['hostname']} ({target}): {h['cpu']}, {h['gpus']} GPU(s); timed "
          "there, the link's latency is in no figure")  # fmt: skip
    if args.json:
        write_json(args.json, result)
    return EXIT_OK


def _with_host(result: dict[str, Any], target: Any, info: dict[str, Any]) -> dict[str, Any]:
    result["host"] = {
        "target": str(target),
        "hostname": str(info.get("hostname", ""))[:200],
        "cpu": str(info.get("cpu", ""))[:200],
        "gpus": int(info.get("gpus") or 0),
        "timing": "on the host: the link's latency is not in any figure",
    }
    return result


def _bring_session(target: Any, remote: str, local: Path, paths: dict[str, str]) -> None:
    """The session the host recorded, into `local` (created, or appended to) with new run
    ids: its runs carry the host's machine, telemetry and peaks."""
    import tempfile

    from engine.remote.link import RemoteError, take_file
    from engine.session.merge import copy_runs
    from engine.session.store import SessionStore

    folder = local.resolve().parent
    with tempfile.TemporaryDirectory(dir=folder, prefix=".opscope-host-") as tmp:
        copy = Path(tmp) / "host.opscope"
        try:
            take_file(target, remote, copy)
        except RemoteError as exc:
            print(f"warning: nothing recorded came back from the host ({exc})", file=sys.stderr)
            return
        with SessionStore.create_or_open(local) as store:
            ids = copy_runs(store, copy, paths)  # the model as named here
    print(f"recorded   {local} (run {', '.join(map(str, ids))} from {target})", file=sys.stderr)


def _sender(target: Any) -> Callable[[Path], str]:
    """Sends a path to the host (engine/remote/window_host.py's FileSender: a file by its
    hash, a folder or a model with external data as its files, then the folder assembled
    there), saying what it did; returns the host's path."""
    from engine.remote.window_host import FileSender

    shown = [False]

    def progress(name: str, done: int, total: int) -> None:
        shown[0] = True
        print(f"\rsending    {name}: {done / max(total, 1):.0%} of {total / 1e6:.1f} MB",
              end="", file=sys.stderr, flush=True)  # fmt: skip

    sender = FileSender(target, progress)

    def send(path: Path) -> str:
        shown[0] = False
        remote, sent = sender.send(str(path))
        what = "and its files " if remote in sender.with_files else ""
        print(("\n" if shown[0] else "") + f"info: {path.name} {what}"
              + ("sent to the host" if sent else "already on the host (same content)"),
              file=sys.stderr)  # fmt: skip
        return remote

    return send
