"""Command-line interface: thin wrappers around the stages in caef_bench/."""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from .paths import WORK_DIR  # standard library only: the CLI stays quick to start


def _trace(args: argparse.Namespace) -> int:
    from .machines import BY_MACHINE, align_output, lookup, parse_expression
    from .machines import run as start_run
    from .machines.display import events, format_run

    if args.op:
        operation = lookup(args.op)
        if len(args.operands) != operation.arity:
            raise ValueError(f"{args.op} takes {operation.arity} operand(s), got {len(args.operands)}")
        machine_run = start_run(args.op, *args.operands)
        label = f"{args.op}({', '.join(args.operands)})"
    else:
        if len(args.operands) != 1:
            raise ValueError("give one expression such as '45+67=' (quote it), or --op OP A [B]")
        expression = parse_expression(args.operands[0])
        machine_run = start_run(expression.op, expression.a, expression.b)
        label = str(expression)
    halt_text = machine_run.text(-1)
    # The auxiliary machines (reflection, left mask) have no expression form to align back to.
    answer = align_output(halt_text) if BY_MACHINE[machine_run.machine].symbol else None
    if args.json:
        for event in events(machine_run):
            print(json.dumps({"kind": "transition", **event.__dict__}, ensure_ascii=False))
        print(json.dumps({"kind": "result", "input": label, "result": answer or halt_text.split("\n")[0]}))
        return 0
    print(f"{label}  ({machine_run.machine}, {len(machine_run)} transitions)")
    print(format_run(machine_run))
    print(f"result: {answer}" if answer else f"halt: {halt_text.splitlines()[0]}")
    return 0


