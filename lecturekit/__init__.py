"""lecturekit: the Transformer of Hung-yi Lee's ML 2021 lecture, as an importable package.

Every chapter notebook of the course imports from here. The folders are the parts of the
course (the README's "package map" lists them with their chapters and slide pages):

* ``lecturekit.model``: the model, read top to bottom in chapter order (config, masks,
  attention, layers, cache, transformer, params, interop; and chapter 1's ``rnn``);
* ``lecturekit.kernels``: the Triton GPU kernels and their PyTorch references (kernels chapter);
* ``lecturekit.training``: the training loop and its pieces (losses, schedules, scheduled
  sampling, checkpoints, distributed, metrics);
* ``lecturekit.lab``: the debugging lab's planted bugs and the diagnostics that find them;
* ``lecturekit.decoding``: greedy search, sampling, beam search, the step protocol;
* ``lecturekit.chapters``: each chapter's experiments, one module per chapter (``ch03_stacks``);
* ``lecturekit.book``: plotting, widgets and the environment report of the book;
* ``lecturekit.data``, ``lecturekit.exercises``, ``lecturekit.pretrained``.

Importing the package is cheap: submodules and names are resolved lazily (PEP 562), so
``import lecturekit`` loads neither torch nor triton until a name that needs them is used.
The public names of ``model``, ``training``, ``decoding``, ``data`` and ``lab`` are also
available here (``lecturekit.Transformer``, ``lecturekit.fit``, ``lecturekit.greedy``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lecturekit._lazy import attach

__version__ = "0.1.0"

# the subpackages whose public names are lifted to ``lecturekit.<name>``
_LIFT = ("model", "training", "decoding", "data", "lab")

# Editors and type checkers read these imports; at run time each name is imported on first
# use (PEP 562). tests/test_package.py keeps this list equal to what attach() serves.
if TYPE_CHECKING:
    from lecturekit import book as book
    from lecturekit import capstone as capstone
    from lecturekit import chapters as chapters
    from lecturekit import data as data
    from lecturekit import decoding as decoding
    from lecturekit import exercises as exercises
    from lecturekit import kernels as kernels
    from lecturekit import lab as lab
    from lecturekit import model as model
    from lecturekit import pretrained as pretrained
    from lecturekit import training as training
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
    from lecturekit.decoding.beam import Hypothesis as Hypothesis
    from lecturekit.decoding.beam import beam_search as beam_search
    from lecturekit.decoding.beam import beam_step as beam_step
    from lecturekit.decoding.beam import exhaustive_search as exhaustive_search
    from lecturekit.decoding.beam import length_penalty as length_penalty
    from lecturekit.decoding.protocol import IncrementalDecoder as IncrementalDecoder
    from lecturekit.decoding.protocol import TransformerDecoder as TransformerDecoder
    from lecturekit.decoding.protocol import as_decoder as as_decoder
    from lecturekit.decoding.search import Decoded as Decoded
    from lecturekit.decoding.search import filter_logits as filter_logits
    from lecturekit.decoding.search import greedy as greedy
    from lecturekit.decoding.search import sample as sample
    from lecturekit.decoding.search import sequence_log_prob as sequence_log_prob
    from lecturekit.decoding.table import TableDecoder as TableDecoder
    from lecturekit.lab.bugs import BUGS as BUGS
    from lecturekit.lab.bugs import MODEL_BUGS as MODEL_BUGS
    from lecturekit.lab.bugs import Bug as Bug
    from lecturekit.lab.bugs import mystery as mystery
    from lecturekit.lab.bugs import plant as plant
    from lecturekit.lab.diagnostics import Diagnosis as Diagnosis
    from lecturekit.lab.diagnostics import attention_module_check as attention_module_check
    from lecturekit.lab.diagnostics import attention_reference_check as attention_reference_check
    from lecturekit.lab.diagnostics import beam_ranking_check as beam_ranking_check
    from lecturekit.lab.diagnostics import cache_consistency_probe as cache_consistency_probe
    from lecturekit.lab.diagnostics import causality_probe as causality_probe
    from lecturekit.lab.diagnostics import determinism_probe as determinism_probe
    from lecturekit.lab.diagnostics import embedding_scale_check as embedding_scale_check
    from lecturekit.lab.diagnostics import encoder_padding_probe as encoder_padding_probe
    from lecturekit.lab.diagnostics import free_running_check as free_running_check
    from lecturekit.lab.diagnostics import gradient_norms_by_layer as gradient_norms_by_layer
    from lecturekit.lab.diagnostics import initial_loss_check as initial_loss_check
    from lecturekit.lab.diagnostics import label_shift_check as label_shift_check
    from lecturekit.lab.diagnostics import layernorm_axis_check as layernorm_axis_check
    from lecturekit.lab.diagnostics import loss_padding_probe as loss_padding_probe
    from lecturekit.lab.diagnostics import loss_reference_check as loss_reference_check
    from lecturekit.lab.diagnostics import mask_picture as mask_picture
    from lecturekit.lab.diagnostics import mask_sanity as mask_sanity
    from lecturekit.lab.diagnostics import overfit_one_batch as overfit_one_batch
    from lecturekit.lab.diagnostics import padding_probe as padding_probe
    from lecturekit.lab.diagnostics import permutation_probe as permutation_probe
    from lecturekit.lab.diagnostics import residual_probe as residual_probe
    from lecturekit.lab.diagnostics import warmup_check as warmup_check
    from lecturekit.lab.diagnostics import weight_tie_check as weight_tie_check
    from lecturekit.lab.gallery import GALLERY_BUGS as GALLERY_BUGS
    from lecturekit.lab.gallery import Symptom as Symptom
    from lecturekit.lab.gallery import load_gallery as load_gallery
    from lecturekit.lab.gallery import train_with_bug as train_with_bug
    from lecturekit.lab.gallery import write_gallery as write_gallery
    from lecturekit.model.attention import ATTENTION_FUNCTIONS as ATTENTION_FUNCTIONS
    from lecturekit.model.attention import MultiHeadAttention as MultiHeadAttention
    from lecturekit.model.attention import (
        scaled_dot_product_attention as scaled_dot_product_attention,
    )
    from lecturekit.model.cache import KVCache as KVCache
    from lecturekit.model.cache import LayerKVCache as LayerKVCache
    from lecturekit.model.cache import decode_cached as decode_cached
    from lecturekit.model.config import ACTIVATIONS as ACTIVATIONS
    from lecturekit.model.config import ATTENTION_BACKENDS as ATTENTION_BACKENDS
    from lecturekit.model.config import LAYERNORM_BACKENDS as LAYERNORM_BACKENDS
    from lecturekit.model.config import POSITIONAL_ENCODINGS as POSITIONAL_ENCODINGS
    from lecturekit.model.config import LayerConfig as LayerConfig
    from lecturekit.model.config import TransformerConfig as TransformerConfig
    from lecturekit.model.interop import EncoderDecoder as EncoderDecoder
    from lecturekit.model.interop import from_torch as from_torch
    from lecturekit.model.interop import to_torch as to_torch
    from lecturekit.model.layers import LAYER_NORM_FUNCTIONS as LAYER_NORM_FUNCTIONS
    from lecturekit.model.layers import Decoder as Decoder
    from lecturekit.model.layers import DecoderLayer as DecoderLayer
    from lecturekit.model.layers import Encoder as Encoder
    from lecturekit.model.layers import EncoderLayer as EncoderLayer
    from lecturekit.model.layers import LayerNorm as LayerNorm
    from lecturekit.model.layers import LearnedPositionalEncoding as LearnedPositionalEncoding
    from lecturekit.model.layers import PositionwiseFeedForward as PositionwiseFeedForward
    from lecturekit.model.layers import SinusoidalPositionalEncoding as SinusoidalPositionalEncoding
    from lecturekit.model.masks import causal_mask as causal_mask
    from lecturekit.model.masks import fully_masked_rows as fully_masked_rows
    from lecturekit.model.masks import merge_masks as merge_masks
    from lecturekit.model.masks import padding_mask as padding_mask
    from lecturekit.model.masks import prepare_mask as prepare_mask
    from lecturekit.model.masks import to_additive as to_additive
    from lecturekit.model.params import ComponentCount as ComponentCount
    from lecturekit.model.params import ParameterTable as ParameterTable
    from lecturekit.model.params import count_parameters as count_parameters
    from lecturekit.model.rnn import AdditiveAttention as AdditiveAttention
    from lecturekit.model.rnn import RNNSeq2Seq as RNNSeq2Seq
    from lecturekit.model.rnn import RNNSeq2SeqConfig as RNNSeq2SeqConfig
    from lecturekit.model.tagger import EncoderTagger as EncoderTagger
    from lecturekit.model.transformer import Transformer as Transformer
    from lecturekit.model.transformer import init_weights as init_weights
    from lecturekit.training.averaging import KeepLastCheckpoints as KeepLastCheckpoints
    from lecturekit.training.averaging import average_checkpoints as average_checkpoints
    from lecturekit.training.checkpoint import RUNTIME_FIELDS as RUNTIME_FIELDS
    from lecturekit.training.checkpoint import Checkpoint as Checkpoint
    from lecturekit.training.checkpoint import load_checkpoint as load_checkpoint
    from lecturekit.training.checkpoint import save_checkpoint as save_checkpoint
    from lecturekit.training.checks import MAX_SEED as MAX_SEED
    from lecturekit.training.checks import check_batch_ids as check_batch_ids
    from lecturekit.training.checks import check_decode_length as check_decode_length
    from lecturekit.training.checks import check_epoch as check_epoch
    from lecturekit.training.checks import check_finite as check_finite
    from lecturekit.training.checks import check_pair_shapes as check_pair_shapes
    from lecturekit.training.checks import check_pairs as check_pairs
    from lecturekit.training.checks import check_passes as check_passes
    from lecturekit.training.checks import check_stopping as check_stopping
    from lecturekit.training.checks import check_train_config as check_train_config
    from lecturekit.training.checks import check_weights as check_weights
    from lecturekit.training.checks import clip_and_measure as clip_and_measure
    from lecturekit.training.checks import optimizer_step as optimizer_step
    from lecturekit.training.checks import parameter_norm as parameter_norm
    from lecturekit.training.config import TrainConfig as TrainConfig
    from lecturekit.training.config import small_config as small_config
    from lecturekit.training.config import small_train_config as small_train_config
    from lecturekit.training.distributed import DistContext as DistContext
    from lecturekit.training.distributed import all_reduce_sum as all_reduce_sum
    from lecturekit.training.distributed import any_true as any_true
    from lecturekit.training.distributed import cleanup as cleanup
    from lecturekit.training.distributed import setup as setup
    from lecturekit.training.distributed import shard as shard
    from lecturekit.training.distributed import wrap as wrap
    from lecturekit.training.evaluation import evaluate as evaluate
    from lecturekit.training.history import History as History
    from lecturekit.training.loop import Stopping as Stopping
    from lecturekit.training.loop import fit as fit
    from lecturekit.training.loop import train_steps as train_steps
    from lecturekit.training.loop import update as update
    from lecturekit.training.losses import label_smoothed_nll as label_smoothed_nll
    from lecturekit.training.metrics import corpus_bleu as corpus_bleu
    from lecturekit.training.metrics import error_rate_by_position as error_rate_by_position
    from lecturekit.training.metrics import exact_match as exact_match
    from lecturekit.training.metrics import token_accuracy as token_accuracy
    from lecturekit.training.scheduled_sampling import ScheduledSampling as ScheduledSampling
    from lecturekit.training.scheduled_sampling import check_schedule as check_schedule
    from lecturekit.training.scheduled_sampling import mix_decoder_inputs as mix_decoder_inputs
    from lecturekit.training.scheduled_sampling import teacher_forcing_prob as teacher_forcing_prob
    from lecturekit.training.schedules import check_rate as check_rate
    from lecturekit.training.schedules import constant_lr as constant_lr
    from lecturekit.training.schedules import cosine_lr as cosine_lr
    from lecturekit.training.schedules import learning_rate as learning_rate
    from lecturekit.training.schedules import linear_warmup_lr as linear_warmup_lr
    from lecturekit.training.schedules import noam_lr as noam_lr
    from lecturekit.training.schedules import set_lr as set_lr
else:
    __getattr__, __dir__ = attach(__name__, _LIFT)
