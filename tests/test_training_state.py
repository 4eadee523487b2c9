"""fit(..., state_path=...): a stopped run continues bit for bit; a bad state is refused."""

from __future__ import annotations

import pytest
import torch

from lecturekit import Transformer, TransformerConfig
from lecturekit.data import make_loader, make_task
from lecturekit.training import ScheduledSampling, TrainConfig, fit, load_checkpoint
from lecturekit.training.checkpoint import _checksum

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TASK = make_task("copy", n_train=64, n_valid=8, n_test=8, seed=0)  # 4 batches of 16
STEPS = 14


def model(d_model: int = 16, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    vocab = len(TASK.src_vocab)
    config = TransformerConfig(
        vocab, vocab, d_model=d_model, n_heads=2, d_ff=32, n_encoder_layers=1,
        n_decoder_layers=1, dropout=0.1, max_len=32,
    )  # fmt: skip
    return Transformer(config)


def settings(**fields) -> TrainConfig:
    base = dict(max_steps=STEPS, batch_size=16, warmup_steps=4, eval_every=4, progress=False)
    return TrainConfig(**{**base, **fields})


def same_history(a, b) -> None:
    for name, value in a.to_dict().items():
        if name not in ("seconds", "eval_seconds"):  # wall time
            assert value == getattr(b, name), name
    assert len(a.eval_seconds) == len(b.eval_seconds)


def same_weights(a: Transformer, b: Transformer) -> None:
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name


class Crash(Exception):
    pass


def crash_at(step: int):
    def on_step(current: int, _model) -> None:
        if current == step:
            raise Crash

    return on_step


KINDS = {
    "TaskData, bucketing sampler": (lambda: TASK, {}),
    "shuffled DataLoader (its own generator), scheduled sampling": (
        lambda: make_loader(TASK.encoded("train"), batch_size=16, bucket=False, seed=3),
        {"scheduled_sampling": ScheduledSampling("linear", k=1.0, c=0.05, sample=True)},
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("stop", ["budget mid-epoch", "budget at epoch end", "crash"])
def test_a_continued_run_equals_an_uninterrupted_one_bit_for_bit(tmp_path, kind, stop) -> None:
    data, extra = KINDS[kind]
    straight = model()
    expected = fit(straight, data(), TASK, settings(**extra))
    path = tmp_path / "state.pt"
    if stop == "crash":
        with pytest.raises(Crash):  # the state of step 6 is on disk, step 7 is lost
            fit(model(), data(), TASK, settings(**extra), state_path=path, save_every=3,
                on_step=crash_at(7))  # fmt: skip
        first = 6
    else:
        first = 6 if stop == "budget mid-epoch" else 8
        fit(model(), data(), TASK, settings(max_steps=first, **extra), state_path=path)
    continued = model(seed=5)  # other initial weights: the state's are used
    torch.manual_seed(123)  # the state's generators, not the caller's, decide what follows
    steps: list[int] = []
    history = fit(continued, data(), TASK, settings(**extra), state_path=path,
                  on_step=lambda step, _: steps.append(step))  # fmt: skip
    assert steps == list(range(first + 1, STEPS + 1))  # continued, not started again
    same_weights(straight, continued)
    same_history(expected, history)
    checkpoint = load_checkpoint(path)  # the state file is a checkpoint of the model too
    same_weights(straight, checkpoint.model)


def test_a_finished_state_trains_no_further_and_is_left_as_it_is(tmp_path) -> None:
    path = tmp_path / "state.pt"
    trained = model()
    first = fit(trained, TASK, config=settings(), state_path=path)
    before = path.read_bytes()
    again = model()
    second = fit(again, TASK, config=settings(), state_path=path)
    assert path.read_bytes() == before
    same_weights(trained, again)
    same_history(first, second)


def test_a_non_finite_step_writes_nothing(tmp_path) -> None:
    path = tmp_path / "state.pt"
    broken = model()
    calls = []

    def poison(grad: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return grad * float("nan") if len(calls) == 5 else grad

    broken.output_proj.bias.register_hook(poison)
    with pytest.raises(FloatingPointError, match="gradients became nan at step 5"):
        fit(broken, TASK, config=settings(), state_path=path, save_every=1)
    state = torch.load(path, weights_only=True)["fit_state"]
    assert state["step"] == 4 and state["history"]["step"] == [1, 2, 3, 4]


def _rewrite(path, edit) -> None:
    """Edit the payload of ``path`` and write it with a correct checksum (a crafted file)."""
    payload = torch.load(path, weights_only=True)
    edit(payload)
    payload["checksum"] = _checksum(payload)
    torch.save(payload, path)


def _adam_to_sgd(payload) -> None:
    state = payload["fit_state"]["optimizer"]
    for key in state:
        state[key] = {"momentum_buffer": state[key]["exp_avg"]}


def _flip_a_weight(path) -> None:
    payload = torch.load(path, weights_only=True)
    next(iter(payload["state_dict"].values())).view(-1)[0] += 1.0
    torch.save(payload, path)  # the checksum is not updated


REFUSED = {
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:300]), "cannot read|not a lecturekit"),
    "empty": (lambda p: p.write_bytes(b""), "is empty"),
    "not a checkpoint at all": (lambda p: p.write_text("notes\n"), "not a lecturekit checkpoint"),
    "flipped bytes": (_flip_a_weight, "fails its checksum"),
    "another optimiser": (lambda p: _rewrite(p, _adam_to_sgd), r"another optimiser.*momentum"),
    "a damaged history": (
        lambda p: _rewrite(p, lambda d: d["fit_state"]["history"]["step"].pop()),
        "damaged .*steps of history",
    ),
    "damaged generators": (
        lambda p: _rewrite(p, lambda d: d["fit_state"]["rng"].update(torch=torch.zeros(3))),
        "damaged .*'rng' is not this run's",
    ),
}


@pytest.mark.parametrize("damage", REFUSED)
def test_a_damaged_state_is_refused_and_left_as_it_is(tmp_path, damage) -> None:
    path = tmp_path / "state.pt"
    fit(model(), TASK, config=settings(max_steps=2), state_path=path)
    edit, message = REFUSED[damage]
    edit(path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=rf"state_path: '.*state.pt'.*(?:{message}).*delete the"):
        fit(model(), TASK, config=settings(), state_path=path)
    assert path.read_bytes() == before


def test_a_state_of_another_run_is_refused(tmp_path) -> None:
    from lecturekit.training import save_checkpoint

    path = tmp_path / "state.pt"
    fit(model(), TASK, config=settings(max_steps=2), state_path=path)
    before = path.read_bytes()
    for other, config, data, message in [
        (model(d_model=8), settings(), TASK, r"another model \(d_ff|another model \(d_model"),
        (model(), settings(lr_factor=2.0), TASK, r"another training settings \(lr_factor: 1.0"),
        (model(), settings(seed=1), TASK, r"another training settings \(seed: 0 in the state"),
        (model(), settings(), make_task("copy", n_train=96, n_valid=8, n_test=8), "per epoch"),
    ]:
        with pytest.raises(ValueError, match=message):
            fit(other, data, config=config, state_path=path)
        assert path.read_bytes() == before
    # the budget, the evaluation and the bar may change between calls
    fit(model(), TASK, config=settings(max_steps=3, eval_every=1), state_path=path)
    checkpoint = tmp_path / "model.pt"
    save_checkpoint(checkpoint, model())
    with pytest.raises(ValueError, match="a model checkpoint without a training state"):
        fit(model(), TASK, config=settings(), state_path=checkpoint)


def test_state_path_and_save_every_are_checked() -> None:
    with pytest.raises(ValueError, match="save_every=5 needs a state_path"):
        fit(model(), TASK, config=settings(), save_every=5)
    with pytest.raises(ValueError, match="save_every must be"):
        fit(model(), TASK, config=settings(), state_path="x.pt", save_every=0)
    with pytest.raises(ValueError, match="which is a folder"):
        fit(model(), TASK, config=settings(), state_path=".")
