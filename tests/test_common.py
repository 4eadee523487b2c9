"""The shared helpers of lecturekit._common: the eval-mode context and the argument checks
(one message form, ``TypeError`` for a wrong type, ``ValueError`` for a bad value)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import lecturekit
from lecturekit._common import (
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_type,
    eval_mode,
)
from lecturekit.chapters import ch01_rnn, ch04_nat, ch06_copy

NAN = float("nan")
INF = float("inf")


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"finite": False},
        {"optional": True},
        {"minimum": 0.0},
        {"maximum": 1.0},
        {"minimum": 0.0, "maximum": 1.0, "exclusive": ("minimum", "maximum")},
        {"minimum": 0.0, "finite": False},
    ],
)
def test_check_number_rejects_nan_whatever_the_options(kwargs: dict) -> None:
    # every comparison with NaN is False, so a range check alone would let it through
    message = "a number, not NaN" if kwargs.get("finite") is False else "a finite number"
    with pytest.raises(ValueError, match=rf"^lr must be {message}, got nan$"):
        check_number("lr", NAN, **kwargs)


def test_check_number_infinity_only_where_allowed() -> None:
    for value in (INF, -INF):
        with pytest.raises(ValueError, match=r"^x must be a finite number, got -?inf$"):
            check_number("x", value)
    check_number("x", INF, finite=False)
    check_number("x", INF, minimum=0.0, finite=False)
    with pytest.raises(ValueError, match=r"^x must be >= 0.0, got -inf$"):
        check_number("x", -INF, minimum=0.0, finite=False)


def test_check_number_range_and_open_ends() -> None:
    check_number("p", 0.0, 0.0, 1.0)
    check_number("p", 1, 0.0, 1.0)  # an int is a number
    with pytest.raises(ValueError, match=r"^p must be in \(0.0, 1.0\], got 0.0$"):
        check_number("p", 0.0, 0.0, 1.0, exclusive=("minimum",))
    with pytest.raises(ValueError, match=r"^p must be in \[0.0, 1.0\), got 1.0$"):
        check_number("p", 1.0, 0.0, 1.0, exclusive=("maximum",))
    with pytest.raises(ValueError, match=r"^p must be > 0, got -0.5$"):
        check_number("p", -0.5, 0, exclusive=("minimum",))
    with pytest.raises(ValueError, match=r"^p must be <= 1, got 2.0$"):
        check_number("p", 2.0, maximum=1)


def test_check_number_types() -> None:
    check_number("x", None, optional=True)
    with pytest.raises(TypeError, match=r"^x must be a number, got NoneType \(None\)$"):
        check_number("x", None)
    with pytest.raises(TypeError, match=r"x must be a number, got bool"):
        check_number("x", True)
    with pytest.raises(TypeError, match=r"x must be a number or None, got str .*; write x=0.1"):
        check_number("x", "0.1", optional=True)


def test_check_int() -> None:
    check_int("n", 3, minimum=1, maximum=3)
    check_int("n", None, optional=True)
    with pytest.raises(TypeError, match=r"^n must be an int, got bool \(True\)$"):
        check_int("n", True)
    with pytest.raises(TypeError, match=r"^n must be an int, got float \(2.0\)$"):
        check_int("n", 2.0)
    with pytest.raises(TypeError, match=r"n must be an int or None, got str .*; write n=3"):
        check_int("n", "3", optional=True)
    with pytest.raises(ValueError, match=r"^n must be >= 1, got 0$"):
        check_int("n", 0, minimum=1)
    with pytest.raises(ValueError, match=r"^n must be in \[1, 3\], got 4$"):
        check_int("n", 4, 1, 3)


def test_check_choice_type_and_bool() -> None:
    check_choice("mode", "a", ("a", "b"))
    with pytest.raises(ValueError, match=r"^mode must be one of \('a', 'b'\), got 'c'$"):
        check_choice("mode", "c", ("a", "b"))
    check_type("name", "x", str, "a string")
    with pytest.raises(TypeError, match=r"^name must be a string, got int \(3\)$"):
        check_type("name", 3, str, "a string")
    check_bool("flag", False)
    with pytest.raises(TypeError, match=r"^flag must be True or False, got int \(1\)$"):
        check_bool("flag", 1)


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_switches_every_submodule_and_restores_the_mode(training: bool) -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train(training)
    with eval_mode(model) as inside:
        assert inside is model
        assert not any(m.training for m in model.modules())
    assert all(m.training == training for m in model.modules())


def test_eval_mode_restores_the_mode_after_an_error() -> None:
    model = nn.Dropout(0.5).train()
    with pytest.raises(RuntimeError), eval_mode(model):
        raise RuntimeError("inside")
    assert model.training


def test_eval_mode_leaves_objects_without_a_mode_alone() -> None:
    table = object()
    with eval_mode(table) as inside:
        assert inside is table


def test_check_allocation_refuses_more_than_the_device_has(monkeypatch):
    from lecturekit import _common

    monkeypatch.setattr(_common, "device_memory", lambda device: 2**30)
    _common.check_allocation("a mask", 2**30, "use a smaller one")
    with pytest.raises(ValueError, match=r"a mask need 2\.0 GiB.*1\.0 GiB.*use a smaller one"):
        _common.check_allocation("a mask", 2**31, "use a smaller one")
    monkeypatch.setattr(_common, "device_memory", lambda device: None)  # unknown: torch decides
    _common.check_allocation("a mask", 2**60, "use a smaller one")


def test_device_memory_reads_this_machine():
    import os

    from lecturekit._common import device_memory

    expected = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert device_memory("cpu") == expected
    assert device_memory("meta") is None


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: lecturekit.TrainConfig(epochs=0), ValueError, "epochs must be >= 1"),
        (
            lambda: lecturekit.TrainConfig(epochs=2.0),
            TypeError,
            "epochs must be an int",
        ),
        (lambda: lecturekit.noam_lr(0, 8), ValueError, "step must be >= 1"),
        (
            lambda: lecturekit.TrainConfig(schedule="linear"),
            ValueError,
            "schedule must be one of",
        ),
        (
            lambda: lecturekit.label_smoothed_nll(
                torch.zeros(2, 5), torch.zeros(2, dtype=torch.long), smoothing=1.0
            ),
            ValueError,
            r"smoothing must be in \[0.0, 1.0\)",
        ),
        (
            lambda: lecturekit.greedy(None, None, 0),
            ValueError,
            "max_len must be >= 1, got 0",
        ),
        # the chapter experiments report bad input the same way
        (lambda: ch06_copy.guided_attention_penalty(3, 4, g=NAN), ValueError, "g must be a finite"),
        (  # g = 0 would divide by zero: a NaN loss, not an error
            lambda: ch06_copy.guided_attention_loss(
                torch.full((1, 2, 2), 0.5), torch.tensor([2]), torch.tensor([2]), g=0.0
            ),
            ValueError,
            r"g must be > 0, got 0.0",
        ),
        (lambda: ch06_copy.AttentionToySeq2Seq(0), ValueError, "vocab_size must be >= 1, got 0"),
        (
            lambda: ch06_copy.stretch_batch(torch.Generator(), min_len=5, max_len=3),
            ValueError,
            "max_len must be >= 5, got 3",
        ),
        (
            lambda: ch04_nat.NonAutoregressiveTable.fit([["a"]]).sample(2.0),
            TypeError,
            "n must be an int",
        ),
        (lambda: ch01_rnn.make_rnn_weights(4, 2, gain=0.0), ValueError, "gain must be > 0"),
    ],
)
def test_one_validation_style_across_the_package(call, error, words) -> None:
    """Every part reports bad input the same way: '<name> must be <what>, got <value>'."""
    with pytest.raises(error, match=words):
        call()


def test_one_token_id_check_names_the_first_bad_id_and_where() -> None:
    """``check_token_ids`` (shared by the model, the masks, the chapters and the training
    checks) reports the first id outside the vocabulary in reading order, with its place."""
    from lecturekit._common import check_token_ids

    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        tokens = torch.randint(-2, 9, (3, 4), generator=generator)
        bad = [(i, j) for i in range(3) for j in range(4) if not 0 <= tokens[i, j] < 7]
        if not bad:
            check_token_ids("ids", tokens, 7)
            continue
        i, j = bad[0]
        expected = (
            rf"ids ids must be in \[0, 7\), got {int(tokens[i, j])} \(row {i}, position {j}\)"
        )
        with pytest.raises(ValueError, match=expected):
            check_token_ids("ids", tokens, 7)
    with pytest.raises(ValueError, match=r"tokens must have shape \(B,\) and not be empty"):
        check_token_ids("tokens", torch.zeros(2, 1, dtype=torch.long), shape="(B,)")
    with pytest.raises(ValueError, match=r"got 5 \(row 1\); shrink it"):
        check_token_ids("x", torch.tensor([0, 5]), 5, shape="(B,)", fix="shrink it")
