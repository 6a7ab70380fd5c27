"""One training run: AdamW on the trainable parameters, resumable, with a loss curve.

The run directory holds `checkpoint/` (trainable weights, optimizer, step and
random states), `loss.jsonl` (one line per logged step) and `loss.png`. A run
that finds a checkpoint continues from it; batches are a function of the step,
so the continued run is the run that was interrupted. Each invocation's steps,
seconds and device stay on record (a long run may span invocations on different
machines). A stop signal (SIGTERM from a scheduler, Ctrl-C, SIGHUP)
ends the run after its current step with a checkpoint, so it loses no steps.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import platform
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from caef_bench.train.batches import IGNORE


@dataclass
class RunResult:
    steps: int
    tokens: int
    seconds: float
    final_loss: float | None
    stopped_early: bool  # the time budget ran out before `steps`
    precision: str = "fp32"  # what the run trained in (resolve_precision)
    invocations: list = field(default_factory=list)  # [{"steps": [from, to], "seconds", "device"}], oldest first


@dataclass(frozen=True)
class RunPlan:
    """What a run is: its schedule and its data. A checkpoint is continued only under the same plan.

    data says what make_batch draws from (fingerprint, seed, batch size, ...); the learning
    rate warms up linearly over `warmup` steps, then stays constant or follows a cosine down
    to min_lr_ratio of its peak (lr_factor); clip caps the gradient norm.
    """

    steps: int
    lr: float
    warmup: int = 0
    decay: str = "constant"
    min_lr_ratio: float = 0.05
    weight_decay: float = 0.0
    clip: float = 1.0
    data: dict | None = None

    def identity(self) -> dict:
        """The plan as the checkpoint's JSON holds it (tuples become lists), so that equal plans compare equal."""
        return json.loads(json.dumps({"steps": self.steps, "lr": self.lr, "warmup": self.warmup, "decay": self.decay,
                                      "min_lr_ratio": self.min_lr_ratio, "weight_decay": self.weight_decay,
                                      "clip": self.clip, **(self.data or {})}))


@dataclass(frozen=True)
class RunOptions:
    """How one invocation carries out a plan: none of it is part of the run, so any of it may change
    when the run is continued (precision and batch workers move the arithmetic, not the recipe).

    time_budget_s counts this invocation's seconds alone, so the same command with the same
    budget goes on; workers > 0 builds batches in that many background processes (on an
    accelerator the machines' Python would otherwise starve it); precision: resolve_precision.
    stop_at ends this invocation after that step, with a checkpoint, as if its plan went on: a
    later call with the same plan continues it (a learning curve takes its snapshots there).
    """

    time_budget_s: float | None = None
    stop_at: int | None = None
    title: str = ""  # the progress bar's and the loss plot's
    progress: bool = True
    workers: int = 0
    precision: str = "auto"
    log_every: int = 10  # steps per line of loss.jsonl
    checkpoint_every: int = 200
    # A session can end with a kill no handler sees (SIGKILL): on a CPU a step takes ~20 s, so a
    # checkpoint every 200 steps alone could lose an hour; one every 10 minutes of this invocation too.
    checkpoint_seconds: float = 600.0


STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")


class TrainingInterrupted(Exception):
    """A stop signal ended a run after a step; its checkpoint is saved and the same command goes on."""

    def __init__(self, signal_name: str, step: int, steps: int, title: str):
        self.signal_name, self.step, self.steps, self.title = signal_name, step, steps, title
        super().__init__(f"{signal_name} stopped {title or 'training'} at step {step} of {steps}, "
                         "after saving its checkpoint")

    @property
    def exit_code(self) -> int:  # what a shell reports for a process the signal ended
        return 128 + signal.Signals[self.signal_name].value


