"""Hostile cases, part B: checkpoints & shipped models, data."""

from __future__ import annotations

from hostile.cases import (
    NAN,
    error,
    flipped,
    fresh_cache,
    load,
    result,
    rewrite,
    saved_tiny,
    tiny,
    tmp,
)


def _t():
    import torch

    return torch


def _lk():
    import lecturekit

    return lecturekit


# ------------------------------------------------------------------ checkpoints & shipped models
def _save(path, model=None, **kw):
    from lecturekit.training import save_checkpoint

    return save_checkpoint(path, model if model is not None else tiny(), **kw)


def _stride0(p):
    p["state_dict"]["encoder.layers.0.linear1.weight"] = _t().zeros(1).expand(10**8)


def _afile():
    a = tmp("afile")
    a.write_text("x")
    return _save(a / "x.pt")


def _deep(depth: int):
    meta: dict = {}
    node = meta
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return meta


SHIPPED = ("reverse-tiny", "translation-small", "reverse-small", "number-tf-s0")
error(
    "checkpoints",
    "stride0_checkpoint",
    lambda: load(rewrite(_stride0)),
    "bytes",
    "size",
    "checksum",
    "storage",
)
for name in SHIPPED[:3]:
    error("checkpoints", f"flipped_bytes_{name}", flipped(name), "checksum", "damaged")
error("checkpoints", "save_into_a_file", _afile, "path", "file")
error("checkpoints", "save_empty_path", lambda: _save(""), "path")
error("checkpoints", "save_path_none", lambda: _save(None), "path")
error("checkpoints", "save_path_int", lambda: _save(3), "path")
error(
    "checkpoints",
    "save_deep_metadata",
    lambda: _save(tmp(), metadata=_deep(10_000)),
    "metadata",
    "deep",
    "nest",
)
error(
    "checkpoints",
    "save_metadata_object",
    lambda: _save(tmp(), metadata={"x": object()}),
    "metadata",
)
error("checkpoints", "save_metadata_list", lambda: _save(tmp(), metadata=[1, 2]), "metadata")
error(
    "checkpoints",
    "save_metadata_nan_key",
    lambda: _save(tmp(), metadata={NAN: 1}),
    "metadata",
    "key",
)
error("checkpoints", "save_model_none", lambda: _save(tmp(), model=_t().nn.Linear(2, 2)), "model")
error(
    "checkpoints",
    "map_location_mps",
    lambda: load(saved_tiny(), map_location="mps"),
    "map_location",
)
error(
    "checkpoints",
    "map_location_garbage",
    lambda: load(saved_tiny(), map_location="gpu9"),
    "map_location",
)
error(
    "checkpoints", "map_location_int", lambda: load(saved_tiny(), map_location=3.5), "map_location"
)
error("checkpoints", "load_missing_file", lambda: load(tmp("none.pt")), "path", "no such", "exist")
error(
    "checkpoints", "load_empty_file", lambda: (p := tmp("e.pt")).write_bytes(b"") or load(p), "path"
)
error(
    "checkpoints",
    "load_text_file",
    lambda: (p := tmp("t.pt")).write_text("hello") and load(p),
    "path",
    "checkpoint",
)
error(
    "checkpoints",
    "load_truncated",
    lambda: (p := saved_tiny()).write_bytes(p.read_bytes()[:500]) and load(p),
    "path",
    "damaged",
    "checkpoint",
)
error("checkpoints", "load_directory", lambda: load(tmp("d.pt").parent), "path")
error(
    "checkpoints",
    "load_override_d_model",
    lambda: load(saved_tiny(), d_model=32),
    "d_model",
    "runtime",
)
error(
    "checkpoints",
    "load_into_other_model",
    lambda: load(saved_tiny(), model=tiny(d_model=32, n_heads=2)),
    "d_model",
    "config",
)
error(
    "checkpoints",
    "load_config_nan_dropout",
    lambda: load(rewrite(lambda p: p["model_config"].update(dropout=NAN)), verify=False),
    "dropout",
)
error(
    "checkpoints",
    "load_config_huge_d_model",
    lambda: load(rewrite(lambda p: p["model_config"].update(d_model=2**20)), verify=False),
    "d_model",
    "model_config",
)
error(
    "checkpoints",
    "load_wrong_shape_weight",
    lambda: load(
        rewrite(
            lambda p: p["state_dict"].update({"encoder.layers.0.linear1.weight": _t().zeros(3, 3)})
        ),
        verify=False,
    ),
    "shape",
    "encoder",
)
error(
    "checkpoints",
    "load_missing_weight",
    lambda: load(
        rewrite(lambda p: p["state_dict"].pop("encoder.layers.0.linear1.weight")), verify=False
    ),
    "missing",
    "encoder",
)
error(
    "checkpoints",
    "load_int_weight",
    lambda: load(
        rewrite(
            lambda p: p["state_dict"].update(
                {"encoder.layers.0.linear1.weight": _t().zeros(32, 16, dtype=_t().int64)}
            )
        ),
        verify=False,
    ),
    "dtype",
    "encoder",
)
error(
    "checkpoints",
    "load_nan_weight",
    lambda: load(
        rewrite(lambda p: p["state_dict"]["encoder.layers.0.linear1.weight"].fill_(NAN)),
        verify=False,
    ),
    "nan",
    "finite",
    "encoder",
)
error(
    "checkpoints", "pretrained_load_list", lambda: _lk().pretrained.load(["reverse-tiny"]), "name"
)
error(
    "checkpoints",
    "pretrained_load_unknown",
    lambda: _lk().pretrained.load("reverse-huge"),
    "name",
    "reverse-huge",
)
error(
    "checkpoints",
    "pretrained_load_path_traversal",
    lambda: _lk().pretrained.load("../../etc/passwd"),
    "name",
)
error(
    "checkpoints",
    "pretrained_load_override_bad",
    lambda: _lk().pretrained.load("reverse-tiny", dropout=NAN),
    "dropout",
)
result(
    "checkpoints",
    "pretrained_load_each",
    lambda: [_lk().pretrained.load(n).model.training for n in SHIPPED],
    lambda r: not any(r),
)
error(
    "checkpoints",
    "average_no_checkpoints",
    lambda: _lk().training.average_checkpoints([]),
    "checkpoints",
    "empty",
    "paths",
)
error("checkpoints", "keep_last_0", lambda: _lk().training.KeepLastCheckpoints(0), "n", "keep")

