"""Issue #28 for the exercise checker: no answer hangs ``check``, ends the kernel or escapes it;
the torch twins of a forbidden function are forbidden too; a cell ending in ``check(...)``
echoes nothing in IPython."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import types

import pytest
import torch
import torch.nn.functional as F

from lecturekit.exercises import Verdict, check, get_exercise, running, specs

LAYERNORM = "encoder.layernorm"


def _reference(exercise_id: str):
    return get_exercise(exercise_id).reference


class _LoopingRepr:
    def __repr__(self) -> str:
        while True:
            pass


class _LoopingNumber:
    """Loops when turned into a number or compared: what a careless __float__ does."""

    def __float__(self) -> float:
        while True:
            pass

    __int__ = __index__ = __float__

    def __eq__(self, other: object) -> bool:
        while True:
            pass

    __hash__ = object.__hash__


class _LoopingMessage(Exception):
    def __str__(self) -> str:
        while True:
            pass


class _BrokenMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot show myself")


def _timed_check(exercise_id: str, answer, time_limit: float = 0.5):
    start = time.monotonic()
    result = check(exercise_id, answer, time_limit=time_limit)
    return result, time.monotonic() - start


needs_fork = pytest.mark.skipif(not running.can_fork(), reason="needs a forked worker (Linux)")


@needs_fork
@pytest.mark.parametrize(
    ("exercise_id", "answer"),
    [
        (LAYERNORM, lambda *args, **kwargs: _LoopingRepr()),  # formatting the wrong type
        ("training.noam_lr", lambda *args, **kwargs: _LoopingNumber()),  # its __float__
        ("decoder.attention_shapes", ((_LoopingNumber(), 8), (8, 50))),  # an item's
    ],
    ids=["repr", "float", "item"],
)
def test_a_result_that_loops_when_compared_or_shown_meets_the_time_limit(
    exercise_id, answer, capsys
) -> None:
    result, seconds = _timed_check(exercise_id, answer)
    assert result is False
    assert seconds < 2 * 0.5 + 2 + 5  # the step limit, plus starting and ending the worker
    out = capsys.readouterr().out
    assert "超过 3 秒还没有结束" in out
    # issue 45.12: what did not finish, observed, not guessed
    assert "读取你" in out and "死循环" not in out, out


@needs_fork
def test_an_exception_whose_message_loops_meets_the_time_limit(capsys) -> None:
    def answer(*args, **kwargs):
        raise _LoopingMessage

    result, seconds = _timed_check(LAYERNORM, answer)
    assert result is False and seconds < 8
    out = capsys.readouterr().out
    assert "检查已停止" in out and "显示你的函数抛出的异常（它的消息）超过" in out, out


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-process"])
def test_an_exception_whose_message_raises_is_reported(fork, monkeypatch, capsys) -> None:
    if fork and not running.can_fork():
        pytest.skip("needs a forked worker (Linux)")
    monkeypatch.setattr(running, "can_fork", lambda: fork)

    def answer(*args, **kwargs):
        raise _BrokenMessage

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "_BrokenMessage" in out and "__str__ 出错" in out


@needs_fork
def test_os_exit_in_an_answer_ends_the_worker_not_this_process(capsys) -> None:
    assert check(LAYERNORM, lambda *args, **kwargs: os._exit(3)) is False
    out = capsys.readouterr().out
    assert "以退出码 3 退出了" in out and "调用你的函数时" in out
    # still alive, and the next check works
    assert check(LAYERNORM, _reference(LAYERNORM)) is True


@pytest.mark.parametrize("limit", [float("inf"), float("nan"), 1e300, 0, -1.0])
def test_an_impossible_time_limit_is_refused_clearly(limit) -> None:
    with pytest.raises(ValueError, match="time_limit must be"):
        check(LAYERNORM, _reference(LAYERNORM), time_limit=limit)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, w, b, eps: torch.native_layer_norm(x, x.shape[-1:], w, b, eps)[0],
        lambda x, w, b, eps: torch.ops.aten.native_layer_norm(x, x.shape[-1:], w, b, eps)[0],
        lambda x, w, b, eps: torch.ops.aten.layer_norm.default(x, x.shape[-1:], w, b, eps),
    ],
    ids=["torch.native", "aten.native", "aten.default"],
)
def test_torch_twins_of_a_forbidden_function_are_forbidden(call, capsys) -> None:
    names = list(get_exercise(LAYERNORM).forbidden)
    assert "torch.nn.functional.layer_norm" in names

    def answer(x, eps=1e-5):
        return call(x, None, None, eps)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "这道题不允许用它" in out and ("native_layer_norm" in out or "layer_norm" in out)


@needs_fork
def test_a_check_after_torch_used_its_thread_pool_does_not_deadlock() -> None:
    """GNU OpenMP's pool does not survive a fork: the worker must run on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.randn(600, 600)
        (x @ x).sum()  # the parent's OpenMP pool is now started
        torch.softmax(torch.randn(1000, 1000), dim=-1).sum()

        def answer(x, eps=1e-5):
            big = torch.randn(600, 600)
            (big @ big).sum()  # a parallel region in the worker
            mean = x.mean(dim=-1, keepdim=True)
            return (x - mean) / torch.sqrt(x.var(dim=-1, unbiased=False, keepdim=True) + eps)

        result, seconds = _timed_check(LAYERNORM, answer, time_limit=10)
        assert result is True and seconds < 20
    finally:
        torch.set_num_threads(threads)


