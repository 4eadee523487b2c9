"""Fuzzing the public entry points: every input gives a clear error or a finite result.

A clear error is a ``TypeError`` or ``ValueError`` whose message names the argument at fault
(the fix is part of each message; the unit tests of each module check those
texts). Hypothesis runs derandomized (the same examples on every run) and few examples per
entry point, so the whole file takes a few seconds.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lecturekit import Transformer, TransformerConfig
from lecturekit.data import TASKS, make_task
from lecturekit.decoding import beam_search, greedy, sample
from lecturekit.training import TrainConfig, fit
from lecturekit.training.checkpoint import load_checkpoint, save_checkpoint

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FUZZ = settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SRC_VOCAB, TGT_VOCAB, MAX_LEN = 11, 13, 6

# values of the wrong kind that careless callers pass: bools for counts, strings for
# numbers, NaN and infinities, None, containers
ODD = st.sampled_from(
    [True, False, None, "1", "1e-3", 1.5, -1, 0, math.nan, math.inf, -math.inf, [1], (0.9,)]
)


def arguments(good: dict, bad: dict) -> st.SearchStrategy:
    """Valid arguments from ``good``; in about a third of the examples one argument instead
    takes a value from ``bad`` (or ``ODD``), so both the errors and the results get tested."""

    @st.composite
    def draw(draw_one: st.DrawFn) -> dict:
        args = {name: draw_one(strategy) for name, strategy in good.items()}
        target = draw_one(st.sampled_from([None] * 2 * len(bad) + list(bad)))
        if target is not None:
            args[target] = draw_one(bad[target] | ODD)
        return args

    return draw()


def clear_error(error: Exception, names: list[str]) -> None:
    """Fail unless ``error`` is a TypeError/ValueError naming one of ``names``."""
    if not isinstance(error, (TypeError, ValueError)):
        raise AssertionError(f"{type(error).__name__} instead of a clear error") from error
    if not any(name in str(error) for name in names):
        raise AssertionError(f"error does not name any of {names}: {error}") from error
    event("clear error")  # --hypothesis-show-statistics counts the outcomes


@pytest.fixture(scope="module")
def model(make_tiny_model: Callable[..., Transformer]) -> Transformer:
    return make_tiny_model(
        src_vocab_size=SRC_VOCAB,
        tgt_vocab_size=TGT_VOCAB,
        d_model=8,
        d_ff=12,
        max_len=MAX_LEN,
        positional="learned",
    )


# -- configuration ---------------------------------------------------------------------------

GOOD_CONFIG = {
    "src_vocab_size": st.integers(3, 12),
    "tgt_vocab_size": st.integers(3, 12),
    "d_model": st.sampled_from([4, 8]),
    "n_heads": st.sampled_from([1, 2, 4]),
    "d_ff": st.integers(1, 8),
    "n_encoder_layers": st.integers(0, 2),
    "n_decoder_layers": st.integers(1, 2),
    "dropout": st.floats(0.0, 0.9),
    "max_len": st.integers(4, 8),  # learned positions: the test feeds 3 source tokens
    "pad_id": st.just(0),
    "bos_id": st.sampled_from([1, 2]),
    "eos_id": st.just(2),
    "layer_norm_eps": st.floats(1e-8, 1.0),
    "positional": st.sampled_from(["sinusoidal", "learned"]),
    "tie_embeddings": st.booleans(),
}
BAD_CONFIG = {
    "src_vocab_size": st.integers(-1, 2),
    "tgt_vocab_size": st.integers(-1, 2),
    "d_model": st.sampled_from([0, 6, 9]),
    "n_heads": st.sampled_from([0, 3]),
    "n_decoder_layers": st.just(0),
    "dropout": st.sampled_from([1.0, -0.1]),
    "max_len": st.just(0),
    "pad_id": st.sampled_from([-1, 1, 2, 12]),
    "eos_id": st.sampled_from([0, 12]),
    "layer_norm_eps": st.sampled_from([0.0, -1e-5]),
    "positional": st.just("rotary"),
    "share_vocab": st.just(True),
}


@settings(FUZZ, max_examples=40)
@given(fields=arguments(GOOD_CONFIG, BAD_CONFIG))
def test_config_and_model(fields: dict) -> None:
    try:
        config = TransformerConfig(**fields)
    except Exception as error:
        clear_error(error, list(fields))
        return
    torch.manual_seed(0)
    model = Transformer(config).eval()
    src = torch.arange(3, 6)[None] % config.src_vocab_size
    tgt = torch.tensor([[config.bos_id, 2 % config.tgt_vocab_size]])
    assert torch.isfinite(model(src, tgt)).all()
    out = greedy(model, src, 3).tokens
    assert not (out == config.pad_id).all(dim=1).any()  # every row produced something
    event("finite result")


# -- the model's forward pass ----------------------------------------------------------------

ID_DTYPES = st.sampled_from([torch.int16, torch.int8, torch.uint8, torch.float32, torch.bool])
MASK_VALUES = [0.0, -math.inf, -1e9, 2.5, torch.finfo(torch.float32).min]
BAD_MASK_VALUES = st.sampled_from([math.nan, math.inf, 1e30])


@st.composite
def ids(draw: st.DrawFn, vocab: int, length: int) -> torch.Tensor:
    values = draw(st.lists(st.integers(0, vocab - 1), min_size=2 * length, max_size=2 * length))
    return torch.tensor(values, dtype=draw(st.sampled_from([torch.long, torch.int32]))).view(
        2, length
    )


@st.composite
def bad_ids(draw: st.DrawFn, vocab: int) -> torch.Tensor:
    kind = draw(st.sampled_from(["dtype", "range", "length", "rank", "meta"]))
    tensor = draw(ids(vocab, 3))
    if kind == "dtype":
        return tensor.to(draw(ID_DTYPES))
    if kind == "range":
        return tensor.index_fill(1, torch.tensor([1]), draw(st.sampled_from([-1, vocab])))
    if kind == "length":
        return draw(ids(vocab, draw(st.sampled_from([0, MAX_LEN + 1]))))
    return tensor[0] if kind == "rank" else tensor.to("meta")


@st.composite
def masks(draw: st.DrawFn, shape: tuple[int, ...], bad: bool = False) -> torch.Tensor | None:
    if bad and draw(st.booleans()):
        return torch.zeros(shape[0] + 1, *shape[1:], dtype=torch.bool)  # wrong shape
    kind = draw(st.sampled_from(["none", "bool", "float"]))
    if kind == "none" and not bad:
        return None
    generator = torch.Generator().manual_seed(draw(st.integers(0, 9)))
    mask = torch.rand(shape, generator=generator) < 0.3
    if kind == "bool":
        return mask
    values = MASK_VALUES[1:] if not bad else []
    fill = draw(st.sampled_from(values)) if values else draw(BAD_MASK_VALUES)
    return torch.zeros(shape).masked_fill(mask, fill)


@FUZZ
@given(data=st.data())
def test_forward(model: Transformer, data: st.DataObject) -> None:
    s, t = data.draw(st.integers(1, MAX_LEN)), data.draw(st.integers(1, MAX_LEN))
    shapes = {
        "src_key_padding_mask": (2, s),
        "tgt_key_padding_mask": (2, t),
        "tgt_mask": (t, t),
        "memory_mask": (t, s),
    }
    good = {"src": ids(SRC_VOCAB, s), "tgt": ids(TGT_VOCAB, t)}
    good |= {name: masks(shape) for name, shape in shapes.items()}
    bad = {"src": bad_ids(SRC_VOCAB), "tgt": bad_ids(TGT_VOCAB)}
    bad |= {name: masks(shape, bad=True) for name, shape in shapes.items()}
    args = data.draw(arguments(good, bad))
    try:
        logits = model(**args)
    except Exception as error:
        clear_error(error, list(args))
        return
    assert logits.shape == (2, t, TGT_VOCAB) and torch.isfinite(logits).all()
    event("finite result")


# -- decoding --------------------------------------------------------------------------------

GOOD_DECODING = {
    "max_len": st.integers(1, 8),
    "beam_size": st.integers(1, 3),
    "n_best": st.just(1),
    "length_penalty": st.floats(0.0, 10.0),
    "temperature": st.floats(1e-6, 1e6),
    "top_k": st.none() | st.integers(1, 14),
    "top_p": st.none() | st.floats(0.01, 1.0),
}
BAD_DECODING = {
    "max_len": st.integers(-1, 0),
    "beam_size": st.integers(-1, 0),
    "n_best": st.integers(4, 5),
    "length_penalty": st.sampled_from([-0.5, 11.0, 1e300]),
    "temperature": st.sampled_from([0.0, -1.0, 1e-9]),
    "top_k": st.integers(-1, 0),
    "top_p": st.sampled_from([0.0, 1.5]),
}


USED = {
    "greedy": ["max_len"],
    "sample": ["max_len", "temperature", "top_k", "top_p"],
    "beam": ["max_len", "beam_size", "n_best", "length_penalty"],
}


@FUZZ
@given(data=st.data(), strategy=st.sampled_from(list(USED)))
def test_decoding(model, data, strategy) -> None:
    bad = {name: BAD_DECODING[name] for name in USED[strategy]}
    args = data.draw(arguments(GOOD_DECODING, bad))
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    max_len = args.pop("max_len")
    try:
        if strategy == "greedy":
            decoded = greedy(model, src, max_len)
            tokens, scores = decoded.tokens, decoded.scores
        elif strategy == "sample":
            sampling = {k: args[k] for k in ("temperature", "top_k", "top_p")}
            decoded = sample(model, src, max_len, seed=0, **sampling)
            tokens, scores = decoded.tokens, decoded.scores
        else:
            beam_size = args["beam_size"]
            n_best, alpha = args["n_best"], args["length_penalty"]
            results = beam_search(
                model, src, beam_size, max_len, n_best=n_best, length_penalty=alpha
            ).hypotheses
            scores = torch.tensor([h.score for hyps in results for h in hyps])
            tokens = torch.tensor([len(h.tokens) for hyps in results for h in hyps])
    except Exception as error:
        clear_error(error, ["max_len", *args])
        return
    assert torch.isfinite(scores).all() and tokens.numel() > 0
    event("finite result")


# -- checkpoints -----------------------------------------------------------------------------

PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
NOT_PLAIN = st.sampled_from([b"bytes", {1, 2}, 1j, object(), range(2), frozenset()])


def same(a, b) -> bool:
    """Equality that counts NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@pytest.fixture(scope="module")
