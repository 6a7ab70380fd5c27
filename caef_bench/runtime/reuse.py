"""Model calls answered from an earlier run's records, for adapters whose weights did not change.

Retraining one adapter changes the weights fingerprint and with it the records
folder, so every problem of every cell would be solved again, although most of
its model calls go to adapters that are byte for byte the same. A greedy decode
is a function of the weights and the prompt, so a call to an unchanged adapter
(same base, same adapter bytes, same position scheme: `adapter_fingerprints`)
on a prompt that an earlier run recorded has that run's output. `ReusedSteps`
answers such calls from the records and passes every other call to the model.

The problems are still run through the engine step by step: the new records are
complete, checked against the machines and scored as ever, and each reused step
says so (`"reused": true`). Where a retrained adapter answers differently, the
run goes on from prompts that no record holds, and those calls are generated.

A records folder names its weights in `weights.json` (`write_weights`), which
is how a later run knows which adapters changed.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

from .problem import Completion
from .records import load_records

WEIGHTS_FILE = "weights.json"


def write_weights(folder: str | Path, weights: str, adapters: dict[str, str], reused_from: dict | None = None) -> dict:
    """Name the weights a records folder is made with, and the earlier records its runs reuse steps
    from ({"folder", "weights"}: every source ever used is kept); returns the file's content."""
    path = Path(folder) / WEIGHTS_FILE
    content = {"weights": weights, "adapters": adapters, "reused_from": []}
    if path.exists():
        found = json.loads(path.read_text())
        if found.get("weights") != weights:
            raise ValueError(f"{path} names weights {found.get('weights')}, not {weights}: "
                             "records of other weights must not be mixed")
        content["reused_from"] = found.get("reused_from", [])
    if reused_from is not None and reused_from not in content["reused_from"]:
        content["reused_from"].append(reused_from)
    path.write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")
    return content


def read_weights(folder: str | Path) -> dict:
    path = Path(folder) / WEIGHTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: without the adapters' fingerprints of the run that "
                                f"wrote {folder}, none of its steps can be reused")
    return json.loads(path.read_text())


def unchanged_adapters(earlier: dict[str, str], now: dict[str, str]) -> set[str]:
    """Adapters whose fingerprint is the same in both runs."""
    return {name for name, fingerprint in earlier.items() if now.get(name) == fingerprint}


class ReusedSteps:
    """A step model that answers calls from `steps` {(adapter, prompt): Completion} (an earlier run's
    records, or this run's journal: runtime.journal) and sends every other call to `model` (in one
    batch, in order, with their drafts where it takes them)."""

    def __init__(self, model, steps: dict[tuple[str, str], Completion]):
        self.model, self.steps = model, steps

    @classmethod
    def from_records(cls, model, paths: str | Path | list, adapters: set[str]) -> ReusedSteps:
        """The steps of `adapters` in one or more records files (a missing file gives none)."""
        return cls.from_files(model, {path: adapters for path in ([paths] if isinstance(paths, (str, Path)) else paths)})

    @classmethod
    def from_files(cls, model, files: dict) -> ReusedSteps:
        """{records file: the adapters whose steps it gives}; where files hold the same call, the first one's."""
        steps = {}
        for path, adapters in files.items():
            for record in load_records(path):
                for step in record.steps:
                    if step.adapter in adapters:
                        steps.setdefault((step.adapter, step.input), Completion(step.output, step.tokens, reused=True))
        return cls(model, steps)

    def generate(self, prompts: list[str], adapter: str, drafts: list | None = None) -> list:
        found = [self.steps.get((adapter, prompt)) for prompt in prompts]
        missing = [i for i, hit in enumerate(found) if hit is None]
        if missing:
            asked = [prompts[i] for i in missing]
            if drafts is not None and takes_drafts(self.model):  # windowed problems' drafts (runtime.hf)
                generated = self.model.generate(asked, adapter, drafts=[drafts[i] for i in missing])
            else:
                generated = self.model.generate(asked, adapter)
            for i, output in zip(missing, generated):
                found[i] = output
        return found


def takes_drafts(model) -> bool:
    """Whether a step model's generate takes a caller's drafts (runtime.hf: windowed problems offer them)."""
    try:
        return "drafts" in inspect.signature(model.generate).parameters
    except (TypeError, ValueError):  # a builtin or a mock without a signature
        return False


__all__ = ["WEIGHTS_FILE", "ReusedSteps", "read_weights", "takes_drafts", "unchanged_adapters", "write_weights"]
