"""The tiny tier: tokenizer round trips, coupled positions, decoding, and training that learns and resumes."""

import json
import os
import re
import signal
from dataclasses import replace

import pytest
import torch

from caef_bench.machines import trace
from caef_bench.models.codec import CaefCodec, codec_for
from caef_bench.models.decoding import greedy_texts
from caef_bench.models.positions import FIELD_STRIDE, position_ids
from caef_bench.models.tiny import TinyShape, build_tiny_base, save_tiny_base
from caef_bench.models.tokenizer import VOCAB, build_hf_tokenizer, decode, encode, tokens
from caef_bench.train.batches import IGNORE, collate
from caef_bench.train.loop import RunOptions, RunPlan, TrainingInterrupted, train
from conftest import caef_format_examples

MICRO = TinyShape(hidden=32, layers=2, heads=2, ffn=64, max_positions=8192)
QUIET = RunOptions(progress=False)


def _example_texts():
    texts = []
    for path in sorted(caef_format_examples().glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            for pair in record.get("seq", []):
                texts.extend(pair)
            texts.extend(record[k] for k in ("expr", "tm", "halt", "text") if k in record)
    return texts


def test_tokenizer_round_trips_every_example_text_in_both_implementations():
    hf = build_hf_tokenizer()
    texts = _example_texts()
    assert len(texts) > 300
    for text in texts:
        ids = encode(text)
        assert decode(ids) == text
        assert hf(text, add_special_tokens=False)["input_ids"] == ids
        assert hf.decode(ids) == text


def test_format_units_are_single_tokens():
    assert tokens(encode("|7[HEAD1]No command to execute. Halt state.LEFT_MASK qH")) == [
        "|7", "[HEAD1]", "No command to execute. Halt state.", "LEFT_MASK", " ", "qH"]
    source, _ = trace("add", 10**99, 1)[50]
    assert len(encode(source)) < len(source) / 1.6  # digit cells are one token, not two characters


def test_characters_outside_the_vocabulary_are_refused():
    with pytest.raises(ValueError, match="outside"):
        encode("45+67=é")


def test_coupled_positions_align_the_output_tape_with_the_input_tape():
    source, target = trace("add", 4531, 1504)[2]
    codec = CaefCodec("coupled")
    ids = codec.prompt_ids(source) + codec.completion_ids(target)
    positions = position_ids(ids, "coupled")
    names = tokens(ids)
    sep = names.index("<sep>")
    # The k-th digit cell of tape 1 has the same position id in the prompt and the completion.
    def tape1_cells(start, end):
        field = [p for n, p in zip(names[start:end], positions[start:end]) if n.startswith("|")]
        return field[:4]
    assert tape1_cells(0, sep) == tape1_cells(sep, len(ids))
    assert positions[sep] == 0 and max(positions) < 40 * FIELD_STRIDE
    assert position_ids(ids, "standard") == list(range(len(ids)))


def _cell_ids(names, positions, start, end):
    """Per field (id // FIELD_STRIDE) of names[start:end]: {id: digit} of its digit cells."""
    fields = {}
    for name, position in zip(names[start:end], positions[start:end]):
        if name.startswith("|"):
            fields.setdefault(position // FIELD_STRIDE, {})[position] = name[1]
    return fields


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "gt", "lt", "eq"])
def test_answer_digits_get_the_ids_of_the_tape_cells_they_copy(op):
    from caef_bench.data.testsets import render_expr, solve
    from caef_bench.machines import run

    codec = CaefCodec("coupled-expr")
    a, b = {"mul": (987654321, 12), "div": (9876543 * 12 + 5, 9876543)}.get(op, (987654321, 123456789))
    machine_run, expr = run(op, a, b), render_expr(op, a, b)
    # Aligner (I): expression -> start state. Prompts keep their coupled ids.
    ids = codec.prompt_ids(expr) + codec.completion_ids(machine_run.start_text())
    assert position_ids(ids, "coupled-expr") == position_ids(ids, "coupled")
    # Aligner (O): halt state -> expression with its result. Operands and result digits likewise.
    answer = expr + solve(op, a, b)
    ids = codec.prompt_ids(machine_run.text(-1)) + codec.completion_ids(answer)
    names, positions = tokens(ids), position_ids(ids, "coupled-expr")
    sep = names.index("<sep>")
    tapes = list(_cell_ids(names, positions, 0, sep).values())
    numbers = [{}]
    for name, position in zip(names[sep + 1:-1], positions[sep + 1:-1]):
        if name.isdigit():
            numbers[-1][position] = name
        elif numbers[-1]:
            numbers.append({})
    numbers = [n for n in numbers if n]
    # a, b and the result; a comparison's halt state holds a and b alone, its answer is a word
    assert numbers == (tapes if op in ("gt", "lt", "eq") else tapes[:2] + tapes[-1:])
    comparison = op in ("gt", "lt", "eq")
    if comparison:  # '=' has the id of the halt state's word, which the next token copies; the word one more
        word = positions[names.index(names[-2])]
        assert names[-3] == "=" and positions[-3] == word and positions[-2] == word + 1
    # An operator or '=' has the id just past the top cell of the number after it: one above its first
    # digit (a comparison's further non-digit tokens one more each: `==`'s second '=' is two above).
    for i in range(sep + 2, len(ids) - 1):
        if names[i].isdigit() and not names[i - 1].isdigit():
            later = 1 if comparison and names[i - 2:i] == ["=", "="] else 0
            assert positions[i - 1] == positions[i] + 1 + later
    if op == "eq":
        assert positions[names.index("=", sep)] == positions[names.index("=", sep) + 1] - 1  # no shared id
    # <sep> writes a's top digit: a comparison's gets the id just past that cell, every other prompt's 0
    assert positions[sep] == (positions[sep + 1] + 1 if comparison else 0)
    # Ids of a completion depend only on the tokens before them (what decoding needs).
    for k in range(sep + 1, len(ids)):
        assert position_ids(ids[:k], "coupled-expr") == positions[:k]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "gt", "lt", "eq"])
