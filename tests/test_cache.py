"""The variant cache stays under its size cap: least recently used entries go first."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from engine import cache
from engine.cli.main import main


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _entry(kind: str, key: str, nbytes: int, age_s: float) -> Path:
    staging = cache.Staging(kind, key)
    (staging.path / "model.onnx").write_bytes(b"x" * nbytes)
    folder = staging.commit({"key": key})
    then = time.time() - age_s
    os.utime(folder / "meta.json", (then, then))
    return folder


def test_commit_past_the_cap_evicts_least_recently_used(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_MAX_GB", str(2500 / 1e9))  # 2,500 bytes
    old = _entry("variants", "old", 1000, age_s=3000)
    mid = _entry("variants", "mid", 1000, age_s=2000)
    assert old.exists() and mid.exists()  # 2,000 bytes plus two meta.json: under the cap
    new = _entry("llm-variants", "new", 1000, age_s=0)  # crosses it
    assert not old.exists(), "the least recently used entry is evicted"
    assert mid.exists() and new.exists()
    assert cache.cached_entry("variants", "old") is None
    assert not any(p.name.startswith(".") for p in (root / "variants").iterdir())


def test_an_imported_model_goes_after_every_variant(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import (minutes of a builder) outlives the variants built from it (seconds)."""
    monkeypatch.setenv("OPSCOPE_CACHE_MAX_GB", str(2500 / 1e9))
    imported = _entry("llm-imports", "gguf", 1000, age_s=3000)  # the oldest
    variant = _entry("llm-variants", "int4", 1000, age_s=2000)
    _entry("llm-variants", "int8", 1000, age_s=0)  # crosses the cap
    assert imported.exists() and not variant.exists()


def test_a_hit_counts_as_use(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_MAX_GB", str(2500 / 1e9))
    old = _entry("variants", "old", 1000, age_s=3000)
    mid = _entry("variants", "mid", 1000, age_s=2000)
    assert cache.cached_entry("variants", "old") == old  # read: now the most recent
    _entry("variants", "new", 1000, age_s=0)
    assert old.exists() and not mid.exists()


def test_entries_in_use_a_moment_ago_are_kept(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_MAX_GB", str(100 / 1e9))
    a = _entry("variants", "a", 1000, age_s=5)  # another process may be loading it
    b = _entry("variants", "b", 1000, age_s=0)
    assert a.exists() and b.exists()
    assert cache.trim(recent_s=0.0) and not a.exists() and not b.exists()


def test_an_entry_a_live_process_holds_is_never_evicted(root: Path) -> None:
    """#29: a sweep's builds evicted the variant the live engine was running, and its next
    profile failed with "model.onnx ... File doesn't exist"."""
    running = _entry("variants", "running", 1000, age_s=3000)
    other = _entry("variants", "other", 1000, age_s=2000)
    lease = cache.lease(running)
    assert lease is not None and cache.leased(running)
    evicted = cache.trim(limit=0, recent_s=0)
    assert [e.key for e in evicted] == ["other"] and running.exists() and not other.exists()
    lease.release()
    assert not cache.leased(running)
    assert [e.key for e in cache.trim(limit=0, recent_s=0)] == ["running"]


def test_a_killed_processs_lease_is_stale(root: Path) -> None:
    entry = _entry("variants", "left", 1000, age_s=3000)
    leases = entry / cache.LEASES
    leases.mkdir()
    (leases / "999999-dead").write_text(json.dumps({"pid": 999_999_999, "started": 1.0}))
    me = json.dumps({"pid": os.getpid(), "started": 1.0})  # this pid, reused: not its lease
    (leases / "reused").write_text(me)
    assert not cache.leased(entry) and not any(leases.iterdir())
    assert cache.lease(Path(root).parent) is None  # not a cache entry: nothing to hold


def test_the_engine_holds_the_variant_it_runs(root: Path) -> None:
    from engine import backends
    from engine.backends.base import PrepareRequest
    from engine.config import RunConfig
    from engine.events import drive
    from engine.model.workload import Workload
    from tests.conftest import DEMO_CNN

    req = PrepareRequest(Workload(str(DEMO_CNN), RunConfig(precision="fp16", threads=1)))
    prepared = drive(backends.backend_for(req.workload.config).prepare(req), lambda ev: None)
    folder = Path(prepared.variant.path).parent
    assert cache.trim(limit=0, recent_s=0) == [] and folder.exists()
    prepared.close()
    assert [e.path for e in cache.trim(limit=0, recent_s=0)] == [folder]


def test_scratch_left_by_a_killed_build_is_cleared_when_stale(root: Path) -> None:
    stale = cache.Staging("variants", "k1")
    fresh = cache.Staging("variants", "k2")  # a build in flight in another process
    day_ago = time.time() - cache.STALE_STAGING_S - 10
    os.utime(stale.path, (day_ago, day_ago))
    cache.trim()
    assert not stale.path.exists() and fresh.path.exists()


def test_bad_cap_falls_back_to_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw in ("lots", "-3", "0"):
        monkeypatch.setenv("OPSCOPE_CACHE_MAX_GB", raw)
        assert cache.max_bytes() == int(cache.DEFAULT_MAX_GB * 1e9)
    monkeypatch.setenv("OPSCOPE_CACHE_MAX_GB", "0.5")
    assert cache.max_bytes() == 500_000_000


def test_cli_shows_trims_and_clears(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _entry("variants", "a", 3000, age_s=100)
    _entry("int8-choice", "b", 10, age_s=100)
    assert main(["cache", "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert str(root) in out and "2 entries" in out and "variants" in out
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["kinds"]["variants"]["entries"] == 1 and data["bytes"] > 3000
    assert main(["cache", "--clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert cache.entries() == []
