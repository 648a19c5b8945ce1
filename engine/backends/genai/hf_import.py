"""Importing a Hugging Face model folder (config.json + safetensors weights) or a GGUF file as
a genai-format folder with onnxruntime-genai's model builder, offline. The builder needs
torch and transformers (the `hf` extra); a GGUF file is first unpacked into a Hugging Face
folder by transformers' own GGUF loader (gguf_to_hf.py). Each runs as a child process (the
builder's import aborts when started from inside its own package folder, and a crash in it
must not take OpScope down), from a scratch folder, with its cache in a temporary folder;
the builder through builder_run.py, which carries the fixes real checkpoints need. Their
output lines become progress. Without an output folder the import goes to OpScope's cache
and is reused the next time the same source is opened."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from engine import cache
from engine.backends.genai.families import check_family
from engine.backends.genai.gguf_file import check_gguf
from engine.backends.genai.hf_size import check_config_size, config_sizes
from engine.backends.genai.json_file import read_json
from engine.errors import ConfigError, ModelError
from engine.events import Event, Notice, Progress

HERE = Path(__file__).parent
IMPORTER_VERSION = 2  # bump when what an import writes changes: cached imports are rebuilt

PRECISIONS = ("fp32", "fp16", "int4")
NEEDS = ("onnxruntime_genai", "torch", "transformers")
TOKENIZERS = ("tokenizer.json", "tokenizer.model")
MAX_CONFIG_BYTES = 16 << 20  # a config.json is kilobytes; a label map can make it megabytes
_LAYER = re.compile(r"Reading layer (\d+)")
ERROR = "OPSCOPE-ERROR: "  # gguf_to_hf.py's one line on a failure it knows


@dataclass(frozen=True)
class ImportRequest:
    source: str  # a Hugging Face model folder, or a GGUF file
    output: str = ""  # the genai folder to write (absent or empty); "": OpScope's cache
    precision: str = "fp32"
    provider: str = "cpu"  # the execution provider the model is built for (cpu | cuda)
    job_name: ClassVar[str] = "import"


def missing_packages() -> list[str]:
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def check_folder(src: Path) -> int:
    """A Hugging Face folder's layer count, or one clear error."""
    config = src / "config.json"
    if not src.is_dir():
        raise ConfigError(f"{src}: not a folder (a Hugging Face model folder: config.json and "
                          "*.safetensors) nor a GGUF file")  # fmt: skip
    if not config.is_file():
        raise ConfigError(f"{src}: no config.json (not a Hugging Face model folder)")
    data = read_json(config, MAX_CONFIG_BYTES, ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(f"{config}: not a JSON object")
    check_config_size(data, config)  # before the builder allocates what it describes
    if not any(src.glob("*.safetensors")) and not any(src.glob("*.bin")):
        raise ConfigError(f"{src}: no weights (*.safetensors)")
    if not any((src / name).is_file() for name in TOKENIZERS):
        raise ConfigError(f"{src}: no tokenizer ({' or '.join(TOKENIZERS)})")
    check_family(data, src)
    return int(config_sizes(data, config).get("layers", ("", 0))[1])


def check_request(req: ImportRequest) -> tuple[Path, Path | None, int]:
    """The source, the output folder (None: the cache) and the source's layer count (0 for
    a GGUF file, whose folder is made first), or one clear error."""
    src = Path(req.source)
    if not src.exists():
        raise ConfigError(f"{src}: not found")
    layers = 0
    if src.is_file():
        check_gguf(src)
    else:
        layers = check_folder(src)
    if req.precision not in PRECISIONS:
        raise ConfigError(
            f"precision {req.precision!r}: the builder offers {', '.join(PRECISIONS)}"
        )
    if req.precision == "fp16" and req.provider == "cpu":
        raise ConfigError(
            "fp16 is built for the CUDA provider (--provider cuda); for a CPU import fp32 or int4"
        )
    out = Path(req.output) if req.output else None
    if out is not None and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out}: exists and is not an empty folder")
    missing = missing_packages()
    if missing:
        raise ConfigError(f"importing a Hugging Face model needs {', '.join(missing)}: "
                          "pip install 'opscope[hf]'")  # fmt: skip
    return src, out, layers