# ------------------------------------------------------------------ data
V = lambda: _lk().data  # noqa: E731
error("data", "char_vocab_multichar", lambda: V().CharVocab(["ab"]), "token")
error("data", "word_vocab_space", lambda: V().WordVocab(["big dog"]), "token")
error("data", "word_vocab_str", lambda: V().WordVocab("big"), "tokens")
error("data", "char_vocab_empty_token", lambda: V().CharVocab([""]), "token")
error("data", "char_vocab_int_token", lambda: V().CharVocab([3]), "token")
error(
    "data",
    "vocab_from_dict_none",
    lambda: V().Vocab.from_dict({"kind": "char", "tokens": None}),
    "tokens",
)
error(
    "data",
    "vocab_from_dict_kind",
    lambda: V().Vocab.from_dict({"kind": "byte", "tokens": []}),
    "kind",
)
error("data", "vocab_from_dict_list", lambda: V().Vocab.from_dict(["a"]), "state")
error("data", "vocab_decode_float_id", lambda: V().CharVocab("ab").decode([4.9]), "id")
error("data", "vocab_decode_99", lambda: V().CharVocab("ab").decode([99]), "99", "id")
error("data", "vocab_decode_negative", lambda: V().CharVocab("ab").decode([-1]), "-1", "id")
result(
    "data",
    "vocab_encode_unknown_is_unk",
    lambda: V().CharVocab("ab").encode("abz"),
    lambda r: r[-1] == V().UNK_ID,
    "z",
    "unknown",
)
error("data", "vocab_encode_none", lambda: V().CharVocab("ab").encode(None), "text")
error(
    "data", "vocab_id_to_token_bool", lambda: V().CharVocab("ab").id_to_token(True), "id", "index"
)


def _bpe():
    return V().BPE.train(["low lower lowest", "new newer"], 5)


