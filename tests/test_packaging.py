"""The ops-staff installer: `make package` builds dist/opscope/ (PyInstaller one-folder) and
dist/opscope_<version>_<arch>.deb; the .deb is unpacked with `dpkg-deb -x` (never installed
system-wide) and the bundled app is run from there with no project venv on PATH.

Build reuse: the build takes minutes, so an existing dist/ .deb is reused when it is newer
than every file it is built from (engine/, app/, widgets/, resources/, packaging/, tools/,
pyproject.toml, Makefile); otherwise, or with OPSCOPE_PACKAGE_REBUILD=1, this runs
`make package`. CI starts from a clean clone, so there it always builds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.conftest import one_at_a_time

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
SOURCES = ("engine", "app", "widgets", "resources", "packaging", "tools")
SOURCE_FILES = ("pyproject.toml", "Makefile")
GPU_LIBS = ("libonnxruntime_providers_cuda.so", "libonnxruntime_providers_tensorrt.so")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or shutil.which("dpkg-deb") is None,
        reason="the .deb is built and unpacked with dpkg-deb (Linux)",
    ),
]


def _newest_source_mtime() -> float:
    newest = max((ROOT / f).stat().st_mtime for f in SOURCE_FILES)
    for top in SOURCES:
        for p in (ROOT / top).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                newest = max(newest, p.stat().st_mtime)
    return newest


def _debs() -> list[Path]:
    return sorted(DIST.glob("opscope_*.deb"))


@pytest.fixture(scope="module")
def deb() -> Path:
    """The package, built once: `make test` runs a worker per core, and a worker that gets
    some of this module's tests waits on the lock, then finds the package fresh."""
    with one_at_a_time(DIST / ".build.lock"):
        return _built()


def _built() -> Path:
    debs = _debs()
    fresh = (
        len(debs) == 1
        and (DIST / "opscope" / "opscope").is_file()
        and debs[0].stat().st_mtime > _newest_source_mtime()
    )
    if not fresh or os.environ.get("OPSCOPE_PACKAGE_REBUILD") == "1":
        for old in debs:
            old.unlink()
        t0 = time.perf_counter()
        # zstd level 1 packs in seconds where xz level 1 takes about a minute on 2 cores:
        # the suite checks what is in the package, a release build keeps xz
        env = {**os.environ, "OPSCOPE_DEB_COMPRESSOR": "zstd"}
        proc = subprocess.run(
            ["make", "package"], cwd=ROOT, capture_output=True, text=True, timeout=1500, env=env
        )
        print(f"\nmake package: {time.perf_counter() - t0:.0f} s")
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        debs = _debs()
    assert len(debs) == 1, debs
    return debs[0]