def import_key(req: ImportRequest) -> str:
    """The cache key of an import: the source's files (path, size, time written), the
    precision and provider, and the builder's and importer's versions."""
    import onnxruntime_genai

    src = Path(req.source).resolve()
    files = [src] if src.is_file() else sorted(f for f in src.iterdir() if f.is_file())
    stamp = [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return cache.cache_key({"files": stamp, "precision": req.precision,
                            "provider": req.provider, "importer": IMPORTER_VERSION,
                            "genai": onnxruntime_genai.__version__})  # fmt: skip


def imported(req: ImportRequest) -> Path | None:
    """The cached import of `req`'s source, when it was built before."""
    try:
        return _entry_folder(cache.cached_entry("llm-imports", import_key(req)))
    except (OSError, ImportError):
        return None


def _entry_folder(entry: Path | None) -> Path | None:
    """The genai folder inside a cache entry (named for its source)."""
    if entry is None:
        return None
    folder = entry / str(cache.read_meta(entry).get("folder", ""))
    return folder if (folder / "genai_config.json").is_file() else None


def import_hf(req: ImportRequest) -> Generator[Event, None, Path]:
    """Build the genai folder; progress by layers read; the output folder. Stopping the
    generator (Ctrl+C, cancel) kills the child and leaves no half-written folder."""
    src, out, layers = check_request(req)
    staging = None
    if out is None:
        key = import_key(req)
        hit = _entry_folder(cache.cached_entry("llm-imports", key))
        if hit is not None:
            yield Notice("info", f"imported before: {hit} ({req.precision}), reused")
            return hit
        staging = cache.Staging("llm-imports", key)
    scratch = Path(tempfile.mkdtemp(prefix="opscope-hf-"))
    staged = scratch / "model"
    try:
        if src.is_file():
            folder = scratch / "hf"
            yield Progress("import", 0, None, f"unpacking {src.name} (GGUF) with transformers")
            yield from _child(
                [str(HERE / "gguf_to_hf.py"), str(src.resolve()), str(folder)], scratch, src,
                "transformers' GGUF loader", None,
            )  # fmt: skip
            layers = check_folder(folder)
        else:
            folder = src.resolve()
        yield Progress("import", 0, max(layers, 1), f"building {src.name} ({req.precision})")
        yield from _child(
            [str(HERE / "builder_run.py"), "-i", str(folder), "-o", str(staged),
             "-p", req.precision, "-e", req.provider, "-c", str(scratch / "cache")],
            scratch, src, "the onnxruntime-genai builder", layers,
        )  # fmt: skip
        if not (staged / "genai_config.json").is_file():
            raise ModelError("the onnxruntime-genai builder wrote no genai_config.json", src)
        if staging is not None:  # named for the source: the window and runs show that name
            name = src.stem if src.is_file() else src.name
            shutil.move(str(staged), str(staging.path / name))
            entry = staging.commit({"source": str(src.resolve()), "precision": req.precision,
                                    "provider": req.provider, "folder": name})  # fmt: skip
            staging = None
            result = entry / name
        else:
            assert out is not None
            out.parent.mkdir(parents=True, exist_ok=True)
            if out.exists():
                out.rmdir()  # checked empty above
            shutil.move(str(staged), str(out))
            result = out
        yield Notice("info", f"built {result} from {src} ({req.precision}, {req.provider})")
        return result
    finally:
        if staging is not None:
            staging.discard()
        shutil.rmtree(scratch, ignore_errors=True)


def _child(
    args: list[str], scratch: Path, src: Path, what: str, layers: int | None
) -> Generator[Event, None, None]:
    """Run one child step (`python ARGS`); its lines become progress; a failure is one line
    naming `what` failed and why. Stopping the generator kills the child."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=scratch, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace",
    )  # fmt: skip
    tail: list[str] = []
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            for line in raw.replace("\r", "\n").splitlines():
                line = line.strip()
                if not line:
                    continue
                if line.startswith(ERROR):
                    raise ModelError(line[len(ERROR) :], src)
                tail = [*tail[-19:], line]
                m = _LAYER.search(line)
                if m and layers:
                    done = int(m.group(1)) + 1
                    yield Progress("import", done, layers, f"read layer {done} of {layers}")
                elif line.startswith("step "):
                    yield Progress("import", 0, None, line)
        code = proc.wait()
        if code != 0:
            raise ModelError(f"{what} failed ({_cause(tail, code)})", src)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _cause(tail: list[str], code: int) -> str:
    """The builder's last error line, else its exit status."""
    for line in reversed(tail):
        if re.search(r"(Error|Exception|error:)", line):
            return line[:300]
    return f"exit status {code}"
