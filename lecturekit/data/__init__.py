"""Offline toy data: vocabularies, BPE, generated tasks and batching.

``vocab`` (special ids, character and word vocabularies), ``bpe`` (byte-pair encoding,
appendix), ``tasks`` (the generated toy tasks), ``batching`` (padding, ``Batch``, loaders).
Names resolve lazily, so ``lecturekit.data.make_task`` works without importing torch; only
the batching helpers need it.
"""

from typing import TYPE_CHECKING

from lecturekit._lazy import attach

# Editors and type checkers read these imports; at run time each name is imported on first
# use (PEP 562). tests/test_package.py keeps this list equal to what attach() serves.
if TYPE_CHECKING:
    from lecturekit.data import batching as batching
    from lecturekit.data import bpe as bpe
    from lecturekit.data import pinyin as pinyin
    from lecturekit.data import reading_check as reading_check
    from lecturekit.data import sentences as sentences
    from lecturekit.data import tasks as tasks
    from lecturekit.data import vocab as vocab
    from lecturekit.data.batching import Batch as Batch
    from lecturekit.data.batching import BucketBatchSampler as BucketBatchSampler
    from lecturekit.data.batching import collate as collate
    from lecturekit.data.batching import make_loader as make_loader
    from lecturekit.data.batching import pad_sequences as pad_sequences
    from lecturekit.data.bpe import BPE as BPE
    from lecturekit.data.bpe import learn_merges as learn_merges
    from lecturekit.data.bpe import pretokenize as pretokenize
    from lecturekit.data.pinyin import PinyinSplit as PinyinSplit
    from lecturekit.data.pinyin import Word as Word
    from lecturekit.data.pinyin import cache_dir as cache_dir
    from lecturekit.data.pinyin import char_vocab as char_vocab
    from lecturekit.data.pinyin import load_lexicon as load_lexicon
    from lecturekit.data.pinyin import split_lexicon as split_lexicon
    from lecturekit.data.pinyin import syllable_vocab as syllable_vocab
    from lecturekit.data.pinyin import training_pairs as training_pairs
    from lecturekit.data.pinyin import word_pinyin as word_pinyin
    from lecturekit.data.reading_check import READING_CHECK_FILE as READING_CHECK_FILE
    from lecturekit.data.reading_check import CheckedReading as CheckedReading
    from lecturekit.data.reading_check import ReadingNoise as ReadingNoise
    from lecturekit.data.reading_check import checked_readings as checked_readings
    from lecturekit.data.reading_check import reading_noise as reading_noise
    from lecturekit.data.reading_check import stale_readings as stale_readings
    from lecturekit.data.sentences import SOURCES as SOURCES
    from lecturekit.data.sentences import Clause as Clause
    from lecturekit.data.sentences import SentenceCorpus as SentenceCorpus
    from lecturekit.data.sentences import SentenceSplit as SentenceSplit
    from lecturekit.data.sentences import build_sentences as build_sentences
    from lecturekit.data.sentences import corpus_paths as corpus_paths
    from lecturekit.data.sentences import load_sentences as load_sentences
    from lecturekit.data.sentences import reading_disagreements as reading_disagreements
    from lecturekit.data.sentences import split_clauses as split_clauses
    from lecturekit.data.sentences import split_sentences as split_sentences
    from lecturekit.data.sentences import strip_tags as strip_tags
    from lecturekit.data.tasks import TASKS as TASKS
    from lecturekit.data.tasks import TaskData as TaskData
    from lecturekit.data.tasks import TaskSpec as TaskSpec
    from lecturekit.data.tasks import list_tasks as list_tasks
    from lecturekit.data.tasks import make_task as make_task
    from lecturekit.data.tasks import number_to_chinese as number_to_chinese
    from lecturekit.data.vocab import BOS_ID as BOS_ID
    from lecturekit.data.vocab import EOS_ID as EOS_ID
    from lecturekit.data.vocab import PAD_ID as PAD_ID
    from lecturekit.data.vocab import SPECIAL_TOKENS as SPECIAL_TOKENS
    from lecturekit.data.vocab import UNK_ID as UNK_ID
    from lecturekit.data.vocab import CharVocab as CharVocab
    from lecturekit.data.vocab import Vocab as Vocab
    from lecturekit.data.vocab import WordVocab as WordVocab
else:
    __getattr__, __dir__ = attach(__name__)
