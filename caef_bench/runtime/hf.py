"""StepModels backed by a transformers model with named LoRA adapters.

`HFStepModel` answers the runtime's generate(prompts, adapter) by switching to
the adapter and decoding greedily. With `speculative=True` (the default) each
step is verified against a draft in one forward pass: the draft is the
machine's own next text (from the oracle, when the prompt is a step of a
correct run) or else the prompt copied forward, the step's state being mostly
a copy of the last. Greedy verification keeps the output exactly the model's
greedy output, draft or no draft. `speculative=False` is the paper's loop:
token-by-token greedy decoding, one decode per step.

`load_step_model` loads a tier's base alone; each adapter is attached the first time a
call needs it, so a problem costs the adapters it calls (an addition: two of sixteen).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from caef_bench.models.decoding import greedy_ids, speculative_greedy, verify_drafts
from caef_bench.runtime.problem import Completion
from caef_bench.runtime.oracle import OracleModel


@dataclass
class DecodeStats:
    steps: int = 0
    forward_passes: int = 0
    tokens: int = 0
    by_adapter: dict = field(default_factory=dict)
    # the batched verify passes: how many, their rows, and their tokens as computed (rows x widest row)
    # and as written (each row's own width): what the FLOP estimate of a run counts (bench_runtime.py)
    verify_passes: int = 0
    verify_rows: int = 0
    padded_tokens: int = 0
    real_tokens: int = 0
    verify_seconds: float = 0.0  # this process's CPU time in those passes (the rest of a run is Python)

    def verified(self, rows: int, widest: int, tokens: int, seconds: float) -> None:
        self.verify_passes += 1
        self.verify_rows += rows
        self.padded_tokens += rows * widest
        self.real_tokens += tokens
        self.verify_seconds += seconds

    def add(self, adapter: str, passes: int, tokens: int) -> None:
        self.steps += 1
        self.forward_passes += passes
        self.tokens += tokens
        entry = self.by_adapter.setdefault(adapter, [0, 0, 0])
        entry[0], entry[1], entry[2] = entry[0] + 1, entry[1] + passes, entry[2] + tokens


class Weights:
    """A base model and the adapters attached to it so far; with `adapters` (name -> folder) each of those
    is attached the first time it is asked for. Step models over the same weights share one (`paper_loop`),
    so the base is wrapped by peft once, whichever of them attaches first."""

    def __init__(self, model, adapters: dict | None = None):
        self.model, self.adapters = model, dict(adapters or {})

    def attach(self, adapter: str):
        """The model with `adapter` attached (it is not made the active one)."""
        loaded = getattr(self.model, "peft_config", None) or {}
        if adapter in loaded:
            return self.model
        if adapter not in self.adapters:
            if not self.adapters and not loaded:  # a bare base: there are no adapters to switch
                return self.model
            available = sorted(set(loaded) | set(self.adapters))
            raise ValueError(f"adapter {adapter!r} is not loaded; loaded or available: {', '.join(available)}")
        from caef_bench.models.loading import attach_adapter

        self.model = attach_adapter(self.model, adapter, self.adapters[adapter]).eval()
        return self.model


class HFStepModel:
    # Padded tokens (rows x width) verified in one batched forward pass; the logits are
    # rows x width x vocabulary, so a pretrained tier's large vocabulary gets fewer rows.
    verify_tokens = 1 << 17
    # What one more pass costs, in padded tokens' worth of work, by device: a call's rows are sorted by
    # width and a pass ends where widening it to the next row would pad its rows by more than this
    # (length buckets: a call that carries 5- and 100-digit problems of one adapter, as every cell's
    # problems in the same rounds do, pads the short rows to their own width, not to the longest).
    # A CPU pays for every padded token; an accelerator mostly for the pass itself (its launches).
    pass_cost_tokens = {"cpu": 256, "other": 1 << 14}

    def __init__(self, model, codec, speculative: bool = True, drafter=None, fingerprint: str | None = None,
                 codecs: dict | None = None, adapter_fingerprints: dict | None = None, *,
                 adapters: dict | None = None, tier=None, anonymous_cells: frozenset = frozenset(),
                 anonymous_digits=(), merge_adapters: bool = False):
        self.weights = model if isinstance(model, Weights) else Weights(model, adapters)
        self.codec, self.speculative = codec, speculative
        # each adapter folded into a plain copy of the base (`MergedAdapters`): fewer, larger matrix
        # products per layer; the outputs are the same to float rounding, not bit for bit
        self.merged = MergedAdapters(self) if merge_adapters else None
        self.codecs = codecs or {}  # adapter name -> its own codec, where its position scheme is not the tier's
        self.tier = tier  # models.loading.Tier: where the fingerprints are computed from, when first asked
        self._fingerprint = fingerprint  # names the weights (models.loading.weights_fingerprint)
        self._adapter_fingerprints = adapter_fingerprints  # per adapter (runtime.reuse)
        self.drafter = drafter if drafter is not None else OracleModel(strict=False)
        self.stats = DecodeStats()
        # adapters trained with anonymous tape cells (models.anonymous_cells): the gate is on for them only
        self._cell_gate = None
        self.set_anonymous_cells(anonymous_cells, anonymous_digits)

    @property
    def model(self):
        return self.weights.model

    @property
    def adapter_names(self) -> tuple[str, ...]:
        """Every adapter this model can answer with, attached or not."""
        return tuple(sorted(set(getattr(self.model, "peft_config", None) or ()) | set(self.weights.adapters)))

    @property
    def available_adapters(self) -> frozenset[str] | None:
        """The adapters this model can switch to; None for a bare base, which answers every call itself."""
        names = self.adapter_names
        return frozenset(names) if names else None

    @property
    def fingerprint(self) -> str | None:
        if self._fingerprint is None and self.tier is not None:
            self._fingerprints()
        return self._fingerprint

    @property
    def adapter_fingerprints(self) -> dict:
        if self._adapter_fingerprints is None and self.tier is not None:
            self._fingerprints()
        return self._adapter_fingerprints or {}

    def _fingerprints(self) -> None:
        """Hash the weights only when something records them (`solve` does not)."""
        from caef_bench.models.loading import fingerprints

        self._fingerprint, self._adapter_fingerprints = fingerprints(self.tier)

    def activate(self, adapter: str) -> None:
        """Make `adapter` the one that answers, attaching it on first use (a model without adapters has
        none to switch)."""
        model = self.weights.attach(adapter)
        if hasattr(model, "peft_config") and model.active_adapter != adapter:  # (a switch walks every module)
            model.set_adapter(adapter)
        if self._cell_gate is not None:
            self._cell_gate.on = adapter in self.anonymous_cells
            self._cell_gate.digits = self.anonymous_digits.get(adapter)

    def set_anonymous_cells(self, adapters, digits=()) -> None:
        """Run exactly these adapters with anonymous tape cells from now on, and `digits` (names, or name ->
        "all" or "expressions") with anonymous plain digits as well (the manifests' at loading; a
        diagnosis's counterfactual: lab/diagnosis/executor_attention.py, component_cells.py)."""
        self.anonymous_digits = dict(digits) if isinstance(digits, dict) else {name: "all" for name in digits}
        self.anonymous_cells = frozenset(adapters) | frozenset(self.anonymous_digits)
        if self.anonymous_cells and self._cell_gate is None:
            from caef_bench.models.anonymous_cells import install

            self._cell_gate = install(self.weights.model)
        if self._cell_gate is not None:
            self._cell_gate.on = False  # until the next activate() says
        if getattr(self, "merged", None) is not None:
            self.merged.models.clear()  # each folded copy's gate is set as it is folded: fold them again

    def _limit(self, prompt_ids: list[int]) -> int:
        # A next state is about as long as its input; an aligner (I) answer is longer
        # than its expression (two tokens per digit plus the command): room for both.
        return 3 * len(prompt_ids) + 64

    def room(self, prompt: str, adapter: str) -> int:
        """The most tokens a step on `prompt` may take when nothing else caps it (`_limit`)."""
        return self._limit(self.codec_for(adapter).prompt_ids(prompt))

    def paper_loop(self) -> "HFStepModel":
        """The same weights, adapters and ids decoded the paper's way: one plain greedy decode per step."""
        return HFStepModel(self.weights, self.codec, speculative=False, drafter=self.drafter,
                           fingerprint=self._fingerprint, codecs=self.codecs,
                           adapter_fingerprints=self._adapter_fingerprints, tier=self.tier,
                           anonymous_cells=self.anonymous_cells, anonymous_digits=self.anonymous_digits,
                           merge_adapters=self.merged is not None)

    def codec_for(self, adapter: str):
        """The codec an adapter runs with: the ids it was trained with."""
        return self.codecs.get(adapter, self.codec)

    def generate(self, prompts: list[str], adapter: str, limits: list[int] | None = None,
                 drafts: list[str | None] | None = None) -> list[Completion]:
        """One greedy completion per prompt; `limits` caps each one's tokens (default: room for a next state,
        `_limit`), as one-step checks do, where anything past the expected length is wrong anyway.
        `drafts`: a caller's draft per prompt (None: the drafter's), for prompts the drafter cannot
        answer, such as windows of a state (runtime.windowed). A draft only saves passes: every token
        is still the model's own greedy choice."""
        if self.merged is not None:  # the adapter's folded copy answers: no switch of the peft model
            model = self.merged.model(adapter)
        else:
            self.activate(adapter)
            model = self.model
        codec = self.codec_for(adapter)
        prompt_ids = [codec.prompt_ids(p) for p in prompts]
        limits = limits if limits is not None else [self._limit(ids) for ids in prompt_ids]
        if not self.speculative:
            outputs = []
            for ids, limit in zip(prompt_ids, limits):  # the paper's loop: one decode per step, token by token
                completion = greedy_ids(model, [ids], codec, limit)[0]
                self.stats.add(adapter, len(completion) + 1, len(completion))
                outputs.append(Completion(codec.decode(completion), len(completion)))
            return outputs
        given = drafts if drafts is not None else [None] * len(prompts)
        asked = [i for i, draft in enumerate(given) if draft is None]
        drafts = list(given)
        for i, draft in zip(asked, self.drafter.generate([prompts[i] for i in asked], adapter) if asked else ()):
            drafts[i] = draft
        draft_ids = [codec.completion_ids(draft or prompt.rstrip("\n"))[:-1] for prompt, draft in zip(prompts, drafts)]
        checked = self._verify(model, codec, prompt_ids, draft_ids, limits)
        outputs = []
        for ids, draft, limit, (exact, tokens) in zip(prompt_ids, draft_ids, limits, checked):
            passes = 1
            if not exact:  # finish it one row at a time, from what the batch pass confirmed, realigning on the draft
                tokens, more = speculative_greedy(model, codec, ids, tokens, limit, sources=[draft])
                passes += more
            self.stats.add(adapter, passes, len(tokens))
            outputs.append(Completion(codec.decode(tokens), len(tokens)))
        return outputs

    def _verify(self, model, codec, prompt_ids, draft_ids, limits):
        """verify_drafts over the whole call, its rows sorted by width and cut into passes (`passes`)."""
        widths = [len(p) + min(len(d), limit) + 1 for p, d, limit in zip(prompt_ids, draft_ids, limits)]  # + </s>
        kind = "cpu" if model.device.type == "cpu" else "other"
        budget = max(1, self.verify_tokens * 256 // max(model.config.vocab_size, 256))
        results = [None] * len(prompt_ids)
        for rows in passes(widths, budget, self.pass_cost_tokens[kind]):
            started = time.process_time()
            checked = verify_drafts(model, codec, [prompt_ids[i] for i in rows],
                                    [draft_ids[i] for i in rows], [limits[i] for i in rows])
            self.stats.verified(len(rows), max(widths[i] for i in rows), sum(widths[i] for i in rows),
                                time.process_time() - started)
            for i, result in zip(rows, checked):
                results[i] = result
        return results


def passes(widths: list[int], budget: int, pass_cost: int) -> list[list[int]]:
    """Row indices sorted by width and cut into passes (length buckets): a pass holds at most `budget`
    padded tokens (rows x its widest row), and ends where taking the next row in would pad the rows it
    holds by more than `pass_cost` tokens, what another pass costs."""
    cut, rows, widest = [], [], 0
    for i in sorted(range(len(widths)), key=widths.__getitem__):
        width = widths[i]
        if rows and ((len(rows) + 1) * width > budget or len(rows) * (width - widest) > pass_cost):
            cut.append(rows)
            rows = []
        rows.append(i)
        widest = width  # sorted: the newest row is the widest
    if rows:
        cut.append(rows)
    return cut


class MergedAdapters:
    """Each adapter folded into a plain copy of its step model's base: W + scale * B @ A in every LoRA
    layer, built the first time the adapter answers and kept (the tiny tier's are 14 MB each).

    peft computes a LoRA layer as x W^T + scale * (x A^T) B^T: three products, two of them thin, and
    their sum, in every projection of every layer. The folded copy makes one product of the same
    shape as the base's, which a CPU computes at its matrix rate. The sums are rounded differently,
    so a logit moves by about 1e-4 (the same order as the padding of a batch moves it); greedy
    outputs change only where two tokens' logits are that close (bench_runtime.py counts such
    decisions on a sample; tests/test_batched_cells.py checks records against the unfolded model)."""

    def __init__(self, owner: HFStepModel, dtype=None):
        self.owner, self.models = owner, {}
        self.dtype = dtype  # the folded copies' (e.g. torch.bfloat16 on an accelerator), folded in the base's own

    def model(self, adapter: str):
        if adapter not in self.models:
            self.models[adapter] = self._fold(adapter)
        return self.models[adapter]

    def _fold(self, adapter: str):
        import torch

        peft_model = self.owner.weights.attach(adapter)
        if not hasattr(peft_model, "peft_config"):
            return peft_model  # a bare base: nothing to fold
        base = peft_model.get_base_model()
        from peft.tuners.lora import LoraLayer

        state = {}
        with torch.no_grad():
            for name, module in base.named_modules():
                if isinstance(module, LoraLayer):
                    weight = module.base_layer.weight
                    delta = module.get_delta_weight(adapter) if adapter in module.lora_A else 0
                    # in the base's dtype: peft keeps an adapter in float32 beside a bfloat16 base
                    state[f"{name}.weight"] = (weight + delta).to(weight.dtype).detach().clone()
            for key, value in base.state_dict().items():
                if "lora_" not in key:
                    state.setdefault(key.replace(".base_layer", ""), value.detach().clone())
        with torch.device("meta"):
            plain = type(base)(base.config)
        plain.load_state_dict(state, assign=True, strict=True)
        plain.tie_weights()
        for name, buffer in base.named_buffers():  # rotary frequencies: not in the state dict
            if "lora_" not in name:
                _set_buffer(plain, name.replace(".base_layer", ""), buffer.clone())
        plain.eval()
        if self.dtype is not None:
            plain.to(self.dtype)
        if adapter in self.owner.anonymous_cells:
            from caef_bench.models.anonymous_cells import install

            gate = install(plain)
            gate.on, gate.digits = True, self.owner.anonymous_digits.get(adapter)
        return plain


def _set_buffer(model, dotted: str, value) -> None:
    owner_name, _, leaf = dotted.rpartition(".")
    owner = model.get_submodule(owner_name) if owner_name else model
    owner.register_buffer(leaf, value, persistent=False)


class RoutedModel:
    """Send some adapters to another model: e.g. the machines' aligners around a model's executors."""

    def __init__(self, default, routes: dict):
        self.default, self.routes = default, routes

    def generate(self, prompts: list[str], adapter: str):
        for prefix, model in self.routes.items():
            if adapter.startswith(prefix):
                return model.generate(prompts, adapter)
        return self.default.generate(prompts, adapter)


# Bases up to this many parameters answer with each adapter folded into a copy of their own
# (`MergedAdapters`, 14 MB per adapter on the tiny tier); a larger base (SmolLM2, LLaMA) keeps peft's
# switching, as a copy per adapter would not fit beside it.
MERGE_UP_TO_PARAMETERS = 50_000_000


def load_step_model(tier: str = "tiny", checkpoints: str | None = None, speculative: bool = True,
                    device: str = "cpu", merge_adapters: bool | None = None, ops=None,
                    dtype: str | None = None) -> HFStepModel:
    """A tier's base as a StepModel whose adapters are attached on first use; `checkpoints` is an
    adapter folder (official layout, with base/ inside for the tiny tier) replacing the tier's default.
    merge_adapters: fold each adapter into a copy of the base (`MergedAdapters`); by default for a
    base of at most MERGE_UP_TO_PARAMETERS parameters. `ops`: operators about to be solved, whose
    adapters must all be there (models.limits.check_adapters). `dtype`: a torch dtype name to run the tier
    in instead of its file's (bfloat16 halves a CPU's time where it has bf16 instructions)."""
    from caef_bench.models.codec import codec_for
    from caef_bench.models.limits import check_adapters
    from caef_bench.models.loading import (adapter_folders, adapter_schemes, anonymous_adapters, available_adapters,
                                           load_base, tier_with_checkpoints)

    tier_info = tier_with_checkpoints(tier, checkpoints, dtype)
    if ops:  # before the base loads: an operator the tier cannot run is one line, not a model run
        check_adapters(tier_info.name, ops, available_adapters(tier_info), tier_info.adapters)
    found = adapter_folders(tier_info)  # before the base: a missing adapter folder fails fast
    model, tokenizer = load_base(tier_info, device)
    schemes = adapter_schemes(tier_info.adapters) if tier_info.adapters is not None else {}
    codecs = {name: codec_for(tokenizer, scheme) for name, scheme in schemes.items()
              if scheme != tier_info.position_scheme}
    anonymous, digits = anonymous_adapters(tier_info.adapters) if tier_info.adapters is not None else ((), {})
    if merge_adapters is None:
        merge_adapters = sum(p.numel() for p in model.parameters()) <= MERGE_UP_TO_PARAMETERS
    return HFStepModel(model, codec_for(tokenizer, tier_info.position_scheme), speculative, codecs=codecs,
                       adapters=found, tier=tier_info, anonymous_cells=anonymous, anonymous_digits=digits,
                       merge_adapters=merge_adapters)
