"""Real LLMs as they are shared: a GGUF file (unpacked by transformers' own GGUF loader) and
a Hugging Face folder of a family the builder reads in a form of its own (Gemma 3 under
transformers 5) import and then generate exactly transformers' greedy tokens; an import
without an output folder lands in the cache and is reused; bad sources get one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.backends.genai.generate import generate
from engine.backends.genai.model import open_llm
from engine.config import RunConfig

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("onnxruntime_genai", reason="the genai extra is not installed")
pytest.importorskip("gguf", reason="the hf extra is not installed")
torch = pytest.importorskip("torch")

from tests.test_hf_import import NEW, PROMPT, opscope, tokenizer_for  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    tokenizer_for(512).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory, tokenizer_folder: Path) -> Path:
    from tests.tiny_gguf import tokenizer_dict, write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf",
                           tokenizer_dict(tokenizer_folder))  # fmt: skip


def greedy(model, prompt: list[int]) -> list[int]:  # type: ignore[no-untyped-def]
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=NEW, min_new_tokens=NEW,
                             do_sample=False, pad_token_id=0)  # fmt: skip
    return [int(t) for t in out[0, len(prompt) :]]


def ours(folder: Path, prompt: list[int]) -> list[int]:
    llm = open_llm(folder, RunConfig(engine="genai", threads=1))
    decoder = llm.decoder(1, len(prompt) + NEW + 1)
    made: list[int] = generate(decoder, np.asarray([prompt], np.int64), NEW).tokens[0].tolist()
    return made


def imported_path(stdout: str) -> Path:
    line = next(x for x in stdout.splitlines() if x.startswith("imported"))
    return Path(line.split()[1])


def test_a_gguf_file_imports_into_the_cache_and_generates_transformers_tokens(
    tiny_gguf: Path,
) -> None:
    from transformers import AutoModelForCausalLM, GgufConfig

    proc = opscope("import-hf", tiny_gguf)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # (which progress lines show depends on the printer's pace: the outcome is asserted)
    assert f"from {tiny_gguf} (fp32, cpu)" in proc.stderr, proc.stderr
    folder = imported_path(proc.stdout)
    assert (folder / "genai_config.json").is_file() and folder.name == "tiny-llama"
    unpack = GgufConfig(dequantize=True)
    reference = AutoModelForCausalLM.from_pretrained(
        str(tiny_gguf.parent), gguf_file=tiny_gguf.name, quantization_config=unpack
    )
    assert ours(folder, PROMPT) == greedy(reference, PROMPT)
    again = opscope("import-hf", tiny_gguf)  # the same source: the cached import, at once
    assert again.returncode == 0 and "reused" in again.stderr, again.stdout + again.stderr
    assert imported_path(again.stdout) == folder


def test_gemma3_imports_and_generates_transformers_tokens(
    tmp_path: Path, tokenizer_folder: Path
) -> None:
    """transformers 5 keeps Gemma 3's RoPE per layer type (the builder stopped with KeyError
    'rope_type'); its local layers' sliding window needs a cache of at least the window."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    src = tmp_path / "tiny-gemma3"
    config = Gemma3TextConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, head_dim=16, max_position_embeddings=256,
        sliding_window=32, layer_types=["sliding_attention", "full_attention"],
        query_pre_attn_scalar=16, pad_token_id=0, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    assert "full_attention" in (config.rope_parameters or {})  # the nested form under test
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config)
    model.eval()  # type: ignore[no-untyped-call]
    model.save_pretrained(src)
    for f in tokenizer_folder.iterdir():
        (src / f.name).write_bytes(f.read_bytes())
    out = tmp_path / "gemma3-genai"
    proc = opscope("import-hf", src, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ours(out, PROMPT) == greedy(model, PROMPT)  # 16 tokens, in a cache of the window's 32


def test_bad_sources_get_one_line(tmp_path: Path, tiny_gguf: Path) -> None:
    from engine.backends.genai.hf_import import ImportRequest, check_request
    from engine.errors import OpScopeError
    from engine.model.info import load_model

    def why(source: Path) -> str:
        with pytest.raises(OpScopeError) as err:
            check_request(ImportRequest(str(source)))
        return str(err.value)

    data = tiny_gguf.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) // 2])
    assert "truncated" in why(cut)
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"PK\x03\x04" + data[4:200])
    assert "not a GGUF file" in why(fake)
    version = tmp_path / "v9.gguf"
    version.write_bytes(b"GGUF\x09\x00\x00\x00" + data[8:])
    assert "GGUF version 9" in why(version)
    folder = tmp_path / "unknown"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\x00" * 16)
    (folder / "tokenizer.json").write_text("{}")
    (folder / "config.json").write_text('{"architectures": ["FooForCausalLM"]}')
    message = why(folder)
    assert "architecture FooForCausalLM" in message and "Llama" in message and "not Foo" in message
    (folder / "config.json").write_text('{"model_type": "llama"}')
    assert "no 'architectures'" in why(folder)
    # any other command handed such a source says how to run it, in one line
    with pytest.raises(OpScopeError, match="a GGUF file: import it first"):
        load_model(tiny_gguf)
    from app.entry import _a_shared_llm

    assert _a_shared_llm(str(tiny_gguf)) and not _a_shared_llm("info")  # `opscope X.gguf`: window
    proc = opscope("import-hf", cut)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert str(cut) in proc.stderr and "Traceback" not in proc.stderr


def test_the_builder_reads_gemma3s_rope_per_layer_type() -> None:
    from types import SimpleNamespace

    from engine.backends.genai.builder_run import flatten_layer_rope

    config = SimpleNamespace(rope_parameters={
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
    })  # fmt: skip
    flatten_layer_rope(config)
    assert config.rope_parameters == {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}
    assert config.rope_theta == 1e6 and config.rope_local_base_freq == 1e4
    flat = SimpleNamespace(rope_parameters={"rope_type": "default", "rope_theta": 5e5})
    flatten_layer_rope(flat)  # the flat form is left as it is
    assert flat.rope_parameters == {"rope_type": "default", "rope_theta": 5e5}


def test_the_window_opens_a_gguf_file_by_importing_it(qtbot, tiny_gguf: Path) -> None:  # type: ignore[no-untyped-def]
    """File > Open / `opscope MODEL` on a GGUF file: imported (cached) under a progress
    dialog, then opened as a generating model."""
    pytest.importorskip("PySide6")
    from app.host.engine_client import EngineClient
    from app.host.job_runner import JobRunner
    from app.llm.hf_import import ImportJob, import_and_open

    client = EngineClient()
    runner = JobRunner(client)
    client.start()
    opened: list[str] = []
    said: list[str] = []
    try:
        job = import_and_open(None, runner, str(tiny_gguf), opened.append, said.append)  # type: ignore[arg-type]
        with qtbot.waitSignal(job.finished, timeout=240_000) as blocker:
            pass
        assert blocker.args[0] is True, blocker.args
        assert not said and opened and (Path(opened[0]) / "genai_config.json").is_file()
        cut = tiny_gguf.with_name("cut-in-the-window.gguf")  # a bad file: one line, no crash
        cut.write_bytes(tiny_gguf.read_bytes()[:4096])
        job = ImportJob(runner, str(cut), "")
        with qtbot.waitSignal(job.finished, timeout=60_000) as blocker:
            job.start()
        ok, why = blocker.args
        assert not ok and "truncated" in why and str(cut) in why and "\n" not in why, why
    finally:
        client.shutdown()
