"""Hooks of the CAEF lm-eval tasks: load a test-set cell, build prompts, score.

lm-eval imports this file by path (``!function utils.NAME`` in the templates),
from the checkout's tasks/ or from the copy installed with caef-bench. It
imports caef_bench as any installed package; the test sets are found where
every caef-bench data location is (caef_bench.paths), so runs work offline
from any working directory.
"""

from caef_bench.data.direct import chat_prompt, direct_prompt
from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.scoring import score


def load_cell_dataset(cell, **_metadata):
    """``custom_dataset`` hook: the committed cell as the ``test`` split. lm-eval
    passes the task's metadata (and any --metadata) as keywords too; unused."""
    import datasets

    return datasets.DatasetDict({"test": datasets.Dataset.from_list(load_cell(cell))})


def direct_text(doc):
    return direct_prompt(doc["expr"], doc["op"])


def chat_text(doc):
    return chat_prompt(doc["expr"], doc["op"])


def _score(style, doc, results):
    return {"exact_match": float(score(results[0], doc["answer"], doc["op"], style))}


def process_results_bare(doc, results):
    return _score("bare", doc, results)


def process_results_direct(doc, results):
    return _score("direct", doc, results)


def process_results_chat(doc, results):
    return _score("chat", doc, results)
