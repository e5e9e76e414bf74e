"""Kernel calls of a live run's non-model compute phases (``calibrate.live``).

``calibrate.live`` times, besides forward, backward and the optimizer, the packing,
sparsification, decompression and H-SADMM consensus work of each pattern as phases
(``pack``, ``sparsify``, ``decompress``, ``dual``, ``projection``, ``compress``) and
records each op's seconds, phase and role but not its tensor sizes. This module
rebuilds those sizes from the run's config and the model's parameter tensors (the zoo
model registers its tensors in the order ``calibrate/live/model.py`` does) and maps
each timed op to the profile's kernel families
(:data:`simcluster.compute.profile.KERNEL_FAMILIES`), one call per torch op that the
timed code in ``calibrate/live/run.py`` runs:

* ``torch.cat`` / ``copy_`` / ``.contiguous()`` / a strided ``reshape``: ``memcpy``
  (d2d) of the bytes copied;
* an element-wise op (``div_``, ``+``, ``-``, ``zeros``, ``.long()``): ``elementwise``
  of the bytes read and written;
* ``torch.topk`` of magnitudes + gather (``_topk_pack``): ``sparsify`` (exact);
* ``index_add_`` of the gathered (index, value) pairs: ``scatter_add``;
* channel norms + top-k + mask (H-SADMM ``project``): ``channel_mask``, the same ops
  timed as the code runs them, where the profile measured it
  (:data:`~simcluster.compute.measured.OPTIONAL_KERNELS`), else ``projection``
  (channel: a transposed copy, norms, top-k and a mask multiply);
* ``index_select`` of the kept channels: ``compress``; ``zero_`` + ``index_copy_``
  (H-SADMM's decompress, in place): ``index_copy`` where the profile measured it, else
  ``elementwise`` of the weight's bytes + ``compress`` of the kept elements;
* every freshly allocated output or scratch buffer (``torch.cat``, ``abs``, ``+``,
  ``zeros``, top-k's per-call queue of (value, index) pairs...): a ``fresh`` call of
  its bytes, priced by :meth:`~simcluster.compute.profile.DeviceProfile.fresh_output_time`
  (the first touch of pages the host's allocator maps anew; the kernel families are
  timed on reused buffers);
* every torch call that no family prices (a view, a slice, a ``reshape`` or
  ``view_as`` of a contiguous tensor, ``view(dtype)``): a ``dispatch`` call, priced at
  the profile's :meth:`~simcluster.compute.profile.DeviceProfile.dispatch_time` (its
  roofline's ``launch_overhead_s``: one op call on one-element tensors). Such a call
  moves no data but goes through the same Python binding and dispatcher as an add
  (1.4-3 us each on the epyc host), and the live code runs several per tensor:
  ``_scatter_add`` six, ``_unflat`` two per tensor.

``nonzero`` of a mask is left out (its cost is the H-SADMM compress op's, not modelled).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simcluster.compute.measured import CHANNEL_MASK, INDEX_COPY, OPTIONAL_KERNELS

__all__ = ["PREDICTED_PHASES", "KernelCall", "kernel_calls", "op_seconds", "phase_ops"]

#: phases of each pattern whose ops :func:`kernel_calls` prices
PREDICTED_PHASES: dict[str, tuple[str, ...]] = {
    "ddp": ("pack",),
    "nodebased": ("pack",),
    "topk": ("sparsify", "decompress"),
    "fusion": ("pack", "sparsify", "decompress"),
    "hsadmm": ("dual", "projection", "compress", "decompress"),
}

MB = 1 << 20
F4 = 4  # fp32 bytes
#: pseudo-family of :func:`op_seconds`: a fresh output's first touch
FRESH = "fresh"
#: pseudo-family of :func:`op_seconds`: torch calls that move no data (views, slices)
DISPATCH = "dispatch"
#: bytes per element of PyTorch's CPU top-k scratch: a ``std::vector`` of
#: ``std::pair<float, int64_t>`` (16 bytes with padding) over the whole input, allocated
#: per call (aten/src/ATen/native/cpu/TopKImpl.h)
TOPK_SCRATCH_BYTES = 16

#: (family, parameters) of one kernel call
KernelCall = tuple[str, dict[str, Any]]


def _memcpy(nbytes: float) -> KernelCall:
    return ("memcpy", {"nbytes": float(nbytes), "kind": "d2d"})


def _elementwise(nbytes: float) -> KernelCall:
    return ("elementwise", {"nbytes": float(nbytes)})


def _fresh(nbytes: float) -> KernelCall:
    """A freshly allocated buffer of ``nbytes`` bytes that the op writes."""
    return (FRESH, {"nbytes": float(nbytes)})


def _own(family: str, otherwise: list[KernelCall], **params: float) -> KernelCall:
    """One call of an optional family (``channel_mask``, ``index_copy``), priced by the
    ``otherwise`` calls on a profile that did not measure it."""
    return (family, {**{k: float(v) for k, v in params.items()}, "otherwise": otherwise})


def _dispatch(calls: int) -> KernelCall:
    """``calls`` torch calls that no kernel family prices (views, slices)."""
    return (DISPATCH, {"calls": int(calls)})


def _buckets(sizes: list[int], first_mb: float, cap_mb: float) -> list[list[int]]:
    """Tensor sizes (elements) in backward order grouped by byte caps, as
    ``calibrate.live.run._buckets`` groups the parameters: DDP's rule
    (:func:`~simcluster.schedules.training.torch_buckets`) over fp32 tensors."""
    from simcluster.schedules.training import GradTensor, torch_buckets

    tensors = [GradTensor(0, n, i) for i, n in enumerate(reversed(sizes))]
    return [
        [t.numel for t in b.tensors] for b in torch_buckets(tensors, cap_mb * MB, first_mb * MB, F4)
    ]


def _flatten(sizes: list[int]) -> list[KernelCall]:
    """``_flat``: a ``reshape(-1)`` (a view) per tensor, then one ``torch.cat`` of them
    into a fresh buffer."""
    return [_dispatch(len(sizes)), _memcpy(F4 * sum(sizes)), _fresh(F4 * sum(sizes))]


def _unflatten(sizes: list[int], divide: bool) -> list[KernelCall]:
    """``_unflat(flat.div_(d), tensors)``: the in-place division, then per tensor a
    slice, a ``view_as`` and a ``copy_``."""
    calls = [_elementwise(2 * F4 * sum(sizes))] if divide else []
    return calls + [_dispatch(2 * len(sizes))] + [_memcpy(F4 * n) for n in sizes]


def _pack_pairs(sizes: list[int], first_mb: float, cap_mb: float) -> list[list[KernelCall]]:
    """``Trainer.allreduce_grads``: per bucket a flatten, then a divide + unflatten."""
    ops: list[list[KernelCall]] = []
    for b in _buckets(sizes, first_mb, cap_mb):
        ops += [_flatten(b), _unflatten(b, True)]
    return ops


def _topk_pack(n: int, k: int) -> list[KernelCall]:
    """``_topk_pack``: exact top-k of magnitudes with the values gathered, then the
    values and int32 indices concatenated (2k elements). Fresh: the magnitudes
    (``abs``) and top-k's scratch (:data:`TOPK_SCRATCH_BYTES` per element)."""
    return [
        _dispatch(2),  # reshape(-1), view(float32) of the int32 indices
        ("sparsify", {"numel": n, "density": k / n, "method": "exact"}),
        _fresh(F4 * n),
        _fresh(TOPK_SCRATCH_BYTES * n),
        _memcpy(2 * F4 * k),
    ]