@contextlib.contextmanager
def _stop_requests():
    """A list that gets the name of the first stop signal to arrive while the block runs.

    A CPU step takes seconds and a checkpoint comes every 200 steps: dying at once would lose up
    to that many. A second signal does what it did before
    (Ctrl-C twice interrupts at once). A signal already ignored stays so (nohup's SIGHUP), and
    outside the main thread, where Python cannot install handlers, nothing changes.
    """
    requested: list[str] = []
    previous = {}

    def request_stop(signum, _frame):
        requested.append(signal.Signals(signum).name)
        signal.signal(signum, previous[signum])

    if threading.current_thread() is threading.main_thread():
        for name in STOP_SIGNALS:
            number = getattr(signal, name, None)  # no SIGHUP on Windows
            current = None if number is None else signal.getsignal(number)
            if current is not None and current is not signal.SIG_IGN:  # None: set outside Python
                previous[number] = signal.signal(number, request_stop)
    try:
        yield requested
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _ignore_stop_signals(_worker_id: int) -> None:
    """Batch workers leave stop signals to the training process (Ctrl-C reaches the whole
    process group), which finishes its step and then shuts them down."""
    for name in STOP_SIGNALS:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)


def _batches_from(make_batch: Callable[[int], dict], start: int, stop: int, workers: int):
    """(step, batch) for step in start..stop-1, built by `workers` processes ahead of training when > 0.

    Worker k builds steps start+k, start+k+workers, …; the loader takes them in
    turn, so the order (and a resumed run) is the same as with no workers.
    """
    if workers <= 0:
        return ((step, make_batch(step)) for step in range(start, stop))
    import torch

    class Steps(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            for step in range(start + info.id, stop, info.num_workers):
                yield step, make_batch(step)

    return iter(torch.utils.data.DataLoader(Steps(), batch_size=None, num_workers=workers, prefetch_factor=4,
                                            worker_init_fn=_ignore_stop_signals))


def lr_factor(step: int, steps: int, warmup: int, decay: str, min_ratio: float) -> float:
    """The learning rate at `step` as a fraction of the peak: linear warm-up, then constant or cosine.

    Cosine ends at min_ratio of the peak: the last, small steps are what turn a
    99.9%-per-token model into one that copies a 100-digit tape exactly.
    """
    if warmup and step < warmup:
        return (step + 1) / warmup
    if decay == "constant":
        return 1.0
    if decay != "cosine":
        raise ValueError(f"unknown lr decay {decay!r}; expected constant or cosine")
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


PRECISIONS = ("auto", "fp32", "bf16")


def native_cpu_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AMX tiles or AVX512-BF16), where bf16
    autocast trains faster than fp32; elsewhere it is emulated and slower."""
    import torch

    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


CPU_FAST_MIN_HIDDEN = 256


def resolve_precision(device_type: str, precision: str = "auto", hidden_size: int = 0) -> str:
    """fp32 or bf16 (autocast) for a run on `device_type`. auto: bf16 on an accelerator (the
    paper trains in bf16); on a CPU with native bf16, bf16 for models of hidden size 256 or
    more, whose products are large enough to pay for the casts (docs/training.md has the
    measurements); else fp32. The weights and optimizer stay fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    if device_type == "cuda":
        return "bf16"
    wide = hidden_size >= CPU_FAST_MIN_HIDDEN
    return "bf16" if device_type == "cpu" and wide and native_cpu_bf16() else "fp32"


def _autocast(device_type: str, precision: str):
    import torch

    if precision == "bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _completion_tokens(batch: dict) -> int:
    """The tokens a causal LM's loss averages over: labels after the shift, not ignored."""
    return int((batch["labels"][:, 1:] != IGNORE).sum())


# Causal LMs whose forward is `lm_head(decoder(...).last_hidden_state)` and whose loss is the mean
# cross-entropy of the next token where labels are not IGNORE: completion_loss computes the same
# loss with the head applied only where it is read.
PLAIN_HEADS = ("LlamaForCausalLM",)


def completion_loss(model, batch: dict):
    """The batch's loss, mean cross-entropy over its completion tokens, as `model(**batch).loss`
    computes it, but with the output layer applied only at the positions that loss reads.

    A pretrained tier's output layer is most of a step (SmolLM2: 49,152 x 576, larger than all its
    LoRA-wrapped layers' products on a ~150-token sample), and its logits at the prompt's positions
    are computed only to be ignored. The decoder's hidden states are taken at the positions whose
    next token is a label (each row of a product does not depend on the others, so those logits are
    the full pass's), then the head and the loss as the model's own (logits in fp32, mean over the
    labels). Other architectures (a head with scaling or soft-capping) keep the model's own loss."""
    import torch

    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    if type(causal_lm).__name__ not in PLAIN_HEADS:
        return model(**batch, use_cache=False).loss
    inputs = {name: tensor for name, tensor in batch.items() if name != "labels"}
    hidden = causal_lm.model(**inputs, use_cache=False).last_hidden_state
    targets = batch["labels"][:, 1:]  # position t is scored on token t + 1
    read = targets != IGNORE
    logits = causal_lm.lm_head(hidden[:, :-1][read]).float()
    return torch.nn.functional.cross_entropy(logits, targets[read])