@pytest.mark.parametrize("a,b", [(987654321, 12), (5, 3), (1000000, 999)])
def test_expression_digits_get_the_ids_of_the_queries_that_write_their_cells(op, a, b):
    from caef_bench.data.testsets import render_expr
    from caef_bench.machines import run

    if op == "mul":
        b = b % 10 or 7
    if op == "div":  # a short quotient: the machine runs as many steps as it
        a, b = 3 * a + 1, a
    codec = CaefCodec("coupled-hints")
    ids = codec.prompt_ids(render_expr(op, a, b)) + codec.completion_ids(run(op, a, b).start_text())
    names, positions = tokens(ids), position_ids(ids, "coupled-hints")
    sep = names.index("<sep>")
    digits = [i for i in range(sep) if names[i].isdigit()]
    length_a = len(str(a))
    # prompt digits from each operand's lowest, in the order the start state writes their cells
    keys = [positions[i] for i in digits[:length_a][::-1] + digits[length_a:][::-1]]
    cells = [i for i in range(sep + 1, len(ids)) if names[i].startswith("|")][: len(digits)]
    written = [names[i][1] for i in cells]
    assert written == list(str(a)[::-1] + str(b)[::-1])
    assert keys == [positions[i - 1] for i in cells]  # zero offset from each cell's query to its digit
    assert len(set(keys)) == len(keys)
    # no other completion token (before the operands' cells end) has the id of a digit: none is misled
    others = [positions[i] for i in range(sep + 1, cells[-1]) if i + 1 not in cells]
    assert not set(others) & set(keys)
    # the completion's ids depend only on the tokens before them (what decoding needs)
    for k in range(sep + 1, len(ids)):
        assert position_ids(ids[:k], "coupled-hints") == positions[:k]


def test_only_expression_prompts_get_hints():
    codec = CaefCodec("coupled")
    texts = _example_texts()
    for prompt, completion in zip(texts, texts[1:]):
        ids = codec.prompt_ids(prompt) + codec.completion_ids(completion)
        hinted = position_ids(ids, "coupled-hints") != position_ids(ids, "coupled-expr")
        assert hinted == bool(re.fullmatch(r"[0-9]+(\+|-|\*|//|>|<|==)[0-9]+=", prompt))
    for prompt in ("45+67", "45+=", "4a+6=", "Please: 45+67="):  # not an expression: no hints
        ids = codec.prompt_ids(prompt)
        assert position_ids(ids, "coupled-hints") == position_ids(ids, "coupled-expr")


def test_machine_states_get_the_same_ids_under_both_coupled_schemes():
    codec = CaefCodec("coupled")
    texts = _example_texts()
    for prompt, completion in zip(texts, texts[1:]):
        if completion[:1].isdigit():
            continue  # aligner (O)'s answer: the schemes differ there on purpose
        ids = codec.prompt_ids(prompt) + codec.completion_ids(completion)
        assert position_ids(ids, "coupled") == position_ids(ids, "coupled-expr")


