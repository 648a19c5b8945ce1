"""`opscope import-hf`: a Hugging Face model folder (here a tiny random-weight Llama written by
transformers, offline) built into a genai folder by onnxruntime-genai's builder; our engine
then generates on it the same greedy tokens as transformers does on the original weights.
Bad folders get one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.backends.genai.generate import generate
from engine.backends.genai.model import open_llm
from engine.config import RunConfig
from tests.conftest import ROOT

pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("onnxruntime_genai", reason="the genai extra is not installed")
torch = pytest.importorskip("torch")

PROMPT = [5, 17, 300, 42, 7, 99]
NEW = 10


def opscope(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.entry", *map(str, args)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("hf") / "tiny-llama"
    config = LlamaConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer_for(config.vocab_size).save_pretrained(folder)
    return folder


def tokenizer_for(vocab: int):  # type: ignore[no-untyped-def]
    """A byte-level BPE of `vocab` tokens trained on the demo LLM's corpus (offline)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    corpus = ROOT / "resources" / "models" / "demo_llm_corpus.txt"
    tok.train([str(corpus)], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


def hf_greedy(folder: Path) -> list[int]:
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        out = model.generate(
            torch.tensor([PROMPT]), max_new_tokens=NEW, do_sample=False, min_new_tokens=NEW,
            pad_token_id=0,
        )  # fmt: skip
    return [int(t) for t in out[0, len(PROMPT) :]]


def test_an_imported_model_generates_the_original_models_tokens(
    hf_folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "genai"
    proc = opscope("import-hf", hf_folder, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "genai_config.json").is_file() and "imported" in proc.stdout
    llm = open_llm(out, RunConfig(engine="genai", threads=1))
    decoder = llm.decoder(1, len(PROMPT) + NEW + 1)
    ours = generate(decoder, np.asarray([PROMPT], np.int64), NEW).tokens[0].tolist()
    assert ours == hf_greedy(hf_folder)
    # and it is a model like the others: timed by `opscope generate`
    proc = opscope("generate", out, "--prompt-len", "8", "--new-tokens", "4", "--duration", "0.3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tpot" in proc.stdout


def _said(stderr: str) -> list[str]:
    """stderr's lines but progress: a step quiet for 5 s says it is still running, on a pipe
    too (engine/cli/step_watch.py); on a busy machine the builder's refusal can take that."""
    return [line for line in stderr.splitlines() if not line.startswith("[")]


def test_bad_folders_get_one_line(hf_folder: Path, tmp_path: Path) -> None:
    no_config = tmp_path / "empty"
    no_config.mkdir()
    proc = opscope("import-hf", no_config, tmp_path / "o1")
    assert proc.returncode == 2 and len(_said(proc.stderr)) == 1, proc.stderr
    assert "no config.json" in proc.stderr
    (no_config / "config.json").write_text((hf_folder / "config.json").read_text())
    (no_config / "model.safetensors").write_bytes((hf_folder / "model.safetensors").read_bytes())
    proc = opscope("import-hf", no_config, tmp_path / "o1")
    assert proc.returncode == 2 and "no tokenizer" in proc.stderr, proc.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((hf_folder / "config.json").read_text())
    (broken / "model.safetensors").write_bytes(b"\x00" * 64)
    (broken / "tokenizer.json").write_text((hf_folder / "tokenizer.json").read_text())
    proc = opscope("import-hf", broken, tmp_path / "o2")
    assert proc.returncode == 2 and len(_said(proc.stderr)) == 1, proc.stderr
    assert "builder failed" in proc.stderr and str(broken) in proc.stderr
    assert not (tmp_path / "o2").exists()  # nothing half-written
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("keep me")
    proc = opscope("import-hf", hf_folder, taken)
    assert proc.returncode == 2 and "not an empty folder" in proc.stderr
    assert (taken / "x").read_text() == "keep me"


def test_the_app_imports_with_progress_and_cancel(qtbot, hf_folder: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """File > Import Hugging Face Model's job: progress by layer, then the folder; a
    cancelled import leaves nothing behind."""
    pytest.importorskip("PySide6")
    from app.host.engine_client import EngineClient
    from app.host.job_runner import JobRunner
    from app.llm.hf_import import ImportJob, free_folder

    client = EngineClient()
    runner = JobRunner(client)
    client.start()  # the engine host runs the import in a process of its own
    try:
        out = free_folder(tmp_path / "x")
        assert out.name == "x-genai"
        job = ImportJob(runner, str(hf_folder), str(out))
        seen: list[tuple[int, int]] = []
        job.progress.connect(lambda done, total, _text: seen.append((done, total)))
        with qtbot.waitSignal(job.finished, timeout=240_000) as blocker:
            job.start()
        assert blocker.args == [True, str(out)]
        assert (out / "genai_config.json").is_file()
        assert (2, 2) in seen  # both layers read
        assert free_folder(tmp_path / "x").name == "x-genai-2"
        cancelled = tmp_path / "never"
        job = ImportJob(runner, str(hf_folder), str(cancelled))
        job.progress.connect(lambda *_: job.cancel())  # at its first progress: building
        with qtbot.waitSignal(job.finished, timeout=60_000) as blocker:
            job.start()
        assert blocker.args == [False, "cancelled"]
        assert not job.running
    finally:
        client.shutdown()
    assert not cancelled.exists()
