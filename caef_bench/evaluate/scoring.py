"""Answer extraction and scoring: one rule for every system (`score`), CAEF's runs included.

Scoring rule (the protocol: one attempt, exact match against the ground truth):
integer answers must equal the ground truth as strings after stripping
surrounding whitespace, so "0112" does not match "112" and "+5" does not match
"5": a model that pads or signs its answer has not produced the answer.
True/False answers match case-insensitively (the chat prompt asks for "true or
false" in lower case while the ground truth is written "True"/"False").

Extraction is where formats are tolerated: thousands separators and markdown
around a chat model's ``Answer:`` line are removed before matching. Negative
numbers are kept, with their sign, so they are scored wrong rather than dropped.

Import-light on purpose: the statistics (Wilson intervals, Fisher's exact test) are scipy.stats'
and import it on first use, so reading and scoring answers loads the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from caef_bench.data.testsets import COMPARISON_OPS

PROMPT_STYLES = ("bare", "direct", "chat")
_BOOLEANS = {"true": "True", "false": "False"}

# An integer, optionally negative (ASCII hyphen or the Unicode minus sign chat
# models like to print), with optional well-formed thousands separators.
_INTEGER = re.compile(r"[-\u2212]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)")
_BOOLEAN = re.compile(r"\b(true|false)\b", re.IGNORECASE)
_ANSWER_LABEL = re.compile(r"answer\s*:", re.IGNORECASE)
# Markdown emphasis/code and LaTeX wrappers seen around answers: **Answer:** 1,
# Answer: `1`, Answer: $\boxed{1}$.
_DECORATION = re.compile(r"\\boxed|\\text|[*_`$\\{}()\[\]]")


def _normalize_integer(text: str) -> str:
    return text.replace(",", "").replace("\u2212", "-")


def _is_boolean_target(target: str) -> bool:
    return target.strip().lower() in _BOOLEANS


def exact_match(prediction: str | None, target: str) -> bool:
    """Whether an extracted answer is the ground truth (see the module docstring).
    A missing answer (None) is wrong."""
    if prediction is None:
        return False
    if _is_boolean_target(target):
        return prediction.strip().lower() == target.strip().lower()
    return prediction.strip() == target.strip()


def _labelled_answers(text: str) -> list[str]:
    """What follows the last ``Answer:`` on each line that has one, undecorated, in order."""
    answers = []
    for line in text.splitlines():
        line = _DECORATION.sub("", line)
        labels = list(_ANSWER_LABEL.finditer(line))
        if labels:
            answers.append(line[labels[-1].end() :])
    return answers


def extract_chat_answer(text: str, op: str) -> str | None:
    """The answer of an instruct/chat model's reply, or None when it gave none.

    Arithmetic: the integer on the last ``Answer: N`` line (after an ``=`` on that
    line if the model restated the expression). Comparisons: True/False from the
    last ``Answer: true`` line if any, else the reply read as a person reads it
    (`_read_verdict`).
    """
    if op in COMPARISON_OPS:
        for answer in reversed(_labelled_answers(text)):
            found = _BOOLEAN.match(answer.strip())
            if found:
                return _BOOLEANS[found.group(1).lower()]
        return _read_verdict(text)
    for answer in reversed(_labelled_answers(text)):
        found = _INTEGER.search(answer.rpartition("=")[2])
        if found:
            return _normalize_integer(found.group())
    return None


_SENTENCE_END = re.compile(r"(?<=[.?!])\s+|\n+")
_ASSERTED = re.compile(r"\b(not\s+(?:an?\s+)?|un)?(true|false)\b", re.IGNORECASE)


def _read_verdict(text: str) -> str | None:
    """True/False from a reply without an ``Answer:`` line, as a person reads it.

    A reply that opens with its verdict ("False. The expression ... is not a true
    statement.") is that verdict: its restatement often ends in the other word (9 of
    32 of SmolLM2's eq_5 replies). Otherwise the last true/false the reply asserts:
    words in questions ("Is it true? ...") are not verdicts, and a negated one ("is
    not true", "not a true statement") means the other.
    """
    opening = _BOOLEAN.match(_DECORATION.sub("", text).strip())
    if opening:
        return _BOOLEANS[opening.group(1).lower()]
    verdict = None
    for sentence in _SENTENCE_END.split(text):
        if sentence.rstrip().endswith("?"):
            continue
        for negation, word in _ASSERTED.findall(sentence):
            if negation.lower() == "un":  # "untrue" is not the word true
                continue
            value = word.lower() == "true"
            verdict = "True" if value != bool(negation) else "False"
    return verdict


def extract_direct_answer(text: str, op: str) -> str | None:
    """The first token of a completion that should be just the answer (the
    LoRA-direct baseline, or a bare ``45+67=`` prompt): an integer, or True/False
    for comparisons; None when the completion does not start with one."""
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    first_line = first_line.strip()
    if op in COMPARISON_OPS:
        found = _BOOLEAN.match(first_line)
        return _BOOLEANS[found.group(1).lower()] if found else None
    found = _INTEGER.match(first_line)
    return _normalize_integer(found.group()) if found else None


def extract_answer(text: str, op: str, style: str) -> str | None:
    """The answer in a completion of a ``style`` prompt (one of PROMPT_STYLES).

    A bare prompt is scored strictly: the whole completion line, stripped, is the
    answer, because a model answering ``45+67=`` has only the answer to write.
    """
    if style == "bare":
        return text.strip()
    if style == "direct":
        return extract_direct_answer(text, op)
    if style == "chat":
        return extract_chat_answer(text, op)
    raise ValueError(f"unknown prompt style {style!r}; expected one of {PROMPT_STYLES}")


def score(output: str | None, target: str, op: str | None, style: str) -> bool:
    """The benchmark's one rule: is the answer in a system's output (`extract_answer`, read as the
    prompt style asks) the target (`exact_match`)? Every system is scored by it: the baselines
    through the lm-eval tasks' hooks, CAEF's runs through `is_correct`. No output is wrong."""
    if output is None:
        return False
    return exact_match(extract_answer(output, op, style), target)


# CAEF answers with aligner (O)'s text after "=": the answer alone, as a bare ``45+67=`` prompt asks
# (the `caef` lm-eval model hands the same text to the bare tasks).
CAEF_STYLE = "bare"


def is_correct(record) -> bool:
    """Whether a CAEF run (a `runtime.ProblemRecord`) answered its target, by `score`."""
    if record.target is None:
        raise ValueError(f"{record.id}: the record has no target to score its answer against")
    return record.outcome == "answered" and score(record.answer, record.target, None, CAEF_STYLE)


def verdict(record) -> str:
    """How a CAEF run ended, judged: "ok" or "wrong_answer" for a run that answered, else the
    runtime's outcome ("no_halt", "unparseable", "error")."""
    if record.outcome != "answered":
        return record.outcome
    return "ok" if is_correct(record) else "wrong_answer"


def text_accuracy(cases: list[tuple[str, str]], outputs: list[str], keep: int | None = 5) -> dict:
    """Accuracy of a component's outputs, (prompt, expected text) each: an executor step or an
    aligner conversion is right only when its whole text is the machine's. The first `keep`
    misses are kept beside the numbers (None: all)."""
    scored = [(prompt, expected, got) for (prompt, expected), got in zip(cases, outputs, strict=True)]
    failures = [{"prompt": prompt, "expected": expected, "got": got} for prompt, expected, got in scored if got != expected]
    return {**accuracy({"correct": got == expected} for _, expected, got in scored), "failures": failures[:keep]}


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n, z standard errors wide (1.96: the 95% every report
    prints), by scipy.stats.binomtest. n=0 gives (0, 1).

    The confidence level is the one whose z is exactly 1.96 (0.9500042), not 0.95 (z 1.959964): the
    committed results were computed at z = 1.96, and this gives each of their 716 intervals again to
    within 1e-15 and every printed digit the same, where 0.95 moves the last printed digit of some."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    from scipy.special import ndtr
    from scipy.stats import binomtest

    interval = binomtest(k, n).proportion_ci(confidence_level=2 * float(ndtr(z)) - 1, method="wilson")
    return float(interval.low), float(interval.high)


def accuracy(records: Iterable[Mapping]) -> dict:
    """Accuracy of scored records (each with a boolean ``correct``) and its Wilson
    95% interval. With no records accuracy is 0.0 and the interval (0, 1)."""
    outcomes = [bool(record["correct"]) for record in records]
    n, correct = len(outcomes), sum(outcomes)
    low, high = wilson_interval(correct, n)
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else 0.0,
        "ci_low": low,
        "ci_high": high,
    }


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test that k1 of n1 and k2 of n2 come from one rate
    (scipy.stats.fisher_exact on the 2x2 table of successes and failures). An empty group, or no
    success or no failure at all, gives 1.0."""
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"need 0 <= k <= n, got {k1}/{n1} and {k2}/{n2}")
    from scipy.stats import fisher_exact as fisher

    return float(fisher([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided").pvalue)
