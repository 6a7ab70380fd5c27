"""Position ids past 127 cells a field: a coupled scheme with its own field stride, and the
training-time offsets that move every cell away from <s>/<sep> without changing any offset between cells."""

import pytest

from caef_bench.machines import run, trace
from caef_bench.models.codec import CaefCodec
from caef_bench.models.positions import FIELD_STRIDE, field_cells, position_ids, split_scheme
from caef_bench.models.tokenizer import BOS_ID, SEP_ID, tokens
from caef_bench.train.batches import encode_sample, sample_offset


def _ids(prompt: str, completion: str) -> list[int]:
    codec = CaefCodec("coupled")
    return codec.prompt_ids(prompt) + codec.completion_ids(completion)


def test_a_scheme_names_its_stride_or_takes_the_default():
    assert split_scheme("coupled-hints") == ("coupled-hints", FIELD_STRIDE)
    assert split_scheme("coupled-hints/1024") == ("coupled-hints", 1024)
    assert split_scheme("standard") == ("standard", None)
    assert field_cells("coupled/1024") == 1023 and field_cells("coupled") == 127 and field_cells("standard") is None
    for bad in ("coupled/x", "coupled/1", "standard/64", "abacus", "coupled-hints/"):
        if bad == "coupled-hints/":  # an empty stride is the default one
            assert split_scheme(bad) == ("coupled-hints", FIELD_STRIDE)
            continue
        with pytest.raises(ValueError, match="position scheme"):
            split_scheme(bad)


@pytest.mark.parametrize("scheme", ["coupled", "coupled-expr", "coupled-hints"])
def test_a_wider_stride_moves_fields_apart_and_nothing_else(scheme):
    # executor steps, aligner (I) (expression hints) and aligner (O) (answer hints) of several machines
    cases = [trace("add", 4567, 891)[2], trace("sub", 9001, 998)[3], trace("gt", 123456, 123465)[4]]
    for op, a, b in (("add", 4567, 891), ("sub", 9001, 998), ("eq", 77, 77)):
        machine_run = run(op, a, b)
        cases += [(f"{a}{'+' if op == 'add' else '-' if op == 'sub' else '=='}{b}=", machine_run.start_text())]
    for prompt, completion in cases:
        ids = _ids(prompt, completion)
        narrow, wide = position_ids(ids, scheme), position_ids(ids, f"{scheme}/1024")
        assert wide == [1024 * (p // FIELD_STRIDE) + p % FIELD_STRIDE for p in narrow], (prompt, scheme)


def _tape_ids(names, positions, start, end) -> list[list[int]]:
    """The ids of each field's digit cells in names[start:end] (fields split at separators)."""
    fields, field = [], []
    for name, position in zip(names[start:end], positions[start:end]):
        if name in (" ", "\n"):
            fields.append(field)
            field = []
        elif name.startswith("|"):
            field.append(position)
    return [cells for cells in fields + [field] if cells]


def test_a_1000_digit_tape_keeps_its_cells_apart_and_coupled_under_stride_1024():
    a, b = int("7" * 1000), int("4" * 999 + "9")
    prompt, completion = run("add", a, b).transition(500)
    ids = _ids(prompt, completion)
    names = tokens(ids)
    sep = names.index("<sep>")
    wide = position_ids(ids, "coupled-hints/1024")
    tapes = _tape_ids(names, wide, 0, sep)
    assert [len(t) for t in tapes][:2] == [1000, 1000]
    after = _tape_ids(names, wide, sep, len(ids))
    assert after[:2] == tapes[:2]  # each cell of a and b: the same id in the state and the next
    assert after[2][:len(tapes[2])] == tapes[2]  # and the output written so far, one cell longer after
    every = [i for tape in tapes for i in tape]
    assert len(every) == len(set(every))  # no two cells share an id
    # under the default stride a's cells run into b's ids: the tape cannot be addressed
    narrow = _tape_ids(names, position_ids(ids, "coupled-hints"), 0, sep)
    assert set(narrow[0]) & set(narrow[1])


def test_an_offset_moves_every_token_but_the_markers_and_keeps_every_distance_between_them():
    prompt, completion = trace("add", 98765, 4321)[3]
    ids = _ids(prompt, completion)
    plain, shifted = position_ids(ids, "coupled-hints/1024"), position_ids(ids, "coupled-hints/1024", offset=300)
    for token, p, q in zip(ids, plain, shifted):
        assert q == (p if token in (BOS_ID, SEP_ID) else p + 300)
    assert shifted[ids.index(SEP_ID)] == 0 and shifted[0] == 0


def test_training_offsets_are_drawn_per_sample_in_range_and_the_same_on_every_run():
    samples = [{"prompt": f"{i}+{i * 7}=", "completion": run("add", i, i * 7).start_text()} for i in range(1, 301)]
    offsets = [sample_offset(s, 896) for s in samples]
    assert all(0 <= o <= 896 for o in offsets) and len(set(offsets)) > 200
    assert offsets == [sample_offset(s, 896) for s in samples]
    assert all(sample_offset(s, 0) == 0 for s in samples)
    codec = CaefCodec("coupled-hints/1024")
    ids, labels, positions = encode_sample(samples[0], codec, 896)
    assert positions == position_ids(ids, codec.scheme, offsets[0])
    assert encode_sample(samples[0], codec)[2] == position_ids(ids, codec.scheme)


def test_the_train_command_takes_a_stride_and_offsets_and_refuses_a_bad_scheme(capsys):
    from caef_bench.cli import build_parser
    from caef_bench.train.presets import preset_overrides

    args = build_parser().parse_args(["train", "--set", "position_scheme=coupled-hints/1024,position_offsets=896"])
    overrides = preset_overrides(vars(args))
    assert overrides["position_scheme"] == "coupled-hints/1024" and overrides["position_offsets"] == 896
    with pytest.raises((ValueError, SystemExit), match="position scheme|scheme"):
        preset_overrides(vars(build_parser().parse_args(["train", "--set", "position_scheme=coupled/seven"])))