def _trainable(model) -> dict:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def _save_checkpoint(folder: Path, model, optimizer, state: dict) -> None:
    import torch
    from safetensors.torch import save_file

    tmp = folder.with_name(folder.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in _trainable(model).items()}, str(tmp / "trainable.safetensors"))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / "state.json").write_text(json.dumps(state))
    # Replace the old checkpoint only once the new one is complete: a kill mid-save loses nothing.
    if folder.exists():
        old = folder.with_name(folder.name + ".old")
        folder.rename(old)
        tmp.rename(folder)
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    else:
        tmp.rename(folder)


def describe_device(device) -> str:
    """The device a run trained on, as manifests record it: a CPU's model, threads and the
    process's C allocator each change its speed (see native_cpu_bf16 and allocator.py)."""
    import torch

    from .allocator import active_allocator

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type} ({cpu_model()}, {torch.get_num_threads()} threads, {active_allocator()} allocator)"


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The CPU's model name as Linux reports it ("AMD EPYC"), else what `platform` knows ("x86_64")."""
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load_checkpoint(folder: Path, model, optimizer) -> None:
    """The trainable weights and the optimizer's state into `model` and `optimizer`."""
    import torch
    from safetensors.torch import load_file

    weights = load_file(str(folder / "trainable.safetensors"))
    params = _trainable(model)
    with torch.no_grad():
        for name, value in weights.items():
            params[name].copy_(value)
    # read onto the CPU: a run checkpointed on a GPU goes on on a CPU (load_state_dict puts each state
    # beside its parameter, wherever the model is now)
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True, map_location="cpu"))


def return_freed_memory() -> bool:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim); False where there is
    no glibc (macOS, musl). Micro-batches of every width fragment the heap, and glibc keeps what
    is freed in the middle of it, so a long run's resident memory grows by gigabytes
    (docs/training.md)."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True


def _check_same_run(saved: dict | None, asked: dict, run_dir: Path) -> None:
    """Refuse to continue a checkpoint under another schedule or on other data: the result would
    be neither run. (A checkpoint from before runs were recorded cannot be checked.)"""
    if saved is None or saved == asked:
        return
    differ = ", ".join(f"{key} {saved.get(key)!r} -> {asked.get(key)!r}"
                       for key in sorted(set(saved) | set(asked)) if saved.get(key) != asked.get(key))
    raise ValueError(f"{run_dir} holds the checkpoint of another run ({differ}): give the command it was "
                     "started with, or another --out (--base-init and --adapter-init start a further round)")


def _forget_logged_steps_after(log_path: Path, step: int) -> None:
    """Drop the loss lines a killed run wrote past its last checkpoint: those steps train again,
    and the curve should have each step once."""
    if not log_path.exists():
        return
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    kept = [line for line in lines if json.loads(line)["step"] <= step]
    if len(kept) < len(lines):
        log_path.write_text("".join(line + "\n" for line in kept))


def plot_losses(log_path: Path, png_path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["step"] for r in rows], [r["loss"] for r in rows])
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (completion tokens)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)


