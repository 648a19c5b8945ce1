"""Importing a Hugging Face model folder (config.json + safetensors weights) as a genai-format
folder with onnxruntime-genai's model builder, offline. The builder needs torch and
transformers (the `hf` extra); it runs as a child process (its import aborts when started
from inside its own package folder, and a crash in it must not take OpScope down), from a
scratch folder, with its cache in a temporary folder. Its output lines become progress."""

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

from engine.backends.genai.hf_size import check_config_size, config_sizes
from engine.backends.genai.json_file import read_json
from engine.errors import ConfigError, ModelError
from engine.events import Event, Notice, Progress

PRECISIONS = ("fp32", "fp16", "int4")
NEEDS = ("onnxruntime_genai", "torch", "transformers")
TOKENIZERS = ("tokenizer.json", "tokenizer.model")
MAX_CONFIG_BYTES = 16 << 20  # a config.json is kilobytes; a label map can make it megabytes
_LAYER = re.compile(r"Reading layer (\d+)")


@dataclass(frozen=True)
class ImportRequest:
    source: str  # a Hugging Face model folder
    output: str  # the genai-format folder to write (must not exist, or be empty)
    precision: str = "fp32"
    provider: str = "cpu"  # the execution provider the model is built for (cpu | cuda)
    job_name: ClassVar[str] = "import"


def missing_packages() -> list[str]:
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def check_request(req: ImportRequest) -> tuple[Path, Path, int]:
    """The source and output folders and the source's layer count, or one clear error."""
    src = Path(req.source)
    config = src / "config.json"
    if not src.is_dir():
        raise ConfigError(f"{src}: not a folder (a Hugging Face model folder: config.json and "
                          "*.safetensors)")  # fmt: skip
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
    if req.precision not in PRECISIONS:
        raise ConfigError(
            f"precision {req.precision!r}: the builder offers {', '.join(PRECISIONS)}"
        )
    if req.precision == "fp16" and req.provider == "cpu":
        raise ConfigError(
            "fp16 is built for the CUDA provider (--provider cuda); for a CPU import fp32 or int4"
        )
    out = Path(req.output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out}: exists and is not an empty folder")
    missing = missing_packages()
    if missing:
        raise ConfigError(f"importing a Hugging Face model needs {', '.join(missing)}: "
                          "pip install 'opscope[hf]'")  # fmt: skip
    layers = config_sizes(data, config).get("layers", ("", 0))[1]
    return src, out, layers


def import_hf(req: ImportRequest) -> Generator[Event, None, Path]:
    """Build the genai folder; progress by layers read; the output folder. Stopping the
    generator (Ctrl+C, cancel) kills the builder and leaves no half-written folder."""
    src, out, layers = check_request(req)
    scratch = Path(tempfile.mkdtemp(prefix="opscope-hf-"))
    staged = scratch / "model"
    cmd = [
        sys.executable, "-m", "onnxruntime_genai.models.builder",
        "-i", str(src.resolve()), "-o", str(staged), "-p", req.precision,
        "-e", req.provider, "-c", str(scratch / "cache"),
    ]  # fmt: skip
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.Popen(
        cmd, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, text=True, errors="replace",
    )  # fmt: skip
    tail: list[str] = []
    try:
        yield Progress("import", 0, max(layers, 1), f"building {src.name} ({req.precision})")
        assert proc.stdout is not None
        for raw in proc.stdout:
            for line in raw.replace("\r", "\n").splitlines():
                line = line.strip()
                if not line:
                    continue
                tail = [*tail[-19:], line]
                m = _LAYER.search(line)
                if m and layers:
                    done = int(m.group(1)) + 1
                    yield Progress("import", done, layers, f"read layer {done} of {layers}")
        code = proc.wait()
        if code != 0 or not (staged / "genai_config.json").is_file():
            raise ModelError(f"the onnxruntime-genai builder failed ({_cause(tail, code)})", src)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            out.rmdir()  # checked empty above
        shutil.move(str(staged), str(out))
        yield Notice("info", f"built {out} from {src} ({req.precision}, {req.provider})")
        return out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _cause(tail: list[str], code: int) -> str:
    """The builder's last error line, else its exit status."""
    for line in reversed(tail):
        if re.search(r"(Error|Exception|error:)", line):
            return line[:300]
    return f"exit status {code}"