error("data", "bpe_train_none", lambda: V().BPE.train(None, 5), "corpus")
error("data", "bpe_train_str", lambda: V().BPE.train("low lower", 5), "corpus")
error(
    "data", "bpe_min_count_nan", lambda: V().BPE.train(["low low"], 5, min_count=NAN), "min_count"
)
error("data", "bpe_min_count_0", lambda: V().BPE.train(["low low"], 5, min_count=0), "min_count")
error("data", "bpe_num_merges_negative", lambda: V().BPE.train(["low low"], -1), "num_merges")
error("data", "bpe_num_merges_huge_float", lambda: V().BPE.train(["low low"], 1e9), "num_merges")
error("data", "bpe_from_dict_empty", lambda: V().BPE.from_dict({}), "state", "alphabet")
error(
    "data",
    "bpe_from_dict_bad_merge",
    lambda: V().BPE.from_dict({"alphabet": ["a"], "merges": [["a"]]}),
    "merges",
)
error("data", "bpe_decode_ids_float", lambda: _bpe().decode_ids([4.9]), "ids", "id")
error("data", "bpe_decode_ids_99", lambda: _bpe().decode_ids([999]), "999", "id")
error("data", "bpe_decode_ids_str", lambda: _bpe().decode_ids("abc"), "ids")
error("data", "bpe_encode_none", lambda: _bpe().encode(None), "text")
result(
    "data",
    "bpe_round_trip",
    lambda: _bpe().decode(_bpe().encode("lowest newer")),
    lambda r: r == "lowest newer",
)
error("data", "make_task_list", lambda: V().make_task(["copy"]), "name")
error("data", "make_task_unknown", lambda: V().make_task("copyy"), "name", "copyy")
error("data", "make_task_negative", lambda: V().make_task("copy", n_train=-1), "n_train")
error("data", "make_task_float", lambda: V().make_task("copy", n_train=2.5), "n_train")
error("data", "make_task_huge", lambda: V().make_task("copy", n_train=10**10), "n_train")
error("data", "make_task_seed_str", lambda: V().make_task("copy", n_train=4, seed="0"), "seed")
result(
    "data",
    "make_task_seed_2_64",
    lambda: V().make_task("copy", n_train=4, seed=2**64).train,
    lambda r: len(r) == 4,
    "seed",
)
error(
    "data",
    "empty_task_max_src_len",
    lambda: V().make_task("copy", n_train=0, n_valid=0, n_test=0).max_src_len,
    "empty",
    "pairs",
    "split",
    "n_train",
)
error(
    "data", "pinyin_n_train_0", lambda: V().make_task("pinyin", n_train=0), "n_train", timeout=120
)
error(
    "data",
    "pinyin_n_train_1e10",
    lambda: V().make_task("pinyin", n_train=10**10),
    "n_train",
    timeout=120,
)
error(
    "data",
    "pinyin_vocab_size_0",
    lambda: V().make_task("pinyin", n_train=5, vocab_size=0),
    "vocab_size",
    timeout=120,
)
error(
    "data",
    "pinyin_alpha_nan",
    lambda: V().make_task("pinyin", n_train=5, alpha=NAN),
    "alpha",
    timeout=120,
)
result(
    "data", "lexicon_zero_byte_cache",
    fresh_cache(lambda d: (_lk().data.pinyin._cache_path(d).write_bytes(b""), V().load_lexicon())[1]),
    lambda r: len(r) > 1000, timeout=240,
)  # fmt: skip
error(
    "data",
    "make_loader_batch_0",
    lambda: V().make_loader([([4], [5])], batch_size=0, bucket=False),
    "batch_size",
)
error(
    "data",
    "make_loader_batch_0_bucket",
    lambda: V().make_loader([([4], [5])], batch_size=0),
    "batch_size",
)
error(
    "data",
    "make_loader_batch_float",
    lambda: V().make_loader([([4], [5])], batch_size=2.5),
    "batch_size",
)
error(
    "data", "make_loader_empty", lambda: list(V().make_loader([], batch_size=2)), "pairs", "empty"
)
error(
    "data",
    "make_loader_str_pairs",
    lambda: list(V().make_loader([("ab", "c")], batch_size=2)),
    "pairs",
    "int",
    "ids",
)
error("data", "collate_empty_source", lambda: V().collate([([], [4])]), "source", "empty")
error(
    "data",
    "collate_pad_eq_eos",
    lambda: V().collate([([4], [5])], pad_id=2, eos_id=2),
    "pad_id",
    "eos_id",
)
error("data", "collate_target_has_eos", lambda: V().collate([([4], [5, 2])]), "eos", "target")
error("data", "collate_float_ids", lambda: V().collate([([4.5], [5])]), "int", "ids", "source")
error("data", "pad_sequences_ragged_nested", lambda: V().pad_sequences([[[1]], [2]]), "seqs", "int")
error(
    "data",
    "pad_sequences_pad_float",
    lambda: V().pad_sequences([[1], [2, 3]], pad_id=0.5),
    "pad_id",
)
error("data", "bucket_sampler_batch_0", lambda: V().BucketBatchSampler([1, 2], 0), "batch_size")
error("data", "number_to_chinese_negative", lambda: V().number_to_chinese(-1), "n")
error("data", "number_to_chinese_float", lambda: V().number_to_chinese(2.5), "n")
error("data", "number_to_chinese_huge", lambda: V().number_to_chinese(10**30), "n")


def _hmm():
    from lecturekit.capstone.engines import HmmBaseline

    return HmmBaseline()


error("data", "hmm_k_1e9", lambda: _hmm().candidates(["ji qi"], 10**9), "k")
error("data", "hmm_k_0", lambda: _hmm().candidates(["ji qi"], 0), "k")
error("data", "hmm_pinyins_str", lambda: _hmm().candidates("ji qi", 3), "pinyins")
error("data", "hmm_unknown_syllable", lambda: _hmm().candidates(["zzz"], 3), "pinyins", "syllable")
