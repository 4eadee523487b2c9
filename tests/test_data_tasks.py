import dataclasses
import random

import pytest

from lecturekit.data import TASKS, list_tasks, make_task, number_to_chinese
from lecturekit.data.tasks import DATA_TASKS, DATE_FORMATS, DATE_RANGE

# hand-checked readings
READINGS = {
    0: "零", 7: "七", 10: "十", 11: "十一", 19: "十九", 20: "二十", 22: "二十二",
    100: "一百", 101: "一百零一", 110: "一百一十", 111: "一百一十一", 200: "二百",
    1000: "一千", 1001: "一千零一", 1010: "一千零一十", 1100: "一千一百", 2000: "两千",
    2222: "两千二百二十二", 10000: "一万", 10001: "一万零一", 10010: "一万零一十",
    10100: "一万零一百", 11000: "一万一千", 20000: "两万", 20481: "两万零四百八十一",
    100000: "十万", 100001: "十万零一", 110000: "十一万", 120345: "十二万零三百四十五",
    200000: "二十万", 305020: "三十万五千零二十", 999999: "九十九万九千九百九十九",
    1000000: "一百万", 12000: "一万两千", 220000: "二十二万",
}  # fmt: skip

DIGIT_VALUES = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2}
UNIT_VALUES = {"十": 10, "百": 100, "千": 1000}


def parse_chinese(text: str) -> int:
    """Independent reader: accumulate digit * unit, 万 scales the part read so far."""
    total, section, digit = 0, 0, 0
    for ch in text:
        if ch in DIGIT_VALUES:
            digit = DIGIT_VALUES[ch]
        elif ch in UNIT_VALUES:
            section += (digit or 1) * UNIT_VALUES[ch]
            digit = 0
        else:
            assert ch == "万"
            total += (section + digit) * 10_000
            section, digit = 0, 0
    return total + section + digit


@pytest.mark.parametrize("n, reading", sorted(READINGS.items()))
def test_number_to_chinese_hand_checked(n, reading):
    assert number_to_chinese(n) == reading


def test_number_to_chinese_properties():
    rng = random.Random(0)
    numbers = list(range(3000)) + [rng.randrange(10**6) for _ in range(20000)]
    numbers += [rng.randrange(10**8) for _ in range(2000)]
    for n in numbers:
        text = number_to_chinese(n)
        assert parse_chinese(text) == n, (n, text)
        assert "零零" not in text
        assert n == 0 or not text.endswith("零")
        assert not text.startswith("一十")
        assert "零万" not in text
        assert ("万零" in text) == (n >= 10_000 and 0 < n % 10_000 < 1000)


def test_number_to_chinese_bad_input():
    with pytest.raises(ValueError, match=r"\[0, 10\^8\)"):
        number_to_chinese(-1)
    with pytest.raises(ValueError):
        number_to_chinese(10**8)
    with pytest.raises(TypeError, match="int"):
        number_to_chinese(3.0)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_splits_are_disjoint_deterministic_and_encodable(name):
    data = make_task(name, n_train=600, n_valid=100, n_test=100, seed=3)
    assert (len(data.train), len(data.valid), len(data.test)) == (600, 100, 100)
    sources = [set(s for s, _ in data.split(split)) for split in ("train", "valid", "test")]
    assert sum(len(s) for s in sources) == 800  # sources unique within and across splits
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    again = make_task(name, n_train=600, n_valid=100, n_test=100, seed=3)
    assert again.train == data.train and again.test == data.test
    assert make_task(name, n_train=600, n_valid=100, n_test=100, seed=4).test != data.test
    for src, tgt in data.train + data.valid + data.test:
        # every character/word is in the vocabulary (strict encoding raises otherwise)
        assert data.decode_src(data.encode_src(src)) == src
        assert data.decode_tgt(data.encode_tgt(tgt)) == tgt
    pairs = data.encoded("valid")
    assert len(pairs) == 100 and all(len(s) > 0 and len(t) > 0 for s, t in pairs)
    assert data.max_src_len >= max(len(s) for s, _ in pairs)


def test_global_random_state_untouched():
    random.seed(123)
    expected = random.random()
    random.seed(123)
    make_task("number", 50, 10, 10)
    assert random.random() == expected


def test_task_rules():
    data = make_task("number", 2000, 0, 0)
    for src, tgt in data.train:
        assert number_to_chinese(int(src)) == tgt and int(src) < 10**6 and str(int(src)) == src
    data = make_task("reverse", 200, 0, 0)
    assert all(t == s[::-1] for s, t in data.train)
    data = make_task("copy", 200, 0, 0)
    assert all(t == s for s, t in data.train)


