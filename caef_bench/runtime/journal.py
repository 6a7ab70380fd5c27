"""Model calls of the problems still in flight, kept so that a killed run resumes them mid-problem.

A records file gets a problem's record only when the problem ends. A DIV of a 10-digit quotient
makes hundreds of calls, and with sixteen such problems in flight on one CPU thread a run can
hold an hour of model time that no record holds yet; a killed run lost all of it. The journal
beside the records file (`caef_div_1_10.jsonl` -> `caef_div_1_10.calls`, JSON lines; not
`.jsonl`, which names records) gets each generated call as it returns, with the problem it was
made for and the model time it took. A run started again reads back the calls of the problems
not yet recorded: greedy decoding of the same weights gives the same output for the same prompt
(the records folder is per weights, `evaluate.suites.records_folder`), so a resumed problem
replays its calls from the journal (`runtime.reuse.ReusedSteps`) and goes on from its first call
the journal lacks. Each step read back keeps the model time it took when it was made, so records
cost what they cost. Once every problem of the file is recorded, its journal is deleted.
"""

from __future__ import annotations

import json
from pathlib import Path

from .problem import Completion
from .records import _complete_lines, repair

JOURNAL_SUFFIX = ".calls"


def journal_path(records_path: str | Path) -> Path:
    """The journal beside a records file: `caef_add_5.jsonl` -> `caef_add_5.calls`."""
    path = Path(records_path)
    return path.with_name(path.name.removesuffix(".jsonl") + JOURNAL_SUFFIX)


def read_journal(path: str | Path, unfinished: set[str]) -> dict[tuple[str, str], Completion]:
    """{(adapter, prompt): the completion} of the calls a journal holds for the `unfinished` problems
    (a cut last line, from a kill mid-write, is ignored)."""
    path = Path(path)
    if not path.is_file():
        return {}
    lines, _ = _complete_lines(path.read_bytes())
    calls = {}
    for line in lines:
        call = json.loads(line)
        if call["problem"] in unfinished:
            calls.setdefault((call["adapter"], call["input"]),
                             Completion(call["output"], call.get("tokens"), seconds=call["seconds"]))
    return calls


class Journal:
    """Appends a records file's model calls, one JSON line each, flushed as it is written."""

    def __init__(self, records_path: str | Path):
        self.path = journal_path(records_path)
        repair(self.path)  # a line cut by a kill would join the next one
        self._file = None

    def write(self, problem_id: str, adapter: str, prompt: str, completion: Completion, seconds: float) -> None:
        if self._file is None:  # a run that makes no call leaves no journal behind
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(json.dumps({"problem": problem_id, "adapter": adapter, "input": prompt,
                                     "output": completion.text, "tokens": completion.n_tokens,
                                     "seconds": round(seconds, 6)}) + "\n")
        self._file.flush()

    def close(self, finished: bool) -> None:
        """Close it; `finished` (every problem of its records file recorded): delete it too."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if finished:
            self.path.unlink(missing_ok=True)


__all__ = ["JOURNAL_SUFFIX", "Journal", "journal_path", "read_journal"]
