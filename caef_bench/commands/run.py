"""`caef-bench run SUITE` (or `run --suite SUITE`): a suite's results/*.md and .json.

Each suite is its own subcommand, so argparse says which options apply to it: table1 and repeated
run the systems of baselines/ (each names its own model), caef and table2 run one CAEF model here
or at an endpoint. `run --suite NAME`, what users type and results record, is read as `run NAME`.
"""

from __future__ import annotations

import argparse

from .common import backend_arguments, out_argument, records_argument, say, seed_argument, solver_arguments

SUITE_HELP = {
    "table1": "every system of baselines/ through lm-eval, on Table 1's cells",
    "table2": "Table 2: CAEF's components each on its own: the executors from the machines' start state, "
              "aligner (I) and aligner (O) exact match",
    "caef": "Table 1's CAEF rows, every run traced",
    "repeated": "repeated digits against random controls: every system, CAEF's one-step stress",
    "long_mul_div": "long multiplication and division (20x20 and 50x50 digits, 40/20 and 100/10): CAEF's long "
                    "route beside LoRA-direct",
}


def suite_first(argv: list[str]) -> list[str]:
    """`run [OPTIONS] --suite NAME [OPTIONS]` -> `run NAME [OPTIONS] [OPTIONS]`; other lines unchanged."""
    if argv[:1] != ["run"]:
        return argv
    rest = argv[1:]
    for i, arg in enumerate(rest):
        if arg == "--":
            break
        if arg == "--suite" and i + 1 < len(rest):
            return ["run", rest[i + 1], *rest[:i], *rest[i + 2:]]
        if arg.startswith("--suite="):
            return ["run", arg.partition("=")[2], *rest[:i], *rest[i + 1:]]
    return argv


def register(commands) -> None:
    run = commands.add_parser("run", help="run a suite and write results/*.md and .json",
                              description="Run a suite: " + "; ".join(f"{n}: {h}" for n, h in SUITE_HELP.items())
                                          + ". `run --suite NAME ...` is the same as `run NAME ...`.")
    suites = run.add_subparsers(dest="suite", required=True, metavar="SUITE", parser_class=argparse.ArgumentParser)
    for name, add in (("table1", _table1_options), ("table2", _caef_options), ("caef", _caef_options),
                      ("repeated", _repeated_options), ("long_mul_div", _long_mul_div_options)):
        suite = suites.add_parser(name, help=SUITE_HELP[name])
        add(suite, name)


def _common_options(suite: argparse.ArgumentParser, cells_help: str) -> None:
    suite.add_argument("--cells", help=cells_help)
    suite.add_argument("--limit", type=int, help="first N problems per cell")
    out_argument(suite, "results/local", "where the tables go (the committed results/ stay as they are)")


def _systems_options(suite: argparse.ArgumentParser, name: str, default: str = "all") -> None:
    """The options of the suites that run the systems of baselines/ (table1, repeated, long_mul_div)."""
    suite.add_argument("--systems", help=f"comma-separated system names from baselines/ (default {default})")
    suite.add_argument("--work", help=f"lm-eval's outputs and request caches per system (default work/{name}); "
                                      "reruns resume from them")
    others = "every problem of the cell" if name == "long_mul_div" else "the system's own"
    suite.add_argument("--limits", metavar="SYSTEM=N,...",
                       help=f"problems per cell for named systems (the others: --limit, else {others}), e.g. "
                            "caef-tiny=200 read from the caef suite's records"
                            + ("; SYSTEM@PATTERN=N for CAEF on the cells a pattern matches (caef-tiny@repeated_*_10_*=200)"
                               if name == "repeated" else ""))
    suite.add_argument("--cells-of", action="append", metavar="SYSTEM=PATTERN",
                       help="run this system on these of the cells only (e.g. a slow chat model on 'repeated_*_10_*'); "
                            "may be given again for another system")


def _solver_options(suite: argparse.ArgumentParser) -> None:
    """The options of the CAEF model a suite runs in this process."""
    solver_arguments(suite)
    records_argument(suite)
    suite.add_argument("--reuse-steps", metavar="RECORDS",
                       help="an earlier run's records folder: calls to adapters that are unchanged since (same "
                            "bytes, base and position scheme) are answered from its records, the rest generated")


def _table1_options(suite: argparse.ArgumentParser, name: str) -> None:
    _common_options(suite, "comma-separated test cells (default: all 22 of Table 1)")
    _systems_options(suite, name)
    suite.add_argument("--keep-others", action="store_true",
                       help="keep the systems of the table1.json in --out that --systems does not name, as they "
                            "are (each with the command that made it; a tier's only on the weights it ran on): "
                            "one system run again without the others' hours")
    suite.set_defaults(handler=run_table1)