@pytest.fixture(scope="module")
def unpacked(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deb-root")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, timeout=300)
    return root


def _clean_env(tmp: Path) -> dict[str, str]:
    """`env -i` style: no project venv on PATH, private HOME, session and cache folders."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "QT_QPA_PLATFORM": "offscreen",
        "OPSCOPE_SESSION_DIR": str(tmp / "sessions"),
        "OPSCOPE_CACHE_DIR": str(tmp / "cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
    }


def test_deb_metadata_and_layout(deb: Path, unpacked: Path) -> None:
    fields = subprocess.run(
        ["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert "Package: opscope\n" in fields
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"Version: {version}\n" in fields
    assert f"Architecture: {arch}\n" in fields
    assert "Maintainer: " in fields
    for lib in (
        "libegl1",
        "libxkbcommon-x11-0",
        "libxcb-cursor0",
        "libxcb-icccm4",
        "libxcb-keysyms1",
        "libfontconfig1",
        "libdbus-1-3",
    ):
        assert lib in fields
    exe = unpacked / "opt" / "opscope" / "opscope"
    assert exe.is_file() and os.access(exe, os.X_OK)
    launcher = unpacked / "usr" / "bin" / "opscope"
    assert os.access(launcher, os.X_OK)
    assert 'exec /opt/opscope/opscope "$@"' in launcher.read_text()
    subprocess.run(["sh", "-n", str(launcher)], check=True)
    desktop = (unpacked / "usr/share/applications/opscope.desktop").read_text()
    assert "Exec=/opt/opscope/opscope" in desktop and "Icon=opscope" in desktop
    assert (unpacked / "usr/share/icons/hicolor/256x256/apps/opscope.png").read_bytes()[
        :8
    ] == b"\x89PNG\r\n\x1a\n"
    assert (unpacked / "usr/share/icons/hicolor/scalable/apps/opscope.svg").is_file()
    bundle = unpacked / "opt" / "opscope"
    names = {p.name for p in bundle.rglob("*")}
    assert not names & set(GPU_LIBS), "CPU bundle must not carry the CUDA/TensorRT providers"
    assert not (bundle / "_internal" / "torch").exists()
    # optuna's SQL storage is left out (tune's study is in memory; the tune test below)
    assert not (bundle / "_internal" / "sqlalchemy").exists()
    assert list(bundle.rglob("demo_transformer.onnx"))


def test_bundled_self_test(unpacked: Path, tmp_path: Path) -> None:
    exe = unpacked / "opt" / "opscope" / "opscope"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(exe), "--self-test"],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(f"\nbundled --self-test: {time.perf_counter() - t0:.1f} s: {proc.stdout.strip()}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "opscope self-test: OK provider=CPUExecutionProvider runs=20" in proc.stdout


def test_bundled_app_runs_live_and_screenshots(unpacked: Path, tmp_path: Path) -> None:
    exe = unpacked / "opt" / "opscope" / "opscope"
    shot = tmp_path / "shot.png"
    env = _clean_env(tmp_path)
    # A first launch measures the machine's peaks before timing starts (5-6 s on a 2-vCPU
    # Xeon whose OS reports a 480 MiB L3, longer beside another test worker): measured here
    # first by the bundled CLI into the same cache, so the window's 15 s are the app's and
    # its engine host's (8 s with the peaks inside them failed once on a busy CI machine)
    peaks = subprocess.run([str(exe), "system"], env=env, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert peaks.returncode == 0, peaks.stdout + peaks.stderr
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(exe), "--screenshot", str(shot), "--quit-after", "15"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    wall = time.perf_counter() - t0
    first = [ln for ln in proc.stderr.splitlines() if "first latency point" in ln]
    print(f"\nbundled app --quit-after 15: {wall:.1f} s; {first}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The engine host (a spawn child of the frozen executable) really ran: the app logged its
    # first latency point and autosaved a session with samples in it.
    assert first, proc.stderr
    sessions = list(Path(env["OPSCOPE_SESSION_DIR"]).glob("*.opscope"))
    assert len(sessions) == 1, sessions
    from engine.session.store import open_session_file

    reader = open_session_file(sessions[0])
    try:
        run_id = reader.last_run_id()
        assert run_id is not None
        _starts, lat = reader.latency(run_id)
    finally:
        reader.close()
    assert len(lat) > 20
    shutil.copy(shot, DIST / "bundle-screenshot.png")
    # `opscope report` (matplotlib inside the bundle) on the session the app just recorded.
    report = tmp_path / "report.html"
    proc = subprocess.run(
        [str(exe), "report", str(sessions[0]), "-o", str(report)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report.stat().st_size > 10_000


def test_bundled_cli_builds_int8_variant(unpacked: Path, tmp_path: Path) -> None:
    """The variant builders import onnxruntime.transformers' top-level modules by name."""
    bundle = unpacked / "opt" / "opscope"
    model = next(bundle.rglob("demo_cnn.onnx"))
    proc = subprocess.run(
        [
            str(bundle / "opscope"),
            "bench",
            str(model),
            "--precision",
            "int8-dynamic",
            "--duration",
            "0.5",
        ],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "accuracy   vs fp32 on generated: " in proc.stdout
    assert "worst sample's cosine" in proc.stdout


def test_bundled_cli_generates_on_the_demo_llm(unpacked: Path, tmp_path: Path) -> None:
    """The demo LLM ships in the bundle, and its tokenizer and decoder run there."""
    bundle = unpacked / "opt" / "opscope"
    folder = next(bundle.rglob("demo_llm"))
    assert (folder / "genai_config.json").is_file() and (folder / "tokenizer.json").is_file()
    out = tmp_path / "gen.json"
    proc = subprocess.run(
        [
            str(bundle / "opscope"),
            "generate",
            str(folder),
            "--prompt",
            "the model reads a prompt",
            "--new-tokens",
            "4",
            "--duration",
            "0.5",
            "--json",
            str(out),
        ],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert data["ttft_ms"]["count"] > 0 and data["tpot_ms"]["count"] > 0


def test_bundled_cli_tunes_with_optuna(unpacked: Path, tmp_path: Path) -> None:
    """`tune --budget` samples with optuna in the bundle, which leaves optuna's SQL storage
    (SQLAlchemy, Alembic, Mako) out: the study is kept in memory."""
    bundle = unpacked / "opt" / "opscope"
    model = next(bundle.rglob("demo_cnn.onnx"))
    out = tmp_path / "tune.json"
    proc = subprocess.run(
        [str(bundle / "opscope"), "tune", str(model), "--space", "batch=1,2,4", "--budget", "2",
         "--duration", "0.3", "--no-recheck", "--json", str(out)],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert data["searched"].startswith("optuna TPE"), data["searched"]
    assert len(data["trials"]) == 2 and data["best"], data
