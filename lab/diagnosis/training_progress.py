"""How far a `caef-bench train` run has got: one-step exact match of each adapter's latest weights, finished
or still training (its run checkpoint under OUT/.runs), on the test cells' held-out steps.

    python lab/diagnosis/training_progress.py --out work/smollm2_cpu --base smollm2-135m
        [--adapters executor_add,aligner_gt] [--per-cell 40] [--max-len 10] [--json FILE]

For each adapter the folder of a finished one (OUT/<kind>s/<op>/) or else the newest checkpoint of its
runs (OUT/.runs/<adapter>/stage<k>/checkpoint, its LoRA weights at the step it was saved; the LoRA's
shape is read from the run's recorded plan) goes onto the base, and the one-step cases of
evaluate.onestep (executor_cases, aligner_cases: transitions of the committed test problems, never
drawn for training) of its cells up to --max-len digits are checked in batched teacher-forced passes:
a case is right when every completion token is the model's argmax under the true prefix, which is
greedy decoding's exact match (models.decoding.verify_drafts). Reads, never writes, the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch


def latest_weights(out: Path, name: str) -> tuple[str, Path, dict] | None:
    """('finished', folder, {}) or ('step N of M, stage k', checkpoint folder, its run plan), or None."""
    from caef_bench.models.names import FOLDER_OF_KIND, split_adapter_name

    kind, op = split_adapter_name(name)
    folder = out / FOLDER_OF_KIND[kind] / op
    if (folder / "manifest.json").is_file():
        manifest = json.loads((folder / "manifest.json").read_text())
        complete = all(stage.get("complete", True) for stage in manifest["stages"].values())
        return ("finished" if complete else "stopped early, saved"), folder, {}
    for stage in (2, 1):
        checkpoint = out / ".runs" / name / f"stage{stage}" / "checkpoint"
        if (checkpoint / "state.json").is_file():
            state = json.loads((checkpoint / "state.json").read_text())
            return f"stage {stage}, step {state['step']} of {state['run']['steps']}", checkpoint, state["run"]
    return None


def lora_model(base_model, name: str, source: Path, plan: dict):
    """The base with this adapter's LoRA weights, as saved in a finished folder or a run checkpoint."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from safetensors.torch import load_file

    if (source / "adapter_config.json").is_file():
        return PeftModel.from_pretrained(base_model, str(source), adapter_name=name).eval()
    r, alpha, modules = plan["lora"]
    model = get_peft_model(base_model, LoraConfig(r=r, lora_alpha=alpha, target_modules=modules, lora_dropout=0.0,
                                                  task_type="CAUSAL_LM"), adapter_name=name)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for key, value in load_file(str(source / "trainable.safetensors")).items():
            # a run's checkpoint names the adapter peft's "default"; here it has its own name
            params[key if key in params else key.replace(".default.", f".{name}.")].copy_(value)
    return model.eval()


def miss_part(expected: str, got: str) -> str:
    """Where a wrong completion first leaves the expected one: in its first line (an executor's next
    state, an aligner's start state or answer) or after it (the command that the state implies)."""
    first_miss = len(os.path.commonprefix([expected, got]))
    newline = expected.find("\n")
    return "command" if 0 <= newline < first_miss else "state"


def exact_match(model, codec, cases: list[tuple[str, str]], batch: int = 8) -> tuple[int, list[dict], dict]:
    """(cases right, the first wrong ones, how many wrong ones first miss in the state and in the
    command), by verify_drafts on the expected completions."""
    from caef_bench.models.decoding import verify_drafts

    right, wrong, misses = 0, [], {"state": 0, "command": 0}
    for start in range(0, len(cases), batch):
        part = cases[start:start + batch]
        drafts = [codec.completion_ids(expected)[:-1] for _, expected in part]
        checked = verify_drafts(model, codec, [codec.prompt_ids(prompt) for prompt, _ in part], drafts,
                                [len(d) + 1 for d in drafts])
        for (prompt, expected), (ok, tokens) in zip(part, checked):
            right += ok
            if ok:
                continue
            got = codec.decode(tokens)
            misses[miss_part(expected, got)] += 1
            if len(wrong) < 3:
                wrong.append({"prompt": prompt[-120:], "expected": expected[:120], "got (to the first miss)": got[:120]})
    return right, wrong, misses


def main() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from caef_bench.evaluate.onestep import aligner_cases, cell_digits, cells_for, executor_cases
    from caef_bench.models.codec import codec_for
    from caef_bench.models.names import split_adapter_name
    from caef_bench.models.tiny import tier_info
    from caef_bench.train.recipe import base_folder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the training command's --out")
    parser.add_argument("--base", required=True, help="its --base (a folder or a tier's name)")
    parser.add_argument("--adapters", help="comma-separated names (default: every one with weights under --out)")
    parser.add_argument("--per-cell", type=int, default=40)
    parser.add_argument("--max-len", type=int, default=10, help="cells of operands up to this many digits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out, base = Path(args.out), base_folder(args.base)
    names = (args.adapters.split(",") if args.adapters else
             sorted({p.name for p in (out / ".runs").iterdir()} if (out / ".runs").is_dir() else set())
             | sorted({f"{k[:-1]}_{p.name}" for k in ("executors", "aligners") for p in (out / k).glob("*")}))
    tokenizer = AutoTokenizer.from_pretrained(base)
    codec = codec_for(tokenizer, tier_info(base).get("position_scheme", "standard"))
    results = {}
    for name in sorted(set(names)):
        kind, op = split_adapter_name(name)
        if kind == "direct":
            continue  # (its own evaluation: the direct prompts, evaluate.direct)
        found = latest_weights(out, name)
        if found is None:
            continue
        what, source, plan = found
        model = lora_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), name, source, plan)
        cases_for = executor_cases if kind == "executor" else aligner_cases
        cells = {}
        for cell in (c for c in cells_for(op, kind) if cell_digits(c) <= args.max_len):
            cases = cases_for(op, cell, args.per_cell, args.seed)
            right, wrong, misses = exact_match(model, codec, cases)
            cells[cell] = {"n": len(cases), "correct": right, "first_miss": misses, "wrong": wrong}
        results[name] = {"weights": what, "cells": cells}
        print(f"{name:<18} ({what}): " + ", ".join(f"{cell} {c['correct']}/{c['n']}" for cell, c in cells.items()),
              flush=True)
        print(f"{'':<18} wrong ones first miss in the state / the command: "
              + ", ".join(f"{cell} {c['first_miss']['state']}/{c['first_miss']['command']}" for cell, c in cells.items()),
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"command": " ".join(sys.argv), "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
