import pytest
import torch

from lecturekit.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Batch,
    BucketBatchSampler,
    collate,
    make_loader,
    make_task,
    pad_sequences,
)


def test_collate_teacher_forcing_layout():
    batch = collate([([5, 6, 7], [8, 9]), ([5], [10, 11, 12])])
    assert isinstance(batch, Batch) and len(batch) == 2
    assert batch.src.tolist() == [[5, 6, 7], [5, PAD_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, 9, PAD_ID], [BOS_ID, 10, 11, 12]]
    assert batch.tgt_out.tolist() == [[8, 9, EOS_ID, PAD_ID], [10, 11, 12, EOS_ID]]
    assert batch.src_padding_mask.tolist() == [[False] * 3, [False, True, True]]
    assert batch.tgt_padding_mask.tolist() == [[False, False, False, True], [False] * 4]
    assert batch.src.dtype == torch.long and batch.src_padding_mask.dtype == torch.bool
    # the decoder input is the label sequence shifted right by one (teacher forcing)
    assert torch.equal(batch.tgt_in[:, 1:][~batch.tgt_padding_mask[:, 1:]],
                       batch.tgt_out[:, :-1][~batch.tgt_padding_mask[:, 1:]])  # fmt: skip
    assert batch.n_target_tokens == 7
    moved = batch.to("cpu")
    assert torch.equal(moved.tgt_out, batch.tgt_out)


@pytest.mark.parametrize("pad_id", [0, 7])
def test_pad_sequences_matches_torch_pad_sequence(pad_id):
    rng = torch.Generator().manual_seed(0)
    lengths = [3, 1, 5, 5, 2]
    seqs = [torch.randint(1, 50, (n,), generator=rng) for n in lengths]
    expected = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=pad_id)
    for given in (seqs, [s.tolist() for s in seqs], [tuple(s.tolist()) for s in seqs]):
        out = pad_sequences(given, pad_id)
        assert out.dtype == torch.long and torch.equal(out, expected)
    with pytest.raises(ValueError, match="at least one"):
        pad_sequences([])


def test_collate_rejects_bad_pairs():
    with pytest.raises(ValueError, match="at least one"):
        collate([])
    with pytest.raises(ValueError, match="empty source"):
        collate([([], [4])])
    with pytest.raises(ValueError, match="bos_id/eos_id"):
        collate([([4], [BOS_ID, 5])])
    with pytest.raises(ValueError, match="pad_id=0"):
        collate([([4, 0], [5])])
    with pytest.raises(ValueError, match="non-negative int"):
        collate([([4, 1.5], [5])])
    with pytest.raises(TypeError, match="pair"):
        collate([[4, 5, 6]])


def test_bucket_sampler_covers_everything_once_and_groups_lengths():
    rng = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 40, (1000,), generator=rng).tolist()
    sampler = BucketBatchSampler(lengths, batch_size=16, seed=1, pool_batches=10)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 63
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(1000))
    # within a batch lengths are close: far less spread than in random batches
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches)
    random_spread = sum(
        max(lengths[i : i + 16]) - min(lengths[i : i + 16]) for i in range(0, 1000, 16)
    )
    assert spread < random_spread / 3


def test_bucket_sampler_is_seeded_and_changes_per_epoch():
    lengths = list(range(1, 101)) * 3
    a = BucketBatchSampler(lengths, 8, seed=5)
    b = BucketBatchSampler(lengths, 8, seed=5)
    first_a, first_b = list(a), list(b)
    assert first_a == first_b
    assert list(a) != first_a  # the next epoch has a new order
    a.set_epoch(0)
    assert list(a) == first_a
    assert list(BucketBatchSampler(lengths, 8, seed=6)) != first_a
    ordered = list(BucketBatchSampler(lengths, 8, shuffle=False))
    assert ordered == list(BucketBatchSampler(lengths, 8, shuffle=False))
    assert [lengths[b[0]] for b in ordered] == sorted(lengths[b[0]] for b in ordered)
    dropped = BucketBatchSampler(list(range(1, 21)), 8, shuffle=False, drop_last=True)
    assert len(dropped) == 2 and all(len(b) == 8 for b in dropped)


