"""Scheme coupled-words (models.positions): coupled-hints plus a place of its own for every token of a field
from its first letter, `_` or `[` token on, so names the tokenizer spells a character a token (LONG_MUL, DIGIT_MUL,
LONG_DIV, [REM], [NEG]) get distinct ids. Every text without such a token (every state of the paper's
machines, every expression) keeps coupled-hints' ids exactly."""

import copy

import pytest

from caef_bench.machines import align_output, run
from caef_bench.machines.ops import ALIGNED_OPS, EXECUTOR_OPS, lookup
from caef_bench.models.codec import CaefCodec
from caef_bench.models.positions import SCHEMES, WordCounter, make_counter, position_ids, split_scheme
from caef_bench.models.tokenizer import SEP_ID, encode, tokens

OPERANDS = {"add": [(4567, 891), (99999, 1), (0, 0), (10**30 - 1, 10**29 + 7)],
            "sub": [(9001, 998), (1000, 1), (55, 55), (10**25, 3)],
            "mul": [(946, 7), (12, 1), (0, 5), (10**12 + 3, 3)],
            "div": [(100, 7), (5, 9), (0, 3), (10**15, 10**14)],
            "gt": [(123456, 123465), (7, 7), (10, 9)], "lt": [(123456, 123465), (7, 7), (10**20, 10**20 - 1)],
            "eq": [(77, 77), (77, 78), (0, 0)], "reflection": [(99999, 1234), (999, 0)],
            "left_mask": [(1000,), (12300,), (7,)]}


def _ids(prompt: str, completion: str) -> list[int]:
    codec = CaefCodec("coupled-hints")
    return codec.prompt_ids(prompt) + codec.completion_ids(completion)


def _paper_pairs():
    """(prompt, completion) of every transition of the paper's machines on a few operands (composers' callees
    included), and both aligners' conversions of the arithmetic and comparison operators."""
    assert set(OPERANDS) == set(EXECUTOR_OPS)
    for op, problems in OPERANDS.items():
        for operands in problems:
            machine_run = run(op, *operands)
            yield from machine_run.transitions()
            for _, callee in getattr(machine_run, "calls", lambda: [])():
                yield from callee.transitions()
            if op in ALIGNED_OPS:
                a, b = operands
                yield f"{a}{lookup(op).symbol}{b}=", machine_run.start_text()
                halt = machine_run.text(-1)
                yield halt, align_output(halt)


def test_the_scheme_is_registered_and_takes_a_stride():
    assert "coupled-words" in SCHEMES
    assert split_scheme("coupled-words") == ("coupled-words", 128)
    assert split_scheme("coupled-words/1024") == ("coupled-words", 1024)
    assert isinstance(make_counter("coupled-words/1024"), WordCounter)


@pytest.mark.parametrize("stride", ["", "/256"])
def test_texts_without_spelled_words_keep_coupled_hints_ids(stride):
    pairs = list(_paper_pairs())
    assert len(pairs) > 500
    for prompt, completion in pairs:
        if "*" in prompt or "//" in prompt:  # aligner (I)'s hints follow the long route's start states there
            continue
        ids = _ids(prompt, completion)
        assert position_ids(ids, f"coupled-words{stride}") == position_ids(ids, f"coupled-hints{stride}"), prompt


@pytest.mark.parametrize("op, a, b", [("long_div", 94612, 37), ("long_div", 7, 7), ("long_mul", 946, 15),
                                      ("long_mul", 123456789, 98)])
def test_aligner_inputs_hints_follow_the_long_routes_start_state(op, a, b):
    """Under coupled-words (the long route's adapters) each digit of `a//b=` or `a*b=` gets the id of the token
    that writes its cell in LONG_DIV's or LONG_MUL's start state, as coupled-hints gives them DIV's and MUL's."""
    machine_run = run(op, a, b)
    prompt, completion = f"{a}{lookup(op).symbol}{b}=", machine_run.start_text()
    codec = CaefCodec("coupled-words")
    prompt_ids, completion_ids = codec.prompt_ids(prompt), codec.completion_ids(completion)
    positions = position_ids(prompt_ids + completion_ids, "coupled-words")
    prompt_positions, completion_positions = positions[:len(prompt_ids)], positions[len(prompt_ids):]
    names = tokens(completion_ids)
    queries = [completion_positions[k - 1] for k, name in enumerate(names) if name.startswith("|")]
    digits = [prompt_positions[k] for k, name in enumerate(tokens(prompt_ids)) if name.isdigit()]
    sa, sb = str(a), str(b)
    # the cells are written lowest digit first: a's, then b's; the prompt reads each number top digit first
    assert digits == queries[:len(sa)][::-1] + queries[len(sa):len(sa) + len(sb)][::-1]


def _field_ids(text: str, scheme: str = "coupled-words") -> list[list[tuple[str, int]]]:
    """The (token, id) pairs of each field of a completion."""
    ids = [SEP_ID, *encode(text)]
    fields, field = [], []
    for name, position in zip(tokens(ids)[1:], position_ids(ids, scheme)[1:]):
        field.append((name, position))
        if name in (" ", "\n"):
            fields.append(field)
            field = []
    return fields + [field]


