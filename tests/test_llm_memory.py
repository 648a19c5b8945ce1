"""Memory for generating models: `opscope memory FOLDER` on the demo LLM (the KV cache per
token, per sequence and at full context for each batch, the weights by dtype, a prefill's
and a decode step's activation peaks and resident growth, measured apart), the weight-only
packed weights counted as int4/int8, and a decoder ONNX's past-KV inputs sized from the
config beside it (one line naming the input without one)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.backends.genai.kv_dims import decoder_shapes
from engine.backends.genai.memory import llm_weights
from engine.cli.main import main
from engine.cli.memory_cmd import print_memory
from engine.errors import InputError
from engine.model.info import load_model
from engine.session.memory_rows import checked_report

PROMPT, NEW, BATCH = 16, 8, 2


@pytest.fixture(scope="module")
def measured(llm: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """`opscope memory FOLDER --json --session` on the demo LLM, once for the module: the
    JSON's report and the session file."""
    out = tmp_path_factory.mktemp("llm-memory") / "memory.json"
    session = out.with_suffix(".opscope")
    argv = ["memory", str(llm), "--batch", str(BATCH), "--prompt-len", str(PROMPT),
            "--new-tokens", str(NEW), "--threads", "1", "--json", str(out),
            "--session", str(session)]  # fmt: skip
    assert main(argv) == 0
    memory: dict[str, Any] = json.loads(out.read_text())["memory"]
    return memory, session


@pytest.fixture(scope="module")
def report(measured: tuple[dict[str, Any], Path]) -> dict[str, Any]:
    return measured[0]


def _decoder(llm: Path) -> dict[str, Any]:
    dec: dict[str, Any] = json.loads((llm / "genai_config.json").read_text())["model"]["decoder"]
    return dec


def test_the_kv_cache_per_token_sequence_and_full_context_for_each_batch(
    report: dict[str, Any], llm: Path
) -> None:
    dec = _decoder(llm)
    per_token = 2 * dec["num_hidden_layers"] * dec["num_key_value_heads"] * dec["head_size"] * 4
    kv = report["llm"]["kv_cache"]
    assert kv["dtype"] == "float32" and kv["bytes_per_token"] == per_token == 2048
    assert (kv["layers"], kv["kv_heads"], kv["head_size"]) == (4, 2, 32)
    assert kv["run_tokens"] == PROMPT + NEW and report["llm"]["context_length"] == 2048
    assert kv["by_batch"] == [
        {"batch": b, "per_token": b * per_token, "per_sequence": b * per_token * (PROMPT + NEW),
         "full_context": b * per_token * 2048}
        for b in (1, BATCH)
    ]  # fmt: skip


def test_weights_and_the_prefill_and_decode_peaks_measured(
    report: dict[str, Any], llm: Path
) -> None:
    w = report["weights_bytes"]
    assert w["by_dtype"]["float32"] > 0.95 * (llm / "model.onnx").stat().st_size
    phases = report["llm"]["phases"]
    prefill, decode = phases["prefill"], phases["decode"]
    assert (prefill["tokens"], decode["tokens"], prefill["batch"]) == (PROMPT, 1, BATCH)
    logits = BATCH * PROMPT * 3928 * 4  # every prompt position's float32 logits
    assert prefill["activation_peak_bytes"] >= logits
    assert 0 < decode["activation_peak_bytes"] < prefill["activation_peak_bytes"]
    assert prefill["alive_at_peak"][0]["tensor"] == "logits"  # the KV cache is counted apart
    assert not any(t["tensor"].startswith(("past", "present"))
                   for p in (prefill, decode) for t in p["alive_at_peak"])  # fmt: skip
    assert prefill["rss_growth_bytes"] is not None and "VmHWM" in report["llm"]["measured_by"]
    rss = report["measured"]["rss_bytes"]
    assert list(rss) == ["before_session", "after_session", "after_prefill", "after_decode"]
    assert report["measured"]["held_bytes"] == rss["after_decode"] - rss["before_session"] > 0
    assert report["activations"]["as_run"]["peak_bytes"] == prefill["activation_peak_bytes"]
    assert report["inputs"] == {"input_ids": [BATCH, PROMPT]}
    checked_report(report)  # a session file takes it as every memory report


