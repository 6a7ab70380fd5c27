"""Adapter names and folders: the one place that says what an executor's, aligner's or LoRA-direct
adapter is called.

Inside a peft model adapters are keyed by name, `executor_<op>`, `aligner_<op>`, `direct_<op>`
(peft keeps them in module dicts and save folders, where '.' and '/' would break); on disk they
sit in the official release's folders, `executors/<op>/`, `aligners/<op>/` (and caef-bench's
`direct/<op>/`). Records, manifests, one-step results and training runs all use these names.

Schoolbook multiplication and long division (the long route, `machines.ROUTES`; docs/long-mul-div.md)
have adapters of their own, named the same way from their machines' ops: `executor_long_mul`,
`executor_long_div`, `executor_digit_mul`, and `aligner_long_mul`, `aligner_long_div` (their start and
halt states are LONG_MUL's and LONG_DIV's, not MUL's and DIV's). They are adapter names, folders
(`executors/long_mul/`, ...) and training targets, but not among the paper's operators (`EXECUTOR_OPS`,
`ALIGNED_OPS`), which say what a tier trains, serves and evaluates by default.
"""

from __future__ import annotations

from caef_bench.machines import ALIGNED_OPS, BY_MACHINE, EXECUTOR_OPS, LONG_ALIGNED_OPS, LONG_EXECUTOR_OPS, lookup
from caef_bench.machines.composers import CALLEES
from caef_bench.machines.long_composers import LONG_CALLEES

ADAPTER_KINDS = ("executor", "aligner", "direct")
FOLDER_OF_KIND = {"executor": "executors", "aligner": "aligners", "direct": "direct"}
KIND_OF_FOLDER = {folder: kind for kind, folder in FOLDER_OF_KIND.items()}
OPS_OF_KIND = {"executor": EXECUTOR_OPS + LONG_EXECUTOR_OPS, "aligner": ALIGNED_OPS + LONG_ALIGNED_OPS,
               "direct": ALIGNED_OPS}


def adapter_name(kind: str, op: str) -> str:
    """'executor', 'add' -> 'executor_add'; a ValueError for a kind or op that has no such adapter."""
    if kind not in OPS_OF_KIND:
        raise ValueError(f"unknown adapter kind {kind!r}; expected one of {ADAPTER_KINDS}")
    if op not in OPS_OF_KIND[kind]:
        raise ValueError(f"no {kind} adapter for op {op!r}; {FOLDER_OF_KIND[kind]} exist for: "
                         f"{', '.join(OPS_OF_KIND[kind])}")
    return f"{kind}_{op}"


def executor_name(op: str) -> str:
    return adapter_name("executor", op)


def aligner_name(op: str) -> str:
    return adapter_name("aligner", op)


def executor_of_machine(machine: str) -> str:
    """'LESS_THAN' -> 'executor_lt': the adapter a composer's [CALL] switches to."""
    return executor_name(BY_MACHINE[machine].name)


def operator_adapters(op: str) -> tuple[str, ...]:
    """Every adapter a problem of `op` calls: its aligner, its executor and the executors its composer
    calls ('sub': aligner_sub, executor_sub, executor_reflection, executor_add, executor_left_mask;
    'long_mul': aligner_long_mul, executor_long_mul, executor_digit_mul, executor_add)."""
    machine = lookup(op).machine
    callees = CALLEES.get(machine, ()) or LONG_CALLEES.get(machine, ())
    return (aligner_name(op), executor_of_machine(machine), *(executor_of_machine(callee) for callee in callees))


def split_adapter_name(name: str) -> tuple[str, str]:
    """'aligner_add' -> ('aligner', 'add'); 'executor_left_mask' -> ('executor', 'left_mask')."""
    kind, _, op = name.partition("_")
    adapter_name(kind, op)  # the same checks, so a misspelt name fails here
    return kind, op


__all__ = ["ADAPTER_KINDS", "FOLDER_OF_KIND", "KIND_OF_FOLDER", "OPS_OF_KIND", "adapter_name", "aligner_name",
           "executor_name", "executor_of_machine", "operator_adapters", "split_adapter_name"]