def good_checkpoint(model, tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("ckpt") / "m.pt"
    return save_checkpoint(path, model, metadata={"first": 1}).read_bytes()


@settings(FUZZ, max_examples=25)
@given(metadata=st.dictionaries(st.text(max_size=3), PLAIN | NOT_PLAIN, max_size=3))
def test_checkpoint_metadata(model, good_checkpoint, tmp_path, metadata) -> None:
    path = tmp_path / "m.pt"
    path.write_bytes(good_checkpoint)
    try:
        save_checkpoint(path, model, metadata=metadata)
    except Exception as error:
        clear_error(error, ["metadata"])
        assert path.read_bytes() == good_checkpoint  # the good checkpoint is untouched
        return
    assert same(metadata, load_checkpoint(path).metadata)
    event("finite result")


# -- training --------------------------------------------------------------------------------

GOOD_TRAINING = {
    "max_steps": st.integers(1, 2),
    "batch_size": st.integers(1, 4),
    "schedule": st.sampled_from(["noam", "constant"]),
    "lr": st.floats(1e-6, 1.0),
    "lr_factor": st.floats(1e-3, 10.0),
    "warmup_steps": st.integers(1, 10),
    "betas": st.tuples(st.floats(0.0, 0.99), st.floats(0.0, 0.999)),
    "adam_eps": st.floats(1e-12, 1e-3),
    "weight_decay": st.floats(0.0, 0.1),
    "label_smoothing": st.floats(0.0, 0.5),
    "clip_grad_norm": st.none() | st.floats(0.1, 10.0),
    "eval_every": st.none() | st.integers(1, 3),
}
BAD_TRAINING = {
    "max_steps": st.integers(-1, 0),
    "batch_size": st.integers(-1, 0),
    "lr": st.sampled_from([0.0, -1e-3]),
    "betas": st.sampled_from([(0.9,), (0.9, 1.0), (1.5, 0.9), 0.9]),
    "adam_eps": st.just(-1.0),
    "label_smoothing": st.sampled_from([1.0, -0.1]),
    "clip_grad_norm": st.sampled_from([0.0, -1.0]),
    "eval_every": st.just(0),
}
PAIRS = [([3, 4, 5], [3, 4, 5]), ([6, 7], [6, 7]), ([8], [8]), ([9, 10, 3], [9, 10, 3])]


@settings(FUZZ, max_examples=12)
@given(fields=arguments(GOOD_TRAINING, BAD_TRAINING))
def test_train_config_and_fit(model, fields) -> None:
    try:
        config = TrainConfig(**fields, progress=False, device="cpu")
    except Exception as error:
        clear_error(error, list(fields))
        return
    history = fit(copy.deepcopy(model), PAIRS, PAIRS, config)
    assert len(history.step) == config.max_steps
    assert all(math.isfinite(x) for x in history.loss + history.valid_loss)
    event("finite result")


# -- data ------------------------------------------------------------------------------------


@settings(FUZZ, max_examples=30)
@given(
    name=st.sampled_from(["copy", "number", "date", "translation"]),
    sizes=arguments(
        {f"n_{split}": st.integers(0, 20) for split in ("train", "valid", "test")},
        {f"n_{split}": st.sampled_from([-1, 2_000_000, 10**12]) for split in ("train", "test")},
    ),
)
def test_make_task(name, sizes) -> None:
    try:
        task = make_task(name, **sizes)
    except Exception as error:
        clear_error(error, list(sizes))
        return
    defaults = TASKS[name].sizes  # None asks for the task's default size
    expected = [d if n is None else n for n, d in zip(sizes.values(), defaults, strict=True)]
    assert [len(task.train), len(task.valid), len(task.test)] == expected
    event("finite result")


# -- issue #28: decoding, losses, checkpoint bytes and the exercise checker ------------------
# Each asserts "a clear error, or a finite result that equals the per-item result", within a
# time bound per example (no hang).

PER_EXAMPLE_S = 20.0


@settings(FUZZ, max_examples=20)
@given(
    strategy=st.sampled_from(["greedy", "beam"]),
    max_len=st.sampled_from([1, 3, 5, 10**9, 62_833]) | ODD,
    rows=st.lists(st.lists(st.integers(3, SRC_VOCAB - 1), min_size=1, max_size=4), min_size=1,
                  max_size=3),
)  # fmt: skip
def test_decoding_a_batch_equals_decoding_each_source(model, strategy, max_len, rows) -> None:
    from lecturekit.decoding import sequence_log_prob

    width = max(len(r) for r in rows)
    src = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    start = time.monotonic()
    try:
        if strategy == "greedy":
            batch = greedy(model, src, max_len)
            alone = [greedy(model, src[b : b + 1], max_len) for b in range(len(rows))]
        else:
            batch = beam_search(model, src, 2, max_len)
            alone = [beam_search(model, src[b : b + 1], 2, max_len) for b in range(len(rows))]
    except Exception as error:
        clear_error(error, ["max_len"])
        return
    finally:
        assert time.monotonic() - start < PER_EXAMPLE_S
    assert torch.isfinite(batch.scores).all()
    for b, one in enumerate(alone):
        width = one.tokens.shape[1]
        assert torch.equal(batch.tokens[b, :width], one.tokens[0])
        assert (batch.tokens[b, width:] == model.config.pad_id).all()
        assert batch.scores[b].item() == pytest.approx(one.scores[0].item(), abs=1e-4)
    if strategy == "greedy":
        scored = sequence_log_prob(model, src, batch.tokens)
        assert scored.tolist() == pytest.approx(batch.scores.tolist(), abs=1e-4)
    event("finite result")


@settings(FUZZ, max_examples=30)
@given(
    targets=st.lists(st.integers(-101, 15), min_size=1, max_size=6),
    ignore_index=st.sampled_from([0, -100, None]),
    smoothing=st.sampled_from([0.0, 0.1, 0.5]) | ODD,
)
def test_the_loss_of_a_batch_equals_the_loss_of_each_token(targets, ignore_index, smoothing):
    from lecturekit.training.losses import label_smoothed_nll

    torch.manual_seed(0)
    logits = torch.randn(len(targets), TGT_VOCAB)
    target = torch.tensor(targets)
    try:
        losses = label_smoothed_nll(logits, target, smoothing, ignore_index, reduction="none")
    except Exception as error:
        clear_error(error, ["target", "smoothing"])
        return
    assert torch.isfinite(losses).all()
    for i in range(len(targets)):
        one = label_smoothed_nll(logits[i : i + 1], target[i : i + 1], smoothing, ignore_index)
        assert losses[i].item() == pytest.approx(one.item(), abs=1e-5)
    event("finite result")


@settings(FUZZ, max_examples=25)
@given(
    edits=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(1, 255)), min_size=0, max_size=3),
    cut=st.none() | st.floats(0.0, 1.0),
)
def test_a_damaged_checkpoint_loads_unchanged_or_not_at_all(
    model, good_checkpoint, tmp_path, edits, cut
) -> None:
    data = bytearray(good_checkpoint)
    for where, flip in edits:
        data[int(where * (len(data) - 1))] ^= flip
    if cut is not None:
        data = data[: int(cut * len(data))]
    path = tmp_path / "m.pt"
    path.write_bytes(bytes(data))
    start = time.monotonic()
    try:
        loaded = load_checkpoint(path)
    except Exception as error:
        clear_error(error, ["path"])
        return
    finally:
        assert time.monotonic() - start < PER_EXAMPLE_S
    expected = model.state_dict()  # what the good checkpoint holds
    for name, tensor in loaded.model.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
    event("finite result")