def test_the_session_keeps_the_kv_cache_and_the_report_shows_it(
    measured: tuple[dict[str, Any], Path],
) -> None:
    from engine.analysis.memory_report import memory_section
    from engine.session.store import open_session_file

    with open_session_file(measured[1]) as reader:
        (row,) = reader.memory()
    kept = row.report["llm"]
    assert kept["kv_cache"]["bytes_per_token"] == 2048 and kept["context_length"] == 2048
    assert kept["kv_cache"]["by_batch"][1]["full_context"] == BATCH * 2048 * 2048
    assert kept["phases"]["prefill"]["tokens"] == PROMPT
    html = memory_section([row])
    assert "KV cache (batch 1)" in html
    assert "2.0 KB/token; 49.2 KB at 24 tokens; 4.2 MB at 2,048 (full context)" in html


def test_the_report_in_words(report: dict[str, Any]) -> None:
    out = io.StringIO()
    print_memory(report, out)
    text = out.getvalue()
    assert "kv cache   float32: 2,048 bytes per token = 4 layers x 2 KV heads x 32" in text
    assert f"batch {BATCH}: 4.1 KB per token, 98.3 KB at 24 tokens, 8.4 MB at full context" in text
    assert f"prefill    {PROMPT} tokens x batch {BATCH}: activation peak" in text
    assert f"decode     1 token x batch {BATCH}: activation peak" in text


def test_the_memory_dock_shows_the_llm_rows(report: dict[str, Any], qtbot: Any) -> None:
    pytest.importorskip("PySide6")
    from unittest.mock import MagicMock

    from app.desk import Desk
    from app.memory.controller import MemoryController
    from app.memory.view import MemoryPanel
    from widgets.models.llm_memory_rows import llm_lines

    lines = llm_lines(report)
    assert lines[0].startswith("KV cache float32: 2,048 bytes per token (4 layers x 2 KV heads")
    assert (
        lines[2] == "  batch 2: 4.1 KB/token, 98.3 KB at 24 tokens, 8.4 MB at full context (2,048)"
    )
    assert lines[3].startswith(f"Prefill ({PROMPT} tokens x batch {BATCH}): activations ")
    assert lines[4].startswith(f"Decode (1 token x batch {BATCH}): activations ")
    assert llm_lines({"weights_bytes": {}}) == []

    dock = MemoryPanel()  # what the view shows when a report comes back
    qtbot.addWidget(dock)
    MemoryController(MagicMock(spec=Desk), dock)._done(report)
    assert not dock.llm.isHidden() and dock.llm.text().split("\n") == lines
    assert dock.view.summary.text().startswith("Weights 19.6 MB (float32")
    assert dock.measure_button.isEnabled() and not dock.cancel_button.isEnabled()


def test_the_memory_dock_asks_at_the_generation_docks_lengths(llm: Path, qapp: Any) -> None:
    pytest.importorskip("PySide6")
    from unittest.mock import MagicMock, PropertyMock

    from app.desk import Desk
    from app.memory.controller import MemoryController
    from app.memory.port import MemoryViewPort
    from engine.api import RunConfig, Workload

    desk = MagicMock(spec=Desk)
    type(desk).generation_shape = PropertyMock(return_value=(48, 12))  # the Generation dock's
    type(desk).session_path = PropertyMock(return_value="s.opscope")
    desk.jobs.busy.return_value = False
    MemoryController(desk, MagicMock(spec=MemoryViewPort)).measure()
    (concern, make), kwargs = desk.run_on_workload.call_args
    assert concern == "memory" and kwargs["pause"] == "paused: measuring memory"
    config = RunConfig(engine="genai", batch=3)
    req = make(Workload(str(llm), config))
    assert (req.workload.model, req.prompt_len, req.new_tokens) == (str(llm), 48, 12)
    assert req.workload.config.batch == 3 and req.session == "s.opscope"
    onnx_model = make(Workload(str(llm / "model.onnx"), config))  # an ONNX model: no lengths
    assert (onnx_model.prompt_len, onnx_model.new_tokens) == (None, None)