def test_date_task_covers_all_forms_and_is_correct():
    import datetime

    data = make_task("date", 3000, 0, 0, seed=1)
    seen_forms = set()
    for src, tgt in data.train:
        day = datetime.date.fromisoformat(tgt)
        assert DATE_RANGE[0] <= day <= DATE_RANGE[1]
        forms = {name for name, fmt in DATE_FORMATS.items() if fmt(day) == src}
        assert forms, (src, tgt)
        seen_forms |= forms
    assert seen_forms == set(DATE_FORMATS)
    assert DATE_FORMATS["long_us"](datetime.date(2021, 3, 5)) == "March 5, 2021"
    assert DATE_FORMATS["short_uk"](datetime.date(2021, 3, 5)) == "5 Mar 2021"
    assert DATE_FORMATS["chinese"](datetime.date(2021, 3, 5)) == "2021年3月5日"
    assert DATE_FORMATS["us_numeric"](datetime.date(2021, 3, 5)) == "03/05/2021"


def test_translation_reorders_words():
    data = make_task("translation", 2000, 0, 0)
    en, zh = data.src_vocab, data.tgt_vocab
    assert "dog" in en and "狗" in zh
    from lecturekit.data.tasks import ADJECTIVES, NOUNS

    n_adjective_noun = 0
    for src, tgt in data.train:
        words, out = src.split(), tgt.split()
        for a, b in zip(words, words[1:], strict=False):
            if a in ADJECTIVES and b in NOUNS:
                # adjective before the noun in the source, after it in the target
                i = out.index(NOUNS[b])
                assert ADJECTIVES[a] in out[i + 1 :]
                n_adjective_noun += 1
        # SOV: the verb (or 不 + verb) is the last word of the target
        assert out[-1] not in set(NOUNS.values()) | set(ADJECTIVES.values())
    assert n_adjective_noun > 100
    src, tgt = TASKS["translation"].example
    assert data.encode_src(src) and data.encode_tgt(tgt)


def test_examples_and_listing():
    assert TASKS["number"].example == ("20481", number_to_chinese(20481))
    assert set(list_tasks()) == set(TASKS) | set(DATA_TASKS)
    for spec in TASKS.values():
        src, tgt = spec.example
        assert spec.src_vocab().encode(src, strict=True)
        assert spec.tgt_vocab().encode(tgt, strict=True)


def test_too_many_examples_requested(monkeypatch):
    tiny = dataclasses.replace(TASKS["copy"], name="tiny", sample=lambda rng: _digit(rng))
    monkeypatch.setitem(TASKS, "tiny", tiny)
    assert len(make_task("tiny", 8, 1, 1).train) == 8
    with pytest.raises(ValueError, match="only produce 10 distinct sources"):
        make_task("tiny", n_train=9, n_valid=1, n_test=1)


def _digit(rng):
    d = str(rng.randrange(10))
    return d, d


def test_bad_arguments():
    with pytest.raises(ValueError, match="name must be one of"):
        make_task("sorting")
    with pytest.raises(ValueError, match="n_train"):
        make_task("copy", n_train=-1)
    with pytest.raises(ValueError, match="split must be"):
        make_task("copy", 10, 1, 1).split("dev")
    with pytest.raises(ValueError, match="not in the vocabulary"):
        make_task("copy", 10, 1, 1).encode_src("xyz")


def test_capacities_are_the_number_of_distinct_sources():
    import datetime

    first, last = DATE_RANGE
    days = [first + datetime.timedelta(days=i) for i in range((last - first).days + 1)]
    assert TASKS["date"].capacity == len({form(d) for d in days for form in DATE_FORMATS.values()})
    rng = random.Random(0)
    numbers = {int(TASKS["number"].sample(rng)[0]) for _ in range(20_000)}
    assert min(numbers) == 0 and max(numbers) < TASKS["number"].capacity == 10**6
    for name in ("copy", "reverse", "translation"):  # far more sources than MAX_EXAMPLES
        assert TASKS[name].capacity is None


@pytest.mark.parametrize(
    ("name", "sizes", "pattern"),
    [
        ("number", (1_500_000, 0, 0), r"1,500,000 is too many for task 'number'.*500,000"),
        ("number", (500_000, 500, 0), r"500,500 is too many"),
        ("date", (87_000, 500, 0), r"87,500 is too many for task 'date': it has 174,629"),
        ("copy", (1_000_000, 1, 0), r"1,000,001 is more than make_task generates"),
    ],
)
def test_oversized_requests_fail_before_drawing(name, sizes, pattern, monkeypatch):
    from lecturekit.data import tasks

    def no_drawing(*args, **kwargs):
        raise AssertionError("drew examples before checking the size")

    monkeypatch.setattr(tasks, "_draw_distinct", no_drawing)
    with pytest.raises(ValueError, match=pattern):
        make_task(name, *sizes)


@pytest.mark.parametrize("name", [["copy"], None, 3])
def test_make_task_name_must_be_a_str(name) -> None:
    with pytest.raises(TypeError, match="name must be a task name"):
        make_task(name)


def test_an_empty_task_says_why_it_has_no_max_len() -> None:
    empty = make_task("copy", n_train=0, n_valid=0, n_test=0)
    for side in ("src", "tgt"):
        with pytest.raises(ValueError, match=rf"max_{side}_len of task 'copy' is undefined"):
            getattr(empty, f"max_{side}_len")
    assert make_task("copy", n_train=3, n_valid=0, n_test=0).max_src_len >= 1
