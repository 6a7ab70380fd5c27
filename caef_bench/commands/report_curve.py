"""`caef-bench report-curve`: lora_direct_curve.md, .json and .png from eval-curve's results."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    from .common import out_argument

    curve_report = commands.add_parser(
        "report-curve", help="lora_direct_curve.md, .json and .png from eval-curve's JSON, beside CAEF and the paper")
    curve_report.add_argument("--evaluation", action="append",
                              help="eval-curve's JSON, one run (default work/direct_curve/evaluation.json); again for "
                                   "another run of the same budgets (another batch or machine), shown beside it; an earlier "
                                   "report's JSON gives its runs again; a run named the same as an earlier one (its "
                                   "plan trained again, further) takes its place for the operators it holds")
    curve_report.add_argument("--caef", default="results/table1_caef.json",
                              help="CAEF's results at its full budget (default results/table1_caef.json; '' for none)")
    out_argument(curve_report, "results/local", "where the three files go")
    curve_report.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from caef_bench.report.direct_curve import write_curve_report

    evaluations = args.evaluation or ["work/direct_curve/evaluation.json"]
    for path in write_curve_report(evaluations, args.out, args.command_line, args.caef or None):
        print(f"wrote {path}")
    return 0