def _matmul_nbits(bits: int) -> onnx.ModelProto:
    """A MatMul of a [64, 32] weight as ONNX Runtime's quantizer writes it: packed uint8
    blocks of 32, a scale per block, and a float bias beside it."""
    n, k, block = 32, 64, 32
    packed = np.zeros((n, k // block, block * bits // 8), np.uint8)
    scales = np.ones((n * k // block,), np.float32)
    node = helper.make_node("MatMulNBits", ["x", "w_q", "w_scales"], ["mm"], domain="com.microsoft",
                            K=k, N=n, bits=bits, block_size=block)  # fmt: skip
    add = helper.make_node("Add", ["mm", "bias"], ["y"])
    graph = helper.make_graph(
        [node, add], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        [numpy_helper.from_array(packed, "w_q"), numpy_helper.from_array(scales, "w_scales"),
         numpy_helper.from_array(np.zeros(n, np.float32), "bias")],
    )  # fmt: skip
    return helper.make_model(graph)


def test_packed_weights_count_as_int4_and_int8_with_their_scales() -> None:
    for bits in (4, 8):
        got = {name: (dtype, size) for name, dtype, size in llm_weights(_matmul_nbits(bits))}
        assert got == {
            "w_q": (f"int{bits}", 32 * 64 * bits / 8),
            "w_scales": (f"int{bits} scales", 64 * 4.0),
            "bias": ("float32", 32 * 4.0),
        }


def test_a_decoders_past_kv_inputs_are_sized_from_the_config_beside_it(
    llm: Path, tmp_path: Path
) -> None:
    _, info = load_model(llm / "model.onnx")
    dims, shapes = decoder_shapes(info, 3, 20, {}, {})
    pasts = {k: v for k, v in shapes.items() if k.startswith("past_key_values.")}
    assert len(pasts) == 8 and set(pasts.values()) == {(3, 2, 0, 32)}
    assert dims == {"sequence_length": 20, "total_sequence_length": 20}
    # a past length and a shape given are kept: the total is the past + the new tokens
    dims, shapes = decoder_shapes(info, 1, 20, {"past_sequence_length": 5},
                                  {"input_ids": (1, 1)})  # fmt: skip
    assert shapes["past_key_values.3.value"] == (1, 2, 5, 32) and shapes["input_ids"] == (1, 1)
    assert dims == {"past_sequence_length": 5, "total_sequence_length": 6}

    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "model.onnx").symlink_to(llm / "model.onnx")
    _, bare = load_model(alone / "model.onnx")
    with pytest.raises(InputError) as caught:
        decoder_shapes(bare, 1, 20, {}, {})
    said = str(caught.value)
    assert "\n" not in said and said.startswith(str(alone / "model.onnx"))
    assert "input past_key_values.0.key [batch_size, 2, past_sequence_length, 32]" in said
    assert "--dim past_sequence_length=N (past tokens)" in said
    assert decoder_shapes(bare, 1, 20, {"past_sequence_length": 4}, {})[1][
        "past_key_values.0.key"
    ] == (1, 2, 4, 32)


def _symbolic_decoder(folder: Path) -> Path:
    """A decoder whose past names every dim (as SmolLM2's genai export does: the head size
    is "kv_cache_dim"), in `folder`."""
    past = ["batch_size", "num_kv", "past_sequence_length", "kv_cache_dim"]
    ins = [
        helper.make_tensor_value_info(
            "input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]
        ),
        helper.make_tensor_value_info(
            "attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]
        ),
        helper.make_tensor_value_info("past_key_values.0.key", TensorProto.FLOAT, past),
        helper.make_tensor_value_info("past_key_values.0.value", TensorProto.FLOAT, past),
    ]
    outs = [helper.make_tensor_value_info("logits", TensorProto.INT64, None)]
    graph = helper.make_graph([helper.make_node("Identity", ["input_ids"], ["logits"])], "g",
                              ins, outs)  # fmt: skip
    folder.mkdir()
    onnx.save(helper.make_model(graph), folder / "model.onnx")
    return folder / "model.onnx"


def test_the_heads_and_head_size_come_from_genai_config_or_config_json(
    llm: Path, tmp_path: Path
) -> None:
    genai = _symbolic_decoder(tmp_path / "genai")
    shutil.copy(llm / "genai_config.json", genai.parent)
    _, info = load_model(genai)
    dims, shapes = decoder_shapes(info, 2, 7, {}, {})
    assert shapes["past_key_values.0.value"] == (2, 2, 0, 32)
    assert dims == {"sequence_length": 7, "total_sequence_length": 7}

    hf = _symbolic_decoder(tmp_path / "hf")
    (hf.parent / "config.json").write_text(json.dumps(
        {"num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576}))  # fmt: skip
    _, info = load_model(hf)
    assert decoder_shapes(info, 1, 7, {}, {})[1]["past_key_values.0.key"] == (1, 3, 0, 64)
    _, info = load_model(_symbolic_decoder(tmp_path / "none"))
    with pytest.raises(InputError, match=r"pass --dim num_kv=N \(KV heads\), --dim "
                       r"past_sequence_length=N \(past tokens\), --dim kv_cache_dim=N "
                       r"\(head size\)$"):  # fmt: skip
        decoder_shapes(info, 1, 7, {}, {})
