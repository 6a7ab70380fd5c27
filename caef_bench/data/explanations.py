"""Stage-1 prompts: an explanation of each machine and one worked example.

The paper's stage 1 prefixes each training sample with a long description of
the machine and one example; these descriptions are ours, written from the
machines' rules (caef_bench/machines).
"""

from __future__ import annotations

from functools import lru_cache

from caef_bench.machines import run

_FORMAT = (
    "Numbers are written on tapes least-significant digit first, each digit after a '|': "
    "45 is |5|4. A head marker such as [HEAD1] stands just before the cell it reads; a head "
    "past the last digit stands after it, and it stops there. Each step reads the state line "
    "and the command line and writes the next state line and the next command line. "
    "The halt state is followed by 'No command to execute. Halt state.'"
)

EXPLANATIONS = {
    "ADD": "ADD adds two numbers column by column. [C] holds the carry. In q1 the command writes "
           "the new carry and the digit (a + b + carry) mod 10 to [OUTPUT], moves [OUTPUT] right and "
           "moves each head that still reads a digit. When both heads have passed their numbers, "
           "the final carry is written (as a new top digit only when it is 1) and the machine halts.",
    "GREATER_THAN": "GREATER_THAN compares a > b digit by digit from the least-significant end. "
                    "[OUTPUT] starts False; where the two digits differ it becomes True if a's digit is "
                    "larger, else False, so the most significant difference decides. When one number "
                    "runs out first, the longer number is the larger.",
    "LESS_THAN": "LESS_THAN compares a < b digit by digit from the least-significant end. [OUTPUT] "
                 "starts False; where the two digits differ it becomes True if a's digit is smaller, "
                 "else False, so the most significant difference decides. When one number runs out "
                 "first, the shorter number is the smaller.",
    "EQUAL": "EQUAL checks a == b digit by digit. [OUTPUT] starts True; at the first pair of "
             "different digits, or when one number runs out before the other, it writes False "
             "and halts. If both run out together it halts with True.",
    "REFLECTION": "REFLECTION writes the nines' complement of b over the width of the first tape "
                  "(all nines): each output digit is 9 minus b's digit, and 9 where b has run out.",
    "LEFT_MASK": "LEFT_MASK copies its number to [OUTPUT], then moves left erasing the top digit, "
                 "then keeps erasing top zeros. An empty result is written 0.",
    "SUB": "SUB computes a - b for a >= b by calling other machines: REFLECTION (99..9 - b), "
           "ADD (a plus the reflection), ADD (plus 1) and LEFT_MASK (drop the extra top digit and "
           "the zeros below it). A call shows the callee's start state under the command; the "
           "callee's halt state comes back under it.",
    "MUL": "MUL computes a * b by repeated addition: [COUNT] starts at 1 and [OUTPUT] at a. While "
           "LESS_THAN(count, b) is True it calls ADD(a, output) and ADD(count, 1); when it is False "
           "the machine halts. Calls show the callee's start, and later its halt, under the command.",
    "DIV": "DIV computes a // b by repeated addition: [COUNT] starts at b and [OUTPUT] at 0. While "
           "GREATER_THAN(count, a) is False it calls ADD(output, 1) and ADD(b, count); when it is "
           "True the machine halts. Calls show the callee's start, and later its halt, under the command.",
}

# Small problems whose complete traces serve as the worked example.
EXAMPLES = {
    "ADD": ("add", 45, 67), "GREATER_THAN": ("gt", 45, 67), "LESS_THAN": ("lt", 100, 99),
    "EQUAL": ("eq", 12, 12), "REFLECTION": ("reflection", 99, 47), "LEFT_MASK": ("left_mask", 100, None),
    "SUB": ("sub", 70, 7), "MUL": ("mul", 89, 2), "DIV": ("div", 7, 3),
}


@lru_cache(maxsize=None)
def stage1_preamble(machine: str) -> str:
    """The explanation and a worked example that precede a stage-1 sample of this machine."""
    op, a, b = EXAMPLES[machine]
    transitions = run(op, a, b).transitions()
    example = "\n\n".join(f"Input:\n{source.rstrip(chr(10))}\nOutput:\n{target}" for source, target in transitions)
    return f"{EXPLANATIONS[machine]}\n{_FORMAT}\n\n### Example\n{example}\n\n### Step\n"
