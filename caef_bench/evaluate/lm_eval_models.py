"""caef-bench's systems as lm-evaluation-harness models: `caef` and `caef-direct`.

lm-eval's own models (`hf`, `vllm`, the API models) load every baseline that is an ordinary
transformers model. Two systems are not: CAEF itself, which runs aligner (I), the executors
(switching LoRA adapters, composers calling executors) and aligner (O) for one answer; and the
tiny tier's LoRA-direct model, whose tokenizer gives position ids lm-eval's `hf` cannot make
(coupled positions). Both are registered here as `generate_until` models, so the same task files
and the same scorer (tasks/utils.py) serve every system.

lm-eval 0.4.13 discovers no models from other packages: `caef-bench lm-eval ...` imports
lm-eval's models, then this module, then runs lm-eval's own command line (`main`), so every
lm-eval flag works as usual.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import lm_eval.models  # noqa: F401  (lm-eval's own models first: registering before them breaks its lookup)
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from caef_bench.machines import parse_expression, routed, typed_expression
from caef_bench.models.limits import (BeyondTierError, check_lengths, check_within_tier, long_route_adapters, measuring_to,
                                      windowing)
from caef_bench.runtime.backends import check_operators


def _device(requested: str | None) -> str:
    """lm-eval hands every model its --device, "cuda" unless told otherwise: on a machine without a
    GPU that default means the CPU (a device given in model_args is used as it is)."""
    from caef_bench.models.loading import default_device

    if requested and str(requested).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return "cpu"
    return default_device(requested)


def _bool_arg(value) -> bool:
    return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")


def problem_id(expr: str) -> str:
    """A record id that is the same for the same expression in every run, so records resume."""
    return "lm-eval-" + hashlib.sha256(expr.encode()).hexdigest()[:16]


class _NoLoglikelihood:
    """The CAEF tasks only generate; scoring choices by likelihood is not what these systems do."""

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError(f"{type(self).__name__} only generates (generate_until tasks such as caef_table1)")

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError(f"{type(self).__name__} only generates (generate_until tasks such as caef_table1)")


@register_model("caef")
class CaefLM(_NoLoglikelihood, LM):
    """CAEF end to end behind `generate_until`: the context is a templated expression ("45+67="),
    the continuation is the answer aligner (O) wrote ("112", or True/False).

    model_args: tier (tiny, smollm2-135m, llama-3.1-8b), checkpoints (an adapter folder), device,
    records (a folder: every problem's traced record is appended to `lm_eval.jsonl` there, and a
    rerun solves only the expressions it does not hold), speculative (default true; false is the
    paper's loop), reuse_steps (a records folder of `caef-bench run` or of this model, or the root holding
    `<tier>-<weights>/` folders: calls to adapters unchanged since those records are answered from
    them, as `run --reuse-steps` does, and an expression the caef suite has solved end to end, with
    every adapter its cell calls unchanged, is answered with that record (a copy, which says
    `carried_from`), so Table 1's CAEF row costs nothing where the caef suite has already solved the
    same problems, also from records packed without their step texts), backend and base_url (backend=openai: every step a completion
    request to the OpenAI-compatible server at base_url, model = the adapter's name; docs/serving.md),
    windowed_digits (a run that measures windowed operands past the tier's longest measured length, up to
    this many digits; the results' config says so), max_in_flight (at most this many problems solved
    together; the others join as they finish, so that a long run's records grow as it goes and an
    interrupted one resumes from them rather than from nothing).
    mul and div past the paper's limits run on the long route (schoolbook multiplication, long division;
    docs/long-mul-div.md) where the tier's limits give the long route's lengths and the model has its
    adapters (models.limits.route_within_tier); get_model_info says which routes it can take.
    All of one call's problems (or max_in_flight of them) are solved together, batching each step's model
    calls across problems.
    """

    def __init__(self, tier: str = "tiny", checkpoints: str | None = None, device: str | None = None,
                 records: str | None = None, speculative=True, reuse_steps: str | None = None,
                 backend: str = "hf", base_url: str | None = None, step_model=None, windowed_digits=None,
                 max_in_flight=None, **_lm_eval_options):
        super().__init__()
        self.max_in_flight = None if max_in_flight in (None, "", "None") else int(max_in_flight)
        self.limits = measuring_to(tier, windowed_digits)
        if step_model is None:
            from caef_bench.runtime.backends import step_model as backend_model

            step_model = backend_model(backend, tier, checkpoints, speculative=_bool_arg(speculative),
                                       device=_device(device) if backend == "hf" else None, base_url=base_url)
        self.step_model, self.tier = step_model, tier
        self.checked_model = step_model  # the model itself, whose adapters say which operators it can run
        weights = getattr(step_model, "fingerprint", None) or "model"
        self.records = Path(records) / f"{tier}-{weights}" / "lm_eval.jsonl" if records else None
        self.solved = {}  # expression -> the caef suite's record of it, where every adapter it calls is unchanged
        source = None  # the records whose steps answer unchanged adapters' calls: {"folder", "weights"}
        if reuse_steps:
            self.step_model, self.solved, source = _reusing_steps(step_model, Path(reuse_steps), f"{tier}-{weights}")
        adapters = getattr(step_model, "adapter_fingerprints", None)
        if self.records is not None and adapters:  # as `caef-bench run` names its records' weights, so that a
            # later lm-eval run on other weights can answer the unchanged adapters' calls from these (reuse_steps)
            from caef_bench.runtime.reuse import write_weights

            self.records.parent.mkdir(parents=True, exist_ok=True)
            write_weights(self.records.parent, weights, adapters, source)

    def get_model_info(self) -> dict:
        """What lm-eval puts in its results' config: the tier, its weights, how it runs long operands
        (each windowed problem's record says so as well) and the routes its mul and div can take (each
        long-route problem's record says `route: long`)."""
        shape = windowing(self.tier)
        return {"caef_tier": self.tier, "caef_weights": getattr(self.checked_model, "fingerprint", None),
                "caef_windowing": None if shape is None else {
                    "ops": list(shape.ops), "past_digits": shape.past, "width": shape.width, "back": shape.back,
                    "chunk": shape.chunk, "up_to_digits": self.limits.windowed_digits,
                    "measured_to": self.limits.windowed_measured},
                "caef_routes": self.routes()}

    def routes(self) -> dict:
        """{"paper": the paper's mul/div limits, "long": {op: the long route's limits}} for the operators
        this tier's limits give a long route and this model has its adapters for (none: no "long")."""
        limits = self.limits
        paper = {"mul": {"a_digits": limits.small_digits, "b_at_most": limits.small_factor},
                 "div": {"divisor_digits": limits.small_digits, "quotient_at_most": limits.small_factor}}
        available = getattr(self.checked_model, "available_adapters", None)
        long = {}
        for op in ("mul", "div"):
            digits = limits.long_digits(op)
            if digits is not None and (available is None or set(long_route_adapters(op)) <= set(available)):
                long[op] = {"a_digits": digits[0], "b_digits": digits[1], "measured_to": limits.long_measured}
        return {"paper": paper, **({"long": long} if long else {})}

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        from caef_bench.runtime import Problem, load_records, solve_batch, solve_to_file

        answers: list[str | None] = [None] * len(requests)
        waiting: dict[str, list[int]] = {}  # problem id -> the requests that ask it
        problems: dict[str, Problem] = {}
        for index, request in enumerate(requests):
            try:  # a context typed as people type it ("12 + 34") is run as the template (12+34=)
                expr = typed_expression(request.args[0])
                check_lengths(self.tier, expr, self.limits)  # beyond the tier's operands, before the digits are read as numbers
                expression = parse_expression(expr)
            except BeyondTierError:
                raise
            except ValueError as error:  # not a CAEF expression: nothing to execute, an empty answer
                print(f"caef: not an expression, answered with nothing: {request.args[0].strip()[:80]!r} ({error})",
                      file=sys.stderr)
                answers[index] = ""
                continue
            # beyond the tier's operands: stop before solving anything (mul and div past the paper's limits: the
            # long route, where the tier's limits and this model's adapters have it)
            route = check_within_tier(self.tier, expression, self.limits,
                                      lambda: getattr(self.checked_model, "available_adapters", None))
            check_operators(self.checked_model, self.tier, [routed(expression.op, route)])  # and adapters it lacks
            problem = problems.setdefault(problem_id(expr), Problem(problem_id(expr), expr, route=route))
            waiting.setdefault(problem.id, []).append(index)

        def finished(record) -> None:  # each answer into lm-eval's request cache (--use_cache) as it comes
            if record.outcome == "misaligned":  # no answer to another problem's expression; say which operand
                print(f"caef: {record.expr} answered with nothing, misaligned: {record.detail}", file=sys.stderr)
            for index in waiting.get(record.id, ()):
                answers[index] = record.answer or ""
                self.cache_hook.add_partial("generate_until", requests[index].args, answers[index])

        if self.solved:  # the caef suite's records of the same expressions: copied, not solved again
            from dataclasses import replace

            from caef_bench.runtime import RecordWriter

            held = {record.id for record in load_records(self.records)} if self.records is not None else set()
            copies = [replace(self.solved[p.expr], id=p.id, target=None)
                      for p in problems.values() if p.expr in self.solved and p.id not in held]
            if self.records is not None and copies:
                with RecordWriter(self.records) as writer:
                    for record in copies:
                        writer.write(record)
            for record in copies:
                finished(record)
            problems = {key: p for key, p in problems.items() if answers[waiting[key][0]] is None}
        if self.records is not None:
            self.records.parent.mkdir(parents=True, exist_ok=True)
            solve_to_file(list(problems.values()), self.step_model, self.records, mode="traced", on_record=finished,
                          windowing=windowing(self.tier), max_in_flight=self.max_in_flight)
            for record in load_records(self.records):  # those an earlier run had already recorded
                if record.id in waiting and answers[waiting[record.id][0]] is None:
                    finished(record)
        else:
            solve_batch(list(problems.values()), self.step_model, mode="traced", on_record=finished,
                        windowing=windowing(self.tier), max_in_flight=self.max_in_flight)
        return [answer or "" for answer in answers]


@register_model("caef-direct")
class CaefDirectLM(_NoLoglikelihood, LM):
    """A tier's base with its LoRA-direct adapters (`direct_<op>`): the context is the protocol's
    LoRA-direct prompt, answered greedily with the adapter of the expression's operator, under the
    position scheme that adapter's manifest records (`evaluate.direct`).

    model_args: tier, checkpoints, device, max_gen_toks (default 128: a 100-digit sum has 101 digits).
    """

    def __init__(self, tier: str = "tiny", checkpoints: str | None = None, device: str | None = None,
                 max_gen_toks: int = 128, batch_size=32, **_lm_eval_options):
        super().__init__()
        from caef_bench.evaluate.direct import load_direct
        from caef_bench.models.loading import tier_with_checkpoints

        self.direct = load_direct(tier_with_checkpoints(tier, checkpoints), _device(device))
        self.max_gen_toks = int(max_gen_toks)
        self.batch_size = int(batch_size) if str(batch_size).isdigit() else 32

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        outputs: list[str | None] = [None] * len(requests)
        by_op: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            by_op.setdefault(_operator_of_direct_prompt(request.args[0]), []).append(index)
        for op, indices in by_op.items():
            for start in range(0, len(indices), self.batch_size):  # each batch into the cache as it comes
                batch = indices[start:start + self.batch_size]
                limits = [int(requests[i].args[1].get("max_gen_toks", self.max_gen_toks)) for i in batch]
                texts = self.direct.replies(op, [requests[i].args[0] for i in batch], limits, self.batch_size,
                                            stop=None)
                for index, text in zip(batch, texts):
                    for stop in requests[index].args[1].get("until", []):
                        text = text.split(stop)[0] if stop else text
                    outputs[index] = text
                    self.cache_hook.add_partial("generate_until", requests[index].args, text)
        return outputs


def _reusing_steps(step_model, folder: Path, weights_folder: str):
    """`step_model` answering the calls of its unchanged adapters from the records under `folder`,
    {expression: record} of the caef suite's records there whose cells call unchanged adapters only, and
    the source ({"folder", "weights"}) or None where there is none."""
    from dataclasses import replace

    from caef_bench.data.testsets import CELLS
    from caef_bench.evaluate.suites import cell_adapters, reusable_adapters
    from caef_bench.runtime.records import load_records
    from caef_bench.runtime.reuse import WEIGHTS_FILE, ReusedSteps, read_weights, unchanged_adapters

    if not (folder / WEIGHTS_FILE).is_file():
        folder = folder / weights_folder  # the root of `caef-bench run`'s records: these weights' own folder
    if not (folder / WEIGHTS_FILE).is_file():
        print(f"caef: no records to reuse steps from at {folder}; every call is generated", file=sys.stderr)
        return step_model, {}, None
    earlier = read_weights(folder)
    unchanged = unchanged_adapters(earlier["adapters"], step_model.adapter_fingerprints)
    files = sorted(folder.glob("*.jsonl"))
    # whole problems: the caef suite's traced runs (not table2's, whose aligners are the machines')
    solved = {}
    for path in files:
        cell = path.stem.removeprefix("caef_")
        if path.stem.startswith("caef_") and cell in CELLS and cell_adapters(cell) <= unchanged:
            for record in load_records(path):
                if record.mode == "traced":
                    solved.setdefault(record.expr, replace(record, carried_from=record.carried_from or earlier["weights"]))
    print(f"caef: calls to {len(unchanged)} unchanged adapters answered from {len(files)} records files in "
          f"{folder} where they hold the same prompt; {len(solved)} expressions answered with the caef suite's "
          "record of them", file=sys.stderr)
    source = {"folder": str(folder), "weights": earlier["weights"]}
    reused = ReusedSteps.from_files(step_model, {path: reusable_adapters(path, unchanged) for path in files})
    return reused, solved, source


def _operator_of_direct_prompt(context: str) -> str:
    """The operator of the expression inside a LoRA-direct prompt ("The expression is: 45+67=.")."""
    marker = "The expression is: "
    start = context.find(marker)
    if start < 0:
        raise ValueError(f"not a LoRA-direct prompt (no {marker!r}): {context[:80]!r}")
    expr = context[start + len(marker):].split(".\n", 1)[0]
    return parse_expression(expr).op


def main(argv: list[str] | None = None) -> None:
    """lm-eval's own command line, with caef-bench's models registered (`caef-bench lm-eval ...`).

    The CAEF tasks are found without `--include_path` (it is added when not given)."""
    from lm_eval.__main__ import cli_evaluate

    from caef_bench.paths import TASKS_DIR

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--include_path" not in argv and not any(a.startswith("--include_path=") for a in argv):
        argv += ["--include_path", str(TASKS_DIR)]
    sys.argv = ["lm_eval", *argv]
    cli_evaluate()
