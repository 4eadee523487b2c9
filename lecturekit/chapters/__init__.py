"""Each chapter's experiments, one module per chapter (per idea when a chapter has two).

Named like ``lecturekit.exercises``: ``chNN_<idea>``. A chapter's notebook imports its module,
e.g. ``from lecturekit.chapters.ch03_stacks import train_regression``. The experiments use the
package's model, attention and training pieces, not their own copies.
"""

from typing import TYPE_CHECKING

from lecturekit._lazy import attach

# Editors and type checkers read these imports; at run time each name is imported on first
# use (PEP 562). tests/test_package.py keeps this list equal to what attach() serves.
if TYPE_CHECKING:
    from lecturekit.chapters import ch01_rnn as ch01_rnn
    from lecturekit.chapters import ch02_scaling as ch02_scaling
    from lecturekit.chapters import ch03_ffn as ch03_ffn
    from lecturekit.chapters import ch03_stacks as ch03_stacks
    from lecturekit.chapters import ch04_nat as ch04_nat
    from lecturekit.chapters import ch06_copy as ch06_copy
    from lecturekit.chapters import ch06_exposure as ch06_exposure
    from lecturekit.chapters import ch06_monotonic as ch06_monotonic
    from lecturekit.chapters import ch06_readings as ch06_readings
    from lecturekit.chapters import ch06_sampling as ch06_sampling
    from lecturekit.chapters import ch07_memory as ch07_memory
    from lecturekit.chapters import ch08_paths as ch08_paths
    from lecturekit.chapters.ch01_rnn import context_recoverability as context_recoverability
    from lecturekit.chapters.ch01_rnn import make_rnn_weights as make_rnn_weights
    from lecturekit.chapters.ch01_rnn import module_gradient_norms as module_gradient_norms
    from lecturekit.chapters.ch01_rnn import rnn_gradient_norms as rnn_gradient_norms
    from lecturekit.chapters.ch01_rnn import run_rnn as run_rnn
    from lecturekit.chapters.ch02_scaling import (
        attention_gradient_norms as attention_gradient_norms,
    )
    from lecturekit.chapters.ch02_scaling import softmax_saturation as softmax_saturation
    from lecturekit.chapters.ch03_ffn import PairTagger as PairTagger
    from lecturekit.chapters.ch03_ffn import ZeroFFN as ZeroFFN
    from lecturekit.chapters.ch03_ffn import make_pair_table as make_pair_table
    from lecturekit.chapters.ch03_ffn import pair_lookup_accuracy as pair_lookup_accuracy
    from lecturekit.chapters.ch03_ffn import parameters_with_gradient as parameters_with_gradient
    from lecturekit.chapters.ch03_ffn import position_influence as position_influence
    from lecturekit.chapters.ch03_ffn import train_pair_lookup as train_pair_lookup
    from lecturekit.chapters.ch03_ffn import without_ffn as without_ffn
    from lecturekit.chapters.ch03_stacks import DeepStack as DeepStack
    from lecturekit.chapters.ch03_stacks import SequenceTagger as SequenceTagger
    from lecturekit.chapters.ch03_stacks import adam_first_step_norms as adam_first_step_norms
    from lecturekit.chapters.ch03_stacks import deep_mlp_stack as deep_mlp_stack
    from lecturekit.chapters.ch03_stacks import make_regression_data as make_regression_data
    from lecturekit.chapters.ch03_stacks import make_reversal_batch as make_reversal_batch
    from lecturekit.chapters.ch03_stacks import per_layer_grad_norms as per_layer_grad_norms
    from lecturekit.chapters.ch03_stacks import train_regression as train_regression
    from lecturekit.chapters.ch03_stacks import train_sequence_stack as train_sequence_stack
    from lecturekit.chapters.ch04_nat import EOS as EOS
    from lecturekit.chapters.ch04_nat import AutoregressiveTable as AutoregressiveTable
    from lecturekit.chapters.ch04_nat import NonAutoregressiveTable as NonAutoregressiveTable
    from lecturekit.chapters.ch04_nat import valid_fraction as valid_fraction
    from lecturekit.chapters.ch06_copy import GREETING_VOCAB as GREETING_VOCAB
    from lecturekit.chapters.ch06_copy import AttentionToySeq2Seq as AttentionToySeq2Seq
    from lecturekit.chapters.ch06_copy import copy_distribution as copy_distribution
    from lecturekit.chapters.ch06_copy import greeting_batch as greeting_batch
    from lecturekit.chapters.ch06_copy import guided_attention_loss as guided_attention_loss
    from lecturekit.chapters.ch06_copy import guided_attention_penalty as guided_attention_penalty
    from lecturekit.chapters.ch06_copy import mix_copy_generate as mix_copy_generate
    from lecturekit.chapters.ch06_copy import stretch_batch as stretch_batch
    from lecturekit.chapters.ch06_copy import train_toy as train_toy
    from lecturekit.chapters.ch06_exposure import SUBSTITUTION_KINDS as SUBSTITUTION_KINDS
    from lecturekit.chapters.ch06_exposure import ExposureReport as ExposureReport
    from lecturekit.chapters.ch06_exposure import PrefixGroup as PrefixGroup
    from lecturekit.chapters.ch06_exposure import Recovery as Recovery
    from lecturekit.chapters.ch06_exposure import SubstitutionRecovery as SubstitutionRecovery
    from lecturekit.chapters.ch06_exposure import error_after_mistake as error_after_mistake
    from lecturekit.chapters.ch06_exposure import exposure_report as exposure_report
    from lecturekit.chapters.ch06_exposure import (
        free_running_predictions as free_running_predictions,
    )
    from lecturekit.chapters.ch06_exposure import inject_error as inject_error
    from lecturekit.chapters.ch06_exposure import recovery_after_error as recovery_after_error
    from lecturekit.chapters.ch06_exposure import (
        recovery_by_substitution as recovery_by_substitution,
    )
    from lecturekit.chapters.ch06_exposure import substitution_kind as substitution_kind
    from lecturekit.chapters.ch06_exposure import (
        teacher_forced_predictions as teacher_forced_predictions,
    )
    from lecturekit.chapters.ch06_monotonic import MonotonicDecoder as MonotonicDecoder
    from lecturekit.chapters.ch06_monotonic import path_faults as path_faults
    from lecturekit.chapters.ch06_readings import is_reading as is_reading
    from lecturekit.chapters.ch06_readings import is_reading_prefix as is_reading_prefix
    from lecturekit.chapters.ch06_sampling import bigram_table as bigram_table
    from lecturekit.chapters.ch06_sampling import prefix_table as prefix_table
    from lecturekit.chapters.ch06_sampling import repeated_bigram_rate as repeated_bigram_rate
    from lecturekit.chapters.ch07_memory import H100_SXM as H100_SXM
    from lecturekit.chapters.ch07_memory import GpuSpec as GpuSpec
    from lecturekit.chapters.ch07_memory import MemoryLevel as MemoryLevel
    from lecturekit.chapters.ch07_memory import OpTraffic as OpTraffic
    from lecturekit.chapters.ch07_memory import draw_memory_hierarchy as draw_memory_hierarchy
    from lecturekit.chapters.ch07_memory import eager_traffic as eager_traffic
    from lecturekit.chapters.ch08_paths import LAYER_KINDS as LAYER_KINDS
    from lecturekit.chapters.ch08_paths import min_layers_to_connect as min_layers_to_connect
    from lecturekit.chapters.ch08_paths import sequential_depth as sequential_depth
else:
    __getattr__, __dir__ = attach(__name__)
