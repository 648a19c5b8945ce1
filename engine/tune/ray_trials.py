"""Trials on a Ray cluster (`opscope tune --ray ADDRESS`): one actor pinned to each node
runs that node's trials one at a time, each as `opscope bench` in its own process (as on
this machine), so trials never share a node's CPUs. The model and data files go with the
trial unless the node has the same file at the same path; each trial records into a
session of its own, copied into this one when it ends. Ray is an optional extra
(`pip install 'opscope[ray]'`); every node needs the same OpScope installed."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.errors import ConfigError, one_line
from engine.hostinfo import host_name
from engine.model.info import files_sha256
from engine.model.workload import DATA_FILES, JobInputs, Workload
from engine.session.origins import new_tune_key, tune_origin
from engine.tune.trial import TRIAL_TIMEOUT_S, Trial, run_trial

CONNECT_TIMEOUT_S = 5.0
START_TIMEOUT_S = 120.0  # every node's worker answers within this, or the tune stops


@dataclass(frozen=True)
class Shipped:
    """A file (or a folder of files) as a trial needs it on a node: its path here, its
    digest, and its bytes in Ray's object store (fetched only where the path is missing)."""

    path: str
    sha256: str
    ref: Any  # ray.ObjectRef of the bytes; for a folder, of {name: bytes}
    folder: bool = False


def check_address(address: str) -> None:
    """One line (exit 2) for an address nothing listens at, before Ray's own retries."""
    if address == "auto":
        return
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray {address}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConfigError(f"--ray {address}: cannot reach a Ray cluster ({one_line(exc)})") from exc


class NodeWorker:
    """Runs on one node (a Ray actor): one trial at a time."""

    def where(self) -> tuple[str, int]:
        return (host_name() or ""), os.cpu_count() or 1

    def run(
        self,
        number: int,
        config: RunConfig,
        model: Shipped,
        files: dict[str, Shipped],
        inputs: JobInputs,
        duration_s: float,
        record: bool,
        timeout_s: float,
        origin: dict[str, Any] | None = None,
    ) -> tuple[Trial, bytes | None]:
        with tempfile.TemporaryDirectory(prefix="opscope-ray-") as tmp:
            local = Path(tmp)
            model_path = _materialize(model, local / "model")
            here = {
                name: _materialize(files[name], local / f"data{i}")
                for i, name in enumerate(DATA_FILES)
                if name in files
            }
            args = dataclasses.replace(
                inputs,
                inputs_npz=here.get("inputs_npz", inputs.inputs_npz),
                labels_npy=here.get("labels_npy", inputs.labels_npy),
                tokenizer=here.get("tokenizer", inputs.tokenizer),
                calibration_npz=here.get("calibration_npz", inputs.calibration_npz),
            )
            session = local / "trial.opscope" if record else None
            trial = run_trial(
                number, Workload(model_path, config, args), duration_s,
                str(session) if session else None, timeout_s, origin,
            )  # fmt: skip
            trial.details["node"] = host_name() or ""
            data = session.read_bytes() if session is not None and session.is_file() else None
            return trial, data


def _digest(path: Path) -> str:
    return files_sha256([path])


def _folder_digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0" + _digest(f).encode())
    return h.hexdigest()


def _materialize(item: Shipped, into: Path) -> str:
    """The path to use on this node: the same path when it holds the same bytes."""
    import ray

    here = Path(item.path)
    if item.folder and here.is_dir() and _folder_digest(here) == item.sha256:
        return item.path
    if not item.folder and here.is_file() and _digest(here) == item.sha256:
        return item.path
    into.mkdir(parents=True)
    content = ray.get(item.ref)
    if item.folder:
        for name, blob in content.items():
            (into / Path(name).name).write_bytes(blob)
        return str(into)
    target = into / here.name
    target.write_bytes(content)
    return str(target)


def _ship(path: str) -> Shipped:
    import ray

    p = Path(path).resolve()
    if p.is_dir():
        blobs = {f.name: f.read_bytes() for f in sorted(p.iterdir()) if f.is_file()}
        return Shipped(str(p), _folder_digest(p), ray.put(blobs), folder=True)
    return Shipped(str(p), _digest(p), ray.put(p.read_bytes()))


