"""Numeric precisions as PyTorch runs them: which math units each op class uses.

A scenario asks for ``workload.precision`` (``fp32``, ``tf32`` or ``amp``) and, for
``amp``, ``workload.amp_dtype`` (``fp16`` default, or ``bf16``). Profiles and schedules
see one *compute key* (:func:`compute_key`), the key of ``device.compute`` in a measured
profile::

    fp32      strict fp32: torch.backends.cuda.matmul.allow_tf32 = False and
              torch.backends.cudnn.allow_tf32 = False
    tf32      both flags True: matmuls and convolutions on TF32 tensor cores,
              everything else fp32
    amp       torch.autocast(dtype=torch.float16) + GradScaler (loss scaling)
    amp_bf16  torch.autocast(dtype=torch.bfloat16), no loss scaling

Attention (:data:`NO_TF32_OPS`) is the exception to ``tf32``: the zoo's ``attention`` layer
is PyTorch's fused ``scaled_dot_product_attention`` (what ``nn.MultiheadAttention`` and the
calibration run), whose fp32 kernel (the memory-efficient one: flash attention takes only
fp16 / bf16) does not read either flag, so it runs the same math with TF32 on or off. The
measured H100's BERT-large steps say so: at the same tokens per step, 16 x 512 tokens
outlast 64 x 128 by 38.2 ms in ``fp32`` and 38.6 ms in ``tf32`` (the extra work is the
attention's; ``calibrate/measurements/h100-sxm-80gb-2026-11-26/anchors-run2.json``), and
the profiles' attention samples took 0.95-1.08x as long under ``fp32`` as under ``tf32``
(10 passes each on the measured H100 and H200; small shapes, where linear layers already
reach 4.6x).

Autocast (PyTorch's "CUDA Ops that can autocast to float16" and "... to float32" lists):
convolutions, linear / matmul / bmm (attention's two matmuls) and the LSTM cell's GEMMs
run in the half type on tensor cores (:data:`HALF_OPS`); softmax, layer_norm and the
losses are autocast to fp32 (their inputs are cast up, :data:`FP32_OPS`); every other op
(activations, dropout, adds, pooling, batch-norm, whose statistics stay fp32 inside
cuDNN) runs in the dtype of its input, i.e. half after a half-precision layer. Model
weights stay fp32 (the optimizer updates fp32 parameters: native AMP has no separate
master copy), and each forward casts a matmul layer's weight to the half type.
"""

from __future__ import annotations

__all__ = [
    "PRECISIONS",
    "AMP_DTYPES",
    "COMPUTE_KEYS",
    "HALF_OPS",
    "FP32_OPS",
    "NO_TF32_OPS",
    "compute_key",
    "describe_key",
    "is_amp",
    "peak_key",
    "required_peak",
    "activation_bytes",
    "PEAK_NAMES",
]

#: values of ``workload.precision``
PRECISIONS = ("fp32", "tf32", "amp")
#: values of ``workload.amp_dtype``
AMP_DTYPES = ("fp16", "bf16")
#: keys of a measured profile's ``device.compute`` (and the precision schedules pass on)
COMPUTE_KEYS = ("fp32", "tf32", "amp", "amp_bf16")
#: op classes whose math runs on tensor cores under tf32 / autocast
HALF_OPS = frozenset({"conv", "linear", "attention", "lstm"})
#: op classes (or ``op:variant``) autocast runs in fp32 (input cast up first)
FP32_OPS = frozenset({"norm:layernorm"})
#: op classes whose fp32 kernels ignore the TF32 flags: under ``tf32`` they run the math
#: they run under strict ``fp32`` (fused scaled-dot-product attention, see the module doc)
NO_TF32_OPS = frozenset({"attention"})

#: peak key -> what a spec sheet calls it
PEAK_NAMES = {
    "fp32": "FP32 (CUDA cores)",
    "tf32_tensor": "TF32 tensor cores",
    "fp16_tensor": "FP16 tensor cores",
    "bf16_tensor": "BF16 tensor cores",
}


def compute_key(precision: str, amp_dtype: str | None = None) -> str:
    """The ``device.compute`` key for a workload's precision and autocast dtype."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "amp":
        dtype = amp_dtype or "fp16"
        if dtype not in AMP_DTYPES:
            raise ValueError(f"amp_dtype must be one of {AMP_DTYPES}, got {dtype!r}")
        return "amp" if dtype == "fp16" else "amp_bf16"
    return precision


def describe_key(key: str) -> str:
    """Human form of a compute key (``amp (bf16)``)."""
    return {"amp": "amp (fp16)", "amp_bf16": "amp (bf16)"}.get(key, key)


def is_amp(key: str) -> bool:
    """True for autocast keys (``amp``, ``amp_bf16``)."""
    return key.startswith("amp")


def required_peak(key: str) -> str:
    """The tensor-core peak a device needs to run ``key`` (``fp32`` for plain fp32)."""
    return {"fp32": "fp32", "tf32": "tf32_tensor", "amp": "fp16_tensor"}.get(key, "bf16_tensor")


def peak_key(key: str, op: str) -> str:
    """Which peak FLOP/s an op class's math runs at under compute key ``key`` (the fp32
    one for :data:`NO_TF32_OPS` under ``tf32``)."""
    base = op.split(":", 1)[0]
    if base in HALF_OPS and key != "fp32" and not (key == "tf32" and base in NO_TF32_OPS):
        return required_peak(key)
    return "fp32"


def activation_bytes(key: str, op: str, variant: str | None = None) -> int:
    """Bytes per activation element an op class reads and writes under ``key``.

    fp32 / tf32: 4. Autocast: 2 for the half-precision op classes and for the ops that
    follow their input's dtype; 4 for the ops autocast runs in fp32 (layer norm).
    """
    if not is_amp(key):
        return 4
    name = f"{op}:{variant}" if variant else op
    return 4 if name in FP32_OPS else 2