@pytest.mark.parametrize("scheme", ["coupled", "coupled-expr", "coupled-hints"])
def test_cached_batched_greedy_equals_full_recomputation(scheme):
    torch.manual_seed(0)
    model = build_tiny_base(MICRO, seed=1).eval()
    codec = CaefCodec(scheme)
    prompts = [trace("add", 45, 67)[1][0], trace("gt", 7, 70)[0][0], "45+67=", trace("add", 45, 67)[-1][1]]
    cached = greedy_texts(model, codec, prompts, 12, batch_size=3)
    for prompt, text in zip(prompts, cached):
        ids = codec.prompt_ids(prompt)
        out = []
        for _ in range(12):
            full = ids + out
            logits = model(input_ids=torch.tensor([full]), position_ids=torch.tensor([position_ids(full, scheme)])).logits
            token = int(logits[0, -1].argmax())
            if token == codec.eos_id:
                break
            out.append(token)
        assert text == codec.decode(out)


def test_loss_is_on_the_completion_only():
    codec = CaefCodec("coupled")
    batch = collate([{"prompt": "45+67=", "completion": "112"}], codec)
    labels = batch["labels"][0].tolist()
    assert labels.count(IGNORE) == len(codec.prompt_ids("45+67="))
    assert [t for t in labels if t != IGNORE] == codec.completion_ids("112")


def _batches(seed=0):
    codec = CaefCodec("coupled")
    samples = [{"prompt": s, "completion": t} for s, t in trace("add", 45, 67)]

    def make(step):
        return collate(samples, codec)

    return make


def test_a_few_training_steps_lower_the_loss(tmp_path):
    model = build_tiny_base(MICRO, seed=0)
    make = _batches()
    before = model(**make(0)).loss.item()
    result = train(model, make, tmp_path, RunPlan(steps=30, lr=3e-3), replace(QUIET, log_every=5))
    after = model(**make(0)).loss.item()
    assert after < before * 0.7
    assert result.steps == 30 and (tmp_path / "loss.png").exists()
    assert len((tmp_path / "loss.jsonl").read_text().splitlines()) == 6


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path):
    make = _batches()
    straight = build_tiny_base(MICRO, seed=0)
    train(straight, make, tmp_path / "straight", RunPlan(steps=12, lr=3e-3), QUIET)
    resumed = build_tiny_base(MICRO, seed=0)

    def stopped_after_7_steps(step):  # SIGTERM while step 7's batch is built: it trains, then stops
        if step == 6:
            os.kill(os.getpid(), signal.SIGTERM)
        return make(step)
    with pytest.raises(TrainingInterrupted):
        train(resumed, stopped_after_7_steps, tmp_path / "resumed", RunPlan(steps=12, lr=3e-3), QUIET)
    again = build_tiny_base(MICRO, seed=0)  # a new process: weights come back from the checkpoint
    result = train(again, make, tmp_path / "resumed", RunPlan(steps=12, lr=3e-3), QUIET)
    assert result.steps == 12
    for (name, a), (_, b) in zip(straight.named_parameters(), again.named_parameters()):
        assert torch.allclose(a, b, atol=1e-5), name


def test_saved_tiny_base_reloads_with_its_tokenizer_and_scheme(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = build_tiny_base(MICRO, seed=0).eval()
    save_tiny_base(model, tmp_path, "coupled")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, torch_dtype=torch.float32).eval()
    codec = codec_for(AutoTokenizer.from_pretrained(tmp_path), "coupled")
    assert isinstance(codec, CaefCodec) and len(VOCAB) == loaded.config.vocab_size
    batch = collate([{"prompt": "1+2=", "completion": "3"}], codec)
    # bf16 storage: the reloaded model agrees with the bf16-rounded original.
    reference = build_tiny_base(MICRO, seed=0).to(torch.bfloat16).to(torch.float32).eval()
    assert torch.allclose(loaded(**batch).logits, reference(**batch).logits, atol=1e-4)


def test_background_batch_workers_give_the_same_run(tmp_path):
    codec = CaefCodec("coupled")

    def make(step):  # a different batch at every step, so the order matters
        return collate([{"prompt": s, "completion": t} for s, t in trace("add", 10 * step + 7, step)], codec)

    alone = build_tiny_base(MICRO, seed=0)
    train(alone, make, tmp_path / "alone", RunPlan(steps=6, lr=3e-3), QUIET)
    helped = build_tiny_base(MICRO, seed=0)
    train(helped, make, tmp_path / "helped", RunPlan(steps=6, lr=3e-3), replace(QUIET, workers=2))
    for (name, a), (_, b) in zip(alone.named_parameters(), helped.named_parameters()):
        assert torch.equal(a, b), name


def test_curriculum_grows_the_operand_lengths():
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "add")], max_len=100, seed=0, curriculum_steps=1000)
    assert (source.longest(0), source.longest(500), source.longest(1000)) == (8, 54, 100)
    early = source.batch(0, 50)
    assert max(max(len(s["meta"]["a"]), len(s["meta"]["b"])) for s in early) <= 8
