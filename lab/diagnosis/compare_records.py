"""Two records folders side by side on exactly the same problems: a candidate's against a reference's.

    python lab/diagnosis/compare_records.py work/records/tiny-<candidate> work/records/tiny-<reference>

Per cell with records in the candidate's folder, on the candidate's ids: how many each got right (scored
as the tables score them, `scoring.is_correct`), and the candidate's wrong problems, each with the
adapter whose step first went wrong (`records_summary.first_wrong_adapter`); a total row last. A cell
the reference lacks any of those ids for is refused: the comparison is only on the same problems.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from records_summary import first_wrong_adapter  # noqa: E402

from caef_bench.evaluate.scoring import is_correct  # noqa: E402
from caef_bench.runtime import load_records  # noqa: E402


def compare(candidate: Path, reference: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(candidate.glob("caef_*.jsonl")):
        ours = {record.id: record for record in load_records(path)}
        if not ours:
            continue  # a cell the evaluation did not reach
        theirs = {record.id: record for record in load_records(reference / path.name)} \
            if (reference / path.name).exists() else {}
        missing = sorted(set(ours) - set(theirs))
        if missing:
            raise SystemExit(f"{reference / path.name} lacks {len(missing)} of the candidate's problems "
                             f"(first {missing[0]}): compare on the same problems only")
        ids = sorted(ours)
        wrong = [i for i in ids if not is_correct(ours[i])]
        rows.append({"cell": path.stem[len("caef_"):], "problems (the same ids)": len(ids),
                     f"{reference.name} right": sum(is_correct(theirs[i]) for i in ids),
                     f"{candidate.name} right": len(ids) - len(wrong),
                     f"{candidate.name} wrong (first wrong step's adapter)": ", ".join(
                         f"{i} ({first_wrong_adapter(ours[i].to_dict())})" for i in wrong)})
    table = pd.DataFrame(rows)
    if not table.empty:
        total = table.sum(numeric_only=True).astype(int).to_dict()
        table = pd.concat([table, pd.DataFrame([{**total, "cell": "total"}])], ignore_index=True).fillna("")
    return table


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    print(compare(Path(sys.argv[1]), Path(sys.argv[2])).to_markdown(index=False))


if __name__ == "__main__":
    main()