def _data_build(args: argparse.Namespace) -> int:
    from .data.training import KINDS, BuildConfig, build, format_summary
    from .machines import EXECUTOR_OPS

    ops = tuple(args.ops.split(",")) if args.ops else EXECUTOR_OPS
    kinds = tuple(args.kinds.split(",")) if args.kinds else KINDS
    unknown = [o for o in ops if o not in EXECUTOR_OPS] + [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown op or kind: {', '.join(unknown)}")
    if args.max_len < 1 or args.per_class < 1 or args.middle < 0:
        raise ValueError("--max-len and --per-class must be >= 1, --middle >= 0")
    config = BuildConfig(max_len=args.max_len, per_class=args.per_class, middle=args.middle, balance=args.balance,
                         stage1_per_class=args.stage1_per_class, seed=args.seed, ops=ops, kinds=kinds)
    summary = build(args.out, config, progress=not args.quiet)
    print(format_summary(summary))
    print(f"written to {args.out}/ (summary.json has the config and SHA-256 of every file)")
    return 0


def _data_testsets(args: argparse.Namespace) -> int:
    from .data.testsets import main as testsets_main

    argv = ["--check"] if args.check else []
    argv += ["--out", args.out] if args.out else []
    argv += ["--seed", str(args.seed)] if args.seed is not None else []
    return testsets_main(argv)


def _ops(text: str | None, allowed: tuple[str, ...], default: tuple[str, ...]) -> tuple[str, ...]:
    if text is None:
        return default
    ops = tuple(o for o in text.split(",") if o)
    unknown = [o for o in ops if o not in allowed]
    if unknown:
        raise ValueError(f"unknown op(s) {', '.join(unknown)}; expected some of {','.join(allowed)}")
    return ops


def _train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .evaluate.onestep import one_step_check
    from .machines import ALIGNED_OPS, EXECUTOR_OPS
    from .train.presets import PRESETS, preset_overrides
    from .train.recipe import TrainRequest, run_training

    if args.preset not in PRESETS:
        raise ValueError(f"unknown preset {args.preset!r}; expected one of {', '.join(PRESETS)}")
    request = TrainRequest(
        preset=args.preset, out=Path(args.out), seed=args.seed, base=args.base,
        data=Path(args.data) if args.data else None,
        executors=_ops(args.executors, EXECUTOR_OPS, EXECUTOR_OPS), aligners=_ops(args.aligners, ALIGNED_OPS, ALIGNED_OPS),
        direct=_ops(args.direct, ALIGNED_OPS, ()), overrides=preset_overrides(vars(args)),
        time_budget_s=args.time_budget, stop_after_s=args.stop_after,
        # --eval-per-cell 0: no check (the manifest then records none, rather than 0 of 0 as 0%)
        one_step_check=one_step_check(args.eval_per_cell, args.seed) if args.eval_per_cell > 0 else None,
        progress=not args.quiet,
        command=args.command_line, device=args.device,
        workers=args.workers, precision=args.precision, micro_batch_tokens=args.micro_batch_tokens,
        base_init=Path(args.base_init) if args.base_init else None,
        adapter_init=Path(args.adapter_init) if args.adapter_init else None,
        direct_position_scheme=args.direct_position_scheme, anonymous_cells=args.anonymous_cells,
        anonymous_digits=args.anonymous_digits,
    )
    if args.preset != "tiny" and not args.base:
        raise ValueError(f"preset {args.preset!r} trains adapters on a given base: pass --base PATH")
    summary, code = _stoppable(lambda: run_training(request))
    if summary is None:
        return code
    for name, manifest in summary["adapters"].items():
        accuracy = manifest.get("one_step_accuracy") or {}
        cells = ", ".join(f"{cell} {r['accuracy']:.1%}" for cell, r in accuracy.items()) or "one-step not checked"
        print(f"{name:<22} {cells}")
    print(f"written to {args.out}/ in {summary['seconds']} s")
    return _said_stopped(summary)


def _stoppable(training) -> tuple[dict | None, int]:
    """(training()'s summary, 0), or (None, the signal's exit code) when a stop signal ended it
    after a step: the run saved its checkpoint, and the same command goes on."""
    from .train.loop import TrainingInterrupted

    try:
        return training(), 0
    except TrainingInterrupted as stop:
        print(f"caef-bench: {stop}; the same command goes on from there", file=sys.stderr)
        return None, stop.exit_code


def _said_stopped(summary: dict) -> int:
    if summary["stopped"]:
        print(f"stopped: {summary['stopped']}; the same command goes on from there")
    return 0


def _train_curve(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .machines import ALIGNED_OPS
    from .paths import TINY_CHECKPOINTS
    from .train.curve import label, parse_fractions, train_curve
    from .train.presets import preset_overrides
    from .train.recipe import TrainRequest

    fractions = parse_fractions(args.fractions)
    request = TrainRequest(
        preset="tiny", out=Path(args.out), seed=args.seed, base=args.base or str(TINY_CHECKPOINTS / "base"),
        executors=(), aligners=(),
        direct=_ops(args.ops, ALIGNED_OPS, ALIGNED_OPS), overrides=preset_overrides(vars(args)),
        stop_after_s=args.stop_after, progress=not args.quiet, command=args.command_line, device=args.device,
        workers=args.workers, precision=args.precision, micro_batch_tokens=args.micro_batch_tokens,
        direct_position_scheme=args.position_scheme)
    summary, code = _stoppable(lambda: train_curve(request, fractions))
    if summary is None:
        return code
    for op, snapshots in summary["snapshots"].items():
        taken = ", ".join(f"{name} ({m['samples']:,} samples, loss {m['stages']['stage2']['final_loss']:.3f}, "
                          f"{m['stages']['stage2']['tokens'] / max(m['wall_time_s'], 1e-9):,.0f} tokens/s)"
                          for name, m in sorted(snapshots.items(), key=lambda item: item[1]["samples"]))
        print(f"direct_{op}: {taken or 'no snapshot yet'}")
    print(f"snapshots in {args.out}/<{label(fractions[0])}, ...>/direct/<op>/")
    return _said_stopped(summary)


def _eval_curve(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .evaluate.direct_curve import evaluate_curve
    from .machines import ALIGNED_OPS

    curve = Path(args.curve)
    out = Path(args.out) if args.out else curve / "evaluation.json"
    evaluate_curve(curve, out, per_cell=args.per_cell, ops=list(_ops(args.ops, ALIGNED_OPS, ALIGNED_OPS)),
                   cells=args.cells.split(",") if args.cells else None, device=_device(args),
                   batch_size=args.batch_size, base=args.base, command=args.command_line,
                   progress=lambda line: print(line, flush=True))
    print(f"wrote {out}")
    return 0


def _report_curve(args: argparse.Namespace) -> int:
    from .report.direct_curve import write_curve_report

    for path in write_curve_report(args.evaluation, args.out, args.command_line, args.caef or None):
        print(f"wrote {path}")
    return 0


def _device(args: argparse.Namespace) -> str:
    from .models.loading import default_device

    return default_device(args.device)


def _step_model(args: argparse.Namespace, ops=None):
    """The model behind `solve`, `run` and `serve`: the tier here, or the server at --base-url; `ops`:
    the operators to solve, refused in one line if the tier lacks an adapter they call."""
    from .runtime.backends import step_model

    return step_model(args.backend, args.model, args.checkpoints, speculative=not args.no_speculative,
                      device=args.device, base_url=args.base_url, ops=ops)


def _solve(args: argparse.Namespace) -> int:
    from .evaluate.suites import solve_expression
    from .machines import parse_expression
    from .models.limits import check_supported

    check_supported(args.model, args.expr)  # bad input, or operands the tier was not built for, fail here
    model = _step_model(args, ops=[parse_expression(args.expr).op])  # and an operator it has no adapters for
    record, correct = solve_expression(model, args.expr)
    if args.trace:
        for i, step in enumerate(record.steps, 1):
            indent = "    " * step.depth
            print(f"{i:>4} {step.adapter}\n" + "\n".join(indent + "     " + line for line in step.output.split("\n")))
    # Only an answer to the asked expression is printed: a run whose aligner wrote other operands
    # (outcome "misaligned") says so instead of showing another problem's expression.
    answered = record.outcome == "answered" and record.final
    print(record.final if answered else f"no answer ({record.outcome}{': ' + record.detail if record.detail else ''})")
    if record.first_divergence:
        d = record.first_divergence
        print(f"first divergence from the machine: step {d.step}, {d.error_class}")
    stats = getattr(model, "stats", None)
    cost = f"{stats.forward_passes} forward passes" if stats else f"{model.requests} requests to {model.root}"
    print(f"{record.n_steps} model calls, {cost}, {record.seconds:.2f} s", file=sys.stderr)
    return 0 if correct else 1


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .data.testsets import CELLS
    from .evaluate.suites import SUITES, SuiteRequest, check_cells, run_suite
    from .report.tables import write_suite

    if args.suite not in SUITES:
        raise ValueError(f"unknown suite {args.suite!r}; expected one of {', '.join(SUITES)}")
    if args.suite in ("table1", "repeated") and (args.backend != "hf" or args.base_url):
        raise ValueError(f"--backend and --base-url apply to --suite caef and table2; {args.suite}'s systems name "
                         "their own models (baselines/caef-llama-3.1-8b-vllm.yaml runs CAEF on an endpoint)")
    if args.suite == "table1":
        return _run_table1(args)
    if args.suite == "repeated":
        return _run_repeated(args)
    request = SuiteRequest(
        suite=args.suite, tier=args.model, command=args.command_line,
        cells=tuple(check_cells(args.cells.split(",") if args.cells else None)), limit=args.limit,
        checkpoints=args.checkpoints, records=Path(args.records) if args.records else None,
        reuse_steps=Path(args.reuse_steps) if args.reuse_steps else None, keep_unchanged=args.keep_unchanged)
    model = _step_model(args, ops=[CELLS[cell].op for cell in request.cells])
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731

    def progress(cell, result):
        say(f"{cell}: " + ", ".join(f"{k} {v['accuracy']:.1%} (N={v['n']})"
                                    for k, v in result.items() if isinstance(v, dict) and "n" in v))

    for path in write_suite(run_suite(model, request, Path(args.out), progress, say), args.out):
        print(f"wrote {path}")
    return 0


def _run_table1(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .data.testsets import match_cells, table1_cells

    from .evaluate.table1 import direct_training_notes, run_table1
    from .report.table1 import write_table1

    systems, chosen = _chosen_systems(args.systems)
    cells = args.cells.split(",") if args.cells else table1_cells()
    cells_of = _cells_of(args.cells_of, systems, cells, lambda patterns: match_cells(patterns, table1_cells()))
    work = Path(args.work or WORK_DIR / "table1")
    results = run_table1([systems[name] for name in chosen], cells, args.limit, work,
                         progress=lambda line: print(line, file=sys.stderr, flush=True), cells_of=cells_of,
                         limits=_system_limits(args.limits, systems))
    notes = direct_training_notes(results, systems)
    for path in write_table1(results, args.out, args.command_line, notes):
        print(f"wrote {path}")
    committed = Path("results") / "table1.json"
    if committed.is_file() and Path(args.out).resolve() != committed.parent.resolve():
        from .report.table1 import comparison_lines

        print("\n".join(comparison_lines(results, json.loads(committed.read_text()))))
    return 0


def _chosen_systems(names: str | None) -> tuple[dict, list[str]]:
    """Every system of baselines/ and the names --systems picks (default all); unknown names are an error."""
    from .evaluate.systems import load_systems

    systems = load_systems()
    chosen = names.split(",") if names else list(systems)
    unknown = [name for name in chosen if name not in systems]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; systems in baselines/: {', '.join(systems)}")
    return systems, chosen


def _cells_of(items: list[str] | None, systems, cells: list[str], select_cells) -> dict[str, list[str]]:
    """--cells-of NAME=PATTERN,... (repeatable): a slow system on fewer of the suite's cells."""
    cells_of = {}
    for item in items or ():
        name, _, patterns = item.partition("=")
        if name not in systems:
            raise ValueError(f"--cells-of: unknown system {name!r}; systems in baselines/: {', '.join(systems)}")
        cells_of[name] = [cell for cell in select_cells(patterns) if cell in cells]
    return cells_of


def _system_limits(text: str | None, known) -> dict[str, int]:
    """'caef-tiny=10,lora-direct-tiny=50,caef-tiny@rep_*_10_*=200' -> {name or name@pattern: N}."""
    limits = {}
    for item in (i for i in (text or "").split(",") if i):
        key, equals, value = item.partition("=")
        name, _, pattern = key.partition("@")
        if not equals or not value.isdigit() or name not in known or (key != name and not pattern):
            raise ValueError(f"--limits takes SYSTEM=N or SYSTEM@CELL_PATTERN=N, comma-separated, with systems of "
                             f"baselines/ ({', '.join(known)}), not {item!r}")
        limits[key] = int(value)
    return limits


def _run_repeated(args: argparse.Namespace) -> int:
    """The repeated-digit failure analysis: results/failure_analysis.* (default results/local/)."""
    from pathlib import Path

    from .evaluate.repeated import RepeatedRequest, run_repeated, select_cells
    from .report.failures import with_previous, write_failure_analysis

    previous = None
    if args.previous:  # read before the run: a bad file must fail before hours of solving, not after
        if not Path(args.previous).is_file():
            raise SystemExit(f"--previous {args.previous}: no such report (a failure_analysis.json)")
        previous = json.loads(Path(args.previous).read_text())
    systems, chosen = _chosen_systems(args.systems)
    cells = select_cells(args.cells)
    request = RepeatedRequest(
        command=args.command_line, tier=args.model, cells=tuple(cells), systems=tuple(systems[n] for n in chosen),
        work=Path(args.work or WORK_DIR / "repeated"), checkpoints=args.checkpoints,
        records=Path(args.records) if args.records else None, limit=args.limit,
        limits=_system_limits(args.limits, systems), cells_of=_cells_of(args.cells_of, systems, cells, select_cells),
        seed=args.seed, onestep_per_cell=args.onestep_per_cell,
        onestep_cells=tuple(select_cells(args.onestep_cells)) if args.onestep_cells else None,
        speculative=not args.no_speculative, device=_device(args))
    results = run_repeated(request, say=lambda line: print(line, file=sys.stderr, flush=True))
    if previous is not None:
        results = with_previous(results, previous, args.previous)
    for path in write_failure_analysis(results, args.out):
        print(f"wrote {path}")
    return 0


def _carry_records(args: argparse.Namespace) -> int:
    """Copy another weights' records of cells whose adapters did not change into these weights' folder."""
    from pathlib import Path

    from .data.testsets import CELLS, match_cells
    from .evaluate.suites import carry_records
    from .models.loading import fingerprints, tier_with_checkpoints

    cells = match_cells(args.cells, list(CELLS))
    weights, adapters = fingerprints(tier_with_checkpoints(args.model, args.checkpoints))
    folder = Path(args.records or WORK_DIR / "records" / f"{args.model}-{weights}")
    try:
        carried = carry_records(Path(args.source), folder, weights, adapters, cells)
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(f"carry-records: {error}") from None
    for cell, count in carried.items():
        print(f"{cell}: {count} records carried")
    print(f"{sum(carried.values())} records carried from {args.source} into {folder}/")
    return 0


def _onestep(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .evaluate.onestep import measure_tier
    from .machines import ALIGNED_OPS, EXECUTOR_OPS
    from .report.tables import onestep_markdown

    adapters = [("executor", op) for op in _ops(args.executors, EXECUTOR_OPS, EXECUTOR_OPS)]
    adapters += [("aligner", op) for op in _ops(args.aligners, ALIGNED_OPS, ALIGNED_OPS)]

    def show(name, cells):
        print(f"{name:<19} " + ", ".join(f"{cell} {r['accuracy']:.1%} [{r['ci_low']:.1%}, {r['ci_high']:.1%}]"
                                        for cell, r in cells.items()), flush=True)

    record = measure_tier(args.model, args.checkpoints, adapters, args.per_cell, args.seed, base_only=args.base_only,
                          device=str(_device(args)), command=args.command_line,
                          out=Path(args.out) if args.out else None, markdown=onestep_markdown, progress=show,
                          every_step=args.every_step, structured=args.structured)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .models.positions import SCHEMES

    parser = argparse.ArgumentParser(prog="caef-bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    trace = commands.add_parser("trace", help="print a machine's execution step by step")
    trace.add_argument("operands", nargs="+", metavar="EXPR",
                       help="an expression such as '89*2=' (or, with --op, the operands)")
    trace.add_argument("--op", help="run one machine directly: add sub mul div gt lt eq reflection left_mask")
    trace.add_argument("--json", action="store_true", help="JSON lines: every transition in execution order")
    trace.set_defaults(handler=_trace)

    data = commands.add_parser("data", help="training data and test sets").add_subparsers(dest="data_command", required=True)
    build = data.add_parser("build", help="write executor, aligner and LoRA-direct training samples as JSONL")
    build.add_argument("--out", default="work/data", help="output folder (default: work/data)")
    build.add_argument("--max-len", type=int, default=100, help="operand lengths 1..N (default 100)")
    build.add_argument("--per-class", type=int, default=20, help="expressions per (len(a), len(b)) class (default 20)")
    build.add_argument("--middle", type=int, default=3, help="random middle transitions kept per trace (default 3)")
    build.add_argument("--balance", action="store_true", help="more expressions for short operands")
    build.add_argument("--stage1-per-class", type=int, default=1, help="expressions per class with stage-1 prompts")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--ops", help="comma-separated, default all: add,sub,mul,div,gt,lt,eq,reflection,left_mask")
    build.add_argument("--kinds", help="comma-separated, default all: executor,aligner,direct")
    build.add_argument("--quiet", action="store_true", help="no progress bars")
    build.set_defaults(handler=_data_build)
    testsets = data.add_parser("testsets", help="write (or --check) the paper's test sets")
    testsets.add_argument("--out", help="data folder (default: the committed tasks/data)")
    testsets.add_argument("--seed", type=int, help="base seed (default: the one the committed sets use)")
    testsets.add_argument("--check", action="store_true", help="regenerate in memory and compare bytes")
    testsets.set_defaults(handler=_data_testsets)

    train = commands.add_parser("train", help="train CAEF adapters (and the tiny tier's base)")
    train.add_argument("--preset", default="tiny", help="tiny (default), smollm2 or llama")
    train.add_argument("--out", default="checkpoints/tiny",
                       help="output folder, official adapter layout (default: checkpoints/tiny, the tiny tier's)")
    train.add_argument("--base", help="base model folder, or a tier's name (smollm2-135m): required except for "
                                      "the tiny preset")
    train.add_argument("--data", help="`caef-bench data build` folder to train from (default: draw from the machines)")
    train.add_argument("--executors", help="comma-separated ops (default all nine)")
    train.add_argument("--aligners", help="comma-separated ops (default all seven)")
    train.add_argument("--direct", help="comma-separated ops for the LoRA-direct baseline (default none)")
    train.add_argument("--base-steps", type=int, help="override the preset's base pre-training steps")
    train.add_argument("--stage1-steps", type=int, help="override the preset's stage-1 steps per adapter")
    train.add_argument("--stage2-steps", type=int, help="override the preset's stage-2 steps per adapter")
    train.add_argument("--max-len", type=int, help="operand lengths 1..N (default 100)")
    train.add_argument("--time-budget", type=float,
                       help="seconds per training run in this invocation; the same command goes on later")
    train.add_argument("--stop-after", type=float,
                       help="seconds for the whole command: stop the run in progress then, start no other; "
                            "the same command goes on later")
    train.add_argument("--eval-per-cell", type=int, default=50, help="one-step evaluation cases per test cell (0: none)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--device", help="cpu, cuda, cuda:1 … (default: cuda when available)")
    train.add_argument("--workers", type=int, default=0, help="processes building batches ahead (use several on a GPU)")
    train.add_argument("--batch", type=int, help="override the base and stage-2 batch size (larger on a GPU)")
    train.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                       help="bf16 autocast or fp32 (default auto: bf16 on a GPU and on a CPU with native bf16, "
                            "such as AMX or AVX512-BF16)")
    train.add_argument("--micro-batch-tokens", type=int,
                       help="split each step's batch into length-sorted micro-batches of at most N padded tokens, "
                            "same gradient (default 4096 on a CPU, whole batches on a GPU; 0: whole batches)")
    train.add_argument("--lr", type=float, help="override the adapters' learning rate")
    train.add_argument("--base-lr", type=float, help="override the tiny base's learning rate")
    train.add_argument("--base-init", help="tiny preset: pre-train the base further, starting from this base folder")
    train.add_argument("--curriculum-steps", type=int, help="override the base steps over which operand lengths grow to max")
    train.add_argument("--adapter-init", help="train each adapter further, starting from the one of the same name "
                                              "in this folder (official layout, e.g. checkpoints/tiny)")
    train.add_argument("--equal-share", type=float, help="override the share of samples with operands of equal length")
    train.add_argument("--short-share", type=float, help="override the share of samples with operands of at most 10 digits")
    train.add_argument("--long-share", type=float,
                       help="override the share of samples whose longer operand has more than 50 digits")
    train.add_argument("--same-share", type=float, help="override the share of comparison and sub samples with a == b")
    train.add_argument("--near-share", type=float,
                       help="override the share of comparison and sub samples with b = a but for one digit")
    train.add_argument("--nines-share", type=float,
                       help="override the share of reflection, sub and add samples from subtractions whose b has 9s "
                            "on top (REFLECTION then drops leading zeros)")
    train.add_argument("--return-share", type=float,
                       help="override the share of sub, mul and div samples that are steps reading a callee's halt "
                            "state (where it copies the callee's result into its next state)")
    train.add_argument("--structured-share", type=float,
                       help="override the share of samples whose operands are structured: runs of one digit, periodic "
                            "patterns, round numbers, a run then random digits, equal operands, one digit apart, "
                            "b = 0 or 1 (caef_bench/data/structured.py)")
    train.add_argument("--structured-long-share", type=float,
                       help="override the share of the structured samples whose two operands have one length of more "
                            "than 50 digits (what the 50- and 100-digit repeated-digit cells hold)")
    train.add_argument("--wide-share", type=float,
                       help="override the share of add and left_mask samples from SUB's calls on two operands of one "
                            "length above 90 digits, whose sums fill a field of 101 digits")
    train.add_argument("--sub-call-share", type=float,
                       help="override the share of add and left_mask samples from SUB's calls on two operands of one "
                            "length above 50 digits, half structured, leaning on each call's first and last steps")
    train.add_argument("--top-run-share", type=float,
                       help="override the share of gt, lt and eq samples on a run of one digit below a different top "
                            "digit (9777...7), the other operand equal or one digit apart, leaning on the last steps")
    train.add_argument("--carry-run-share", type=float,
                       help="override the share of add samples carrying through a run of 11-100 9s into a digit "
                            "that ends the carry (SUB's adding of 1), leaning on the steps where the carry ends")
    train.add_argument("--top-steps-share", type=float,
                       help="override the share of add samples that are one of the last 12 steps of ADD on two random "
                            "operands of one length above 90 digits (add_100's run, SUB's first call): the top digits")
    train.add_argument("--top-steps-structured-share", type=float,
                       help="override the share of the top-steps draws whose two operands are structured (runs of "
                            "one digit, round numbers, ...), half of them at any step of the run")
    train.add_argument("--deciding-steps-share", type=float,
                       help="override the share of gt and lt samples that are one of the last 3 steps on two random "
                            "operands of one length above 90 digits: the top digit pair's, which decides, and the halt")
    train.add_argument("--anonymous-cells", action="store_true",
                       help="layer 0's attention reads every tape cell alike (models.anonymous_cells): what a run of "
                            "one digit no longer outvotes; recorded in each adapter's manifest, and the runtime "
                            "runs those adapters the same way")
    train.add_argument("--anonymous-digits", nargs="?", const="all", choices=("all", "expressions"),
                       help="--anonymous-cells, and plain digits alike too (aligners read operands as plain "
                            "digits); 'expressions': only in the sequences that begin with one (aligner (I)), so "
                            "an executor trained in the same command runs ungated")
    train.add_argument("--composer-share", type=float,
                       help="override the share of add and gt samples drawn from the calls inside SUB, MUL, DIV runs")
    train.add_argument("--position-scheme", choices=SCHEMES,
                       help="override the position scheme (default: the preset's, or the --base's own)")
    train.add_argument("--direct-position-scheme", choices=SCHEMES, default="standard",
                       help="the ids the LoRA-direct adapters train with, whatever the base's (default standard, "
                            "the paper's; another is its own system, not the paper's row)")
    _adapter_arguments(train)
    train.add_argument("--quiet", action="store_true")
    train.set_defaults(handler=_train)

    curve = commands.add_parser(
        "train-curve", help="the LoRA-direct learning curve: one run per operator, a snapshot of its direct adapter "
                            "at each fraction of its budget (its CAEF executor's and aligner's samples)")
    curve.add_argument("--ops", help="comma-separated (default all seven: add,sub,mul,div,gt,lt,eq)")
    curve.add_argument("--fractions", default="1/16,1/8,1/4,1/2,1",
                       help="fractions of each budget to take a snapshot at (default 1/16,1/8,1/4,1/2,1)")
    curve.add_argument("--out", default="work/direct_curve",
                       help="snapshots go to OUT/frac_<n>_<d>/direct/<op>/ (default work/direct_curve)")
    curve.add_argument("--base", help="the base the adapters train on (default: the tiny tier's, checkpoints/tiny/base)")
    curve.add_argument("--position-scheme", choices=SCHEMES, default="standard",
                       help="the adapters' ids (default standard, the paper's; another is its own system)")
    curve.add_argument("--seed", type=int, default=0)
    curve.add_argument("--device", help="cpu, cuda, cuda:1 … (default: cuda when available)")
    curve.add_argument("--workers", type=int, default=0, help="processes building batches ahead (use several on a GPU)")
    curve.add_argument("--batch", type=int, help="override the batch (default the plan's 128; budgets are samples)")
    curve.add_argument("--lr", type=float, help="override the plan's learning rate (constant after warm-up)")
    curve.add_argument("--stage2-steps", type=int, help="override the budget: this many steps of --batch (tests)")
    curve.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                       help="as for train (default auto: bf16 on a GPU and on a CPU with native bf16)")
    curve.add_argument("--micro-batch-tokens", type=int,
                       help="as for train (default 4096 on a CPU, whole batches on a GPU; 0: whole batches)")
    _adapter_arguments(curve)
    curve.add_argument("--stop-after", type=float,
                       help="seconds for the whole command; the same command goes on later")
    curve.add_argument("--quiet", action="store_true")
    curve.set_defaults(handler=_train_curve)

    curve_eval = commands.add_parser(
        "eval-curve", help="the learning curve's snapshots on their operators' Table 1 cells, in process (no lm-eval)")
    curve_eval.add_argument("--curve", default="work/direct_curve", help="train-curve's --out (default work/direct_curve)")
    curve_eval.add_argument("--out", help="the results JSON (default CURVE/evaluation.json); a rerun measures only "
                                          "what it lacks")
    curve_eval.add_argument("--per-cell", type=int, default=100, help="first N problems of each cell (default 100)")
    curve_eval.add_argument("--ops", help="comma-separated (default: every operator with snapshots)")
    curve_eval.add_argument("--cells", help="comma-separated cells (default: all of each operator's Table 1 cells)")
    curve_eval.add_argument("--base", help="the base the snapshots were trained on (default: as their manifests say)")
    curve_eval.add_argument("--batch-size", type=int, default=100, help="problems decoded together (default 100)")
    curve_eval.add_argument("--device", help="cpu, cuda, … (default: cuda when available)")
    curve_eval.set_defaults(handler=_eval_curve)

    curve_report = commands.add_parser(
        "report-curve", help="lora_direct_curve.md, .json and .png from eval-curve's JSON, beside CAEF and the paper")
    curve_report.add_argument("--evaluation", default="work/direct_curve/evaluation.json",
                              help="eval-curve's JSON (default work/direct_curve/evaluation.json)")
    curve_report.add_argument("--caef", default="results/table1_caef.json",
                              help="CAEF's results at its full budget (default results/table1_caef.json; '' for none)")
    curve_report.add_argument("--out", default="results/local", help="where the three files go (default results/local)")
    curve_report.set_defaults(handler=_report_curve)

    onestep = commands.add_parser("onestep", help="one-step exact match of executors and aligners per test cell")
    onestep.add_argument("--model", default="tiny")
    onestep.add_argument("--checkpoints", help="adapter folder to use instead of the tier's")
    onestep.add_argument("--base-only", action="store_true", help="the tiny base itself, no adapters")
    onestep.add_argument("--executors", help="comma-separated ops (default all nine)")
    onestep.add_argument("--aligners", help="comma-separated ops (default all seven)")
    onestep.add_argument("--per-cell", type=int, default=50, help="cases per test cell (default 50)")
    onestep.add_argument("--every-step", action="store_true",
                         help="executors: every transition of --per-cell problems per cell (whole runs, teacher-forced), "
                              "not one drawn from each: a 100-digit run needs ~99.99%% per step")
    onestep.add_argument("--structured", action="store_true",
                         help="also the struct_<n> cells: operands of the structured samplers (runs of one digit, "
                              "round numbers, periodic patterns, equal operands, …; caef_bench/data/structured.py)")
    onestep.add_argument("--seed", type=int, default=0)
    onestep.add_argument("--device", help="cpu, cuda, … (default: cuda when available)")
    onestep.add_argument("--json", help="also write the results to this JSON file")
    onestep.add_argument("--out", help="write onestep.md and .json here, after every adapter; a rerun with the "
                                       "same weights, --per-cell and --seed skips the adapters already measured")
    onestep.set_defaults(handler=_onestep)

    solve = commands.add_parser("solve", help="solve one expression with a CAEF model")
    solve.add_argument("expr", help="e.g. '123456789*12='")
    solve.add_argument("--model", default="tiny", help="tier: tiny (default), smollm2-135m, llama-3.1-8b")
    solve.add_argument("--checkpoints", help="adapter folder to use instead of the tier's")
    solve.add_argument("--trace", action="store_true", help="print every step")
    solve.add_argument("--device", help="cpu, cuda, … (default: cuda when available)")
    solve.add_argument("--no-speculative", action="store_true", help="plain greedy decoding, one token per pass")
    _backend_arguments(solve)
    solve.set_defaults(handler=_solve)

    carry = commands.add_parser(
        "carry-records", help="copy another weights' records of the cells whose adapters are byte-identical in "
                              "both into these weights' records folder (a rerun would write the same records)")
    carry.add_argument("--from", dest="source", required=True, help="the other weights' records folder "
                                                                    "(work/records/<tier>-<weights>/)")
    carry.add_argument("--cells", required=True, help="comma-separated cells or shell patterns ('gt_*,rep_eq_*'); "
                                                      "a cell calling a changed adapter is refused")
    carry.add_argument("--model", default="tiny")
    carry.add_argument("--checkpoints", help="adapter folder to use instead of the tier's")
    carry.add_argument("--records", help="these weights' records folder (default work/records/<model>-<weights>)")
    carry.set_defaults(handler=_carry_records)

    run = commands.add_parser("run", help="run a suite and write results/*.md and .json")
    run.add_argument("--suite", required=True,
                     help="table1 (every system of baselines/ through lm-eval), table2 (components), caef "
                          "(Table 1's CAEF rows, traced) or repeated (the repeated-digit failure analysis)")
    run.add_argument("--systems", help="table1: comma-separated system names from baselines/ (default all)")
    run.add_argument("--work",
                     help="table1, repeated: lm-eval's outputs and request caches per system (default work/table1, "
                          "work/repeated; also the repeated suite's one-step results); reruns resume from them")
    run.add_argument("--limits", metavar="SYSTEM=N,...",
                     help="table1, repeated: problems per cell for named systems (the others: --limit, else the "
                          "system's own), e.g. caef-tiny=200 read from the caef suite's records; repeated: "
                          "SYSTEM@PATTERN=N for CAEF on the cells a pattern matches (caef-tiny@rep_*_10_*=200)")
    run.add_argument("--cells-of", action="append", metavar="SYSTEM=PATTERN",
                     help="table1, repeated: run this system on these of the cells only (e.g. a slow chat model on "
                          "'rep_*_10_*'); may be given again for another system")
    run.add_argument("--onestep-per-cell", type=int, default=20,
                     help="repeated: one-step cases per adapter and cell (default 20; 0: no one-step stress)")
    run.add_argument("--onestep-cells", metavar="PATTERN",
                     help="repeated: the one-step stress on these of the cells only (default: all of --cells)")
    run.add_argument("--seed", type=int, default=0, help="repeated: the one-step cases' draw (default 0)")
    run.add_argument("--previous", metavar="FAILURE_ANALYSIS_JSON",
                     help="repeated: an earlier report of other weights (e.g. the committed "
                          "results/failure_analysis.json before new weights ship): its CAEF numbers are printed "
                          "beside these, named <system> @<weights>")
    run.add_argument("--model", default="tiny")
    run.add_argument("--checkpoints", help="adapter folder to use instead of the tier's")
    run.add_argument("--cells", help="comma-separated test cells (default: all 22 of Table 1; repeated: all 102 "
                                     "rep_<op>_<n>_<pattern> cells, shell patterns such as 'rep_add_*' allowed)")
    run.add_argument("--limit", type=int, help="first N problems per cell")
    run.add_argument("--out", default="results/local",
                     help="where the tables go (default results/local: the committed results/ stay as they are)")
    run.add_argument("--records", help="folder of per-problem records (default work/records/<model>); reruns resume")
    run.add_argument("--device", help="cpu, cuda, … (default: cuda when available)")
    run.add_argument("--no-speculative", action="store_true")
    _backend_arguments(run)
    run.add_argument("--keep-unchanged", action="store_true",
                     help="keep the other cells of the results file in --out whose adapters are byte-identical "
                          "to these weights' (each says which command made it); drop the rest")
    run.add_argument("--reuse-steps", metavar="RECORDS",
                     help="an earlier run's records folder: calls to adapters that are unchanged since (same "
                          "bytes, base and position scheme) are answered from its records, the rest generated")
    run.set_defaults(handler=_run)

    serve = commands.add_parser(
        "serve", help="CAEF as an OpenAI-compatible server: /v1/models, /v1/completions, /v1/chat/completions "
                      "(docs/serving.md)")
    serve.add_argument("--model", default="tiny", help="tier: tiny (default), smollm2-135m, llama-3.1-8b")
    serve.add_argument("--checkpoints", help="adapter folder to use instead of the tier's")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--device", help="cpu, cuda, … (default: cuda when available)")
    serve.add_argument("--no-speculative", action="store_true", help="plain greedy decoding, one token per pass")
    serve.add_argument("--batch-size", type=int, help="cap the prompts of one model call (default: a whole round)")
    _backend_arguments(serve)
    serve.set_defaults(handler=_serve)

    lm_eval = commands.add_parser(
        "lm-eval", add_help=False,
        help="lm-evaluation-harness's own command line with caef-bench's models registered (caef, caef-direct); "
             "every lm_eval flag works, e.g. --model caef --tasks caef_add_5 --include_path tasks")
    lm_eval.add_argument("lm_eval_args", nargs=argparse.REMAINDER)
    lm_eval.set_defaults(handler=_lm_eval)
    return parser


def _adapter_arguments(parser: argparse.ArgumentParser) -> None:
    """What an adapter is and, for the LoRA-direct ones, what they draw (preset fields)."""
    parser.add_argument("--lora-r", type=int, help="override the preset's LoRA rank")
    parser.add_argument("--lora-alpha", type=int, help="override the preset's LoRA alpha")
    parser.add_argument("--adapter", choices=("lora", "full"),
                        help="lora (the preset's) or full: every weight of the base fine-tuned, saved whole")
    parser.add_argument("--direct-draw", metavar="DRAW",
                        help="LoRA-direct problems: protocol (default; data.direct.LENGTH_RULE), protocol:<digits> "
                             "(one operand length, e.g. protocol:5), or classes (uniform over length pairs, as before)")


def _backend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("hf", "openai"), default="hf",
                        help="hf: the tier in this process (default); openai: each step a completion request to "
                             "the OpenAI-compatible server at --base-url, model = the adapter's name")
    parser.add_argument("--base-url", help="--backend openai: the server's address, e.g. http://127.0.0.1:8000/v1")


def _serve(args: argparse.Namespace) -> int:
    from .serve.server import serve

    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be 1-65535, not {args.port}")
    serve(_step_model(args), args.model, host=args.host, port=args.port, batch_size=args.batch_size,
          checkpoints=args.checkpoints, say=lambda line: print(line, file=sys.stderr, flush=True))
    return 0


def _lm_eval(args: argparse.Namespace) -> int:
    from .evaluate.lm_eval_models import main as lm_eval_main

    lm_eval_main(args.lm_eval_args)
    return 0


def _keep_expressions_positional(argv: list[str]) -> list[str]:
    """argparse reads "-5+3=" as an unknown option; mark it as an operand so it gets a real error."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if len(arg) > 1 and arg[0] == "-" and arg[1].isdigit():
            return argv[:i] + ["--"] + argv[i:]
    return argv


def _quiet_libraries() -> None:
    """Keep the libraries' loading bars and deprecation notes out of the CLI's output."""
    import os
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)


def main(argv: list[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    invoked_as_program = argv is None  # a caller's own argv (tests) never re-executes the process
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["lm-eval"]:  # lm-eval's arguments pass through untouched
        args = argparse.Namespace(handler=_lm_eval, lm_eval_args=argv[1:])
    else:
        args = parser.parse_args(_keep_expressions_positional(argv))
    args.command_line = "caef-bench " + " ".join(shlex.quote(a) for a in argv)  # recorded with every result
    if invoked_as_program and args.handler in (_train, _train_curve):
        # Before torch is imported: the allocator is fixed when a process starts (see allocator.py).
        from .train.allocator import reexecute_with_jemalloc

        reexecute_with_jemalloc(argv)
    try:
        code = args.handler(args)
    except (ValueError, FileNotFoundError) as error:
        # Bad input or a missing model is the user's to fix: one clear line, exit code 2, no traceback.
        print(f"caef-bench: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        if not hasattr(error, "exit_code"):  # a stop signal that ended a run (evaluate.table1.RunStopped)
            raise
        print(f"caef-bench: {error}", file=sys.stderr)
        return error.exit_code
    if invoked_as_program and args.handler is _solve:
        # solve has printed all it has to say and writes no file: skip the interpreter's teardown of
        # torch and transformers, a second or two of an interactive command's wall time
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
