"""KV cache: incremental decoding equals full recomputation; index_select for beam search."""

import pytest
import torch

from lecturekit import KVCache
from lecturekit.model.cache import decode_cached


def make_model(make_tiny_model, **overrides):
    sizes = dict(src_vocab_size=19, tgt_vocab_size=21, d_ff=20, n_decoder_layers=2, max_len=512)
    return make_tiny_model(**{**sizes, **overrides})


def data(batch=3, src_len=5, tgt_len=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 19, (batch, src_len), generator=g)
    src[0, 3:] = 0  # padding in one row
    tgt = torch.randint(3, 21, (batch, tgt_len), generator=g)
    tgt[:, 0] = 1  # BOS
    return src, tgt


@pytest.mark.parametrize(
    "overrides",
    [dict(), dict(norm_first=True, attention_backend="sdpa"), dict(positional="learned")],
)
def test_cached_steps_equal_full_recomputation(overrides, make_tiny_model):
    model = make_model(make_tiny_model, **overrides)
    src, tgt = data()
    with torch.no_grad():
        full = model(src, tgt)  # (B, T, V)
        memory = model.encode(src)
        cache = model.init_cache(memory, memory_key_padding_mask=src == 0)
        assert len(cache) == 0 and cache.batch_size == 3
        assert torch.equal(cache.memory_key_padding_mask, src == 0)
        for t in range(tgt.size(1)):
            step = model.decode_step(tgt[:, t], cache)
            assert step.shape == (3, 21) and len(cache) == t + 1
            torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=0)
    assert cache[0].self_keys.shape == (3, 2, 6, 8)
    assert cache[1].cross_keys.shape == (3, 2, 5, 8)


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_cross_mask_is_built_once_and_a_fully_padded_source_matches(backend, make_tiny_model):
    model = make_model(make_tiny_model, attention_backend=backend)
    src, tgt = data()
    src[1] = 0  # a source that is all padding: its cross attention sees nothing (zeros)
    with torch.no_grad():
        full = model(src, tgt, src_key_padding_mask=src == 0)
        cache = model.init_cache(model.encode(src), memory_key_padding_mask=src == 0)
        mask, dead = cache[0].cross_mask  # (B, 1, 1, S) additive, (B, 1, 1, 1)
        assert mask.shape == (3, 1, 1, 5) and dead.flatten().tolist() == [False, True, False]
        assert all(layer.cross_mask[0] is mask for layer in cache.layers)  # one for all layers
        for t in range(tgt.size(1)):
            step = model.decode_step(tgt[:, t], cache)
            torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=0)
        selected = cache.index_select(torch.tensor([1, 0]))
        assert torch.equal(selected[1].cross_mask[0], mask[[1, 0]])
        assert selected[1].cross_mask[1].flatten().tolist() == [True, False]


def test_index_select_reorders_rows(make_tiny_model):
    model = make_model(make_tiny_model)
    src, tgt = data()
    with torch.no_grad():
        memory = model.encode(src)
        cache = model.init_cache(memory, memory_key_padding_mask=src == 0)
        for t in range(3):
            model.decode_step(tgt[:, t], cache)
        index = torch.tensor([2, 2, 0, 1])
        selected = cache.index_select(index)
        assert isinstance(selected, KVCache) and len(selected) == 3 and selected.batch_size == 4
        torch.testing.assert_close(selected[1].self_values, cache[1].self_values[index])
        assert torch.equal(selected.memory_key_padding_mask, (src == 0)[index])
        # continue both: the selected cache gives the rows of the original
        original = model.decode_step(tgt[:, 3], cache)
        reordered = model.decode_step(tgt[index, 3], selected)
        torch.testing.assert_close(reordered, original[index], atol=1e-6, rtol=0)
        assert len(cache) == 4