class RayTrials:
    """A pool of trial slots, one per live node of the cluster (see `search.Trials`)."""

    def __init__(
        self,
        address: str,
        workload: Workload,
        duration_s: float,
        session: str | None,
        timeout_s: float = TRIAL_TIMEOUT_S,
    ) -> None:
        """Trials of `workload` (its model on its inputs; each trial at its own config)."""
        check_address(address)
        try:
            import ray
        except ImportError as exc:
            raise ConfigError("--ray needs Ray: pip install 'opscope[ray]'") from exc
        self._ray = ray
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        try:
            ray.init(
                address=address,
                logging_level=logging.ERROR,
                log_to_driver=False,
                configure_logging=True,
            )
        except Exception as exc:  # Ray raises many kinds (version mismatch, no raylet...)
            raise ConfigError(
                f"--ray {address}: cannot join the cluster ({one_line(exc)})"
            ) from exc
        try:
            self._start(workload.model, workload.inputs, duration_s, session, timeout_s)
        except BaseException:
            ray.shutdown()
            raise

    def _start(
        self,
        model: str,
        inputs: JobInputs,
        duration_s: float,
        session: str | None,
        timeout_s: float,
    ) -> None:
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU")]
        if not nodes:
            raise ConfigError("the Ray cluster has no live node with CPUs")
        actor = ray.remote(NodeWorker)
        self._workers = [
            actor.options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote()
            for n in nodes
        ]
        try:
            self.nodes: list[tuple[str, int]] = ray.get(
                [w.where.remote() for w in self._workers], timeout=START_TIMEOUT_S
            )
        except Exception as exc:
            raise ConfigError(
                f"the Ray nodes cannot start OpScope's trial worker ({one_line(exc)}); "
                "install the same opscope on every node"
            ) from exc
        self._model_path = model
        self._model = _ship(model)
        self._files = {name: _ship(path) for name in DATA_FILES if (path := getattr(inputs, name))}
        self._inputs, self._duration, self._timeout = inputs, duration_s, timeout_s
        self._session = session
        self._tune = new_tune_key()  # its trials' origin: this tune's, in every run list
        self._idle = list(self._workers)
        self._queued: list[tuple[int, RunConfig]] = []
        self._running: dict[Any, tuple[Any, int, RunConfig]] = {}

    @property
    def slots(self) -> int:
        return len(self._workers)

    def submit(self, number: int, config: RunConfig) -> None:
        self._queued.append((number, config))
        self._dispatch()

    def _dispatch(self) -> None:
        while self._idle and self._queued:
            worker = self._idle.pop(0)
            number, config = self._queued.pop(0)
            ref = worker.run.remote(
                number, config, self._model, self._files, self._inputs, self._duration,
                self._session is not None, self._timeout, tune_origin(self._tune, number),
            )  # fmt: skip
            self._running[ref] = (worker, number, config)

    def next_done(self) -> Trial:
        ray = self._ray
        if not self._running:
            raise ConfigError("every node of the Ray cluster is gone")
        ready, _ = ray.wait(list(self._running), num_returns=1)
        worker, number, config = self._running.pop(ready[0])
        try:
            trial, data = ray.get(ready[0])
        except ray.exceptions.RayError as exc:  # the node or its worker died: not again
            self._workers.remove(worker)
            trial = Trial(number, config, status="failed")
            trial.error = f"the Ray worker was lost ({one_line(exc, 200)})"
            data = None
        else:
            self._idle.append(worker)
        if data is not None and self._session is not None:
            self._record(data)
        self._dispatch()
        return trial  # type: ignore[no-any-return]

    def _record(self, data: bytes) -> None:
        from engine.session.merge import copy_runs
        from engine.session.store import SessionStore

        with tempfile.TemporaryDirectory(prefix="opscope-ray-") as tmp:
            trial_file = Path(tmp) / "trial.opscope"
            trial_file.write_bytes(data)
            with SessionStore.create_or_open(self._session or "") as store:
                ids = copy_runs(store, trial_file)
                with store.transaction():  # the path the user knows, not the node's copy
                    for run_id in ids:
                        store.update_run(run_id, {"model_path": self._model_path})

    def close(self) -> None:
        for worker in self._workers:
            with contextlib.suppress(Exception):  # already gone
                self._ray.kill(worker)
        self._ray.shutdown()
