"""IPython start-up file for the perturbed nbval pass: nudge the last bits of float results.

A printed figure that survives only on the machine that executed the notebook (the loss after
hundreds of live float32 steps, a chaotic recurrence, an argmax between near-equal scores)
changes when the arithmetic changes in its last bit, as it does on another CPU, BLAS or thread
count. This file, run by the kernel at start-up (``IPYTHONDIR`` points at a folder holding it),
multiplies the result of every matrix product, softmax and normalisation by ``1 + 2**-(p-1)``
or ``1 - 2**-(p-1)`` (``p`` the format's mantissa bits: about one unit in the last place).
A stable computation prints the same digits; an amplifying one does not, and nbval reports
the cell.

What every machine computes exactly is left alone, so that the nudge makes no false alarms:
results whose values are all integers (counts, one-hot rows, masks), and the same operation
on the same shape, which gets the same sign every time (a machine is deterministic: two
identical forward passes agree on it too). While a ``TorchDispatchMode`` records operators
(the book counts kernels and dependency chains that way) nothing is nudged, since the nudge's
own operators would be counted.
"""

from __future__ import annotations

import zlib

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _get_current_dispatch_mode

_F = torch.nn.functional
_NUDGED = {
    torch.matmul,
    torch.mm,
    torch.bmm,
    torch.addmm,
    torch.baddbmm,
    torch.einsum,
    torch.softmax,
    torch.log_softmax,
    torch.Tensor.matmul,
    torch.Tensor.__matmul__,
    torch.Tensor.softmax,
    torch.Tensor.log_softmax,
    _F.linear,
    _F.softmax,
    _F.log_softmax,
    _F.layer_norm,
    _F.scaled_dot_product_attention,
}
_STEP = {torch.float32: 2.0**-22, torch.float64: 2.0**-51, torch.float16: 2.0**-9}


def _sign(func: object, shape: torch.Size) -> float:
    """+1 or -1, fixed by the operation and the shape (a stable hash, unlike ``hash``)."""
    key = f"{getattr(func, '__name__', func)}{tuple(shape)}".encode()
    return 1.0 if zlib.crc32(key) % 2 else -1.0


class NudgeLastBits(TorchFunctionMode):
    """Multiply selected float results by ``1 +/- one ulp`` (see the module docstring)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        if func not in _NUDGED or not isinstance(out, torch.Tensor):
            return out
        step = _STEP.get(out.dtype)
        if step is None or out.numel() == 0 or out.device.type == "meta":
            return out
        if _get_current_dispatch_mode() is not None:
            return out
        with torch.no_grad():
            if bool((out == out.round()).all()):
                return out
        return out * (1.0 + _sign(func, out.shape) * step)


_mode = NudgeLastBits()
_mode.__enter__()  # stays active for the whole kernel session
