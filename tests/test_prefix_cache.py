"""Prefix caching in the LLM simulator: block keys, LRU, the shared-prefix workload, a
Mooncake trace's hash_ids, and the command line's report with and without the cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.serve.llm.metrics import summarize_llm
from engine.serve.llm.prefix_cache import PrefixCache
from engine.serve.llm.requests import (
    SHARED_BASE,
    LLMWorkload,
    SharedPrefix,
    make_workload,
    parse_length,
)
from engine.serve.llm.sim import Layout, simulate_llm
from engine.serve.traffic.schedule import make_schedule, parse_traffic
from engine.session import open_session_file
from tests.test_cli import opscope
from tests.test_serve_llm import DEMO_LLM, MEASURED


def test_match_takes_the_longest_leading_run_and_leaves_a_token() -> None:
    cache = PrefixCache(capacity=10, block_tokens=4)
    assert cache.match((1, 2, 3), 12) == 0
    cache.insert((1, 2, 3), 12)
    assert cache.match((1, 2, 3), 13) == 12
    assert cache.match((1, 2, 3), 12) == 8  # the last token is always prefilled
    assert cache.match((1, 9, 3), 13) == 4  # a run stops at the first block not cached
    assert cache.match((9, 2, 3), 13) == 0
    cache.insert((5, 6), 7)  # a prompt of 7 tokens: one full block
    assert 6 not in cache._lru


def test_least_recently_used_blocks_go_first() -> None:
    cache = PrefixCache(capacity=3, block_tokens=1)
    cache.insert((1, 2, 3), 3)
    cache.match((1,), 5)  # 1 is used again
    cache.insert((4,), 1)  # evicts 2, the least recently used
    assert set(cache._lru) == {1, 3, 4}
    off = PrefixCache(capacity=0, block_tokens=16)
    off.insert((1, 2), 64)
    assert len(off) == 0
    with pytest.raises(ConfigError):
        PrefixCache(capacity=4, block_tokens=0)


def test_shared_prefix_blocks() -> None:
    prompts = np.asarray([300, 64, 10, 300])
    blocks = SharedPrefix(groups=1, tokens=64).blocks(prompts, 16, seed=0)
    assert blocks[0][:4] == blocks[3][:4] == blocks[1] == (0, 1, 2, 3)
    assert blocks[2] == ()  # under one block
    assert len(blocks[0]) == 300 // 16 and min(blocks[0][4:]) >= SHARED_BASE
    assert not set(blocks[0][4:]) & set(blocks[3][4:])  # each prompt's own blocks are its own
    with pytest.raises(ConfigError, match="GROUPS,TOKENS"):
        SharedPrefix.parse("4")


def _work(rate: float, n: int, shared: SharedPrefix | None) -> LLMWorkload:
    schedule = make_schedule(parse_traffic(f"poisson:{rate}"), 0, 0, requests=n)
    return make_workload(schedule, parse_length("200-400", "p"), parse_length("16", "n"), 0,
                         shared=shared, block=16)  # fmt: skip


def test_a_cache_cuts_ttft_by_the_prefill_it_skips() -> None:
    llm_cost = MEASURED
    work = _work(20.0, 400, SharedPrefix(2, 192))
    layout = Layout("chunked", max_seqs=16, chunk_tokens=64)
    plain = summarize_llm(simulate_llm(work, layout, llm_cost))
    cached = summarize_llm(simulate_llm(work, layout, llm_cost, None, 4096))
    pc = cached["prefix_cache"]
    # every prompt but each group's first finds its group's 12 blocks (192 of ~300 tokens)
    assert 0.5 < pc["hit_rate"] < 192 / 200 and pc["requests_hit"] >= 400 - 2 - 5
    assert cached["ttft_ms"]["p50"] < 0.8 * plain["ttft_ms"]["p50"]
    assert "prefix_cache" not in plain
    small = summarize_llm(simulate_llm(work, layout, llm_cost, None, 4))
    assert small["prefix_cache"]["hit_rate"] < pc["hit_rate"]
    with pytest.raises(ConfigError, match="share prefixes"):
        simulate_llm(_work(20.0, 10, None), layout, llm_cost, None, 64)


def test_simulate_with_a_prefix_cache_from_the_command_line(tmp_path: Path) -> None:
    out, session = tmp_path / "p.json", tmp_path / "s.opscope"
    base = ["simulate", DEMO_LLM, "--llm", "--traffic", "poisson:20", "--requests", "200",
            "--prompt-len", "200-400", "--new-tokens", "16", "--layout", "chunked"]  # fmt: skip
    done = opscope(*base, "--shared-prefix", "4,192", "--prefix-cache", "64", "--json", out,
                   "--session", session, check=True)  # fmt: skip
    r = json.loads(out.read_text())
    assert f"recorded   {session} (LLM serving study 1)" in done.stdout
    with open_session_file(session) as reader:
        (study,) = reader.llm_studies()
    assert study.kind == "simulate" and study.plan["prefix_cache"] == 64
    (row,) = study.rows
    assert row["prefix_cache"]["hit_rate"] == r["prefix_cache"]["hit_rate"]
    assert (
        row["without_prefix_cache"]["ttft_ms"]["p50"] == r["without_prefix_cache"]["ttft_ms"]["p50"]
    )
    assert len(row["prefix_curve"]) == len(r["prefix_curve"])
    assert r["prefix_cache"]["blocks"] == 64 and r["prefix_cache"]["hit_rate"] > 0
    assert r["ttft_ms"]["p50"] < r["without_prefix_cache"]["ttft_ms"]["p50"]
    rates = [c["hit_rate"] for c in r["prefix_curve"]]
    assert rates == sorted(rates) and rates[-1] > rates[0]
    assert "of prompt tokens cached" in done.stdout
    # Mooncake: the trace's own blocks (512 tokens each)
    trace = tmp_path / "m.jsonl"
    rows = [{"timestamp": 1000 * i, "input_length": 1100, "output_length": 8,
             "hash_ids": [7, 8, 100 + i]} for i in range(30)]  # fmt: skip
    trace.write_text("".join(json.dumps(x) + "\n" for x in rows))
    moon = opscope("simulate", DEMO_LLM, "--llm", "--traffic", f"trace:{trace}", "--layout",
                   "chunked", "--instances", "1", "--prefix-cache", "16", "--json", out,
                   check=True)  # fmt: skip
    r = json.loads(out.read_text())
    assert r["prefix_cache"]["requests_hit"] == 29, moon.stdout  # all but the first
    assert r["prefix_cache"]["cached_tokens"] == 29 * 1024
    # bad input: one line, exit 2
    for extra, says in (
        (["--prefix-cache", "64"], "share no prefix"),
        (["--shared-prefix", "4", "--prefix-cache", "8"], "GROUPS,TOKENS"),
        (["--shared-prefix", "4,192", "--prefix-cache", str(1 << 26), "--prefix-block", "4096"],
         "more than this machine's"),
    ):  # fmt: skip
        never = tmp_path / "never.opscope"
        bad = opscope(*base, *extra, "--session", never)
        assert bad.returncode == 2 and says in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
        assert not never.exists()  # nothing recorded half-way


def test_block_keys_chain_the_blocks_before() -> None:
    from engine.serve.llm.prefix_kv import block_keys

    a = np.arange(64, dtype=np.int64)
    b = a.copy()
    b[20] = 999  # block 1 of 16 differs
    ka, kb = block_keys(a, 16), block_keys(b, 16)
    assert len(ka) == 4 and ka[0] == kb[0] and ka[1] != kb[1]
    assert ka[2] != kb[2]  # the same tokens after a differing block: another key
    assert block_keys(a[:47], 16) == ka[:2]


def test_restored_rows_give_the_same_logits_as_a_full_prefill() -> None:
    """The real cache's copy: a prompt whose first two blocks come from another prompt's
    prefill, then the rest prefilled, reads the same logits as prefilling it whole."""
    from engine.backends.genai.model import open_llm
    from engine.backends.genai.slots import SlotCache
    from engine.config import RunConfig
    from engine.serve.llm.prefix_kv import PrefixKV

    llm = open_llm(DEMO_LLM, RunConfig(threads=1))
    slots = SlotCache(llm.session, llm.shape, 3, 128)
    rng = np.random.default_rng(0)
    shared = rng.integers(llm.first_plain_token, llm.vocab_size, 32)
    first = np.r_[shared, rng.integers(llm.first_plain_token, llm.vocab_size, 20)]
    second = np.r_[shared, rng.integers(llm.first_plain_token, llm.vocab_size, 25)]
    kv = PrefixKV(capacity=8, block=16)
    slots.prefill(0, first)
    kv.keep(slots, 0, first)
    got, held = kv.take(second)
    assert got == 32 and len(held) == 2
    kv.restore(slots, 1, held)
    cached = slots.prefill(1, second[got:], got)
    whole = slots.prefill(2, second)
    np.testing.assert_allclose(cached, whole, rtol=1e-4, atol=1e-4)
    assert cached.argmax() == whole.argmax()
    small = PrefixKV(capacity=1, block=16)  # room for one block: the rest are not kept
    small.keep(slots, 0, first)
    assert len(small.rows) == 1 and small.take(second)[0] == 0  # its last block: no match


def test_served_for_real_with_a_prefix_cache(tmp_path: Path) -> None:
    """`load --llm --prefix-cache`: served without the cache, then with; the same tokens for
    every request, and prompts found cached (which ones depends on timing)."""
    out = tmp_path / "real.json"
    done = opscope("load", DEMO_LLM, "--llm", "--traffic", "poisson:8", "--requests", "16",
                   "--prompt-len", "100-200", "--new-tokens", "8", "--shared-prefix", "1,96",
                   "--prefix-cache", "64", "--layout", "chunked", "--threads", "1", "--json",
                   out, check=True)  # fmt: skip
    r = json.loads(out.read_text())
    assert r["tokens_identical"] == {"requests": 16, "same": 16}, done.stdout
    assert r["prefix_cache"]["requests_hit"] >= 1 and r["prefix_cache"]["hit_rate"] > 0
    assert "ttft_ms" in r["without_prefix_cache"] and "16 of 16 requests identical" in done.stdout
    # recorded in a session: session show and the report list it, TTFT with and without
    session = tmp_path / "s.opscope"
    opscope("load", DEMO_LLM, "--llm", "--traffic", "poisson:8", "--requests", "8",
            "--prompt-len", "100-200", "--new-tokens", "4", "--shared-prefix", "1,96",
            "--prefix-cache", "64", "--layout", "chunked", "--threads", "1", "--session",
            session, check=True)  # fmt: skip
    shown = opscope("session", "show", session, check=True).stdout
    assert "1 LLM serving study:" in shown and "served for real" in shown, shown
    assert "tokens identical 8/8" in shown and "without" in shown, shown
    report = tmp_path / "r.html"
    opscope("report", session, "-o", report, check=True)
    page = report.read_text()
    assert 'id="llm"' in page and "tokens identical 8/8" in page


def test_a_hostile_llm_study_is_one_line(tmp_path: Path) -> None:
    """A study edited to carry a wrong type, an out-of-range share, an unknown kind or too
    many rows is refused in one line naming the study and the field; unknown fields are
    dropped, never shown."""
    import sqlite3

    from engine.session import SessionStore
    from tests.sample_reports import LLM_ROW

    session = tmp_path / "s.opscope"
    with SessionStore.create_or_open(session) as store:
        store.add_llm_study(model_path="m", kind="real", config={}, plan={"traffic": "x"},
                            rows=[{**LLM_ROW, "extra": {"a": "<script>"}}])  # fmt: skip
    with open_session_file(session) as reader:
        (study,) = reader.llm_studies()
    assert "extra" not in study.rows[0] and study.plan == {"traffic": "x"}
    for column, value, says in (
        ("rows", json.dumps([{**LLM_ROW, "simulated": "yes"}]), "rows[0].simulated"),
        ("rows", json.dumps([{**LLM_ROW, "prefix_cache": {"hit_rate": 7}}]), "hit_rate"),
        ("rows", json.dumps([LLM_ROW] * 65), "more than 64 rows"),
        ("rows", json.dumps([{"layout": "chunked"}]), "simulated is missing"),
        ("kind", "exec", "not simulate or real"),
        ("plan", '{"seed": 1e400}', "plan.seed"),
    ):
        with sqlite3.connect(session) as conn:
            conn.execute(f"UPDATE llm_studies SET {column} = ?", [value])
        bad = opscope("session", "show", session)
        assert bad.returncode == 2 and says in bad.stderr, (column, bad.stderr)
        assert "LLM serving study 1" in bad.stderr and len(bad.stderr.splitlines()) == 1
        with sqlite3.connect(session) as conn:  # back as it was
            conn.execute("UPDATE llm_studies SET kind = 'real', plan = '{}', rows = ?",
                         [json.dumps([LLM_ROW])])  # fmt: skip
