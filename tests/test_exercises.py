"""The exercise framework, plus the generic test over every registered exercise."""

import warnings

import numpy as np
import pytest
import torch

from lecturekit import exercises
from lecturekit.exercises import Case, Exercise, check, list_exercises, register, show


def _softmax_reference(x, dim=-1):
    return torch.softmax(x, dim=dim)


def _softmax_forgot_max(x, dim=-1):  # plausible but fine numerically for small inputs
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)


def _softmax_wrong_axis(x, dim=-1):
    return torch.softmax(x, dim=0)


def _softmax_raises(x, dim=-1):
    raise RuntimeError("形状搞错了")


def _softmax_returns_list(x, dim=-1):
    return torch.softmax(x, dim=dim).tolist()


def _softmax_returns_double(x, dim=-1):
    return torch.softmax(x.double(), dim=dim).float()[..., :1]


@pytest.fixture
def sample_exercises():
    """Two throwaway exercises registered for one test only (not shipped)."""
    function = Exercise(
        id="sample.softmax",
        chapter=99,
        title="实现 softmax",
        prompt="写一个函数 softmax(x, dim=-1)，沿最后一维做 softmax。",
        hint="先减去最大值再取指数，然后除以总和。",
        kind="function",
        cases=lambda: [
            Case(args=(torch.tensor([[1.0, 2.0, 3.0]]),), label="一行"),
            Case(
                args=(torch.randn(4, 5, generator=torch.Generator().manual_seed(0)),),
                kwargs={"dim": -1},
                label="4x5 随机",
            ),
        ],  # fmt: skip
        reference=_softmax_reference,
        wrong_answers=[_softmax_wrong_axis],
    )
    value = Exercise(
        id="sample.n_params",
        chapter=99,
        title="参数个数",
        prompt="一个 nn.Linear(3, 4) 有多少个参数？",
        hint="权重 3×4，再加上偏置。",
        kind="value",
        reference=16,
        wrong_answers=[12, 15],
    )
    register(function)
    register(value)
    yield function, value
    exercises.unregister(function.id)
    exercises.unregister(value.id)


def test_correct_answers_pass(sample_exercises, capsys):
    assert check("sample.softmax", _softmax_reference) is True
    assert "通过" in capsys.readouterr().out
    assert check("sample.softmax", _softmax_forgot_max) is True
    assert check("sample.n_params", 16) is True
    assert check("sample.n_params", 16.0) is True
    assert check("sample.n_params", torch.tensor(16)) is True
    assert "sample.softmax" in list_exercises(chapter=99)
    assert list_exercises(chapter=99) == ["sample.n_params", "sample.softmax"]


def test_wrong_values_report_expected_and_got(sample_exercises, capsys):
    assert check("sample.softmax", _softmax_wrong_axis) is False
    out = capsys.readouterr().out
    assert "没有通过" in out and "数值不对" in out and "期望" in out and "得到" in out
    assert "提示" in out and "先减去最大值" in out
    assert check("sample.n_params", 12) is False
    out = capsys.readouterr().out
    assert "期望 16" in out and "得到 12" in out


def test_student_exceptions_and_wrong_types_are_reported(sample_exercises, capsys):
    assert check("sample.softmax", _softmax_raises) is False
    out = capsys.readouterr().out
    assert "出错" in out and "RuntimeError" in out and "形状搞错了" in out
    assert check("sample.softmax", _softmax_returns_list) is False
    assert "类型不对" in capsys.readouterr().out
    assert check("sample.softmax", _softmax_returns_double) is False
    assert "形状不对" in capsys.readouterr().out
    assert check("sample.softmax", 3.0) is False
    assert "这道题要一个函数" in capsys.readouterr().out
    assert check("sample.n_params", "16") is False
    assert "类型不对" in capsys.readouterr().out


def test_unsolved_skeletons_print_not_yet_done(sample_exercises, capsys):
    def skeleton(x, dim=-1): ...  # 在这里写你的代码

    def raises_not_implemented(x, dim=-1):
        raise NotImplementedError

    for answer in (skeleton, raises_not_implemented, None):
        assert check("sample.softmax", answer) is False
        assert "尚未完成" in capsys.readouterr().out
    assert check("sample.n_params", None) is False
    assert "尚未完成" in capsys.readouterr().out


def test_inputs_are_copied_so_in_place_edits_cannot_cheat(sample_exercises, capsys):
    def in_place(x, dim=-1):
        x.zero_()
        return torch.softmax(x, dim=dim)

    assert check("sample.softmax", in_place) is False


def test_show_prints_the_task(sample_exercises, capsys):
    show("sample.softmax")
    out = capsys.readouterr().out
    assert "实现 softmax" in out and "写一个函数" in out and 'check("sample.softmax"' in out


def test_registry_errors(sample_exercises):
    with pytest.raises(ValueError, match="already registered"):
        register(sample_exercises[0])
    with pytest.raises(KeyError, match="sample.n_params"):
        check("sample.nope", 1)
    with pytest.raises(ValueError, match="kind"):
        Exercise(id="a.b", chapter=1, title="t", prompt="p", hint="h", kind="essay",
                 reference=1, wrong_answers=[2])  # fmt: skip
    with pytest.raises(ValueError, match="id must look like"):
        Exercise(id="NoTopic", chapter=1, title="t", prompt="p", hint="h", kind="value",
                 reference=1, wrong_answers=[2])  # fmt: skip
    with pytest.raises(TypeError, match="cases"):
        Exercise(id="a.b", chapter=1, title="t", prompt="p", hint="h", kind="function",
                 reference=abs, wrong_answers=[round])  # fmt: skip
    with pytest.raises(ValueError, match="wrong_answers"):
        Exercise(id="a.b", chapter=1, title="t", prompt="p", hint="h", kind="value",
                 reference=1, wrong_answers=[])  # fmt: skip


def test_default_compare_details():
    compare = exercises._default_compare
    assert compare(torch.ones(2), torch.ones(2) + 1e-7) is None
    assert "dtype" in compare(torch.ones(2, dtype=torch.bool), torch.ones(2))
    assert "数值不对" in compare(torch.ones(2), torch.tensor([1.0, float("nan")]))
    assert compare(np.arange(3), np.arange(3)) is None
    assert "numpy.ndarray" in compare(np.arange(3), [0, 1, 2])
    assert compare([1, (2.0, "a")], (1, [2.0 + 1e-9, "a"])) is None
    assert "长度不对" in compare([1, 2], [1])
    assert "键不对" in compare({"a": 1}, {"b": 1})
    assert "位置 ['a']" in compare({"a": 1}, {"a": 2})
    assert compare(True, False) is not None and compare(True, torch.tensor(True)) is None
    assert "数值不对" in compare(torch.tensor(0.5), torch.tensor(0.25))
    assert compare(torch.tensor(0.5), torch.tensor(0.5)) is None
    minus_inf = torch.tensor([float("-inf"), 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a student's masked logits must not print a warning
        assert compare(minus_inf, minus_inf.clone()) is None
    assert "数值不对" in compare(minus_inf, torch.tensor([0.0, 1.0]))


@pytest.mark.parametrize("exercise_id", list_exercises())
def test_every_registered_exercise(exercise_id, capsys):
    """Every shipped exercise: its reference passes, each wrong answer fails."""
    ex = exercises.get_exercise(exercise_id)
    assert check(exercise_id, ex.reference) is True, capsys.readouterr().out
    for i, wrong in enumerate(ex.wrong_answers):
        assert check(exercise_id, wrong) is False, f"wrong answer {i} of {exercise_id} passed"
    out = capsys.readouterr().out
    assert "Traceback" not in out