def test_bucket_sampler_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        BucketBatchSampler([1, 2], 0)
    with pytest.raises(ValueError, match="lengths"):
        BucketBatchSampler([], 4)


@pytest.mark.parametrize("bucket", [True, False])
def test_make_loader_on_a_task(bucket):
    data = make_task("number", 300, 50, 50)
    loader = make_loader(data.encoded("train"), batch_size=32, seed=0, bucket=bucket)
    seen = 0
    for batch in loader:
        assert batch.src.shape[0] == batch.tgt_in.shape[0] <= 32
        assert batch.tgt_in.shape == batch.tgt_out.shape == batch.tgt_padding_mask.shape
        for row in range(len(batch)):
            src = data.decode_src(batch.src[row])
            tgt = data.decode_tgt(batch.tgt_out[row])
            assert (src, tgt) in set(data.train)
        seen += len(batch)
    assert seen == 300
    valid = data.loader("valid", batch_size=16)
    first = next(iter(valid))
    assert first.src.shape[1] <= data.max_src_len


def test_pad_id_is_configurable():
    batch = collate([([5], [6, 7])], pad_id=9, bos_id=1, eos_id=2)
    two = collate([([5, 5], [6]), ([5], [6, 7])], pad_id=9)
    assert batch.tgt_in.tolist() == [[1, 6, 7]]
    assert two.src.tolist()[1] == [5, 9] and two.src_padding_mask.tolist()[1] == [False, True]


def test_collate_accepts_integer_tensors_and_says_what_type_it_expects():
    as_lists = collate([([19, 4, 5], [6, 7])])
    as_tensors = collate([(torch.tensor([19, 4, 5]), torch.tensor([6, 7]))])
    assert as_tensors.src.tolist() == as_lists.src.tolist()
    assert as_tensors.tgt_out.tolist() == as_lists.tgt_out.tolist()
    with pytest.raises(TypeError, match="pairs\\[0\\] source must be a list of int ids or a 1-d"):
        collate([(torch.tensor([4.0, 5.0]), [6])])
    with pytest.raises(TypeError, match="pairs\\[0\\] target must be a list of int ids or a 1-d"):
        collate([([4], torch.tensor([[6]]))])
    with pytest.raises(TypeError, match="encode text with a vocabulary first"):
        collate([("abc", [6])])


def test_bucket_sampler_refuses_lengths_that_are_not_ints():
    with pytest.raises(ValueError, match="lengths must hold non-negative int ids, got '5'"):
        BucketBatchSampler(["5", "7"], 2)
    with pytest.raises(ValueError, match="lengths must be a non-empty list"):
        BucketBatchSampler("57", 2)
    assert list(BucketBatchSampler(torch.tensor([3, 1, 2]), 3, shuffle=False)) == [[1, 2, 0]]


def test_make_loader_refuses_batch_size_zero_on_both_paths() -> None:
    pairs = [([4, 5], [6]), ([5], [6, 7])]
    for bucket in (True, False):
        with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
            make_loader(pairs, batch_size=0, bucket=bucket)
    with pytest.raises(TypeError, match="bucket must be True or False"):
        make_loader(pairs, batch_size=2, bucket="no")


def test_collate_refuses_pad_id_equal_to_eos_id() -> None:
    from lecturekit.data import collate

    with pytest.raises(ValueError, match="pad_id"):
        collate([([4], [5])], pad_id=2, eos_id=2)


@pytest.mark.parametrize(("seqs", "pad_id"), [([[[1]], [2]], 0), ([[1], [2, 3]], 0.5)])
def test_pad_sequences_refuses_non_int_ids_and_pad_id(seqs, pad_id) -> None:
    from lecturekit.data import pad_sequences

    with pytest.raises(TypeError, match="seqs|pad_id"):
        pad_sequences(seqs, pad_id)
