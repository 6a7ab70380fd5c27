"""The CAEF runtime: aligner (I) -> executor loop (with a call stack for composers) -> aligner (O).

    from caef_bench.runtime import Problem, solve_batch, solve_to_file
    from caef_bench.runtime.oracle import OracleModel

    records = solve_batch([Problem("p0", "45+67=", target="112")], OracleModel(), mode="traced")
    records[0].answer, records[0].outcome      # ("112", "answered"): evaluate.scoring judges the answer

A model is anything with ``generate(prompts, adapter) -> completions`` (see
`StepModel`); `oracle` has one made of the machines (the speculative drafter,
and the stand-in for a trained model in tests). Records are written as JSON
lines (`records`), and `solve_to_file` resumes an interrupted run without
redoing or losing problems.
"""

from .engine import MODES, Rounds, solve_batch, solve_to_file, solve_to_files
from .problem import (
    BUDGET_FACTOR,
    BUDGET_SLACK,
    Completion,
    Problem,
    ReferenceStep,
    StepModel,
    composer_view,
    default_step_budget,
    reference_step_count,
    reference_steps,
    to_composer_view,
)
from .records import (
    OUTCOMES,
    Divergence,
    ProblemRecord,
    RecordWriter,
    StepRecord,
    load_records,
    recorded_ids,
    repair,
    resume,
)

__all__ = [
    "BUDGET_FACTOR", "BUDGET_SLACK", "MODES", "OUTCOMES",
    "Completion", "Divergence", "Problem", "ProblemRecord", "RecordWriter", "ReferenceStep", "Rounds", "StepModel",
    "StepRecord",
    "composer_view", "default_step_budget", "load_records",
    "recorded_ids", "reference_step_count", "reference_steps", "repair", "resume", "solve_batch",
    "solve_to_file", "solve_to_files", "to_composer_view",
]