def _scatter_add(n: int, k: int, world: int) -> list[KernelCall]:
    """``_scatter_add``: zeros, the values and indices of ``world`` parts copied out of
    the gathered buffer (strided), the indices widened to int64, ``index_add_``, the
    division by ``world`` and the copy into the gradient; six views (``view``, two
    slices, ``view(int32)``, ``reshape`` of the contiguous indices, ``view_as``)."""
    wk = world * k
    return [
        _dispatch(6),
        _elementwise(F4 * n),
        _fresh(F4 * n),
        _memcpy(F4 * wk),
        _memcpy(F4 * wk),
        _elementwise((4 + 8) * wk),
        _fresh(8 * wk),
        ("scatter_add", {"numel": wk}),
        _elementwise(2 * F4 * n),
        _fresh(F4 * n),
        _memcpy(F4 * n),
    ]


def _k(n: int, density: float) -> int:
    return max(1, round(n * density))


def kernel_calls(
    pattern: str, phase: str, role: str, model, options: Mapping[str, Any]
) -> list[list[KernelCall]]:
    """The kernel calls of each op of ``phase`` with ``role`` in one iteration of
    ``pattern``, in the order ``calibrate.live`` runs them (an iteration may run fewer,
    e.g. ``nodebased``'s parameter average every ``k_prime`` iterations).

    ``model`` is the zoo model (:func:`simcluster.workload.build_model`); ``options`` is
    the run's ``config`` (``world_size``, ``nodes``, ``bucket_mb``, ``first_bucket_mb``,
    ``fusion_mb``, ``density``, ``small_numel``, ``keep``). Empty when the phase is not
    one this module prices (:data:`PREDICTED_PHASES`)."""
    if phase not in PREDICTED_PHASES.get(pattern, ()):
        return []
    if role != "all" and pattern != "hsadmm":  # only H-SADMM's leaders do work of their own
        return []
    o = options
    sizes = [int(n) for layer in model.layers for n in layer.param_tensors]
    world, nodes = int(o["world_size"]), int(o["nodes"])
    per_node = world // nodes
    first = float(o.get("first_bucket_mb", 1.0))
    if pattern == "ddp":
        return _pack_pairs(sizes, first, float(o["bucket_mb"]))
    if pattern == "nodebased":
        ops = _pack_pairs(sizes, first, float(o["bucket_mb"])) if per_node > 1 else []
        return ops + [_flatten(sizes), _unflatten(sizes, True)]
    if pattern == "topk":
        density = float(o["density"])
        ops = []
        for n in reversed(sizes):
            k = _k(n, density)
            ops.append(_topk_pack(n, k) if phase == "sparsify" else _scatter_add(n, k, world))
        return ops
    if pattern == "fusion":
        return _fusion(sizes, phase, o, world)
    return _hsadmm(model, sizes, phase, role, o)