def _in_flight_option(suite: argparse.ArgumentParser) -> None:
    suite.add_argument("--max-in-flight", type=int, metavar="N",
                       help="CAEF: at most N problems solved at once (default: every problem of the cells): fewer "
                            "in flight finish, and keep their records, steadily through a long run")


def _caef_options(suite: argparse.ArgumentParser, name: str) -> None:
    _common_options(suite, "comma-separated test cells (default: all 22 of Table 1)")
    _solver_options(suite)
    backend_arguments(suite)
    if name == "caef":
        _in_flight_option(suite)
    suite.add_argument("--keep-unchanged", action="store_true",
                       help="keep the other cells of the results file in --out whose adapters are byte-identical "
                            "to these weights' (each says which command made it); drop the rest")
    suite.set_defaults(handler=run_caef_suite)


def _repeated_options(suite: argparse.ArgumentParser, name: str) -> None:
    _common_options(suite, "test cells (default: all 102 repeated_<op>_<n>_<pattern> cells; shell patterns such as "
                           "'repeated_add_*' allowed)")
    _systems_options(suite, name)
    _solver_options(suite)
    suite.add_argument("--onestep-per-cell", type=int, default=20,
                       help="one-step cases per adapter and cell (default 20; 0: no one-step stress)")
    suite.add_argument("--onestep-cells", metavar="PATTERN",
                       help="the one-step stress on these of the cells only (default: all of --cells)")
    seed_argument(suite, "one-step cases")
    _in_flight_option(suite)
    suite.add_argument("--previous", metavar="REPEATED_JSON",
                       help="an earlier report of other weights (e.g. the committed results/repeated.json "
                            "before new weights ship): its CAEF numbers are printed beside these, named "
                            "<system> @<weights>")
    suite.set_defaults(handler=run_repeated)


def _long_mul_div_options(suite: argparse.ArgumentParser, name: str) -> None:
    _common_options(suite, "comma-separated long cells or shell patterns (default all four: mul_20x20, mul_50x50, "
                           "div_40by20, div_100by10)")
    # (the suite's systems are named where it runs, evaluate.long_mul_div: not imported to build the parser)
    _systems_options(suite, name, "CAEF on the tiny tier beside LoRA-direct on SmolLM2 and on the tiny base")
    _solver_options(suite)
    suite.add_argument("--measure-long-route", action="store_true",
                       help="run CAEF on the long route where its tier's limits do not take it yet (its adapters "
                            "still required): the measurement a tier's long-route limits are then given from")
    suite.set_defaults(handler=run_long_mul_div)


def run_caef_suite(args: argparse.Namespace) -> int:
    """table2 or caef: one CAEF model on Table 1's cells, every run's records kept."""
    from pathlib import Path

    from caef_bench.data.testsets import CELLS
    from caef_bench.evaluate.suites import SuiteRequest, check_cells, run_suite
    from caef_bench.report.tables import write_suite

    from .common import step_model

    request = SuiteRequest(
        suite=args.suite, tier=args.tier, command=args.command_line,
        cells=tuple(check_cells(args.cells.split(",") if args.cells else None)), limit=args.limit,
        checkpoints=args.checkpoints, records=Path(args.records) if args.records else None,
        reuse_steps=Path(args.reuse_steps) if args.reuse_steps else None, keep_unchanged=args.keep_unchanged,
        max_in_flight=getattr(args, "max_in_flight", None))

    def progress(cell, result):
        say(f"{cell}: " + ", ".join(f"{k} {v['accuracy']:.1%} (N={v['n']})"
                                    for k, v in result.items() if isinstance(v, dict) and "n" in v))

    model = step_model(args, ops=[CELLS[cell].op for cell in request.cells])
    for path in write_suite(run_suite(model, request, Path(args.out), progress, say), args.out):
        print(f"wrote {path}")
    return 0


