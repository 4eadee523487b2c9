"""Checkpoint averaging: the keeper copies the right steps, the average is the mean, fit calls
the callback after every update, and the shipped reverse-small keeps its last checkpoints."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lecturekit.training import TrainConfig, fit
from lecturekit.training.averaging import KeepLastCheckpoints, average_checkpoints

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_keeper_copies_every_nth_step_and_keeps_the_newest() -> None:
    layer = nn.Linear(2, 2)
    keeper = KeepLastCheckpoints(every=2, keep=3)
    for step in range(1, 10):
        with torch.no_grad():
            layer.weight.fill_(float(step))
        keeper(step, layer)
    assert list(keeper.states) == [4, 6, 8]
    # copies, not views: later changes of the model do not reach them
    assert float(keeper.states[8]["weight"][0, 0]) == 8.0
    assert float(keeper.states[4]["weight"][1, 1]) == 4.0
    with pytest.raises(ValueError, match="every"):
        KeepLastCheckpoints(every=0, keep=1)
    with pytest.raises(ValueError, match="keep"):
        KeepLastCheckpoints(every=1, keep=0)


def test_average_is_the_parameter_wise_mean() -> None:
    torch.manual_seed(0)
    states = [
        {"w": torch.randn(3, 4), "b": torch.randn(4), "count": torch.tensor(7)} for _ in range(5)
    ]
    averaged = average_checkpoints(states)
    for name in ("w", "b"):
        reference = torch.stack([s[name].double() for s in states]).mean(0)
        torch.testing.assert_close(averaged[name].double(), reference, rtol=0, atol=1e-7)
        assert averaged[name].dtype == torch.float32
    assert int(averaged["count"]) == 7
    # one state: itself
    torch.testing.assert_close(average_checkpoints(states[:1])["w"], states[0]["w"])


def test_average_rejects_mismatched_states() -> None:
    a = {"w": torch.zeros(2), "n": torch.tensor(1)}
    with pytest.raises(ValueError, match="non-empty list"):
        average_checkpoints([])
    with pytest.raises(ValueError, match="non-empty list"):
        average_checkpoints(a)
    with pytest.raises(ValueError, match=r"states\[1\].*\['v'"):
        average_checkpoints([a, {"v": torch.zeros(2), "n": torch.tensor(1)}])
    with pytest.raises(ValueError, match="different shapes"):
        average_checkpoints([a, {"w": torch.zeros(3), "n": torch.tensor(1)}])
    with pytest.raises(ValueError, match="non-float tensor 'n'"):
        average_checkpoints([a, {"w": torch.zeros(2), "n": torch.tensor(2)}])


def test_fit_calls_on_step_after_every_update() -> None:
    from lecturekit import Transformer, TransformerConfig
    from lecturekit.data import make_task

    task = make_task("copy", n_train=64, n_valid=8, n_test=8, seed=0)
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(
            len(task.src_vocab), len(task.tgt_vocab), d_model=16, n_heads=2, d_ff=16,
            n_encoder_layers=1, n_decoder_layers=1, max_len=32,
        )
    )  # fmt: skip
    seen: list[int] = []
    keeper = KeepLastCheckpoints(every=2, keep=2)

    def on_step(step: int, m: nn.Module) -> None:
        seen.append(step)
        keeper(step, m)

    config = TrainConfig(max_steps=5, batch_size=16, warmup_steps=2, progress=False)
    fit(model, task.encoded("train"), None, config, on_step=on_step)
    assert seen == [1, 2, 3, 4, 5]
    assert list(keeper.states) == [2, 4]
    with pytest.raises(TypeError, match="on_step"):
        fit(model, task.encoded("train"), None, config, on_step=3)


def test_shipped_reverse_small_keeps_its_last_checkpoints() -> None:
    from lecturekit import pretrained

    saved = pretrained.checkpoints("reverse-small")
    assert list(saved) == [800, 850, 900, 950, 1000]
    shipped = pretrained.load("reverse-small").model.state_dict()
    assert all(torch.equal(saved[1000][k], v) for k, v in shipped.items())
    assert not torch.equal(saved[800]["output_proj.weight"], shipped["output_proj.weight"])
    with pytest.raises(ValueError, match="keeps no intermediate weights"):
        pretrained.checkpoints("reverse-tiny")
    with pytest.raises(ValueError, match="go together"):
        pretrained.Recipe("x", "x", "reverse", {}, {}, checkpoint_every=5)


def test_average_checkpoints_refuses_models_instead_of_state_dicts() -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="states\\[0\\] must be a state dict \\(model.state_dict"):
        average_checkpoints([model, model])
