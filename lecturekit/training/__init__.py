"""Training (chapter 5, slides p44-p46): the loop ``fit`` and its pieces.

``loop`` (``fit`` and its steps: one update, evaluation, stopping), ``losses``,
``schedules`` (learning rates), ``scheduled_sampling`` (chapter 6, p57), ``checkpoint``,
``distributed`` (DistributedDataParallel under torchrun), ``metrics``, ``averaging``
(checkpoint averaging, paper section 6.1).
Names resolve lazily; every module's ``__all__`` is available here.
"""

from typing import TYPE_CHECKING

from lecturekit._lazy import attach

# Editors and type checkers read these imports; at run time each name is imported on first
# use (PEP 562). tests/test_package.py keeps this list equal to what attach() serves.
if TYPE_CHECKING:
    from lecturekit.training import averaging as averaging
    from lecturekit.training import checkpoint as checkpoint
    from lecturekit.training import checks as checks
    from lecturekit.training import config as config
    from lecturekit.training import distributed as distributed
    from lecturekit.training import evaluation as evaluation
    from lecturekit.training import history as history
    from lecturekit.training import loop as loop
    from lecturekit.training import losses as losses
    from lecturekit.training import metrics as metrics
    from lecturekit.training import scheduled_sampling as scheduled_sampling
    from lecturekit.training import schedules as schedules
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
    __getattr__, __dir__ = attach(__name__)