def train(model, make_batch: Callable[[int], dict], run_dir: str | Path, plan: RunPlan,
          options: RunOptions = RunOptions()) -> RunResult:
    """Train `model`'s parameters that require grad on batches make_batch(step) for plan.steps steps.

    make_batch returns a batch of CPU tensors or a list of micro-batches (collate_micro): their
    gradients are accumulated, each loss weighted by its share of the step's completion tokens,
    so one optimizer step sees the mean over the whole step as with one batch. Tensors go to
    the model's device here. The plan is saved in the checkpoint, and a checkpoint of another
    plan is refused.
    """
    import torch
    from tqdm import tqdm

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint, log_path = run_dir / "checkpoint", run_dir / "loss.jsonl"
    params = list(_trainable(model).values())
    steps = plan.steps
    optimizer = torch.optim.AdamW(params, lr=plan.lr, weight_decay=plan.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, steps, plan.warmup, plan.decay, plan.min_lr_ratio))
    identity = plan.identity()  # what makes a resumed run the run that was interrupted
    state = {"step": 0, "tokens": 0, "seconds": 0.0, "loss": None}
    if (checkpoint / "state.json").exists():
        state = json.loads((checkpoint / "state.json").read_text())
        _check_same_run(state.get("run"), identity, run_dir)
        _load_checkpoint(checkpoint, model, optimizer)
        schedule.last_epoch = state["step"] - 1
        _forget_logged_steps_after(log_path, state["step"])
    state["run"] = identity
    model.train()
    device = params[0].device
    # A checkpoint saved before invocations were recorded: its steps, device unknown.
    earlier = state.get("invocations", [{"steps": [0, state["step"]], "seconds": round(state["seconds"], 1),
                                         "device": None}] if state["step"] else [])
    first_step, where = state["step"], describe_device(device)
    hidden_size = getattr(getattr(model, "config", None), "hidden_size", 0)
    precision = resolve_precision(device.type, options.precision, hidden_size)
    # `started` carries the seconds of earlier invocations (the run's wall time); the time budget
    # counts this invocation's alone, so the same command with the same budget goes on.
    invoked = time.perf_counter()
    started, window = invoked - state["seconds"], []
    saved = invoked  # when this invocation last saved (or began)

    def note_time():  # the run's seconds, and this invocation's steps and seconds (if it trained any)
        now = time.perf_counter()
        state["seconds"] = now - started
        this = [{"steps": [first_step, state["step"]], "seconds": round(now - invoked, 1),
                 "device": where}] if state["step"] > first_step else []
        state["invocations"] = earlier + this

    bar = tqdm(total=steps, initial=state["step"], desc=options.title or "train", unit="step",
               disable=not options.progress)
    stopped_early = False
    with _stop_requests() as stop_requested:
        last = steps if options.stop_at is None else min(steps, options.stop_at)
        for _, batch in _batches_from(make_batch, state["step"], last, options.workers):
            if options.time_budget_s is not None and time.perf_counter() - invoked > options.time_budget_s:
                stopped_early = True
                break
            parts = batch if isinstance(batch, list) else [batch]
            counts = [_completion_tokens(part) for part in parts]  # counted on the CPU copies
            tokens, total = sum(int(part["attention_mask"].sum()) for part in parts), sum(counts)
            loss = 0.0
            for part, count in zip(parts, counts):
                part = {name: tensor.to(device, non_blocking=True) for name, tensor in part.items()}
                with _autocast(device.type, precision):
                    # (use_cache=False inside: else every layer copies its keys and values into a
                    # generation cache that training never reads, and autograd runs through the copy)
                    share = completion_loss(model, part) * (count / total)
                share.backward()
                loss = loss + share.detach()
            torch.nn.utils.clip_grad_norm_(params, plan.clip)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            state["step"] += 1
            state["tokens"] += tokens
            window.append(loss.detach())  # no .item() per step: that waits for the accelerator every step
            if state["step"] % options.log_every == 0 or state["step"] == last:
                state["loss"] = torch.stack(window).float().mean().item()
                state["seconds"] = time.perf_counter() - started
                with log_path.open("a") as log:
                    log.write(json.dumps({"step": state["step"], "loss": state["loss"], "tokens": state["tokens"],
                                          "seconds": round(state["seconds"], 1)}) + "\n")
                bar.set_postfix(loss=f"{state['loss']:.4f}")
                window = []
                return_freed_memory()  # every log step, not only at checkpoints: see return_freed_memory
            if (state["step"] % options.checkpoint_every == 0
                    or time.perf_counter() - saved > options.checkpoint_seconds):
                note_time()
                _save_checkpoint(checkpoint, model, optimizer, state)
                saved = time.perf_counter()
                return_freed_memory()  # a run of days would otherwise grow by gigabytes
            bar.update(1)
            if stop_requested:
                break
    bar.close()
    note_time()
    _save_checkpoint(checkpoint, model, optimizer, state)
    if stop_requested:
        raise TrainingInterrupted(stop_requested[0], state["step"], steps, options.title)
    if log_path.exists():
        plot_losses(log_path, run_dir / "loss.png", options.title)
    model.eval()
    return RunResult(state["step"], state["tokens"], state["seconds"], state["loss"], stopped_early, precision,
                     state["invocations"])
