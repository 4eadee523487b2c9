"""The exercise framework: feedback, return-type specs, protection against what a student's
code may do (edit its inputs, call a forbidden function, exit, loop forever), and checks over
every registered exercise. Students' answers to each exercise are in test_exercises_chNN*.py."""

import re
import sys
import threading
import time
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lecturekit import exercises
from lecturekit.exercises import (
    Case,
    Exercise,
    check,
    get_exercise,
    hint,
    list_exercises,
    register,
    show,
    solution,
)
from lecturekit.exercises.specs import Array, Integer, Items, Real, Text


def _softmax_reference(x, dim=-1):
    return torch.softmax(x, dim=dim)


@pytest.fixture
def sample_exercises():
    """Two throwaway exercises registered for one test only (not shipped)."""
    function = Exercise(
        id="sample.softmax",
        chapter=99,
        title="实现 softmax",
        prompt="写一个函数 softmax(x, dim=-1)，沿最后一维做 softmax。",
        hint="先让最大的数变成 0，再取指数、归一化。",
        explanation="e = (x - x.max()).exp()；e / e.sum()。",
        kind="function",
        returns=Array("float32", "与 x 相同"),
        cases=lambda: [
            Case(args=(torch.tensor([[1.0, 2.0, 3.0]]),), label="一行"),
            Case(
                args=(torch.randn(4, 5, generator=torch.Generator().manual_seed(0)),),
                kwargs={"dim": -1},
                label="4x5 随机",
            ),
        ],
        reference=_softmax_reference,
        forbidden=("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"),
    )
    value = Exercise(
        id="sample.n_params",
        chapter=99,
        title="参数个数",
        prompt="一个 nn.Linear(3, 4) 有多少个参数？",
        hint="权重和偏置都要算。",
        explanation="权重 3×4 = 12，偏置 4，共 16。",
        kind="value",
        returns=Integer(),
        reference=16,
    )
    register(function)
    register(value)
    yield function, value
    exercises.unregister(function.id)
    exercises.unregister(value.id)