@pytest.mark.parametrize("op,a,b", [("long_mul", 946, 15), ("long_div", 22, 5)])
def test_long_names_and_markers_get_distinct_ids_and_their_cells_a_fixed_offset(op, a, b):
    for text in (t for pair in run(op, a, b).transitions() for t in pair):
        for field in _field_ids(text):
            word = "".join(name for name, _ in field).strip()
            first = next((k for k, (name, _) in enumerate(field) if len(name) == 1 and (name.isalpha() or name == "[")),
                         None)
            if first is not None:  # a spelled-out word: from its first letter on, no two tokens share an id
                spelled = [position for name, position in field[first:]]
                assert len(set(spelled)) == len(spelled), (word, field)
            cells = [position for name, position in field if name.startswith("|")]
            assert cells == list(range(cells[0], cells[0] + len(cells))) if cells else True, field
    ids = [SEP_ID, *encode("LONG_MUL, q1, [OUTPUT]|4\nCMD [CALL] DIGIT_MUL, q2")]
    named = list(zip(tokens(ids), position_ids(ids, "coupled-words")))[1:]
    assert [p for _, p in named[:8]] == [0, 1, 2, 3, 4, 5, 6, 7]  # L O N G _ MUL , and the space
    assert [p for n, p in named if n in "DIGT_" or n == "MUL"][-7:] == list(range(640, 647))
    rem = _field_ids(" [REM]|2|0 [NEG]|5|9")
    assert [p for _, p in rem[1]] == [128, 129, 130, 131, 132, 133, 134, 135]  # [ R E M ] |2 |0 and the space
    assert [p for _, p in rem[2]] == [256, 257, 258, 259, 260, 261, 262]


def test_under_coupled_hints_the_same_names_share_one_id():
    """What the scheme is for: under coupled-hints every letter of a name has the id of its field."""
    field = _field_ids("DIGIT_MUL, q0,", "coupled-hints")[0]
    assert {p for _, p in field} == {0}


def test_a_copied_counter_goes_on_independently():
    ids = [SEP_ID, *encode("LONG_DIV, q3,  |2[HEAD1]|2 [HEAD2]|5 [REM]|2|0")]
    counter = make_counter("coupled-words")
    first = [counter.next(i) for i in ids[:20]]
    twin = copy.copy(counter)
    rest = [counter.next(i) for i in ids[20:]]
    assert [twin.next(i) for i in ids[20:]] == rest
    assert first + rest == position_ids(ids, "coupled-words")


@pytest.mark.parametrize("a, b", [(1234, 5067), (946, 15), (99, 909), (7, 10**12 + 5)])
def test_long_muls_reads_under_head2_have_the_read_cells_id(a, b):
    """LONG_MUL's completion reads b's digit just before HEAD2 (a cell that moves every step) twice: its
    command's first token and DIGIT_MUL's start. Those two queries get that cell's id; nothing else moves."""
    hinted_steps = digit_mul_starts = 0
    for prompt, completion in run("long_mul", a, b).transitions():
        codec = CaefCodec("coupled-words")
        prompt_ids, completion_ids = codec.prompt_ids(prompt), codec.completion_ids(completion)
        positions = position_ids(prompt_ids + completion_ids, "coupled-words")
        assert positions[:len(prompt_ids)] == position_ids(prompt_ids, "coupled-words")  # prompts keep theirs
        fields = _field_ids(completion)  # (the completion's ids restart at <sep>: the same as after the prompt)
        assert [p for field in fields for _, p in field] == positions[len(prompt_ids):][:len(encode(completion))]
        lines = [[]]  # the fields (each ending with its separator), line by line
        for field in fields:
            lines[-1].append(field)
            if field[-1][0] == "\n":
                lines.append([])
        b_field = lines[0][3]  # LONG_MUL, | q | a | b | the product
        at = [k for k, (name, _) in enumerate(b_field) if name == "[HEAD2]"][0]
        read = b_field[at - 1] if at > 0 else None  # (the digit's token, its id)
        command = [token for field in lines[1] for token in field] if len(lines) > 1 else []
        if read is None or not command or command[0][0] != "CMD":
            assert all(p != (read or (0, -1))[1] for name, p in command if name == " ")
            continue
        hinted_steps += 1
        assert command[1] == (" ", read[1])  # the query after CMD: is the digit 0?
        assert [p for name, p in command[2:] if name == " "] != [] and read[1] not in [p for _, p in command[2:]]
        if len(lines) > 2 and "".join(name for name, _ in lines[2][0]) == "DIGIT_MUL, ":
            digit_mul_starts += 1
            start = [token for field in lines[2] for token in field]
            k = [i for i, (name, _) in enumerate(start) if name == "[HEAD2]"][0]
            assert start[k + 1] == (" ", read[1]) and start[k + 2][0] == read[0]  # it writes that very digit
            later = [p for _, p in start[k + 2:]] + [p for line in lines[3:] for field in line for _, p in field]
            assert read[1] not in later  # the callee's command is not hinted
    assert hinted_steps >= len(str(b)) and digit_mul_starts >= 1
