"""Hooks of the CAEF lm-eval tasks: load a test-set cell, build prompts, score.

lm-eval imports this file by path (``!function utils.NAME`` in the templates),
so test data is found relative to this file and every run works offline from
any working directory.
"""

import sys
from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent
DATA_DIR = TASKS_DIR / "data"

try:
    import caef_bench  # noqa: F401
except ImportError:  # lm_eval started outside the checkout without `pip install -e .`
    sys.path.insert(0, str(TASKS_DIR.parent))

from caef_bench.data.direct import chat_prompt, direct_prompt  # noqa: E402
from caef_bench.data.testsets import load_cell  # noqa: E402
from caef_bench.evaluate.scoring import exact_match, extract_answer  # noqa: E402


def load_cell_dataset(cell, **_metadata):
    """``custom_dataset`` hook: the committed cell as the ``test`` split. lm-eval
    passes the task's metadata (and any --metadata) as keywords too; unused."""
    import datasets

    return datasets.DatasetDict({"test": datasets.Dataset.from_list(load_cell(cell, DATA_DIR))})


def direct_text(doc):
    return direct_prompt(doc["expr"], doc["op"])


def chat_text(doc):
    return chat_prompt(doc["expr"], doc["op"])


def _score(style, doc, results):
    predicted = extract_answer(results[0], doc["op"], style)
    return {"exact_match": float(exact_match(predicted, doc["answer"]))}


def process_results_bare(doc, results):
    return _score("bare", doc, results)


def process_results_direct(doc, results):
    return _score("direct", doc, results)


def process_results_chat(doc, results):
    return _score("chat", doc, results)
