"""bench/llm_real.py's results as markdown: the speed, accuracy and story parts kept for
each model, each with the time and commit it ran at."""

from __future__ import annotations

import time
from typing import Any

GOAL = 0.95  # OpScope's tokens/s at least 95% of the bare genai loop's (issue 51)
LABEL = {
    "opscope-spin": "OpScope, spinning on (ORT's session default)",
    "opscope": "OpScope (`generate` loop)",
    "genai": "onnxruntime-genai, bare loop",
    "transformers": "transformers (PyTorch)",
}


def _s(d: dict[str, float], fmt: str = ".2f", iqr: bool = False) -> str:
    """median [min-max], and (IQR q1-q3) when asked"""
    out = f"{d['median']:{fmt}} [{d['min']:{fmt}}-{d['max']:{fmt}}]"
    return out + (f" (IQR {d['q1']:{fmt}}-{d['q3']:{fmt}})" if iqr else "")


def _when(part: dict[str, Any]) -> str:
    took = f", {part['seconds'] / 60:.1f} min" if "seconds" in part else ""
    return (
        f"ran {part.get('time', '?')} at git {part.get('commit', '?')}, load average "
        f"{part.get('load_average', float('nan')):.2f} before{took}"
    )


def _first_part(models: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The first model's result of part `name` that did not fail (its settings are said once)."""
    return next(
        (m["parts"][name] for m in models
         if name in m["parts"] and "error" not in m["parts"][name]),
        None,
    )  # fmt: skip


def speed(models: list[dict[str, Any]]) -> list[str]:
    lines = ["## 1. Speed: tokens/s, interleaved", ""]
    first = _first_part(models, "speed")
    if first is not None:
        lines += [
            f"fp32, batch 1, greedy; {first['threads']} intra-op threads in every engine (ORT "
            "sessions' intra-op threads, torch.set_num_threads); the same prompt tokens "
            "(resources/eval_texts.txt's longest line, tokenized by the model's own "
            f"tokenizer) and {first['new']} new tokens, the end-of-text token never "
            f"stopping one early. {first['rounds']} rounds per load after one warm-up "
            "generation of each engine (before the quiet rounds; the loaded ones follow in "
            "the same process), the order turning each round (A B C, B C A, C A B); under "
            f"load transformers runs in the first {first.get('torch_loaded_rounds', '?')} "
            "rounds only, and any transformers generation stops at "
            f"{first.get('torch_max_s', '?')} s (its `max_time`; its rates then count the "
            "tokens it made). OpScope runs with its default session settings (intra-op "
            "spinning off) and, as `OpScope, spinning on`, with spinning on as onnxruntime's "
            "session default has it (genai_config.json's session options have no spinning "
            "key; this genai build's config reader knows none). "
            "Tokens/s end to end: tokens made / (prompt ids in hand to the last token in "
            "hand; genai's GeneratorParams and Generator are made inside it, as its loop "
            "makes them per generation, OpScope's decoder once, as `opscope generate` does); "
            "decode: the tokens after the first / their time. "
            "`loaded`: one `python -c 'while True: pass'` process per CPU beside the run "
            "(bench/busy_machine.py's load). median [min-max] (IQR) over the rounds. "
            "Contention: OpScope's own reading "
            "(engine/measure/contention.py) over each load's rounds; `others` includes the "
            "busy-loop processes when loaded.",
            "",
        ]
    for m in models:
        part = m["parts"].get("speed")
        lines.append(f"### {m['name']}")
        lines.append("")
        if part is None:
            lines += ["not run", ""]
            continue
        if "error" in part:
            lines += [f"failed: `{part['error']}` ({_when(part)})", ""]
            continue
        lines += [f"{_when(part)}; prompt {part['prompt_tokens']} tokens", ""]
        lines += [
            "| load | engine | tokens/s end to end | decode tokens/s | TTFT ms | same tokens |",
            "|---|---|---|---|---|---|",
        ]
        for load in ("quiet", "loaded"):
            eng = part[load]["engines"]
            ref = eng["genai"]["tokens"] if "genai" in eng else None
            for name, e in eng.items():
                same = "every round" if e["same_tokens_every_round"] else "varied"
                made = e.get("tokens_made", [])
                if made and min(made) < part["new"]:
                    same += f" (tokens made: {made}; cut at {part.get('torch_max_s')} s)"
                if ref is not None:
                    same += ", = genai's" if e["tokens"] == ref else ", differ from genai's"
                lines.append(
                    f"| {load} | {LABEL.get(name, name)} | {_s(e['e2e'])} | "
                    f"{_s(e['decode'])} | {_s(e['ttft_ms'], '.0f')} | {same} |"
                )
        lines += [
            "",
            "| load | OpScope / genai tokens/s (end to end) | decode only | "
            f"goal >= {GOAL:.2f} (median) | contention |",
            "|---|---|---|---|---|",
        ]
        for load in ("quiet", "loaded"):
            p = part[load]
            c = p.get("contention") or {}
            for ours, ratio in p.get("ratios", {}).items():
                r, d = ratio["e2e"], ratio["decode"]
                ok = "met" if r["median"] >= GOAL else "MISSED"
                lines.append(
                    f"| {load} | {LABEL.get(ours, ours)}: {_s(r, '.3f', True)} | "
                    f"{_s(d, '.3f', True)} | {ok} | {c.get('line', 'not measured')} |"
                )
        split = part["quiet"].get("step_split")
        if split:
            lines += [
                "",
                f"OpScope's decode step, quiet (median of {split['steps']}): "
                f"{split['step_ms']:.2f} ms, of which ONNX Runtime's run "
                f"{split['run_ms']:.2f} ms: the Python loop's own cost is "
                f"{split['outside_ms']:.2f} ms per token "
                f"({split['outside_ms'] / split['step_ms']:.1%} of the step).",
            ]
        lines.append("")
    return lines


def accuracy(models: list[dict[str, Any]]) -> list[str]:
    lines = ["## 2. Accuracy: OpScope's weight precisions against transformers' FP32 logits", ""]
    first = _first_part(models, "accuracy")
    if first is not None:
        lines += [
            f"The first {first['texts']} lines of resources/eval_texts.txt of at least 10 "
            f"tokens (real text); transformers (FP32) continues each greedily ({first['new']} "
            "tokens at most, stopping at end-of-text); each OpScope precision (engine/"
            "backends/genai/weights.py `llm_variant`, as it is) reads text + continuation in "
            "one pass (teacher-forced) and its logits are compared with transformers' at "
            "every position: `text` = the text's own next-token positions, `generated` = "
            "the continuation's. Agreement: the same argmax. `greedy`: OpScope's own loop "
            "(`generate`) continuing each text, its tokens against transformers' greedy "
            f"tokens one by one. The sample: {first['sample']!r} continued greedily.",
            "",
        ]
    for m in models:
        part = m["parts"].get("accuracy")
        lines += [f"### {m['name']}", ""]
        if part is None:
            lines += ["not run", ""]
            continue
        if "error" in part:
            lines += [f"failed: `{part['error']}` ({_when(part)})", ""]
            continue
        lines += [
            f"{_when(part)}; prompts of {part['prompt_tokens']} tokens; transformers' "
            f"sample: {part['transformers_sample']!r}",
            "",
        ]
        lines += [
            "| precision | agreement, text | cosine mean / min, text | agreement, generated "
            "| cosine mean / min, generated | greedy = transformers' | texts identical | "
            "sample |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in part["rows"]:
            t, g = r["text"], r["generated"]
            lines.append(
                f"| {r['precision']} | {t['agreement']:.1%} of {t['positions']} | "
                f"{t['cos_mean']:.5f} / {t['cos_min']:.5f} | {g['agreement']:.1%} of "
                f"{g['positions']} | {g['cos_mean']:.5f} / {g['cos_min']:.5f} | "
                f"{r['greedy_same']} of {r['greedy_total']} | {r['texts_identical']} of "
                f"{r['texts']} | {r['sample_text']!r} |"
            )
        lines.append("")
    return lines


def story(models: list[dict[str, Any]]) -> list[str]:
    m = next((m for m in models if "story" in m["parts"]), None)
    lines = ["## 3. The seed's story on a real LLM, in one session", ""]
    if m is None:
        return [*lines, "not run", ""]
    part = m["parts"]["story"]
    if "error" in part:
        return [*lines, f"failed: `{part['error']}` ({_when(part)})", ""]
    lines += [
        f"{m['name']}, {_when(part)}. Every step is an `opscope` command recording into "
        f"`{part['session']}` (`--session`); kept short (a few requests, seconds of "
        "traffic) on this 2-CPU machine.",
        "",
        "| step | command | took s | result | what it showed |",
        "|---|---|---|---|---|",
    ]
    for s in part["steps"]:
        res = "ok" if s["rc"] == 0 else f"FAILED (exit {s['rc']}): `{s['error']}`"
        lines.append(
            f"| {s['name']} | `{s['command']}` | {s['seconds']:.0f} | {res} | {s['showed']} |"
        )
    lines += [
        "",
        "`opscope session show` of the session afterwards:",
        "",
        "```",
        *part.get("session_show", ["(none)"]),
        "```",
        "",
    ]
    return lines


def render(models: list[dict[str, Any]], cpu: str, cpus: int, argv: str) -> str:
    import onnxruntime
    import onnxruntime_genai
    import torch
    import transformers

    lines = [
        f"# Two real LLMs: OpScope against onnxruntime-genai and transformers "
        f"({time.strftime('%Y-%m-%d')})",
        "",
        f"- CPU: **{cpu}**, {cpus} logical CPUs, shared with other engineers' work",
        f"- onnxruntime {onnxruntime.__version__}, onnxruntime-genai "
        f"{onnxruntime_genai.__version__}, torch {torch.__version__}, transformers "
        f"{transformers.__version__}",
        f"- `python bench/llm_real.py {argv}` (issue 51, item 6)",
        "",
        "| model | Hugging Face folder | genai folder |",
        "|---|---|---|",
        *[f"| {m['name']} | `{m['hf']}` | {m['genai_how']} |" for m in models],
        "",
    ]
    return "\n".join(lines + speed(models) + accuracy(models) + story(models))
