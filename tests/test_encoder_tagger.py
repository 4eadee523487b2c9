"""The encoder-only EncoderTagger (lecturekit.model.tagger) and fit training it: a label at
every source position, the metrics hook, a stopped run continued bit for bit."""

from __future__ import annotations

import random

import pytest
import torch

from lecturekit.data.batching import collate
from lecturekit.model.config import TransformerConfig
from lecturekit.model.tagger import EncoderTagger
from lecturekit.model.transformer import Transformer, init_weights
from lecturekit.training import ScheduledSampling, TrainConfig, fit
from lecturekit.training.evaluation import evaluate

pytestmark = pytest.mark.usefixtures("one_torch_thread")

VOCAB = 12  # ids 4..11 are tokens; 0-3 the specials


def _config(**fields) -> TransformerConfig:
    base = dict(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=2, n_decoder_layers=1)
    return TransformerConfig(VOCAB, VOCAB, **{**base, "dropout": 0.1, "max_len": 16, **fields})


def _tagger(seed: int = 0, **fields) -> EncoderTagger:
    torch.manual_seed(seed)
    return EncoderTagger(_config(**fields))


def _pairs(n: int = 64, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    # tag every token with its mirror id (4 <-> 11, 5 <-> 10, ...): one label per position
    rng = random.Random(seed)
    rows = [[rng.randrange(4, VOCAB) for _ in range(rng.randrange(2, 7))] for _ in range(n)]
    return [(row, [15 - t for t in row]) for row in rows]


def _settings(**fields) -> TrainConfig:
    base = dict(
        max_steps=12, batch_size=16, warmup_steps=4, eval_every=4, progress=False, device="cpu"
    )
    return TrainConfig(**{**base, **fields})


def test_encoder_tagger_shares_the_transformers_encoder_side() -> None:
    tagger = _tagger().eval()
    torch.manual_seed(0)
    transformer = Transformer(_config()).eval()
    src = torch.tensor([[4, 5, 6, 7], [8, 9, 0, 0]])  # the second row is padded
    logits = tagger(src)
    assert logits.shape == (2, 4, VOCAB)
    alone = tagger(src[1:, :2])  # no padding at all: the same logits
    torch.testing.assert_close(logits[1, :2], alone[0], rtol=1e-5, atol=1e-5)
    # the same embedding and encoder weights give the Transformer's memory
    transformer.src_embedding.load_state_dict(tagger.src_embedding.state_dict())
    transformer.encoder.load_state_dict(tagger.encoder.state_dict())
    memory = transformer.encode(src)
    torch.testing.assert_close(logits, tagger.output_proj(memory), rtol=1e-5, atol=1e-5)
    params = {n for n, _ in tagger.named_parameters()}
    assert not any(n.startswith(("decoder", "tgt_")) for n in params)  # no decoder at all
    with pytest.raises(ValueError, match="src"):
        tagger(torch.tensor([[4, VOCAB]]))  # an id outside the vocabulary
    with pytest.raises(TypeError, match="config"):
        EncoderTagger({"d_model": 16})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_len=4 with learned positions"):
        _tagger(positional="learned", max_len=4)(torch.tensor([[4] * 5]))


def test_init_weights_gives_embeddings_std_d_model_to_the_minus_half() -> None:
    torch.manual_seed(0)
    embedding, stack = torch.nn.Embedding(1000, 64), torch.nn.Linear(64, 64)
    init_weights([stack], [embedding], 64)
    assert embedding.weight.std().item() == pytest.approx(64**-0.5, rel=0.05)
    bound = (6 / 128) ** 0.5  # Xavier uniform
    assert stack.weight.abs().max().item() <= bound and stack.bias.abs().max() > 0


def test_batch_tags_are_the_targets_aligned_with_the_sources() -> None:
    batch = collate(_pairs(3))
    assert torch.equal(batch.tags, batch.tgt_in[:, 1:])
    assert batch.tags.shape == batch.src.shape  # one label per source position
    assert torch.equal(batch.tags == 0, batch.src == 0)


def test_fit_trains_a_tagger_with_a_label_at_every_position() -> None:
    model = _tagger()
    calls: list[bool] = []

    def metrics(m: torch.nn.Module) -> dict[str, float]:
        calls.append(m.training)
        torch.rand(3)  # a draw here changes nothing of the training
        return {"first": float(m(torch.tensor([[4]])).argmax(-1).item() == 11)}

    history = fit(model, _pairs(), _pairs(16, 1), _settings(max_steps=60), metrics=metrics)
    assert history.loss[-1] < history.loss[0] / 2
    assert history.eval_step == [4 * i for i in range(1, 16)]
    assert len(history.metrics["first"]) == len(history.eval_step) and calls == [False] * 15
    assert history.valid_token_accuracy[-1] > 0.9
    again = fit(_tagger(), _pairs(), _pairs(16, 1), _settings(max_steps=60))
    assert again.loss == history.loss  # the metrics' random draws changed no step
    scores = evaluate(model, [collate(_pairs(16, 1))])
    assert scores["token_accuracy"] == history.valid_token_accuracy[-1]
    assert 0 <= scores["exact_match"] <= scores["token_accuracy"]


def test_fit_continues_a_tagger_bit_for_bit(tmp_path) -> None:
    whole = fit(_tagger(), _pairs(), config=_settings(), metrics=lambda m: {"x": 1.0})
    first = _tagger()
    path = tmp_path / "state.pt"
    fit(
        first,
        _pairs(),
        config=_settings(max_steps=5),
        state_path=path,
        metrics=lambda m: {"x": 1.0},
    )
    second = _tagger(seed=7)  # the state's weights replace these
    resumed = fit(
        second, _pairs(), config=_settings(), state_path=path, metrics=lambda m: {"x": 1.0}
    )
    assert resumed.loss == whole.loss and resumed.metrics == whole.metrics
    assert resumed.eval_step == whole.eval_step


def test_fit_refuses_what_a_tagger_cannot_train_on() -> None:
    model = _tagger()
    with pytest.raises(ValueError, match=r"train\[0\] has 2 source and 3 target ids"):
        fit(model, [([4, 5], [6, 7, 8])] + _pairs(), config=_settings())
    sampling = ScheduledSampling(schedule="linear", k=1.0, min_prob=0.5)
    with pytest.raises(ValueError, match="scheduled_sampling needs a decoder"):
        fit(model, _pairs(), config=_settings(scheduled_sampling=sampling))
    with pytest.raises(TypeError, match="metrics must be callable"):
        fit(model, _pairs(), config=_settings(), metrics=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="metrics must return a dict of str -> float"):
        fit(model, _pairs(), config=_settings(max_steps=4), metrics=lambda m: 0.5)  # type: ignore[arg-type,return-value]