def test_expanding_sources_to_beams_matches_repeated_input(make_tiny_model):
    model = make_model(make_tiny_model)
    src, tgt = data(batch=2)
    beams = 3
    with torch.no_grad():
        cache = model.init_cache(model.encode(src), memory_key_padding_mask=src == 0).index_select(
            torch.arange(2).repeat_interleave(beams)
        )
        repeated = src.repeat_interleave(beams, dim=0)
        direct = model.init_cache(model.encode(repeated), memory_key_padding_mask=repeated == 0)
        a = model.decode_step(tgt[:, 0].repeat_interleave(beams), cache)
        b = model.decode_step(tgt[:, 0].repeat_interleave(beams), direct)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_cache_errors(make_tiny_model):
    model = make_model(make_tiny_model, positional="learned", max_len=2)
    src, tgt = data()
    cache = model.init_cache(model.encode(src[:, :2]))
    with pytest.raises(ValueError, match=r"\(B,\)=\(3,\)"):
        model.decode_step(tgt[:2, 0], cache)
    with pytest.raises(ValueError, match=r"\(B,\)"):
        model.decode_step(tgt[:, :2], cache)
    with pytest.raises(TypeError, match="KVCache"):
        model.decode_step(tgt[:, 0], [])
    model.decode_step(tgt[:, 0], cache)
    model.decode_step(tgt[:, 1], cache)
    with pytest.raises(ValueError, match="max_len=2"):
        model.decode_step(tgt[:, 2], cache)
    with pytest.raises(TypeError, match="index"):
        cache.index_select(torch.tensor([0.0]))
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        cache.index_select(torch.tensor([3]))
    with pytest.raises(ValueError, match="memory must have shape"):
        model.init_cache(torch.zeros(2, 3, 8))


def test_static_cache_is_written_in_place_and_grows_when_full(make_tiny_model):
    """Steps write into one preallocated buffer; a full buffer doubles and keeps its content."""
    model = make_model(make_tiny_model)
    src, tgt = data()
    with torch.no_grad():
        full = model(src, tgt)
        cache = model.init_cache(model.encode(src), memory_key_padding_mask=src == 0, capacity=4)
        layer = cache[0]
        buffer = layer.key_buffer.data_ptr()
        keys = []
        for t in range(tgt.size(1)):
            step = model.decode_step(tgt[:, t], cache)
            torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=0)
            keys.append(layer.self_keys[:, :, -1:].clone())  # this step's keys
            if t < 4:  # room left: the same memory, written in place
                assert layer.key_buffer.data_ptr() == buffer and layer.key_buffer.size(2) == 4
    assert layer.key_buffer.size(2) == 8 and layer.length == 6  # grew once, 4 -> 8
    assert torch.equal(layer.self_keys, torch.cat(keys, dim=2))
    with pytest.raises(ValueError, match="capacity"):
        model.init_cache(model.encode(src), capacity=0)


def test_index_select_copies_only_filled_steps_and_keeps_capacity(make_tiny_model):
    model = make_model(make_tiny_model)
    src, tgt = data()
    with torch.no_grad():
        cache = model.init_cache(model.encode(src), memory_key_padding_mask=src == 0, capacity=5)
        for t in range(2):
            model.decode_step(tgt[:, t], cache)
        selected = cache.index_select(torch.tensor([1, 0]))
    assert selected[0].key_buffer.shape == (2, 2, 5, 8) and selected[0].length == 2
    assert torch.equal(selected[0].self_values, cache[0].self_values[[1, 0]])
    # the selected cache has its own memory: writing to it leaves the original alone
    assert selected[0].key_buffer.data_ptr() != cache[0].key_buffer.data_ptr()


@pytest.mark.parametrize("within_sources", [False, True])
def test_reorder_in_place_equals_index_select(within_sources, make_tiny_model):
    """reorder_ gives the rows of index_select, in two buffers that take turns, and keeps
    working when the cache grows; within_sources leaves the cross-attention part alone."""
    model = make_model(make_tiny_model)
    src, tgt = data(batch=2, tgt_len=7)
    rows = torch.arange(2).repeat_interleave(2)  # row 2b + j: beam j of source b
    # each row from a row of its own source, as beam search reorders
    orders = [[1, 1, 2, 3], [0, 1, 3, 2], [1, 0, 2, 2], [0, 0, 3, 3], [1, 0, 3, 2]]
    if not within_sources:
        orders[3] = [3, 0, 0, 1]  # rows move between sources
    with torch.no_grad():
        start = model.init_cache(model.encode(src), memory_key_padding_mask=src == 0, capacity=3)
        in_place, copied = start.index_select(rows), start.index_select(rows)
        buffers = []
        for t, index in enumerate(map(torch.tensor, orders)):
            tokens = tgt[rows, t]
            a = model.decode_step(tokens, in_place)
            b = model.decode_step(tokens, copied)
            torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
            in_place.reorder_(index, within_sources=within_sources)
            copied = copied.index_select(index)
            buffers.append(in_place[0].key_buffer.data_ptr())
            for mine, theirs in zip(in_place.layers, copied.layers, strict=True):
                assert torch.equal(mine.self_keys, theirs.self_keys)
                assert torch.equal(mine.self_values, theirs.self_values)
        assert len(in_place) == len(copied) == len(orders)
        assert in_place[0].key_buffer.size(2) == 6  # grew once, at step 4
        assert buffers[0] == buffers[2] != buffers[1]  # two buffers take turns
        a = model.decode_step(tgt[rows, 5], in_place)
        b = model.decode_step(tgt[rows, 5], copied)
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match=r"\(B,\)=\(4,\)"):
        in_place.reorder_(torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        in_place.reorder_(torch.tensor([0, 1, 2, 4]))


def test_beam_search_reorders_a_growing_cache(make_tiny_model):
    """Beam search through a cache that starts with room for 2 steps and must grow twice
    while beams are reordered equals beam search by recomputation."""
    from lecturekit.decoding import beam_search

    model = make_model(make_tiny_model, max_len=2)  # sinusoidal: positions extend, cache grows
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)  # sharp distributions: beams differ and get reordered
    src, _ = data()
    cached = beam_search(model, src, beam_size=3, max_len=7, n_best=3).hypotheses
    uncached = beam_search(model, src, beam_size=3, max_len=7, n_best=3, use_cache=False)
    for r1, r2 in zip(cached, uncached.hypotheses, strict=True):
        assert [h.tokens for h in r1] == [h.tokens for h in r2]
        assert [h.score for h in r1] == pytest.approx([h.score for h in r2], abs=1e-4)
    assert max(len(h.tokens) for r in cached for h in r) > 4  # past the second growth