class _Hostile:
    """Answers a careless student could return: each fails differently when used."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        if self.kind == "repr":
            while True:
                pass
        if self.kind == "raise":
            raise RuntimeError("no repr")
        return "_Hostile()"

    def __float__(self) -> float:
        while self.kind == "float":
            pass
        raise TypeError("not a number")


HOSTILE = st.sampled_from(
    [
        None,
        1.5,
        "text",
        [1, 2],
        torch.zeros(2),
        _Hostile("repr"),
        _Hostile("raise"),
        _Hostile("float"),
        lambda *args, **kwargs: (_ for _ in ()).throw(KeyError("x")),
    ]
)


@settings(FUZZ, max_examples=12)
@given(
    exercise_id=st.sampled_from(["encoder.layernorm", "training.noam_lr", "decoder.causal_mask"]),
    answer=HOSTILE,
    as_function=st.booleans(),
)
def test_check_ends_with_a_verdict(exercise_id, answer, as_function, capsys) -> None:
    from lecturekit.exercises import check, running

    if as_function and not callable(answer):
        answer = (lambda value: lambda *args, **kwargs: value)(answer)
    uses_forked_worker = running.can_fork()
    if not uses_forked_worker and isinstance(answer, _Hostile) and answer.kind != "raise":
        return  # without a worker process, looping in a __repr__ can hang check (documented)
    start = time.monotonic()
    result = check(exercise_id, answer, time_limit=0.2)
    assert time.monotonic() - start < PER_EXAMPLE_S
    assert result is False  # none of them is right
    assert capsys.readouterr().out.startswith("❌")
    event("clear verdict")
