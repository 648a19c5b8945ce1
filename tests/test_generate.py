"""`opscope generate` on the demo LLM: tokens as onnxruntime-genai's generator makes them,
TTFT/TPOT from raw per-step samples with their counts, the KV cache's size, and bad input
refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from engine.backends.genai.generate import Sampling, generate
from engine.backends.genai.model import open_llm, read_config
from engine.config import RunConfig
from engine.errors import ConfigError, ModelError
from engine.session.store import open_session_file
from tests.conftest import DEMO_LLM, ROOT
from tests.conftest import DEMO_TRANSFORMER as DEMO_TRANSFORMER_ONNX
from tests.in_process import Cli
from tests.test_cli import opscope


def _og_greedy(folder: Path, prompt: np.ndarray, n: int) -> list[int]:
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=prompt.shape[1] + n, do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(prompt)
    out: list[int] = []
    while not gen.is_done() and len(out) < n:
        gen.generate_next_token()
        out.append(int(gen.get_next_tokens()[0]))
    return out


def test_greedy_tokens_match_the_reference_generator(llm: Path) -> None:
    opened = open_llm(llm, RunConfig(threads=1))
    rng = np.random.default_rng(3)
    for length in (7, 60):
        prompt = rng.integers(3, opened.vocab_size, size=(1, length), dtype=np.int64)
        ours = generate(opened.decoder(1, length + 24), prompt, 24).tokens[0].tolist()
        assert ours == _og_greedy(llm, prompt, 24), length
    # two sequences at once: each the same as alone
    pair = rng.integers(3, opened.vocab_size, size=(2, 12), dtype=np.int64)
    both = generate(opened.decoder(2, 28), pair, 16).tokens
    for row in range(2):
        alone = generate(opened.decoder(1, 28), pair[row : row + 1], 16).tokens[0]
        assert both[row].tolist() == alone.tolist()


def test_sampling_is_seeded(llm: Path) -> None:
    opened = open_llm(llm, RunConfig(threads=1))
    prompt = np.arange(3, 19, dtype=np.int64).reshape(1, 16)

    def run(sampling: Sampling) -> list[int]:
        return generate(opened.decoder(1, 48), prompt, 32, sampling).tokens[0].tolist()

    hot = Sampling(temperature=1.5, seed=7)
    assert run(hot) == run(hot) != run(Sampling(temperature=1.5, seed=8))
    assert run(hot) != run(Sampling())


def test_generate_from_the_command_line(llm: Path, tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    proc = opscope("generate", llm, "--prompt-len", "48", "--new-tokens", "8", "--duration",
                   "0.5", "--threads", "1", "--json", out, check=True)  # fmt: skip
    data = json.loads(out.read_text())
    n = data["generations"]
    assert n >= 3 and data["ttft_ms"]["count"] == n and data["tpot_ms"]["count"] == n * 7
    assert data["ttft_ms"]["p50"] > data["tpot_ms"]["p50"] > 0  # a prompt of 48 vs 1 token
    assert data["tokens_per_s"]["prefill"] > data["tokens_per_s"]["decode"]
    cfg = read_config(llm).shape
    per_token = 2 * cfg.layers * cfg.kv_heads * cfg.head_size * 4
    assert data["kv_cache"] == {"bytes_per_token": per_token, "bytes": per_token * 56,
                                "buffer_bytes": per_token * 56}  # fmt: skip
    assert len(data["tokens"][0]) == 8 and data["provider_used"] == "CPUExecutionProvider"
    for line in ("ttft ", "tpot ", "tokens/s ", "kv cache "):
        assert any(ln.startswith(line) for ln in proc.stdout.splitlines()), line
    text = opscope("generate", llm, "--prompt", "The session file", "--new-tokens", "4",
                   "--duration", "0.2", "--warmup", "0", "--json", out, check=True)  # fmt: skip
    assert "output     " in text.stdout and json.loads(out.read_text())["text"]


def test_bad_input_is_one_line(llm: Path, tmp_path: Path, cli: Cli) -> None:
    def refused(*args: object, said: str) -> None:
        proc = cli("generate", *args, "--duration", "0.1")
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, proc.stderr
        assert said in lines[-1] and "Traceback" not in proc.stderr, proc.stderr
        assert len(lines) == 1 or lines[0].startswith("usage:"), proc.stderr  # argparse's

    refused(tmp_path, said="not a generating model folder (no genai_config.json)")
    too_long = "2040 prompt + 16 new tokens = 2056 exceed the model's context of 2048"
    refused(llm, "--prompt-len", "2040", "--new-tokens", "16", said=too_long)
    refused(llm, "--new-tokens", "0", said="--new-tokens: must be at least 1")
    broken = tmp_path / "broken"
    shutil.copytree(llm, broken)
    (broken / "tokenizer.json").write_text("{not json")
    refused(broken, "--prompt", "hello", said="the tokenizer does not parse")
    (broken / "genai_config.json").write_text('{"model": {"decoder": {"head_size": -1}}}')
    refused(broken, said="unusable config")
    with pytest.raises(ModelError, match="unusable config"):
        read_config(broken)


def test_a_model_without_past_inputs_is_refused(tmp_path: Path) -> None:
    from tests.conftest import DEMO_TRANSFORMER

    folder = tmp_path / "not_a_decoder"
    shutil.copytree(DEMO_LLM, folder)
    shutil.copy(DEMO_TRANSFORMER, folder / "model.onnx")
    opened = open_llm(folder, RunConfig(threads=1))
    with pytest.raises(ConfigError, match=r"no input 'past_key_values\.0\.key'"):
        opened.decoder(1, 16)


def test_prefill_and_decode_profiled_apart(llm: Path, tmp_path: Path) -> None:
    """Prefill's MatMuls do many FLOPs per byte; decode's read the weights for one token:
    its arithmetic intensity at least 5x lower (the issue's bar), its passes tagged apart."""
    out = tmp_path / "p.json"
    proc = opscope("generate", llm, "--prompt-len", "128", "--new-tokens", "6", "--duration",
                   "0.2", "--threads", "1", "--profile", "--json", out, check=True)  # fmt: skip
    phases = json.loads(out.read_text())["phases"]
    pre, dec = phases["prefill"], phases["decode"]
    assert pre["passes"] == 3 and dec["passes"] == 3 * 5  # 3 generations: 1 + 5 passes each
    assert pre["intensity"] >= 5 * dec["intensity"] > 0
    assert pre["flops"] > 50 * dec["flops"] and pre["time_ms"] > dec["time_ms"]
    types = {t["name"] for t in dec["op_types"]}
    assert {"MatMul", "GroupQueryAttention"} <= types
    assert "arithmetic intensity is" in proc.stdout


def test_the_prefill_fit_finds_the_quadratic_share() -> None:
    from engine.tune.prompt_sweep import fit_prefill

    lengths = np.asarray([32.0, 128, 512, 1024, 2048])
    a, b, c = fit_prefill(lengths, 0.5 + 0.02 * lengths + 1e-5 * lengths**2)
    assert (a, b, c) == pytest.approx((0.5, 0.02, 1e-5), rel=1e-6)
    a, b, c = fit_prefill(lengths, 0.5 + 0.02 * lengths)  # linear: no quadratic term
    assert c == pytest.approx(0.0, abs=1e-9) and b == pytest.approx(0.02)
    # noise that would want a negative linear term: the terms stay non-negative
    _, b, c = fit_prefill(lengths, 1e-5 * lengths**2 + np.asarray([0.3, 0.0, 0.0, 0.0, 0.0]))
    assert b >= 0 and c > 0


def test_the_prompt_sweep_from_the_command_line(llm: Path, tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "s.json"
    proc = opscope("generate", llm, "--prompt-len", "32", "--new-tokens", "4", "--duration",
                   "0.6", "--threads", "1", "--warmup", "1", "--sweep-prompt", "16,64,256",
                   "--json", out, "--session", tmp_path / "s.opscope", check=True)  # fmt: skip
    sweep = json.loads(out.read_text())["sweep"]
    with open_session_file(tmp_path / "s.opscope") as reader:  # the run, then each length's
        prompts = [g.prompt_len for r in reader.runs() if (g := reader.generation(r.id))]
    assert prompts == [32, 16, 64, 256]
    points = sweep["points"]
    assert [p["prompt_len"] for p in points] == [16, 64, 256]
    assert points[2]["ttft_p50_ms"] > points[0]["ttft_p50_ms"]
    assert 0 <= sweep["prefill_fit"]["quadratic_share_at_longest"] <= 1
    assert "the quadratic term is" in proc.stdout
    bad = cli("generate", llm, "--sweep-prompt", "16,64")
    assert bad.returncode == 2 and "three different lengths" in bad.stderr
    bad = cli("generate", llm, "--sweep-prompt", "16,64,4000", "--new-tokens", "4")
    assert bad.returncode == 2 and "4000 prompt + 4 new tokens exceed" in bad.stderr


def test_a_generation_run_lands_in_the_session(llm: Path, tmp_path: Path) -> None:
    """Kind `generate`: every timed generation's passes (TTFT, then each TPOT) and its end to
    end latency as the run's samples; the figures at the end; session show says it. A
    SIGTERM mid-run keeps the generations done, prints their summary, the run marked
    cancelled."""
    import signal
    import subprocess
    import sys
    import time

    from engine.session.reader import SessionReader

    session, out = tmp_path / "g.opscope", tmp_path / "g.json"
    opscope("generate", llm, "--prompt-len", "24", "--new-tokens", "5", "--duration", "0.4",
            "--threads", "1", "--session", session, "--json", out, check=True)  # fmt: skip
    data = json.loads(out.read_text())
    with SessionReader.open(session) as reader:
        (run,) = reader.runs()
        gen = reader.generation(run.id)
        starts, e2e = reader.latency(run.id)
    assert run.kind == "generate" and run.status == "ok" and gen is not None
    n = data["generations"]
    assert gen.ttft_ns.size == n == e2e.size == run.samples and gen.tpot_ns.size == 4 * n
    assert (gen.prompt_len, gen.new_tokens, gen.batch, gen.sampling) == (24, 5, 1, "greedy")
    # the JSON comes from float seconds, the session keeps whole ns: equal within a few ns
    assert np.median(gen.ttft_ns) / 1e6 == pytest.approx(data["ttft_ms"]["p50"], abs=1e-5)
    assert gen.summary is not None and gen.summary["tpot_ms"]["count"] == 4 * n
    assert np.all(np.diff(starts) > 0)
    show = opscope("session", "show", session, check=True).stdout
    assert f"run {run.id} generation: prompt 24, 5 new, batch 1, greedy: TTFT p50" in show

    proc = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "generate", str(llm), "--prompt-len", "24",
         "--new-tokens", "5", "--duration", "60", "--threads", "1", "--session", str(session)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until generations of the new run are committed
        time.sleep(0.5)
        try:
            with SessionReader.open(session) as reader:
                runs = reader.runs()
                made = reader.generation(runs[-1].id) if len(runs) > 1 else None
        except Exception:  # mid-write: try again
            continue
        if made is not None and made.ttft_ns.size > 10:
            break
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "opscope: interrupted"
    with SessionReader.open(session) as reader:
        last = reader.runs()[-1]
        kept = reader.generation(last.id)
    assert last.status == "cancelled" and kept is not None and kept.ttft_ns.size > 10
    assert kept.tpot_ns.size == 4 * kept.ttft_ns.size
    # the summary of the generations done is printed, and the same figures are recorded
    assert "(interrupted: the figures of those done" in stdout
    assert kept.summary is not None and kept.summary["interrupted"] is True
    assert f"(n={kept.ttft_ns.size})" in stdout


def test_weight_only_int4_and_int8_are_checked_against_fp32(
    llm: Path, tmp_path: Path, cli: Cli
) -> None:
    """MatMulNBits weights: a smaller model whose next-token choices are compared with
    FP32's, teacher-forced, after the timing; built once into the cache."""
    from engine.backends.genai.weights import llm_variant

    config = read_config(llm)
    folder, _ = llm_variant(config, "int4-weights")
    size = (folder / "model.onnx").stat().st_size
    assert size < 0.5 * config.model_file.stat().st_size
    import onnx

    ops = {n.op_type for n in onnx.load(str(folder / "model.onnx")).graph.node}
    assert "MatMulNBits" in ops and "MatMul" not in ops  # every weight, the LM head's too
    again, meta = llm_variant(config, "int4-weights")
    assert again == folder and meta["cached"]
    out = tmp_path / "q.json"
    proc = opscope("generate", llm, "--precision", "int4", "--prompt-len", "32",
                   "--new-tokens", "4", "--duration", "0.3", "--threads", "1", "--json", out,
                   check=True)  # fmt: skip
    data = json.loads(out.read_text())
    acc = data["accuracy"]
    assert data["config"]["precision"] == "int4-weights" and acc["positions"] == 128
    assert acc["token_agreement"] >= 0.9 and acc["logit_cosine"]["min"] > 0.95
    assert "INT4 weights" in proc.stdout and "accuracy   vs FP32" in proc.stdout
    fp32 = opscope("generate", llm, "--prompt-len", "8", "--new-tokens", "2", "--duration",
                   "0.1", "--json", out, check=True)  # fmt: skip
    assert json.loads(out.read_text())["accuracy"] is None and "accuracy" not in fp32.stdout
    bench = cli("bench", DEMO_TRANSFORMER_ONNX, "--precision", "int4-weights")
    assert bench.returncode == 2 and "precision must be one of" in bench.stderr


def test_fp16_keeps_an_fp16_cache_and_is_checked_against_fp32(llm: Path, tmp_path: Path) -> None:
    """fp16 throughout: the past and present are fp16, so the KV cache takes half the bytes
    (the decoder allocates it in the type the model declares; an fp32 buffer bound to an
    fp16 past failed); on a CPU a line says fp16 does not pay there."""
    from engine.backends.genai.decoder import Decoder
    from engine.backends.genai.weights import llm_variant

    folder, _ = llm_variant(read_config(llm), "fp16")
    half = open_llm(folder, RunConfig(precision="fp16", threads=1, provider="cpu"))
    full = open_llm(llm, RunConfig(threads=1, provider="cpu"))
    assert half.kv_bytes_per_token * 2 == full.kv_bytes_per_token
    dec = Decoder(half.session, half.shape, batch=1, max_length=32)
    assert dec.cache[0].dtype == np.float16
    logits = dec.prefill(np.arange(5, 13, dtype=np.int64).reshape(1, 8))
    assert logits.dtype == np.float32 and np.isfinite(logits).all()
    out = tmp_path / "h.json"
    proc = opscope("generate", llm, "--precision", "fp16", "--prompt-len", "16",
                   "--new-tokens", "4", "--duration", "0.3", "--threads", "1", "--json", out,
                   check=True)  # fmt: skip
    data = json.loads(out.read_text())
    assert data["config"]["precision"] == "fp16"
    assert data["kv_cache"]["bytes_per_token"] * 2 == full.kv_bytes_per_token
    assert data["accuracy"]["token_agreement"] >= 0.9
    assert "fp16 on the CPU" in proc.stderr


def test_compare_two_generation_runs_on_ttft_and_tpot(llm: Path, tmp_path: Path, cli: Cli) -> None:
    session = tmp_path / "c.opscope"
    for precision in ("fp32", "int4"):
        opscope("generate", llm, "--precision", precision, "--prompt-len", "64",
                "--new-tokens", "8", "--duration", "0.5", "--threads", "1", "--session",
                session, check=True)  # fmt: skip
    out = tmp_path / "c.json"
    proc = cli("compare", f"{session}:1", f"{session}:2", "--metric", "tpot_p50", "--json", out)
    assert proc.returncode in (0, 3, 4), proc.stderr  # 4: measured busy, no verdict
    data = json.loads(out.read_text())
    assert data["metric"] == "tpot_p50" and data["latency_kind"]["baseline"].startswith("a whole")
    lines = proc.stdout.splitlines()
    for name in ("ttft_p50 ms", "ttft_p99 ms", "tpot_p50 ms", "tpot_p99 ms"):
        assert any(ln.startswith(name) for ln in lines), name
    assert any(ln.startswith("tpot_p50") and ln.endswith("<- gate") for ln in lines)
    assert "precision fp32 -> int4-weights" in proc.stdout
    from tests.conftest import DEMO_CNN

    opscope("bench", DEMO_CNN, "--duration", "0.3", "--no-live", "--session", session, check=True)
    bad = cli("compare", f"{session}:1", f"{session}:3", "--metric", "ttft_p50")
    assert bad.returncode == 2 and "compares two generation runs" in bad.stderr


def test_prompts_from_a_jsonl_file(llm: Path, tmp_path: Path, cli: Cli) -> None:
    """Each timed generation takes the next prompt; text goes through the tokenizer, token
    lists are checked against the vocabulary; a bad line is one line naming it."""
    good = tmp_path / "p.jsonl"
    good.write_text('{"prompt": "The session file"}\n\n{"tokens": [5, 6, 7, 8, 9, 10, 11]}\n')
    out = tmp_path / "p.json"
    proc = opscope("generate", llm, "--prompts", good, "--new-tokens", "4", "--duration", "0.3",
                   "--threads", "1", "--warmup", "1", "--json", out, check=True)  # fmt: skip
    assert "2 prompts from" in proc.stderr + proc.stdout
    data = json.loads(out.read_text())
    assert data["generations"] >= 3 and data["tpot_ms"]["count"] == 3 * data["generations"]
    for body, said in (
        ('{"tokens": [99999]}', "line 1: tokens must be ids from 0 to"),
        ("\nnot json", "line 2: not JSON"),
        ('{"text": "x"}', 'expected {"prompt": "text"} or {"tokens": [ids]}'),
        ('{"tokens": []}', "line 1: the prompt has no tokens"),
        ("", "no prompts"),
    ):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(body)
        proc = cli("generate", llm, "--prompts", bad, "--duration", "0.1")
        assert proc.returncode == 2 and said in proc.stderr, (body, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
