"""`--host [USER@]HOST[:PORT]` for the commands that run work (bench, profile, memory,
graph, load and simulate so far; a trace file of --traffic is sent too):
the model and its data files sent to the host once by content hash, the same command run
there over the user's own SSH, its output relayed as it comes, its JSON result taken back
and named with the host. And `opscope remote ...`, what a host answers (host_side.py)."""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Any

from engine.cli.common import EXIT_OK, write_json
from engine.errors import ConfigError, ModelError

DATA_FLAGS = ("--inputs", "--calibration", "--labels")


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


def rewrite(argv: list[str], model: str, remote_model: str, files: dict[str, str],
            json_path: str) -> list[str]:  # fmt: skip
    """The command line for the host: `--host` gone, the model and data files replaced by
    their paths there, the JSON result written where the host keeps results."""
    out: list[str] = []
    i, model_done = 0, False
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
        if not model_done and tok == model:
            out.append(remote_model)
            model_done = True
        else:
            out.append(tok)
        i += 1
    return [*out, "--json", json_path]


LOCAL_FILES = {  # flags that write a file here: not brought back from a host yet
    "explorer": "the Model Explorer file is not brought back yet; use --json",
}


def cmd_remote(args: argparse.Namespace) -> int:
    """The command as typed, run on `args.host` (see the module's doc)."""
    from engine.remote.link import hello, run_relayed, take_result
    from engine.remote.target import Target

    target = Target.parse(args.host)
    for flag, why in LOCAL_FILES.items():
        if getattr(args, flag, None):
            raise ConfigError(f"--{flag} with --host: {why}")
    model = Path(args.model)
    if model.is_dir():
        raise ModelError("a folder: --host sends single model files, not yet folders", model)
    if not model.is_file():
        raise ModelError("file not found (a single model file is sent to the host)", model)
    _refuse_external_data(model)
    info = hello(target)
    remote_model = _send(target, model)
    files = {}
    for flag in DATA_FLAGS:
        value = getattr(args, flag[2:])
        if value:
            path = Path(value)
            if not path.is_file():
                raise ConfigError(f"{flag} {value}: with --host, one file (a folder is not "
                                  "sent yet)")  # fmt: skip
            files[flag] = _send(target, path)
    traffic = getattr(args, "traffic", None)
    if traffic and str(traffic).startswith("trace:"):  # the trace goes too, its path swapped
        spec = str(traffic)[len("trace:") :]
        path_text, at, rest = spec.partition("@")
        trace = Path(path_text)
        if not trace.is_file():
            raise ConfigError(f"--traffic {traffic}: no such trace file")
        files["--traffic"] = f"trace:{_send(target, trace)}{at}{rest}"
    run_id = uuid.uuid4().hex
    result_path = f"{info['results']}/{run_id}.json"
    if getattr(args, "session", None):  # recorded there, then copied into the local file
        files["--session"] = f"{info['results']}/{run_id}.opscope"
    argv = rewrite(list(args.argv), args.model, remote_model, files, result_path)
    try:
        code = run_relayed(target, argv)
    finally:  # what the host recorded comes back even when the run stopped early
        if "--session" in files:
            _bring_session(target, files["--session"], Path(args.session))
    if code != 0:
        return code
    result = take_result(target, result_path)
    result["host"] = {
        "target": str(target),
        "hostname": str(info.get("hostname", ""))[:200],
        "cpu": str(info.get("cpu", ""))[:200],
        "gpus": int(info.get("gpus") or 0),
        "timing": "on the host: the link's latency is not in any figure",
    }
    h = result["host"]
    print(f"host       {h['hostname']} ({target}): {h['cpu']}, {h['gpus']} GPU(s); timed "
          "there, the link's latency is in no figure")  # fmt: skip
    if args.json:
        write_json(args.json, result)
    return EXIT_OK


def _bring_session(target: Any, remote: str, local: Path) -> None:
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
            ids = copy_runs(store, copy)
    print(f"recorded   {local} (run {', '.join(map(str, ids))} from {target})", file=sys.stderr)


def _send(target: Any, path: Path) -> str:
    from engine.remote.link import send_file

    def progress(done: int, total: int) -> None:
        print(f"\rsending    {path.name}: {done / max(total, 1):.0%} of {total / 1e6:.1f} MB",
              end="", file=sys.stderr, flush=True)  # fmt: skip

    remote, sent = send_file(target, path, progress)
    print(("\n" if sent else "") + f"info: {path.name} "
          + ("sent to the host" if sent else "already on the host (same content)"),
          file=sys.stderr)  # fmt: skip
    return remote


def _refuse_external_data(model: Path) -> None:
    """A model whose weights live in other files is not sent yet: one line."""
    if model.suffix.lower() != ".onnx":
        return
    import onnx

    try:
        m = onnx.load(str(model), load_external_data=False)
    except Exception:
        return  # the host says what is wrong with it, as locally
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        raise ModelError("its weights are in external data files, which --host does not send "
                         "yet", model)  # fmt: skip
