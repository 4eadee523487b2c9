"""The model's "triton" backends agree with its "math"/"torch" backends on real model tensors."""

import warnings

import torch

import lecturekit.kernels as kernels
from lecturekit import Transformer, TransformerConfig


def _models(dtype: torch.dtype, device: torch.device) -> tuple[Transformer, Transformer]:
    base = dict(
        src_vocab_size=23, tgt_vocab_size=19, d_model=32, n_heads=2, d_ff=48,
        n_encoder_layers=1, n_decoder_layers=1, dropout=0.0,
    )  # fmt: skip
    torch.manual_seed(0)
    reference = Transformer(TransformerConfig(**base)).to(device, dtype)
    fused = Transformer(
        TransformerConfig(**base, attention_backend="triton", layernorm_backend="triton")
    ).to(device, dtype)
    fused.load_state_dict(reference.state_dict())
    return reference, fused


def _batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Sources and targets of different lengths, padded with pad_id=0."""
    src = torch.randint(3, 23, (3, 13))
    tgt = torch.randint(3, 19, (3, 9))
    src[1, 7:] = 0
    src[2, 2:] = 0
    tgt[0, 5:] = 0
    return src.to(device), tgt.to(device)


def test_triton_backends_match_math_backend(device, monkeypatch):
    calls = {"attention": 0, "layer_norm": 0}
    for name in calls:
        original = getattr(kernels, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(kernels, name, counted)

    reference, fused = _models(torch.float32, device)
    src, tgt = _batch(device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback would warn
        logits = fused(src, tgt)
        logits.float().square().mean().backward()
    logits_ref = reference(src, tgt)
    logits_ref.float().square().mean().backward()

    # encoder self-attention, decoder self- and cross-attention
    assert calls["attention"] == 3
    assert calls["layer_norm"] > 0
    torch.testing.assert_close(logits, logits_ref, atol=1e-5, rtol=1e-4)
    for (name, p), p_ref in zip(fused.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, p_ref.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_training_with_attention_dropout_runs_through_the_kernel(device, monkeypatch):
    seen_dropout = []
    original = kernels.attention

    def recording(*args, **kwargs):
        seen_dropout.append(kwargs.get("dropout_p", 0.0))
        return original(*args, **kwargs)

    monkeypatch.setattr(kernels, "attention", recording)
    torch.manual_seed(0)
    config = TransformerConfig(
        23, 19, d_model=32, n_heads=2, d_ff=48, n_encoder_layers=1, n_decoder_layers=1,
        dropout=0.25, attention_backend="triton",
    )  # fmt: skip
    model = Transformer(config).to(device).train()
    src, tgt = _batch(device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to sdpa would warn
        logits = model(src, tgt)
        logits.square().mean().backward()

    assert seen_dropout == [0.25, 0.25, 0.25]
    assert torch.isfinite(logits).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_triton_multi_head_attention_is_causal_for_unequal_lengths(device):
    """is_causal with Tq != Tk runs the kernel (no fallback) and means what it means in torch."""
    from lecturekit import MultiHeadAttention

    module = MultiHeadAttention(32, 2, backend="triton").to(device).eval()
    x, memory = torch.randn(2, 5, 32, device=device), torch.randn(2, 9, 32, device=device)
    for query, keys in ((x, memory), (memory, x)):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # a fallback would warn
            out, _ = module(query, keys, keys, is_causal=True)
        q, (k, v) = module.project_q(query), module.project_kv(keys)
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        expected = module.out_proj(module.merge_heads(expected))
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)


def test_cached_decoding_runs_the_kernel_with_the_caches_padding(device, monkeypatch):
    """Incremental decoding on the "triton" backend: the cross attention hands the memory
    padding kept in the cache to the kernel (no fallback) and equals the full pass."""
    padding_masks = []
    original = kernels.attention

    def recording(*args, **kwargs):
        padding_masks.append(kwargs.get("key_padding_mask"))
        return original(*args, **kwargs)

    monkeypatch.setattr(kernels, "attention", recording)
    reference, fused = _models(torch.float32, device)
    src, tgt = _batch(device)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback would warn
        full = reference(src, tgt)
        cache = fused.init_cache(fused.encode(src), memory_key_padding_mask=src == 0)
        padding_masks.clear()
        steps = [fused.decode_step(tgt[:, t], cache) for t in range(3)]
    torch.testing.assert_close(torch.stack(steps, 1), full[:, :3], atol=1e-5, rtol=1e-4)
    cross = [mask for mask in padding_masks if mask is not None]  # self attention: None
    assert len(cross) == 3 and all(torch.equal(mask, src == 0) for mask in cross)