def test_unvalidated_step_equals_validated_step(make_tiny_model):
    model = make_model(make_tiny_model)
    src, tgt = data()
    with torch.inference_mode():
        memory = model.encode(src)
        checked, unchecked = (model.init_cache(memory) for _ in range(2))
        for t in range(3):
            a = model.decode_step(tgt[:, t], checked)
            b = model.decode_step(tgt[:, t], unchecked, validate=False)
            assert torch.equal(a, b)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decode_cached_feeds_several_positions_and_advances_every_layer(
    norm_first, make_tiny_model
):
    """``decode_cached`` takes any number of new positions (causal, lower right) and writes
    them into every layer's cache in the one call: the layers never fall out of step."""
    model = make_model(make_tiny_model, norm_first=norm_first)
    src, tgt = data()
    with torch.no_grad():
        full = model(src, tgt)
        cache = model.init_cache(model.encode(src), memory_key_padding_mask=src == 0)
        model.decode_step(tgt[:, 0], cache)
        x = model.tgt_positions(model.tgt_embedding(tgt[:, 1:4]) * 4.0, offset=1)  # 3 steps
        out = decode_cached(model.decoder, x, cache)  # (B, 3, D)
        torch.testing.assert_close(model.output_proj(out), full[:, 1:4], atol=1e-5, rtol=0)
        assert len(cache) == cache.steps == 4
        assert all(layer.length == 4 for layer in cache.layers)
        assert repr(cache) == "KVCache(layers=2, batch=3, steps=4)"


def test_decode_cached_refuses_bad_input_before_writing(make_tiny_model):
    model = make_model(make_tiny_model)
    src, tgt = data()
    with torch.no_grad():
        cache = model.init_cache(model.encode(src))
        x = model.tgt_embedding(tgt[:, :1])  # (B, 1, D)
        with pytest.raises(TypeError, match="cache must be a KVCache"):
            decode_cached(model.decoder, x, cache.layers)
        with pytest.raises(ValueError, match=r"x must have shape \(B, T_new, D\)=\(3, "):
            decode_cached(model.decoder, x[:2], cache)
        with pytest.raises(ValueError, match=r"x must have shape"):
            decode_cached(model.decoder, x[:, :0], cache)
        with pytest.raises(TypeError, match="x must be a float tensor"):
            decode_cached(model.decoder, tgt[:, :1], cache)
        other = make_model(make_tiny_model, n_decoder_layers=1)
        with pytest.raises(ValueError, match="cache must come from this model's init_cache"):
            decode_cached(other.decoder, x, cache)
    assert len(cache) == 0  # refused before anything was written


def test_a_cache_of_another_model_is_refused(make_tiny_model):
    model = make_tiny_model()
    other = make_tiny_model(d_model=32, n_decoder_layers=2)
    src = torch.tensor([[4, 5, 6]])
    cache = other.init_cache(other.encode(src))
    with pytest.raises(ValueError, match="cache must come from this model's init_cache"):
        model.decode_step(torch.tensor([1]), cache)
