"""What several commands share: operator lists, the device, the step model and its options."""

from __future__ import annotations

import argparse
import sys


def say(line: str) -> None:
    """Progress for a person watching: stderr, so stdout stays what the command reports."""
    print(line, file=sys.stderr, flush=True)


def ops(text: str | None, allowed: tuple[str, ...], default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated --executors/--aligners/--ops value; None keeps the default, '' means none."""
    if text is None:
        return default
    chosen = tuple(o for o in text.split(",") if o)
    unknown = [o for o in chosen if o not in allowed]
    if unknown:
        raise ValueError(f"unknown op(s) {', '.join(unknown)}; expected some of {','.join(allowed)}")
    return chosen


def device(args: argparse.Namespace) -> str:
    from caef_bench.models.loading import default_device

    return default_device(args.device)


def step_model(args: argparse.Namespace, ops=None):
    """The model behind `solve`, `run` and `serve`: the tier here, or the server at --base-url; `ops`:
    the operators to solve, refused in one line if the tier lacks an adapter they call."""
    from caef_bench.runtime.backends import step_model as backend_step_model

    return backend_step_model(args.backend, args.tier, args.checkpoints, speculative=not args.no_speculative,
                              device=args.device, base_url=args.base_url, ops=ops, dtype=args.dtype)


def tier_arguments(parser: argparse.ArgumentParser) -> None:
    """--tier (caef_bench.models.loading.TIERS) and --checkpoints: the weights a command runs."""
    parser.add_argument("--tier", default="tiny", help="tiny (default), smollm2-135m or llama-3.1-8b")
    parser.add_argument("--checkpoints", help="adapter folder to use instead of the tier's")


def solver_arguments(parser: argparse.ArgumentParser) -> None:
    """The tier, its device and decoding: what solves problems in this process (solve, serve, run)."""
    tier_arguments(parser)
    device_argument(parser)
    parser.add_argument("--dtype", help="the torch dtype the tier runs in instead of its own (float32, bfloat16); "
                                        "part of the weights fingerprint, so its records and results are its own")
    parser.add_argument("--no-speculative", action="store_true", help="plain greedy decoding, one token per pass")


def device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", help="cpu, cuda, cuda:1 … (default: cuda when available)")


def seed_argument(parser: argparse.ArgumentParser, what: str = "draws") -> None:
    parser.add_argument("--seed", type=int, default=0, help=f"seed of the {what} (default 0)")


def out_argument(parser: argparse.ArgumentParser, default: str | None, what: str) -> None:
    parser.add_argument("--out", default=default, help=what + (f" (default {default})" if default else ""))


def records_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", help="the weights' folder of per-problem records (default "
                                          "work/records/<tier>-<weights>); reruns resume from it")


def backend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("hf", "openai"), default="hf",
                        help="hf: the tier in this process (default); openai: each step a completion request to "
                             "the OpenAI-compatible server at --base-url, model = the adapter's name")
    parser.add_argument("--base-url", help="--backend openai: the server's address, e.g. http://127.0.0.1:8000/v1")


def training_arguments(parser: argparse.ArgumentParser) -> None:
    """What train and train-curve share: the run's budget, batches, machine and preset fields."""
    parser.add_argument("--stage2-steps", type=int, help="override the budget: stage-2 steps per adapter (of --batch)")
    parser.add_argument("--lr", type=float, help="override the adapters' learning rate")
    parser.add_argument("--batch", type=int, help="override the base and stage-2 batch size (budgets are samples: a "
                                                  "smaller batch runs more steps)")
    parser.add_argument("--set", action="append", metavar="FIELD=VALUE",
                        help="override another field of the preset (caef_bench/train/presets/), or a setting of the "
                             "run: base_steps, base_lr, curriculum_steps, max_len, position_scheme, position_offsets, "
                             "decay, anonymous_cells, anonymous_digits, direct_position_scheme (repeatable, or "
                             "F=V,F=V)")
    parser.add_argument("--stop-after", type=float,
                        help="seconds for the whole command: stop the run in progress then, start no other; the "
                             "same command goes on later")
    seed_argument(parser)
    device_argument(parser)
    parser.add_argument("--workers", type=int, default=0, help="processes building batches ahead (use several on a GPU)")
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                        help="bf16 autocast or fp32 (default auto: bf16 on a GPU and on a CPU with native bf16, "
                             "such as AMX or AVX512-BF16)")
    parser.add_argument("--micro-batch-tokens", type=int,
                        help="split each step's batch into length-sorted micro-batches of at most N padded tokens, "
                             "same gradient (default 4096 on a CPU, whole batches on a GPU; 0: whole batches)")
    quiet_argument(parser)


def quiet_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def adapter_arguments(parser: argparse.ArgumentParser) -> None:
    """What an adapter is and, for the LoRA-direct ones, what they draw (preset fields)."""
    parser.add_argument("--lora-r", type=int, help="override the preset's LoRA rank")
    parser.add_argument("--lora-alpha", type=int, help="override the preset's LoRA alpha")
    parser.add_argument("--adapter", choices=("lora", "full"),
                        help="lora (the preset's) or full: every weight of the base fine-tuned, saved whole")
    parser.add_argument("--direct-draw", metavar="DRAW",
                        help="LoRA-direct problems: protocol (default; data.direct.LENGTH_RULE), protocol:<digits> "
                             "(one operand length, e.g. protocol:5), or classes (uniform over the executors' length classes, the draw of checkpoints/tiny/direct/)")


def stoppable(training) -> tuple[dict | None, int]:
    """(training()'s summary, 0), or (None, the signal's exit code) when a stop signal ended it
    after a step: the run saved its checkpoint, and the same command goes on."""
    from caef_bench.train.loop import TrainingInterrupted

    try:
        return training(), 0
    except TrainingInterrupted as stop:
        print(f"caef-bench: {stop}; the same command goes on from there", file=sys.stderr)
        return None, stop.exit_code


def said_stopped(summary: dict) -> int:
    if summary["stopped"]:
        print(f"stopped: {summary['stopped']}; the same command goes on from there")
    return 0
