"""Bad input raises ValueError/TypeError naming the argument, expected and actual values."""

import pytest
import torch

import lecturekit
from lecturekit import Transformer, TransformerConfig
from lecturekit.chapters import ch01_rnn, ch04_nat, ch06_copy


@pytest.fixture(scope="module")
def model(make_tiny_model):
    sizes = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=8, d_ff=12, dropout=0.1)
    return make_tiny_model(**sizes, max_len=6, positional="learned")


SRC = torch.randint(3, 11, (2, 4))
TGT = torch.randint(3, 13, (2, 5))
BOOL = torch.bool
NAN, INF = float("nan"), float("inf")
X = torch.zeros(2, 4, 8)


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        # rank, dtype and type of the token ids
        (lambda m: m(SRC[0], TGT), ValueError, r"src must have shape \(B, S\).*got \(4,\)"),
        (
            lambda m: m(SRC, TGT[..., None]),
            ValueError,
            r"tgt must have shape \(B, T\).*\(2, 5, 1\)",
        ),
        (lambda m: m(SRC.float(), TGT), TypeError, r"src must hold integer.*torch.float32"),
        # narrow integer ids and meta tensors (issue #20)
        *[
            (
                lambda m, d=dtype: m(SRC.to(d), TGT),
                TypeError,
                rf"src must hold token ids as torch.long.*got {dtype}; convert with src.long\(\)",
            )
            for dtype in (torch.int8, torch.uint8, torch.int16)
        ],
        (lambda m: m(SRC, TGT.to("meta")), ValueError, r"tgt is on the meta device"),
        (
            lambda m: m(SRC, TGT, tgt_mask=torch.zeros(5, 5, device="meta")),
            ValueError,
            r"tgt_mask is on the meta device",
        ),
        # float masks are added to the scores: NaN and +inf are refused (issue #20)
        (
            lambda m: m(SRC, TGT, tgt_mask=torch.zeros(5, 5).index_fill(0, torch.tensor([2]), NAN)),
            ValueError,
            r"tgt_mask holds NaN: a float mask is added.*-inf.*bool mask",
        ),
        (
            lambda m: m(SRC, TGT, src_key_padding_mask=torch.zeros(2, 4).fill_(INF)),
            ValueError,
            r"src_key_padding_mask holds inf",
        ),
        (
            lambda m: m.encode(SRC, src_key_padding_mask=torch.full((2, 4), NAN)),
            ValueError,
            r"src_key_padding_mask holds NaN",
        ),
        (
            lambda m: m(SRC, TGT, memory_mask=torch.full((5, 4), INF)),
            ValueError,
            r"memory_mask holds inf",
        ),
        (
            lambda m: m(SRC, TGT, tgt_mask=torch.full((5, 5), 3e38)),
            ValueError,
            r"tgt_mask holds 3e\+38.*at most 10000",
        ),
        (
            lambda m: m.init_cache(
                torch.zeros(2, 4, 8), memory_key_padding_mask=torch.full((2, 4), NAN)
            ),
            ValueError,
            r"memory_key_padding_mask holds NaN",
        ),
        (
            lambda m: m.encoder.layers[0].self_attn(X, X, X, attn_mask=torch.full((4, 4), NAN)),
            ValueError,
            r"attn_mask holds NaN",
        ),
        (lambda m: m(SRC.tolist(), TGT), TypeError, r"src must be a torch.Tensor.*list"),
        (lambda m: m(SRC[:, :0], TGT), ValueError, r"src must have shape.*not be empty"),
        # ids outside the vocabulary
        (
            lambda m: m(SRC.clone().fill_(11), TGT),
            ValueError,
            r"src ids must be in \[0, 11\), got 11",
        ),
        (
            lambda m: m(SRC, TGT.clone().fill_(-1)),
            ValueError,
            r"tgt ids must be in \[0, 13\), got -1",
        ),
        # batch sizes that disagree
        (lambda m: m(SRC[:1], TGT), ValueError, r"same batch size.*\(1, 4\).*\(2, 5\)"),
        # masks of the wrong shape or dtype
        (
            lambda m: m(SRC, TGT, src_key_padding_mask=torch.zeros(2, 5, dtype=BOOL)),
            ValueError,
            r"src_key_padding_mask must have shape \(B, S\)=\(2, 4\), got \(2, 5\)",
        ),
        (
            lambda m: m(SRC, TGT, src_key_padding_mask=torch.zeros(2, 4, dtype=torch.long)),
            TypeError,
            r"src_key_padding_mask must be a bool or float tensor, got dtype torch.int64",
        ),
        (
            lambda m: m(SRC, TGT, tgt_mask=torch.zeros(4, 4, dtype=BOOL)),
            ValueError,
            r"tgt_mask must have shape \(Tq, Tk\)=\(5, 5\).*got \(4, 4\)",
        ),
        (
            lambda m: m(SRC, TGT, tgt_mask=torch.zeros(5, 5, dtype=torch.int32)),
            TypeError,
            r"tgt_mask must be a bool or float tensor",
        ),
        (
            lambda m: m(SRC, TGT, tgt_key_padding_mask=torch.zeros(2, 4, dtype=BOOL)),
            ValueError,
            r"tgt_key_padding_mask must have shape \(B, T\)=\(2, 5\)",
        ),
        (
            lambda m: m(SRC, TGT, memory_key_padding_mask=torch.zeros(2, 5, dtype=BOOL)),
            ValueError,
            r"memory_key_padding_mask must have shape \(B, S\)=\(2, 4\)",
        ),
        (lambda m: m(SRC, TGT, src_mask=torch.zeros(3, 3, dtype=BOOL)), ValueError, r"src_mask"),
        (
            lambda m: m(SRC, TGT, memory_mask=torch.zeros(5, 5, dtype=BOOL)),
            ValueError,
            r"memory_mask must have shape \(Tq, Tk\)=\(5, 4\)",
        ),
        (lambda m: m(SRC, TGT, tgt_mask=[[0.0]]), TypeError, r"tgt_mask must be a torch.Tensor"),
        # longer than max_len with learned positions
        (
            lambda m: m(torch.randint(3, 11, (2, 7)), TGT),
            ValueError,
            r"src length must be <= max_len=6 with learned positions, got 7",
        ),
        (
            lambda m: m.decode(torch.randint(3, 13, (2, 9)), torch.zeros(2, 4, 8)),
            ValueError,
            r"tgt length must be <= max_len=6.*got 9",
        ),
        # memory of the wrong width, batch or dtype
        (
            lambda m: m.decode(TGT, torch.zeros(2, 4, 6)),
            ValueError,
            r"memory must have shape \(B, S, d_model=8\), got \(2, 4, 6\)",
        ),
        (
            lambda m: m.decode(TGT, torch.zeros(3, 4, 8)),
            ValueError,
            r"memory and tgt must have the same batch size, got memory batch 3 and tgt batch 2",
        ),
        (
            lambda m: m.decode(TGT, torch.zeros(2, 4, 8, dtype=torch.long)),
            TypeError,
            r"memory must be a floating point",
        ),
        (
            lambda m: m.init_cache(
                torch.zeros(2, 4, 8), memory_key_padding_mask=torch.zeros(2, 3, dtype=BOOL)
            ),
            ValueError,
            r"memory_key_padding_mask must have shape \(B, S\)=\(2, 4\)",
        ),
        (
            lambda m: m.decode_step(torch.tensor([1, 13]), m.init_cache(torch.zeros(2, 4, 8))),
            ValueError,
            r"tokens ids must be in \[0, 13\), got 13",
        ),
    ],
)
def test_bad_input_raises_clear_error(model, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(model)


def test_errors_come_before_any_computation(model, monkeypatch):
    calls = []
    monkeypatch.setattr(model.encoder, "forward", lambda *a, **k: calls.append(1))
    with pytest.raises(ValueError, match="tgt_mask"):
        model(SRC, TGT, tgt_mask=torch.zeros(4, 4, dtype=BOOL))
    with pytest.raises(ValueError, match="tgt ids"):
        model(SRC, TGT.clone().fill_(99))
    assert calls == []


def test_sinusoidal_positions_extend_past_max_len():
    config = TransformerConfig(
        11, 13, d_model=8, n_heads=2, d_ff=12, n_encoder_layers=1, n_decoder_layers=1, max_len=4
    )
    logits = Transformer(config).eval()(torch.randint(3, 11, (1, 9)), torch.randint(3, 13, (1, 7)))
    assert logits.shape == (1, 7, 13) and torch.isfinite(logits).all()


def test_config_must_be_a_config():
    with pytest.raises(TypeError, match="TransformerConfig"):
        Transformer({"d_model": 8})


def test_float_masks_with_minus_inf_and_finite_biases_are_fine(model):
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5)  # 0 and -inf
    as_bool = model(SRC, TGT, tgt_mask=causal.isinf())
    assert torch.equal(model(SRC, TGT, tgt_mask=causal), as_bool)
    padding = torch.zeros(2, 4).index_fill(1, torch.tensor([3]), -INF)
    logits = model(SRC, TGT, src_key_padding_mask=padding, tgt_mask=causal - 0.5)
    assert torch.isfinite(logits).all()


def test_int32_ids_are_accepted(model):
    assert torch.equal(model(SRC.int(), TGT.int()), model(SRC, TGT))


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
