"""The capstone (pinyin -> Chinese characters on real text), in one place, read in the
chapter's order: ``pinyin_input`` (typed pinyin, normalised one way for every engine),
``kneser_ney`` (the character language model), ``ngram`` (the n-gram engines and the
clause metrics), ``engines`` (the Pinyin2Hanzi HMM
baseline and the Transformer as input methods), ``tagger`` (the non-autoregressive tagger as
an input method, the fused engine and the candidate bar's beam search), ``analysis``
(baselines, homophones, cross-attention, paired bootstrap), ``models`` (the shipped sentence
models: recipes, training by ``fit`` in resumable pieces, loading, the best engine;
``python -m lecturekit.capstone build NAME``) and ``widget`` (the input box to type into). The corpus it reads is data: :mod:`lecturekit.data.sentences`.
Names resolve lazily; every module's ``__all__`` is available here.
"""

from typing import TYPE_CHECKING

from lecturekit._lazy import attach

# Editors and type checkers read these imports; at run time each name is imported on first
# use (PEP 562). tests/test_package.py keeps this list equal to what attach() serves.
if TYPE_CHECKING:
    from lecturekit.capstone import analysis as analysis
    from lecturekit.capstone import engines as engines
    from lecturekit.capstone import kneser_ney as kneser_ney
    from lecturekit.capstone import models as models
    from lecturekit.capstone import ngram as ngram
    from lecturekit.capstone import pinyin_input as pinyin_input
    from lecturekit.capstone import tagger as tagger
    from lecturekit.capstone import widget as widget
    from lecturekit.capstone.analysis import HomophoneContrast as HomophoneContrast
    from lecturekit.capstone.analysis import HomophoneSite as HomophoneSite
    from lecturekit.capstone.analysis import SyllableUnigram as SyllableUnigram
    from lecturekit.capstone.analysis import attention_near_diagonal as attention_near_diagonal
    from lecturekit.capstone.analysis import block_subsets as block_subsets
    from lecturekit.capstone.analysis import candidate_bar_text as candidate_bar_text
    from lecturekit.capstone.analysis import check_engine as check_engine
    from lecturekit.capstone.analysis import homophone_contrast as homophone_contrast
    from lecturekit.capstone.analysis import homophones as homophones
    from lecturekit.capstone.analysis import near_diagonal_chance as near_diagonal_chance
    from lecturekit.capstone.analysis import paired_cer_difference as paired_cer_difference
    from lecturekit.capstone.engines import HmmBaseline as HmmBaseline
    from lecturekit.capstone.engines import TransformerIME as TransformerIME
    from lecturekit.capstone.engines import cross_attention as cross_attention
    from lecturekit.capstone.engines import cross_attention_batch as cross_attention_batch
    from lecturekit.capstone.engines import hmm_k_best as hmm_k_best
    from lecturekit.capstone.engines import next_char_probs as next_char_probs
    from lecturekit.capstone.engines import next_char_steps as next_char_steps
    from lecturekit.capstone.engines import teacher_forced_texts as teacher_forced_texts
    from lecturekit.capstone.kneser_ney import KneserNeyLM as KneserNeyLM
    from lecturekit.capstone.models import FUSION_WEIGHT as FUSION_WEIGHT
    from lecturekit.capstone.models import NAT_CURVE_STEPS as NAT_CURVE_STEPS
    from lecturekit.capstone.models import SENTENCE_RECIPES as SENTENCE_RECIPES
    from lecturekit.capstone.models import TRIGRAM_BEAM as TRIGRAM_BEAM
    from lecturekit.capstone.models import TRIGRAM_DISCOUNT as TRIGRAM_DISCOUNT
    from lecturekit.capstone.models import SentenceModel as SentenceModel
    from lecturekit.capstone.models import SentenceRecipe as SentenceRecipe
    from lecturekit.capstone.models import at_engine as at_engine
    from lecturekit.capstone.models import best_engine as best_engine
    from lecturekit.capstone.models import best_path as best_path
    from lecturekit.capstone.models import load_sentence_model as load_sentence_model
    from lecturekit.capstone.models import make_sentence_model as make_sentence_model
    from lecturekit.capstone.models import sentence_checkpoint_path as sentence_checkpoint_path
    from lecturekit.capstone.models import sentence_pairs as sentence_pairs
    from lecturekit.capstone.models import state_path as state_path
    from lecturekit.capstone.models import train_sentences as train_sentences
    from lecturekit.capstone.ngram import UNKNOWN_CHAR as UNKNOWN_CHAR
    from lecturekit.capstone.ngram import ClauseScores as ClauseScores
    from lecturekit.capstone.ngram import NgramIME as NgramIME
    from lecturekit.capstone.ngram import bootstrap_interval as bootstrap_interval
    from lecturekit.capstone.ngram import evaluate_clauses as evaluate_clauses
    from lecturekit.capstone.ngram import sentence_scores as sentence_scores
    from lecturekit.capstone.pinyin_input import MAX_BEAM as MAX_BEAM
    from lecturekit.capstone.pinyin_input import MAX_CANDIDATES as MAX_CANDIDATES
    from lecturekit.capstone.pinyin_input import check_k as check_k
    from lecturekit.capstone.pinyin_input import check_pairs as check_pairs
    from lecturekit.capstone.pinyin_input import length_batches as length_batches
    from lecturekit.capstone.pinyin_input import normalize_pinyin as normalize_pinyin
    from lecturekit.capstone.pinyin_input import pinyin_syllables as pinyin_syllables
    from lecturekit.capstone.pinyin_input import plain_letters as plain_letters
    from lecturekit.capstone.pinyin_input import read_pinyins as read_pinyins
    from lecturekit.capstone.pinyin_input import split_syllables as split_syllables
    from lecturekit.capstone.tagger import FusedIME as FusedIME
    from lecturekit.capstone.tagger import TaggerIME as TaggerIME
    from lecturekit.capstone.tagger import ime_candidates as ime_candidates
    from lecturekit.capstone.tagger import k_best_independent as k_best_independent
    from lecturekit.capstone.tagger import sentence_vocabs as sentence_vocabs
    from lecturekit.capstone.widget import pinyin_input_box as pinyin_input_box
else:
    __getattr__, __dir__ = attach(__name__)
