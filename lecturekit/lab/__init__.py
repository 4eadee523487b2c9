"""The debugging lab (after the capstone): ``bugs``, the classic Transformer bugs, each planted
into the course's own code by one switch (``plant(name)``); ``diagnostics``, the probes
that find them (causality, permutation, padding, initial loss, float64 reference, per-module
reference, cached against uncached decoding, ...); and ``gallery``, each bug's training curve
and greedy output, shipped (``load_gallery``) and reproducible (``train_with_bug``).
The lab's self-tests live with the others, in ``lecturekit.exercises.lab_debugging``.
Names resolve lazily; every module's ``__all__`` is available here.
"""

from typing import TYPE_CHECKING

from lecturekit._lazy import attach

# Editors and type checkers read these imports; at run time each name is imported on first
# use (PEP 562). tests/test_package.py keeps this list equal to what attach() serves.
if TYPE_CHECKING:
    from lecturekit.lab import bugs as bugs
    from lecturekit.lab import diagnostics as diagnostics
    from lecturekit.lab import gallery as gallery
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
else:
    __getattr__, __dir__ = attach(__name__)
