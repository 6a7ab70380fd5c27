"""`caef-bench copy-records`: another weights' records of unchanged cells ("carry" is the arithmetic's
word here, a carry through a run of 9s)."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    from .common import records_argument, tier_arguments

    copy = commands.add_parser(
        "copy-records",
        help="copy another weights' records of the cells whose adapters are byte-identical in both into these "
             "weights' records folder (a rerun would write the same records)")
    copy.add_argument("--from", dest="source", required=True, help="the other weights' records folder "
                                                                   "(work/records/<tier>-<weights>/)")
    copy.add_argument("--cells", required=True, help="comma-separated cells or shell patterns ('gt_*,repeated_eq_*'); "
                                                     "a cell calling a changed adapter is refused")
    tier_arguments(copy)
    records_argument(copy)
    copy.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from caef_bench.data.testsets import CELLS, match_cells
    from caef_bench.evaluate.suites import copy_records
    from caef_bench.models.loading import fingerprints, tier_with_checkpoints
    from caef_bench.paths import WORK_DIR

    cells = match_cells(args.cells, list(CELLS))
    weights, adapters = fingerprints(tier_with_checkpoints(args.tier, args.checkpoints))
    folder = Path(args.records or WORK_DIR / "records" / f"{args.tier}-{weights}")
    try:
        copied = copy_records(Path(args.source), folder, weights, adapters, cells)
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(f"{args.command}: {error}") from None
    for cell, count in copied.items():
        print(f"{cell}: {count} records copied")
    print(f"{sum(copied.values())} records copied from {args.source} into {folder}/")
    return 0