def _fusion(sizes: list[int], phase: str, o: Mapping[str, Any], world: int):
    density, small, cap = float(o["density"]), int(o["small_numel"]), float(o["fusion_mb"])
    ops: list[list[KernelCall]] = []
    for bucket in _buckets(sizes, cap, cap):
        dense = [n for n in bucket if n < small]
        sparse = [n for n in bucket if n >= small]
        if dense and phase == "pack":
            ops += [_flatten(dense), _unflatten(dense, True)]
        if not sparse or phase == "pack":
            continue
        ks = [_k(n, density) for n in sparse]
        if phase == "sparsify":
            calls = [c for n, k in zip(sparse, ks, strict=True) for c in _topk_pack(n, k)]
            ops.append(calls + [_memcpy(2 * F4 * sum(ks)), _fresh(2 * F4 * sum(ks))])
        else:  # each tensor's slice of the parts made contiguous, then scatter-added
            ops.append(
                [_dispatch(1)]  # the parts' view
                + [
                    c
                    for n, k in zip(sparse, ks, strict=True)
                    for c in [
                        _dispatch(2),  # the slice of the parts, .contiguous() of the copy
                        _memcpy(F4 * world * 2 * k),
                        _fresh(F4 * world * 2 * k),
                        *_scatter_add(n, k, world),
                    ]
                ]
            )
    return ops