def run_table1(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from caef_bench.data.testsets import match_cells, table1_cells
    from caef_bench.evaluate.systems import cells_of, choose_systems, system_limits
    from caef_bench.evaluate.table1 import (direct_training_notes, earlier_problem_lines, keep_earlier_lines,
                                            keep_other_systems, run_table1 as run_systems, windowed_notes)
    from caef_bench.paths import WORK_DIR
    from caef_bench.report.table1 import compare_with_committed, write_table1

    systems, chosen = choose_systems(args.systems)
    previous = None
    if args.keep_others:  # checked before the run: a missing table or changed weights must not cost its hours
        earlier = Path(args.out) / "table1.json"
        if not earlier.is_file():
            raise SystemExit(f"--keep-others: no earlier table at {earlier}")
        previous = json.loads(earlier.read_text())
        keep_other_systems(previous, dict.fromkeys(chosen), systems)
    earlier_lines = earlier_problem_lines(Path(args.out), chosen) if previous is not None else {}
    cells = args.cells.split(",") if args.cells else table1_cells()
    results = run_systems([systems[name] for name in chosen], cells, args.limit, Path(args.work or WORK_DIR / "table1"),
                          progress=say, limits=system_limits(args.limits, systems), out=Path(args.out),
                          cells_of=cells_of(args.cells_of, systems, cells, lambda p: match_cells(p, table1_cells())))
    if previous is not None:
        results = keep_other_systems(previous, results, systems)
        keep_earlier_lines(results, earlier_lines, Path(args.out))
    notes = direct_training_notes(results, systems) + windowed_notes(results)
    for path in write_table1(results, args.out, args.command_line, notes):
        print(f"wrote {path}")
    for line in compare_with_committed(results, args.out):
        print(line)
    return 0


def run_repeated(args: argparse.Namespace) -> int:
    """Repeated digits against random controls: results/repeated.* (default results/local/)."""
    import json
    from pathlib import Path

    from caef_bench.evaluate.repeated import RepeatedRequest, run_repeated as run_systems, select_cells
    from caef_bench.evaluate.systems import cells_of, choose_systems, system_limits
    from caef_bench.paths import WORK_DIR
    from caef_bench.report.repeated import with_previous, write_repeated

    from .common import device

    previous = None
    if args.previous:  # read before the run: a bad file must fail before hours of solving, not after
        if not Path(args.previous).is_file():
            raise SystemExit(f"--previous {args.previous}: no such report (a repeated.json)")
        previous = json.loads(Path(args.previous).read_text())
    systems, chosen = choose_systems(args.systems)
    cells = select_cells(args.cells)
    request = RepeatedRequest(
        command=args.command_line, tier=args.tier, cells=tuple(cells), systems=tuple(systems[n] for n in chosen),
        work=Path(args.work or WORK_DIR / "repeated"), checkpoints=args.checkpoints,
        records=Path(args.records) if args.records else None, limit=args.limit,
        limits=system_limits(args.limits, systems), cells_of=cells_of(args.cells_of, systems, cells, select_cells),
        seed=args.seed, onestep_per_cell=args.onestep_per_cell,
        onestep_cells=tuple(select_cells(args.onestep_cells)) if args.onestep_cells else None,
        speculative=not args.no_speculative, device=device(args), dtype=args.dtype,
        reuse_steps=Path(args.reuse_steps) if args.reuse_steps else None, out=Path(args.out),
        max_in_flight=args.max_in_flight)
    results = run_systems(request, say=say)
    if previous is not None:
        results = with_previous(results, previous, args.previous)
    for path in write_repeated(results, args.out):
        print(f"wrote {path}")
    return 0


def run_long_mul_div(args: argparse.Namespace) -> int:
    """Long multiplication and division, every chosen system: results/long_mul_div.* (default results/local/)."""
    from pathlib import Path

    from caef_bench.evaluate.long_mul_div import DEFAULT_SYSTEMS, LongMulDivRequest, run_long_mul_div as run_systems, \
        select_cells
    from caef_bench.evaluate.systems import cells_of, choose_systems, system_limits
    from caef_bench.paths import WORK_DIR
    from caef_bench.report.long_mul_div import write_long_mul_div

    from .common import device

    systems, chosen = choose_systems(args.systems or ",".join(DEFAULT_SYSTEMS))
    cells = select_cells(args.cells)
    request = LongMulDivRequest(
        command=args.command_line, systems=tuple(systems[name] for name in chosen), cells=tuple(cells),
        work=Path(args.work or WORK_DIR / "long_mul_div"), tier=args.tier, checkpoints=args.checkpoints,
        records=Path(args.records) if args.records else None, limit=args.limit,
        limits=system_limits(args.limits, systems), cells_of=cells_of(args.cells_of, systems, cells, select_cells),
        speculative=not args.no_speculative, device=device(args), dtype=args.dtype,
        reuse_steps=Path(args.reuse_steps) if args.reuse_steps else None, measure_long_route=args.measure_long_route)
    for path in write_long_mul_div(run_systems(request, Path(args.out), say=say), args.out):
        print(f"wrote {path}")
    return 0
