"""`caef-bench report-curve`: lora_direct_curve.md, .json and .png from eval-curve's results."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    curve_report = commands.add_parser(
        "report-curve", help="lora_direct_curve.md, .json and .png from eval-curve's JSON, beside CAEF and the paper")
    curve_report.add_argument("--evaluation", default="work/direct_curve/evaluation.json",
                              help="eval-curve's JSON (default work/direct_curve/evaluation.json)")
    curve_report.add_argument("--caef", default="results/table1_caef.json",
                              help="CAEF's results at its full budget (default results/table1_caef.json; '' for none)")
    curve_report.add_argument("--out", default="results/local", help="where the three files go (default results/local)")
    curve_report.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from caef_bench.report.direct_curve import write_curve_report

    for path in write_curve_report(args.evaluation, args.out, args.command_line, args.caef or None):
        print(f"wrote {path}")
    return 0