def _hsadmm(model, sizes: list[int], phase: str, role: str, o: Mapping[str, Any]):
    """``pattern_hsadmm``'s consensus round: theta + u (dual, all), the node mean (dual,
    leader), channel projection, compress and decompress (leader), the dual update
    (dual, all)."""
    from simcluster.schedules.hsadmm import pruned_layers

    n = sum(sizes)
    layers = pruned_layers(model)
    keep = float(o["keep"])
    if phase == "dual" and role == "leader":
        return [[_elementwise(2 * F4 * n), _fresh(F4 * n)]]
    if phase == "dual":  # the flat parameters and each sum / difference are fresh
        flat_sum = [_memcpy(F4 * n), _fresh(F4 * n), _elementwise(3 * F4 * n), _fresh(F4 * n)]
        update = [*flat_sum, _elementwise(3 * F4 * n), *(_memcpy(F4 * s) for s in sizes)]
        return [flat_sum, update]
    if role != "leader":
        return []
    if phase == "projection":
        return [[_own(CHANNEL_MASK, [("projection", {**p, "kind": "channel"})], **p,
                      window=pl.kernel)
                 for pl in layers for p in [{"numel": pl.numel, "groups": pl.cin}]]]  # fmt: skip
    pruned = {pl.index: pl for pl in layers}
    # a pruned conv's weight is its layer's first tensor (a bias, if any, stays dense)
    tensors = [(pruned.get(i) if j == 0 else None, n) for i, layer in enumerate(model.layers)
               for j, n in enumerate(layer.param_tensors)]  # fmt: skip
    calls: list[KernelCall] = []
    compact = 0
    for pl, size in tensors:
        kept = pl.kept("channel", keep) if pl else size
        compact += kept
        if phase == "compress" and pl:
            calls += [("compress", {"numel": kept}), _fresh(F4 * kept)]
        elif phase == "decompress" and pl:
            # in place: v.zero_() writes the weight, index_copy_ puts the kept channels
            # back (the decompress family's benchmark fills fresh zeros by a two-index
            # index_put_: not this code); without the index_copy family, the mirror of
            # compress's index_select
            otherwise = [_elementwise(F4 * pl.numel), ("compress", {"numel": kept})]
            calls.append(_own(INDEX_COPY, otherwise, numel=pl.numel, kept=kept))
        elif phase == "decompress":
            calls.append(_memcpy(F4 * size))
    if phase == "compress":
        calls += [_memcpy(F4 * compact), _fresh(F4 * compact)]
    return [calls]


def phase_ops(pattern: str, model, options: Mapping[str, Any]) -> dict[tuple[str, str], list]:
    """``(phase, role) -> kernel calls of each op`` for every phase of ``pattern`` this
    module prices, roles ``all`` and ``leader``."""
    out = {}
    for phase in PREDICTED_PHASES.get(pattern, ()):
        for role in ("all", "leader"):
            ops = kernel_calls(pattern, phase, role, model, options)
            if ops:
                out[(phase, role)] = ops
    return out


def op_seconds(profile, calls: list[KernelCall]) -> float:
    """Seconds of one op: the sum of its kernel calls as ``profile`` prices them (a
    ``fresh`` call by :meth:`~simcluster.compute.profile.DeviceProfile.fresh_output_time`,
    a ``dispatch`` call at the profile's ``dispatch_time()`` per torch call)."""
    return sum(_call_seconds(profile, family, params) for family, params in calls)


def _call_seconds(profile, family: str, params: Mapping[str, Any]) -> float:
    if family == FRESH:
        return profile.fresh_output_time(params["nbytes"])
    if family == DISPATCH:
        return params["calls"] * profile.dispatch_time()
    if family in OPTIONAL_KERNELS:
        own = {k: v for k, v in params.items() if k != "otherwise"}
        t = profile.optional_kernel_time(family, **own)
        return op_seconds(profile, params["otherwise"]) if t is None else t
    return profile.kernel_time(family, **params)