def test_in_ipython_the_verdict_is_not_echoed(monkeypatch, capsys) -> None:
    from IPython.core.formatters import DisplayFormatter

    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: object()  # as inside a notebook's kernel
    monkeypatch.setitem(sys.modules, "IPython", fake)
    failed = check(LAYERNORM, lambda *args, **kwargs: None)
    passed = check(LAYERNORM, _reference(LAYERNORM))
    capsys.readouterr()
    assert isinstance(failed, Verdict) and isinstance(passed, Verdict)
    assert not failed and passed and failed == False and passed == True  # noqa: E712
    assert repr(failed) == "False" and repr(passed) == "True"
    monkeypatch.delitem(sys.modules, "IPython")
    # what IPython's display hook computes for a cell's value: nothing to show
    assert DisplayFormatter().format(failed) == ({}, {})
    assert DisplayFormatter().format(False) != ({}, {})
    # outside IPython, the plain bool
    assert check(LAYERNORM, _reference(LAYERNORM)) is True


def test_the_in_process_fallback_still_checks(monkeypatch, capsys) -> None:
    monkeypatch.setattr(running, "can_fork", lambda: False)
    assert check(LAYERNORM, _reference(LAYERNORM)) is True
    assert check(LAYERNORM, lambda *args, **kwargs: sys.exit(1)) is False
    assert "sys.exit()" in capsys.readouterr().out


def test_an_exercise_id_that_is_not_a_str_is_named() -> None:
    with pytest.raises(TypeError, match="exercise_id"):
        check(["encoder.layernorm"], lambda x: x)


def _layernorm(x, eps=1e-5):  # a right answer, written by hand
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(dim=-1, unbiased=False, keepdim=True) + eps)


def _stolen_expected():
    """A tensor called ``expected`` in any frame of any thread of this process."""
    for frame in sys._current_frames().values():
        while frame is not None:
            if isinstance(frame.f_locals.get("expected"), torch.Tensor):
                return frame.f_locals["expected"]
            frame = frame.f_back
    return None


def test_the_expected_result_does_not_exist_while_the_answer_runs(capsys) -> None:
    """Issue 45.5: the expectation used to be computed first, and readable from the frames."""
    seen = []

    def answer(x, eps=1e-5):
        found = _stolen_expected()
        seen.append(found is not None)
        return found.clone() if found is not None else torch.zeros_like(x)

    monkey = pytest.MonkeyPatch()
    monkey.setattr(running, "can_fork", lambda: False)  # in this process, to read ``seen``
    try:
        assert check(LAYERNORM, answer) is False
    finally:
        monkey.undo()
    assert seen == [False] and "数值不对" in capsys.readouterr().out


def test_switching_the_watch_off_is_refused(capsys) -> None:
    """Issue 45.7: ``sys.setprofile(None)`` used to switch the forbidden-call watch off."""

    def answer(x, eps=1e-5):
        sys.setprofile(None)
        return F.layer_norm(x, x.shape[-1:], eps=eps)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "调用了 sys.setprofile" in out and "监视" in out, out


def test_a_forbidden_call_in_a_thread_the_answer_starts_is_caught(capsys) -> None:
    def answer(x, eps=1e-5):
        box = []
        thread = threading.Thread(target=lambda: box.append(F.layer_norm(x, x.shape[-1:])))
        thread.start()
        thread.join()
        return box[0]

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "调用了 torch.nn.functional.layer_norm" in out and "不允许" in out, out


def test_patching_the_checkers_comparison_is_refused_and_undone(monkeypatch, capsys) -> None:
    monkeypatch.setattr(running, "can_fork", lambda: False)  # the patch lands in this process
    compare = specs.Array._compare
    monkeypatch.setattr(specs.Array, "_compare", compare)  # undone after the test, whatever

    def answer(x, eps=1e-5):
        specs.Array._compare = lambda self, expected, got, where: None
        return torch.zeros_like(x)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "Array._compare" in out and "已恢复原样" in out, out
    assert specs.Array._compare is compare


@needs_fork
def test_what_the_answer_prints_is_cut(capfd) -> None:
    """Issue 45.8: an answer that printed 10 MB sent all of it into the notebook."""

    def answer(x, eps=1e-5):
        print("x" * 10_000_000)
        return _layernorm(x, eps)

    assert check(LAYERNORM, answer) is True  # printing is allowed, and the check goes on
    out = capfd.readouterr().out
    assert len(out) < running.OUTPUT_LIMIT + 1000 and "输出太长" in out and "✅" in out


def test_a_huge_exception_message_is_cut(capsys) -> None:
    def answer(x, eps=1e-5):
        raise ValueError("长" * 1_000_000)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert len(out) < 5000 and "已截断：共 1000000 个字符" in out


@needs_fork
def test_an_answer_that_signals_itself_is_named(capsys) -> None:
    """Issue 45.12: SIGINT sent by the answer itself used to leave no feedback."""

    def answer(x, eps=1e-5):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        return _layernorm(x, eps)

    assert check(LAYERNORM, answer) is False
    out = capsys.readouterr().out
    assert "调用了 os.kill" in out and "信号" in out, out
    assert check(LAYERNORM, _layernorm) is True
