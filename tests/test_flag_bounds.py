"""Every numeric flag has bounds (#29, #30): a value past them is one line naming the flag
and exit 2, in process, before any model is opened; each command's parser is checked, so
a flag added later without a bounded type is caught here."""

from __future__ import annotations

import argparse

import pytest

from engine.cli.arg_types import float_in, int_in, nonneg_int, seed
from engine.cli.common import EXIT_BAD_INPUT
from engine.cli.main import build_parser, main

M = "model.onnx"  # never opened: the flag is refused first
BAD = [
    (["load", M, "--seed", "-1"], "--seed: must be at least 0 and at most 4,294,967,295"),
    (["bench", M, "--seed", str(2**32)], "--seed"),
    (["generate", M, "--temperature", "-1"], "--temperature: must be a finite number"),
    (["generate", M, "--temperature", "nan"], "--temperature"),
    (["generate", M, "--temperature", "inf"], "--temperature"),
    (["generate", M, "--batch", "100000"], "--batch: must be at least 1 and at most 65,536"),
    (["simulate", M, "--llm", "--prefill-tokens", "0"], "--prefill-tokens: must be at least 1"),
    (["simulate", M, "--llm", "--max-seqs", "1000000000"], "--max-seqs"),
    (["load", M, "--llm", "--max-seqs", "1000000000"], "--max-seqs"),
    (["load", M, "--llm", "--chunk-tokens", "0", "--layout", "chunked"], "--chunk-tokens"),
    (["simulate", M, "--llm", "--kv-gbps", "nan"], "--kv-gbps"),
    (["simulate", M, "--llm", "--slo-tpot", "inf"], "--slo-tpot"),
    (["simulate", M, "--tune-batching", "--slo-p99", "1e9"], "--slo-p99"),
    (["simulate", M, "--max-batch", "1000000"], "--max-batch"),
    (["load", M, "--warmup-s", "1e9"], "--warmup-s"),
    (["load", M, "--repeat", "1"], "--repeat"),
    (["load", M, "--delay-ms", "nan"], "--delay-ms"),
    (["load", M, "--instances", "100000"], "--instances"),
    (["load", M, "--requests", "1e9"], "--requests: expected an integer"),
    (["bench", M, "--duration", "1e300"], "--duration"),
    (["bench", M, "--warmup-s", "-0.5"], "--warmup-s"),
    (["profile", M, "--runs", "1000000000"], "--runs"),
    (["gate", "s.opscope", M, "--runs", "100000"], "--runs"),
    (["gate", "s.opscope", M, "--max-regression", "inf"], "--max-regression"),
    (["compare", "a", "b", "--seed", "-3"], "--seed"),
    (["export", "s.opscope", "--run", str(2**64)], "--run"),
    (["tune", M, "--search-seed", "-1"], "--search-seed"),
    (["tune", M, "--budget", "0"], "--budget"),
    (["sweep", M, "--vary", "a=1", "--seed", "nan"], "--seed: expected an integer"),
    (["session", "compact", "a", "b", "--keep-passes", "-1"], "--keep-passes"),
]


@pytest.mark.parametrize(("argv", "said"), BAD, ids=[" ".join(a[0:1] + a[2:]) for a, _ in BAD])
def test_a_value_past_its_bounds_is_one_line(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == EXIT_BAD_INPUT, err
    assert len(err.strip().splitlines()) == 1 and said in err and "Traceback" not in err, err


def _numeric_flags(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _numeric_flags(sub, f"{prefix}{name} ")
        elif action.option_strings and action.type is not None and action.choices is None:
            out.append((prefix + action.option_strings[-1], action.type))
    return out


def test_no_flag_takes_an_unbounded_int_or_float() -> None:
    """`type=int` took -1 for a seed (numpy's traceback), `type=float` took nan."""
    flags = _numeric_flags(build_parser())
    assert len(flags) > 100
    loose = [name for name, kind in flags if kind in (int, float)]
    assert not loose, loose
    for name, kind in flags:  # every typed flag refuses nan and a huge value
        assert callable(kind)
        for text in ("nan", "1" * 40):
            with pytest.raises((argparse.ArgumentTypeError, ValueError)):
                kind(text)
        del name


def test_the_bounded_types() -> None:
    assert int_in(1, 5)("5") == 5 and seed("4294967295") == 2**32 - 1
    assert nonneg_int(" 0 ") == 0 and float_in(0, 1, lo_open=True)("1e-300") == 1e-300
    for parse, text in ((int_in(1, 5), "6"), (seed, "-1"), (float_in(0, 1), "-0.1"),
                        (float_in(0, 1, lo_open=True), "0"), (float_in(0, 1), "inf")):  # fmt: skip
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


def test_the_cli_bounds_agree_with_the_engines() -> None:
    """The engine checks the same bounds, for the app (which has no argparse)."""
    from engine.cli import serve_args
    from engine.serve.llm import sim as llm_sim

    assert serve_args.MAX_SEQS == llm_sim.MAX_SEQS and serve_args.MAX_TOKENS == llm_sim.MAX_TOKENS
    from engine.cli.arg_types import MAX_INSTANCES, MAX_REQUESTS
    from engine.serve.traffic.schedule import MAX_REQUESTS as SCHEDULE_MAX

    assert MAX_INSTANCES == llm_sim.MAX_INSTANCES and MAX_REQUESTS == SCHEDULE_MAX