def softmax_by_hand(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


def test_correct_answers_pass(sample_exercises, capsys):
    assert check("sample.softmax", softmax_by_hand) is True
    assert "✅ 通过" in capsys.readouterr().out
    for value in (16, np.int64(16), torch.tensor(16)):
        assert check("sample.n_params", value) is True
    assert list_exercises(chapter=99) == ["sample.n_params", "sample.softmax"]


def test_wrong_values_report_expected_got_and_the_hint(sample_exercises, capsys):
    assert check("sample.softmax", lambda x, dim=-1: softmax_by_hand(x, dim=0)) is False
    out = capsys.readouterr().out
    assert "没有通过" in out and "数值不对" in out and "期望" in out and "得到" in out
    assert "输入：x=" in out and "💡 提示：先让最大的数变成 0" in out
    assert 'solution("sample.softmax")' in out
    assert check("sample.n_params", 12) is False
    out = capsys.readouterr().out
    assert "期望 16，得到 12" in out and "💡 提示" in out


def _double_exercise(exercise_id: str, cases: list[Case], forbidden=()) -> Exercise:
    """A throwaway exercise, double(x) = 2x, with the given hidden cases."""
    return Exercise(
        id=exercise_id,
        chapter=99,
        title="加倍",
        prompt="写一个函数 double(x)，返回 2x。",
        hint="乘以二。",
        explanation="2 * x。",
        kind="function",
        returns=Array("float32", "与 x 相同"),
        cases=lambda: cases,
        reference=lambda x: 2 * x,
        forbidden=forbidden,
    )


def _on_scaled_input(double):  # a harness: the case calls what it builds from the answer
    def run(x, times):
        return double(x * times)

    return run


def test_a_case_with_a_harness_calls_what_the_harness_builds(capsys):
    """``Case.harness``: the answer runs inside the harness, under the watch, and the expected
    result is the harness around the reference (called with the reference's one argument,
    the case's two would fail); the inputs are named by the harness's function."""
    exercise = _double_exercise(
        "sample.harness",
        [
            Case(args=(torch.ones(2),), label="直接"),
            Case(args=(torch.ones(2), 3.0), label="套在别的计算里", harness=_on_scaled_input),
        ],
        forbidden=("torch.softmax",),
    )
    register(exercise)
    try:
        assert check("sample.harness", lambda x: x + x) is True
        assert check("sample.harness", lambda x: x if x.shape == (2,) and x[0] == 1 else x) is False
        out = capsys.readouterr().out
        assert "第 1/2 个测试（直接）没有通过" in out
        assert check("sample.harness", lambda x: 2 * x if x.max() < 2 else x) is False
        out = capsys.readouterr().out
        assert "第 2/2 个测试（套在别的计算里）没有通过" in out and "输入：x=" in out, out
        assert "times=3.0" in out
        assert check("sample.harness", lambda x: torch.softmax(x, 0) * 0 + 2 * x) is False
        assert "不允许用它" in capsys.readouterr().out
    finally:
        exercises.unregister(exercise.id)


def _slow_double(x):
    time.sleep(0.6)
    return 2 * x


def test_a_case_with_a_time_factor_gets_that_many_times_the_limit(capsys):
    """``Case.time_factor``: a slow case (a harness that trains) may take factor times the
    time limit, in the answer's own call and in the worker's step; the other cases may not."""

    for factor, passes in [(1.0, False), (4.0, True)]:
        slow = Case(args=(torch.ones(2),), label="慢", time_factor=factor)
        register(_double_exercise("sample.slow", [slow]))
        try:
            assert check("sample.slow", _slow_double, time_limit=0.25) is passes
            out = capsys.readouterr().out
            assert passes or "超过 0.25 秒" in out, out
        finally:
            exercises.unregister("sample.slow")


def test_type_problems_name_the_type_not_the_formula(sample_exercises, capsys):
    """A right value in the wrong type says what type is needed; the hint (which would
    suggest the formula is wrong) is not printed."""
    answers = {
        "sample.softmax": [
            (lambda x, dim=-1: softmax_by_hand(x).tolist(), "你返回的是 list"),
            (lambda x, dim=-1: softmax_by_hand(x).double(), "题目要求 torch.float32"),
            (lambda x, dim=-1: 3.0, "题目要求一个张量"),
        ],
        "sample.n_params": [(16.0, "题目要求一个整数，你的结果是 float 16.0"), ("16", "str")],
    }
    for exercise_id, cases in answers.items():
        for answer, fragment in cases:
            assert check(exercise_id, answer) is False
            out = capsys.readouterr().out
            assert fragment in out and "类型不对" in out or "dtype 不对" in out, out
            assert "💡" not in out and "题目要求" in out, out


def test_a_tensor_that_requires_grad_passes(sample_exercises):
    assert check("sample.softmax", lambda x, dim=-1: softmax_by_hand(x).requires_grad_()) is True


@pytest.mark.parametrize(
    ("convert", "fragment"),
    [
        (lambda t: t.tolist(), "你返回的是 list，题目要的是 torch 张量"),
        (lambda t: t.numpy(), "你返回的是 numpy 数组 (ndarray)，题目要的是 torch 张量"),
    ],
    ids=["list", "ndarray"],
)
def test_an_array_that_is_not_a_tensor_is_named(sample_exercises, capsys, convert, fragment):
    """Issue 45.2: every task asks for a tensor; a list of float32 values used to be refused
    as "float64", a numpy array accepted."""
    assert check("sample.softmax", lambda x, dim=-1: convert(softmax_by_hand(x))) is False
    out = capsys.readouterr().out
    assert fragment in out and "float64" not in out, out


def test_student_exceptions_are_reported_with_the_hint(sample_exercises, capsys):
    def raises(x, dim=-1):
        raise RuntimeError("形状搞错了")

    assert check("sample.softmax", raises) is False
    out = capsys.readouterr().out
    assert "出错：RuntimeError: 形状搞错了" in out and "💡 提示" in out
    assert check("sample.softmax", 3.0) is False
    assert "这道题要一个函数" in capsys.readouterr().out


def test_unsolved_skeletons_print_not_yet_done_without_hint(sample_exercises, capsys):
    def skeleton(x, dim=-1): ...  # 在这里写你的代码

    def raises_not_implemented(x, dim=-1):
        raise NotImplementedError

    for exercise_id, answer in [
        ("sample.softmax", skeleton),
        ("sample.softmax", raises_not_implemented),
        ("sample.softmax", None),
        ("sample.n_params", None),
    ]:
        assert check(exercise_id, answer) is False
        out = capsys.readouterr().out
        assert "尚未完成" in out and "💡" not in out


def test_none_from_a_later_case_is_a_missing_return(sample_exercises, capsys):
    def sometimes(x, dim=-1):
        if x.shape[0] == 1:
            return softmax_by_hand(x)

    assert check("sample.softmax", sometimes) is False
    out = capsys.readouterr().out
    assert "第 2/2 个测试" in out and "忘了 return" in out and "尚未完成" not in out


def test_editing_an_input_in_place_is_reported(sample_exercises, capsys):
    def in_place(x, dim=-1):
        x.sub_(x.amax(dim=dim, keepdim=True)).exp_()
        return x / x.sum(dim=dim, keepdim=True)  # the right value, computed in x itself

    assert check("sample.softmax", in_place) is False
    out = capsys.readouterr().out
    assert "修改了输入参数 x" in out and "💡" not in out


def test_forbidden_functions_are_caught_however_they_are_called(sample_exercises, capsys):
    from torch.nn.functional import softmax as renamed

    for answer in (
        lambda x, dim=-1: renamed(x, dim),
        lambda x, dim=-1: x.softmax(dim),
        lambda x, dim=-1: torch.nn.Softmax(dim)(x),
    ):
        assert check("sample.softmax", answer) is False
        assert "不允许用它" in capsys.readouterr().out


def test_an_endless_loop_is_stopped_by_the_time_limit(sample_exercises, capsys):
    def forever(x, dim=-1):
        while True:
            pass

    def catches_exceptions(x, dim=-1):  # the time limit is no Exception: it gets through
        while True:
            try:
                while True:
                    pass
            except Exception:
                pass

    for answer in (forever, catches_exceptions):
        start = time.monotonic()
        assert check("sample.softmax", answer, time_limit=0.5) is False
        assert time.monotonic() - start < 5.0
        assert "运行超过 0.5 秒" in capsys.readouterr().out
    time.sleep(0.2)
    assert not [t for t in threading.enumerate() if t.name == "lecturekit-exercise-check"]


def test_the_time_limit_works_outside_the_main_thread(sample_exercises, capsys):
    """Signal-based alarms only work in the main thread; the checker must not rely on them."""

    def forever(x, dim=-1):
        while True:
            pass

    results = []
    caller = threading.Thread(
        target=lambda: results.append(check("sample.softmax", forever, time_limit=0.5))
    )
    caller.start()
    caller.join(timeout=10)
    assert results == [False]
    assert "运行超过 0.5 秒" in capsys.readouterr().out


def test_sys_exit_is_reported_not_obeyed(sample_exercises, capsys):
    def exits(x, dim=-1):
        sys.exit(1)

    assert check("sample.softmax", exits) is False
    assert "sys.exit()" in capsys.readouterr().out


class _Hostile:
    """An answer object that breaks every way of looking at it."""

    def __float__(self):
        raise RuntimeError("no float")

    def __len__(self):
        raise RuntimeError("no len")

    def __eq__(self, other):
        raise RuntimeError("no eq")

    def __repr__(self):
        raise RuntimeError("no repr")

    __hash__ = None


def test_hostile_answer_objects_are_type_problems(sample_exercises, capsys):
    assert check("sample.softmax", lambda x, dim=-1: _Hostile()) is False
    assert check("sample.n_params", _Hostile()) is False
    for spec, expected in [(Real(), 1.0), (Integer(), 1), (Items((Text(),)), ("a",))]:
        problem = spec.compare(expected, _Hostile())
        assert problem is not None and problem.kind == "type"
    assert "类型不对" in capsys.readouterr().out


def test_show_states_the_task_the_return_type_and_the_rules(sample_exercises, capsys):
    show("sample.softmax")
    out = capsys.readouterr().out
    assert "实现 softmax" in out and "写一个函数" in out and 'check("sample.softmax"' in out
    assert "返回：形状与 x 相同、dtype 为 torch.float32 的张量" in out
    assert "不能调用：torch.softmax" in out and "不能修改传入的参数" in out
    show("sample.n_params")
    assert "答案的形式：一个整数" in capsys.readouterr().out


def test_hint_is_printed_on_request_and_after_a_failure_never_by_show(sample_exercises, capsys):
    show("sample.softmax")
    out = capsys.readouterr().out
    assert "先让最大的数变成 0" not in out and "e / e.sum()" not in out and "💡" not in out
    hint("sample.softmax")
    out = capsys.readouterr().out
    assert "💡 练习 sample.softmax 的提示：先让最大的数变成 0" in out
    assert 'solution("sample.softmax")' in out and "e / e.sum()" not in out
    with pytest.raises(KeyError, match="sample.softmax"):
        hint("sample.softmx")


def test_solution_prints_the_explanation_and_the_code(sample_exercises, capsys):
    solution("sample.softmax")
    out = capsys.readouterr().out
    assert "参考解答" in out and "e / e.sum()" in out and "def _softmax_reference" in out
    solution("sample.n_params")
    assert "答案：16" in capsys.readouterr().out


def test_registry_errors(sample_exercises):
    fields = dict(chapter=1, title="t", prompt="p", hint="h", explanation="e")
    with pytest.raises(ValueError, match="already registered"):
        register(sample_exercises[0])
    with pytest.raises(KeyError, match="sample.n_params"):
        check("sample.nope", 1)
    with pytest.raises(ValueError, match="kind"):
        Exercise(id="a.b", kind="essay", reference=1, returns=Integer(), **fields)
    with pytest.raises(ValueError, match="id must look like"):
        Exercise(id="NoTopic", kind="value", reference=1, returns=Integer(), **fields)
    with pytest.raises(TypeError, match="cases"):
        Exercise(id="a.b", kind="function", reference=abs, returns=Integer(), **fields)
    with pytest.raises(TypeError, match="returns"):
        Exercise(id="a.b", kind="value", reference=1, returns=int, **fields)
    with pytest.raises(ValueError, match="explanation"):
        Exercise(
            id="a.b", kind="value", reference=1, returns=Integer(), **{**fields, "explanation": ""}
        )
    with pytest.raises(ValueError, match="time_limit"):
        check("sample.softmax", softmax_by_hand, time_limit=0)


@pytest.mark.parametrize(
    ("spec", "expected", "got", "kind"),
    [
        (Integer(), 99, 99, None),
        (Integer(), 99, np.int64(99), None),
        (Integer(), 99, torch.tensor(99), None),
        (Integer(), 99, np.array(99), None),
        (Integer(), 99, 99.0, "type"),
        (Integer(), 99, torch.tensor(99.0), "type"),
        (Integer(), 1, True, "type"),
        (Integer(), 99, torch.tensor([99]), "type"),
        (Integer(), 99, 98, "value"),
        (Real(), 0.8170728069, np.float32(0.8170728), None),
        (Real(), 0.8170728069, torch.tensor(0.8170728), None),
        (Real(), 2.0, 2, None),
        (Real(), 0.8170728069, 0.8170, "value"),
        (Real(), 1.0, float("nan"), "value"),
        (Real(), 1.0, torch.tensor([1.0]), "type"),
        (Real(), 1.0, "1.0", "type"),
        (Real(), 1.0, 1 + 0j, "type"),
        (Array("float32", "(2,)"), torch.ones(2), torch.ones(2) + 1e-7, None),
        (Array("float32", "(2,)"), torch.ones(2), np.ones(2, dtype=np.float32), "type"),
        (Array("float32", "(2,)"), torch.ones(2), torch.ones(2, dtype=torch.float64), "type"),
        (Array("float32", "(2,)"), torch.ones(2), torch.ones(3), "shape"),
        (Array("float32", "(2,)"), torch.ones(2), torch.tensor([1.0, float("nan")]), "value"),
        (Array("bool", "(2,)"), torch.ones(2, dtype=torch.bool), [True, True], "type"),
        (Array("bool", "(2,)"), torch.ones(2, dtype=torch.bool), torch.ones(2), "type"),
        (Array("int64", "(2,)"), torch.arange(2), [0, 1], "type"),
        (Array("int64", "(2,)"), torch.arange(2), ["0", "1"], "type"),
        (
            Array("float64", "()"),
            torch.tensor(1.0).double(),
            torch.tensor(1.0 + 1e-6).double(),
            "value",
        ),
        (Items((Integer(), Text())), (1, "a"), [1, "a"], None),
        (Items((Integer(), Text())), (1, "a"), (1, "b"), "value"),
        (Items((Integer(), Text())), (1, "a"), (1,), "type"),
        (Items((Integer(), Text())), (1, "a"), {1: "a"}, "type"),
        (Items((Integer(), Text()), reveal=False), (1, "a"), (1, "b"), "value"),
        (Items((Integer(), Text()), reveal=False), (1, "a"), (1.0, "a"), "type"),
        (Items((Integer(), Text()), reveal=False), (1, "a"), (1, "a"), None),
        (Text(), "a", "a", None),
        (Text(), "a", b"a", "type"),
    ],
)
def test_specs_compare_values_not_containers(spec, expected, got, kind):
    problem = spec.compare(expected, got)
    assert (problem.kind if problem else None) == kind, problem


def test_items_that_do_not_reveal_name_the_wrong_items_only():
    shape = Items((Integer(), Integer()))
    spec = Items((shape, shape), names=("自注意力", "交叉注意力"), reveal=False)
    problem = spec.compare(((8, 8), (8, 50)), ((8, 8), (50, 8)))
    assert problem.message == "得到 ((8, 8), (50, 8))：交叉注意力 不对，自注意力 对了"
    problem = Items((Integer(), Integer()), reveal=False).compare((1, 2), (3, 4))
    assert problem.message == "得到 (3, 4)：[0]、[1] 不对"
    shown = Items((Integer(), Integer())).compare((1, 2), (3, 4))
    assert shown.message == "期望 (1, 2)，得到 (3, 4)"  # the default shows the expected value


def test_infinities_match_without_warnings():
    spec = Array("float32", "(2,)")
    minus_inf = torch.tensor([float("-inf"), 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a student's masked logits must not print a warning
        assert spec.compare(minus_inf, minus_inf.clone()) is None
    assert spec.compare(minus_inf, torch.tensor([0.0, 1.0])).kind == "value"


# --------------------------------------------------------------------------------------
# every shipped exercise
# --------------------------------------------------------------------------------------

# code in a hint gives the formula away: calls, attribute access, powers, assignments
CODE = re.compile(r"\w\(|\b(torch|np|F)\.|\.\w+\(|\*\*|[^=!<>]=[^=]|\bdim\b")


@pytest.mark.parametrize("exercise_id", list_exercises())
def test_every_exercise_passes_its_reference_and_is_stated_for_the_reader(exercise_id, capsys):
    ex = get_exercise(exercise_id)
    if ex.launch is None:  # a launched answer (a Triton kernel) is checked in tests/kernels
        assert check(exercise_id, ex.reference) is True, capsys.readouterr().out
    texts = [ex.title, ex.prompt, ex.hint, ex.explanation]
    if ex.kind == "function":
        cases = ex.cases()
        texts += [case.label for case in cases]
        assert all(case.label for case in cases)
        assert any(case.label.startswith("随机") for case in cases), "no random cases"
    assert not any("讲义" in text or "笔记" in text for text in texts)
    assert not CODE.search(ex.hint), f"the hint of {exercise_id} shows code: {ex.hint}"
    show(exercise_id)  # the task: neither the hint nor the formula of the explanation
    task = capsys.readouterr().out
    assert ex.hint not in task and ex.explanation not in task and "💡" not in task
    for name in ex.forbidden:
        exercises.running.resolve(name)


@pytest.mark.parametrize("exercise_id", list_exercises())
def test_every_exercise_uses_the_books_terms(exercise_id):
    """Titles, tasks, hints, solutions and case labels follow the appendix glossary, as the
    book's prose does (identifiers such as ``src_key_padding_mask`` are code, not prose)."""
    from test_prose import GLOSSARY, glossary_variants, reader_text, variants_used

    variants = glossary_variants(reader_text(GLOSSARY))
    ex = get_exercise(exercise_id)
    texts = [ex.title, ex.prompt, ex.hint, ex.explanation]
    if ex.kind == "function":
        texts += [case.label for case in ex.cases()]
    used = {u for text in texts for u in variants_used(re.sub(r"\w*_\w*", " ", text), variants)}
    assert not used, f"{exercise_id} uses variants the glossary rules out: {sorted(used)}"


# code in exercise texts is not marked up: calls ``f(x)`` and tuples ``(B, T)`` are code
CALL_OR_TUPLE = re.compile(r"\w+\([^()]*\)|\([^()，。；]*,[^()，。；]*\)")


@pytest.mark.parametrize("exercise_id", list_exercises())
def test_every_exercise_follows_the_books_typography(exercise_id):
    """Full-width （…） around Chinese, (…) around English, no ASCII quotes in prose."""
    from test_prose_numbers import typography_problems

    ex = get_exercise(exercise_id)
    texts = [ex.title, ex.prompt, ex.hint, ex.explanation]
    if ex.kind == "function":
        texts += [case.label for case in ex.cases()]
    problems = [p for text in texts for p in typography_problems(CALL_OR_TUPLE.sub(" ", text))]
    assert not problems, f"{exercise_id}: {problems}"


def test_the_forbidden_attention_function_is_caught_in_the_shipped_exercise(capsys):
    assert check("attention.scaled_dot_product", F.scaled_dot_product_attention) is False
    assert "scaled_dot_product_attention" in capsys.readouterr().out


def test_wrap_display_keeps_every_line_within_80_columns_and_every_character():
    from lecturekit.exercises.specs import display_width, wrap_display

    text = (
        "写函数 split_heads(x, n_heads)："
        + "每个符号的向量，" * 30
        + "\n  indented "
        + "word " * 40
    )
    wrapped = wrap_display(text, 80)
    assert all(display_width(line) <= 80 for line in wrapped.split("\n"))
    assert wrapped.replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(" ", "")
    assert "split_heads(x," in wrapped  # an identifier is never cut
    assert all(line.startswith("  ") for line in wrapped.split("\n")[-3:])  # indent kept
    assert not any(line.startswith("，") for line in wrapped.split("\n"))
    assert wrap_display("x" * 100, 80) == "x" * 100  # an unbreakable token stays whole


def test_show_prints_no_line_wider_than_80_columns(capsys):
    from lecturekit.exercises import list_exercises, show
    from lecturekit.exercises.specs import display_width

    for exercise_id in list_exercises():
        show(exercise_id)
        for line in capsys.readouterr().out.splitlines():
            assert display_width(line) <= 80, (exercise_id, line)


class _LyingArray(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.broadcast(self, other).shape, dtype=bool)

    def __ne__(self, other):
        return np.zeros(np.broadcast(self, other).shape, dtype=bool)


class _LyingTensor(torch.Tensor):
    """Holds zeros; its .numpy() claims to equal anything (issue 45.4)."""

    def numpy(self, *args, **kwargs):
        return np.zeros(tuple(self.shape), dtype=np.float32).view(_LyingArray)


def test_a_tensor_subclass_is_read_as_the_plain_tensor_it_holds(sample_exercises, capsys):
    expected = torch.tensor([0.25, 0.75])
    lying = torch.zeros(2).as_subclass(_LyingTensor)
    problem = Array("float32", "(2,)").compare(expected, lying)
    assert problem is not None and problem.kind == "value", problem
    assert Array("float32", "(2,)").compare(expected, expected.as_subclass(_LyingTensor)) is None
    answer = lambda x, dim=-1: torch.zeros_like(x).as_subclass(_LyingTensor)  # noqa: E731
    assert check("sample.softmax", answer) is False
    assert "数值不对" in capsys.readouterr().out


def test_a_tuple_instead_of_a_tensor_is_named_without_a_raw_printout(sample_exercises, capsys):
    """Issue 45.10: a returned (output, weights) pair used to give numpy's ValueError and a
    multi-line tensor printout."""
    answer = lambda x, dim=-1: (softmax_by_hand(x), torch.ones(4, 5) * 7)  # noqa: E731
    assert check("sample.softmax", answer) is False
    out = capsys.readouterr().out
    assert "你返回的是一个 tuple（2 个元素），题目要的是一个 torch 张量" in out, out
    assert "ValueError" not in out and "tensor(" not in out, out


def test_a_str_subclass_that_claims_equality_is_read_as_its_plain_value():
    class AlwaysEqual(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    assert Text().compare("right", AlwaysEqual("wrong")).kind == "value"
    assert Text().compare("right", AlwaysEqual("right")) is None


def test_a_huge_str_is_described_not_echoed():
    """Issue 45.8: a 100 MB answer produced 100 MB of feedback."""
    problem = Text().compare("right", "x" * 10_000_000)
    assert problem.kind == "value" and len(problem.message) < 1000
    assert "共 10000000 个字符，只显示前 300 个" in problem.message
