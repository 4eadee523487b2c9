"""The shared helpers of lecturekit._common: the eval-mode context and the argument checks
(one message form, ``TypeError`` for a wrong type, ``ValueError`` for a bad value)."""

from __future__ import annotations

import pytest
from torch import nn

from lecturekit._common import (
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_type,
    eval_mode,
)

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
