"""Exact Turing-machine prototypes of CAEF and their text format (standard library only).

Public API:
    trace(op, a, b=None)   -> [(input_text, output_text), ...]  every executor transition
    run(op, a, b=None)     -> Run: any step's state, command and text by index
    align_input("45+67=")  -> the executor's start state and first command
    align_output(halt)     -> "45+67=112"
    typed_expression("12 + 34") -> "12+34=" (what a person types, as the template)
    parse(text) / render(snapshot)  -> structured states and back, byte for byte
    classify(expected, got)         -> how a model's step differs (error class) or None
    next_text(kind, op, text)       -> what op's executor or aligner writes next on a correct run

op is one of: add sub mul div gt lt eq reflection left_mask (OPERATIONS, the paper's), or
long_mul long_div digit_mul (LONG_OPERATIONS: schoolbook multiplication and long division,
long_composers.py). On the long route (`routed(op, "long")`, ROUTES) long_mul and long_div answer the
expressions `a*b=` and `a//b=`: `align_input(expr, route="long")`.
"""

from .aligner import (
    Expression,
    align_input,
    align_output,
    answer_misalignment,
    answer_miscopy,
    operand_texts,
    parse_expression,
    start_misalignment,
    start_operands,
    typed_expression,
)
from .compare import ERROR_CLASSES, classify
from .composers import ComposerRun, call_miscopy, composer_miscopy, composer_view, composer_view_of_halt
from .executors import Run, rewritten_operand
from .ops import (ALIGNED_OPS, ARITHMETIC, BY_MACHINE, COMPARISON, EXECUTOR_OPS, LONG_ALIGNED_OPS, LONG_EXECUTOR_OPS,
                  LONG_OPERATIONS, OPERATIONS, ROUTES, Operation, expression_op, lookup, operand, routed)
from .ops import start as run
from .steps import OffCourse, next_text
from .text import (
    HALT_LINE,
    Action,
    Command,
    ComposerState,
    ExecutorState,
    FormatError,
    Snapshot,
    Tape,
    parse,
    render,
    split_step_end,
)

def trace(op: str, a, b=None) -> list[tuple[str, str]]:
    """Every executor transition of `op` on (a, b), byte-exact with the reference format.

    Simple executors: input and output are a state line and its command line.
    Composers: the texts also carry the callee's start (in an output) and the
    callee's halt (in the next input); composer inputs end with a newline.
    """
    return run(op, a, b).transitions()


def result(op: str, a, b=None):
    """Python's answer for op(a, b): an int, or True/False for comparisons."""
    operation = lookup(op)
    a = operand(a, "a")
    if operation.arity == 1:
        return operation.result(a)
    b = operand(b, "b")
    operation.check(a, b)
    return operation.result(a, b)


__all__ = [
    "ALIGNED_OPS", "ARITHMETIC", "BY_MACHINE", "COMPARISON", "ERROR_CLASSES", "EXECUTOR_OPS", "HALT_LINE",
    "LONG_ALIGNED_OPS", "LONG_EXECUTOR_OPS", "LONG_OPERATIONS", "OPERATIONS", "ROUTES",
    "Action", "Command", "ComposerRun", "ComposerState", "ExecutorState", "Expression",
    "FormatError", "OffCourse", "Operation", "Run", "Snapshot", "Tape",
    "align_input", "align_output", "answer_misalignment", "answer_miscopy", "call_miscopy", "classify", "composer_miscopy", "composer_view", "composer_view_of_halt",
    "expression_op", "lookup", "next_text",
    "operand", "operand_texts", "parse", "parse_expression", "render", "result", "rewritten_operand", "routed", "run",
    "split_step_end",
    "start_misalignment", "start_operands", "trace", "typed_expression",
]
