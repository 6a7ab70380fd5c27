"""Steps of 8 that bring a LoRA-direct adapter on SmolLM2 to its CAEF pair's samples (the paper gives both
the same data): the samples of the operator's CAEF executor and aligner over all their rounds (the pending
folder's, else the tier's), less those of the direct adapter it starts from. From the repository root:
    python lab/lanes/direct_steps.py OP INIT_FOLDER INIT_OP      (prints the steps; 0 when at or over)"""
import math
import sys
from pathlib import Path

from caef_bench.evaluate.table1 import trained_samples

BATCH = 8  # the smollm2 preset's stage-2 batch
FOLDERS = [Path("checkpoints/smollm2-135m-pending"), Path("checkpoints/smollm2-135m")]


def caef_pair(op: str) -> int:
    total = 0
    for kind in ("executors", "aligners"):
        folder = next((root / kind / op for root in FOLDERS if (root / kind / op / "manifest.json").is_file()), None)
        if folder is None:
            raise SystemExit(f"no CAEF {kind[:-1]}_{op} on SmolLM2 to set a budget from")
        total += trained_samples(folder)
    return total


def main(op: str, init_folder: str, init_op: str) -> None:
    start = trained_samples(Path(init_folder) / "direct" / init_op)
    if start is None:
        raise SystemExit(f"no direct_{init_op} in {init_folder} to start from")
    print(max(0, math.ceil((caef_pair(op) - start) / BATCH)))


if __name__ == "__main__":
    main(*sys.argv[1:4])
