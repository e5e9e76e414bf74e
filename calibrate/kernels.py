"""Benchmarks of the kernel families a schedule times (``simcluster.compute.profile``).

Every function here returns ``(params, fn)`` pairs: ``params`` are the kernel family's
parameters as :data:`simcluster.compute.profile.KERNEL_FAMILIES` names them, ``fn`` is a
zero-argument callable that runs one kernel call on prepared tensors. The runner times
each ``fn`` and fits the family's cost model on ``params``.

Implementations (written for this project from the papers' descriptions):

* sparsification (SSFusion paper, Sec. II; DGC, Gaussian-k and random-k as it cites them):
  ``exact`` top-k of magnitudes; ``dgc`` top-k of a 1 % random sample gives a threshold,
  elements above it are selected and trimmed to k by an exact top-k when too many;
  ``gaussian`` threshold from the mean and standard deviation of magnitudes (normal
  quantile of the density); ``random`` k random indices; ``threshold`` a given
  magnitude threshold. Each returns values and indices.
* H-SADMM (PRUNEX paper, Secs. 3-4): projection = group norms over filters (dim 0),
  channels (dim 1) or kernel shapes (dims 1-3 per output position), a top-k over the
  groups, and the mask; ``combined`` applies the three in sequence. Mask merge =
  bitwise OR of two uint8 masks; compress = index_select of kept filters and channels +
  contiguous; decompress = zeros + index_put_ of the compact tensor.
* the live H-SADMM code (``calibrate/live/run.py``) as it runs: ``channel_mask`` =
  ``pow(2).sum`` over dims 0, 2, 3 of an OIHW weight, ``topk`` of the input channels, a
  uint8 mask set at their indices; ``index_copy`` = ``zero_`` of the weight then
  ``index_copy_`` of the kept input channels along dim 1 (in place).
* sparse kernels (SpMV paper): CSR SpMV / SpMM ``A @ X``; the weight update of a sparse
  layer is the sampled outer product ``(delta @ x^T)`` at A's non-zeros
  (``torch.sparse.sampled_addmm`` where available).
* memcpy (d2d on any device; pinned / pageable host <-> device on CUDA), the optimizer
  step (SGD, momentum 0.9) and an element-wise add (``a + b -> c``).
"""

from __future__ import annotations

import math
import mmap
import warnings
from collections.abc import Callable, Iterable, Iterator
from statistics import NormalDist

import torch

__all__ = [
    "sparsify_fn",
    "sparsify_cases",
    "projection_cases",
    "mask_apply_cases",
    "mask_merge_cases",
    "projection_fn",
    "projection_groups",
    "compress_cases",
    "spmv_cases",
    "outer_update_cases",
    "elementwise_cases",
    "memcpy_cases",
    "optimizer_cases",
    "scatter_add_cases",
    "fresh_output_cases",
    "channel_mask_cases",
    "channel_mask_fn",
    "index_copy_cases",
    "roofline",
]

#: (kernel parameters, build) where ``build()`` prepares tensors and returns the kernel call
Case = tuple[dict, Callable[[], Callable[[], object]]]


def _gen(device: torch.device, seed: int = 0) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


# ----------------------------------------------------------------------------- sparsify


def sparsify_fn(method: str, x: torch.Tensor, density: float) -> Callable[[], object]:
    """One gradient sparsification of flat tensor ``x`` keeping ``density`` of it."""
    n = x.numel()
    k = max(1, int(n * density))
    dev = x.device
    if method == "exact":

        def run() -> object:
            _, idx = torch.topk(x.abs(), k, sorted=False)
            return x[idx], idx

        return run
    if method == "dgc":
        sample = max(min(n, 64), n // 100)
        ks = max(1, int(sample * density))
        gen = _gen(dev)

        def run() -> object:
            a = x.abs()
            pick = torch.randint(0, n, (sample,), device=dev, generator=gen)
            thr = torch.topk(a[pick], ks, sorted=False)[0].min()
            idx = torch.nonzero(a >= thr).flatten()
            if idx.numel() > k:  # trim to exactly k (DGC's hierarchical selection)
                idx = idx[torch.topk(a[idx], k, sorted=False)[1]]
            return x[idx], idx

        return run
    if method == "gaussian":
        z = NormalDist().inv_cdf(1 - density / 2)  # two-sided tail of a zero-mean normal

        def run() -> object:
            std, mean = torch.std_mean(x)
            idx = torch.nonzero((x - mean).abs() > z * std).flatten()
            return x[idx], idx

        return run
    if method == "random":
        gen = _gen(dev)

        def run() -> object:
            idx = torch.randint(0, n, (k,), device=dev, generator=gen)
            return x[idx], idx

        return run
    if method == "threshold":
        thr = float(NormalDist().inv_cdf(1 - density / 2))  # x ~ N(0, 1)

        def run() -> object:
            idx = torch.nonzero(x.abs() > thr).flatten()
            return x[idx], idx

        return run
    raise ValueError(f"unknown sparsification method {method!r}")


def sparsify_cases(
    methods: Iterable[str], numels: Iterable[int], densities: Iterable[float], device
) -> Iterator[Case]:
    for n in numels:
        for density in densities:
            for method in methods:

                def build(n=n, method=method, density=density) -> Callable[[], object]:
                    return sparsify_fn(method, torch.randn(n, device=device), density)

                yield {"method": method, "numel": n, "density": density}, build


# ----------------------------------------------------------------------------- H-SADMM


def _norms(w: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "filter":
        return w.flatten(1).norm(dim=1)
    if kind == "channel":
        return w.transpose(0, 1).flatten(1).norm(dim=1)
    return w.norm(dim=0).flatten()  # kernel shape: one norm per (cin, kh, kw) position


def _project(w: torch.Tensor, kind: str, keep: float) -> torch.Tensor:
    """Mask of the structures (filters / channels / kernel positions) with largest norms."""
    norms = _norms(w, kind)
    k = max(1, int(norms.numel() * keep))
    top = torch.topk(norms, k, sorted=False)[1]
    mask = torch.zeros(norms.numel(), dtype=torch.bool, device=w.device)
    mask[top] = True
    if kind == "filter":
        return mask.view(-1, *([1] * (w.dim() - 1))).expand_as(w)
    if kind == "channel":
        return mask.view(1, -1, *([1] * (w.dim() - 2))).expand_as(w)
    return mask.view(1, *w.shape[1:]).expand_as(w)


def projection_groups(shape: tuple[int, ...], kind: str) -> int:
    """Structures scored by a projection of a weight of ``shape``."""
    cout, cin = shape[0], shape[1]
    rest = math.prod(shape[1:])
    groups = {"filter": cout, "channel": cin, "kernel_shape": rest}
    groups["combined"] = cout + cin + rest
    return groups[kind]


def projection_fn(w: torch.Tensor, kind: str, keep: float = 0.5) -> Callable[[], object]:
    """Project ``w`` onto its ``keep`` largest structures of ``kind`` (returns w * mask)."""
    parts = ("filter", "channel", "kernel_shape") if kind == "combined" else (kind,)

    def run() -> object:
        z = w
        for part in parts:
            z = z * _project(z, part, keep)
        return z

    return run


def projection_cases(
    shapes: Iterable[tuple[int, ...]], device, keep: float = 0.5
) -> Iterator[Case]:
    for shape in shapes:
        for kind in ("filter", "channel", "kernel_shape", "combined"):
            groups = projection_groups(shape, kind)
            params = {"kind": kind, "numel": math.prod(shape), "groups": groups}

            def build(shape=shape, kind=kind) -> Callable[[], object]:
                return projection_fn(torch.randn(*shape, device=device), kind, keep)

            yield params, build


def channel_mask_fn(w: torch.Tensor, keep: float = 0.5) -> Callable[[], object]:
    """The live H-SADMM ``project()`` on one OIHW weight (``calibrate/live/run.py``):
    squared norms per input channel by ``pow(2).sum`` over the other dimensions, top-k
    of the channels, a uint8 mask set at their indices (no transposed copy, no mask
    multiply: the ``projection`` family's ``channel`` kind does those)."""
    cin = w.shape[1]
    kk = max(1, round(cin * keep))
    dims = (0, *range(2, w.dim()))

    def run() -> object:
        norms = w.pow(2).sum(dim=dims)
        m = torch.zeros(cin, dtype=torch.uint8, device=w.device)
        m[torch.topk(norms, kk).indices] = 1
        return m

    return run


def channel_mask_cases(
    shapes: Iterable[tuple[int, ...]], device, keep: float = 0.5
) -> Iterator[Case]:
    """``channel_mask`` family: :func:`channel_mask_fn` per conv weight shape."""
    for shape in shapes:

        def build(shape=shape) -> Callable[[], object]:
            return channel_mask_fn(torch.randn(*shape, device=device), keep)

        window = math.prod(shape[2:])
        yield {"numel": math.prod(shape), "groups": shape[1], "window": window}, build


def index_copy_cases(
    shapes: Iterable[tuple[int, ...]], device, keeps: Iterable[float] = (0.5, 0.25)
) -> Iterator[Case]:
    """``index_copy`` family: the live H-SADMM decompress of one OIHW weight in place,
    ``v.zero_()`` then ``v.index_copy_(1, idx, compact)`` of its kept input channels
    (``numel``: the weight's elements; ``kept``: the compact slice's)."""
    for shape in shapes:
        for keep in keeps:
            kin = max(1, round(shape[1] * keep))
            kept = shape[0] * kin * math.prod(shape[2:])

            def build(shape=shape, kin=kin) -> Callable[[], object]:
                g = torch.Generator().manual_seed(0)
                idx = torch.randperm(shape[1], generator=g)[:kin].sort()[0].to(device)
                v = torch.randn(*shape, device=device)
                c = torch.randn(shape[0], kin, *shape[2:], device=device)

                def run() -> object:
                    v.zero_()
                    v.index_copy_(1, idx, c)
                    return v

                return run

            yield {"numel": math.prod(shape), "kept": kept}, build


def mask_apply_cases(numels: Iterable[int], device) -> Iterator[Case]:
    """Weights times a cached float mask (PRUNEX after mask freezing)."""
    for n in numels:

        def build(n=n) -> Callable[[], object]:
            w = torch.randn(n, device=device)
            m = (torch.rand(n, device=device) > 0.5).to(torch.float32)
            return lambda: w * m

        yield {"numel": n}, build


def mask_merge_cases(numels: Iterable[int], device) -> Iterator[Case]:
    """Bitwise OR of two boolean masks of ``numel`` bytes each."""
    for n in numels:

        def build(n=n) -> Callable[[], object]:
            a = torch.rand(n, device=device) > 0.5
            b = torch.rand(n, device=device) > 0.5
            out = torch.empty_like(a)
            return lambda: torch.bitwise_or(a, b, out=out)

        yield {"numel": n}, build


def _kept(shape: tuple[int, ...], keep: float, device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ko = torch.randperm(shape[0], generator=g)[: max(1, int(shape[0] * keep))].sort()[0]
    ki = torch.randperm(shape[1], generator=g)[: max(1, int(shape[1] * keep))].sort()[0]
    return ko.to(device), ki.to(device)


def compress_cases(
    shapes: Iterable[tuple[int, ...]], device, keeps: Iterable[float] = (0.5, 0.25)
) -> Iterator[tuple[str, dict, Callable[[], Callable[[], object]]]]:
    """PRUNEX shrinkage: compress kept filters x channels; decompress into zeros."""
    for shape in shapes:
        for keep in keeps:
            kept = max(1, int(shape[0] * keep)) * max(1, int(shape[1] * keep))
            kept *= math.prod(shape[2:])

            def build_c(shape=shape, keep=keep) -> Callable[[], object]:
                w = torch.randn(*shape, device=device)
                ko, ki = _kept(shape, keep, device)
                return lambda: w.index_select(0, ko).index_select(1, ki).contiguous()

            def build_d(shape=shape, keep=keep) -> Callable[[], object]:
                ko, ki = _kept(shape, keep, device)
                c = torch.randn(len(ko), len(ki), *shape[2:], device=device)

                def run() -> object:
                    full = torch.zeros(shape, device=device)
                    full.index_put_((ko[:, None], ki[None, :]), c)
                    return full

                return run

            yield "compress", {"numel": kept}, build_c
            yield "decompress", {"numel": math.prod(shape), "kept": kept}, build_d


def scatter_add_cases(numels: Iterable[int], device, fan: int = 8) -> Iterator[Case]:
    """Accumulate ``numel`` received (index, value) pairs into a dense buffer (8x larger)."""
    for n in numels:

        def build(n=n) -> Callable[[], object]:
            dense = torch.zeros(n * fan, device=device)
            idx = torch.randint(0, n * fan, (n,), device=device)
            vals = torch.randn(n, device=device)
            return lambda: dense.index_add_(0, idx, vals)

        yield {"numel": n}, build


# ----------------------------------------------------------------------------- sparse


def random_csr(rows: int, cols: int, per_row: int, device, seed: int = 0) -> torch.Tensor:
    """A CSR matrix with ``per_row`` random non-zeros in every row."""
    g = torch.Generator().manual_seed(seed)
    col = torch.randint(0, cols, (rows, per_row), generator=g).sort(dim=1)[0].flatten()
    crow = torch.arange(0, rows * per_row + 1, per_row)
    vals = torch.randn(rows * per_row, generator=g)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta")
        a = torch.sparse_csr_tensor(crow, col, vals, (rows, cols), check_invariants=False)
    return a.to(device)


#: largest ``nnz x batch`` of a sparse case (the outer update gathers two such arrays)
MAX_NNZ_BATCH = 1 << 25


def _sparse_shapes(
    sizes: Iterable[int], per_rows: Iterable[int], batches: Iterable[int]
) -> Iterator[tuple[int, int, int]]:
    """(rows, non-zeros per row, batch) triples within :data:`MAX_NNZ_BATCH`."""
    for n in sizes:
        for d in per_rows:
            for b in batches:
                if n * d * b <= MAX_NNZ_BATCH:
                    yield n, d, b


def spmv_cases(
    sizes: Iterable[int], per_rows: Iterable[int], batches: Iterable[int], device
) -> Iterator[Case]:
    """CSR ``A @ x`` (batch 1, SpMV) and ``A @ X`` (X has ``batch`` columns, SpMM)."""
    for n, d, b in _sparse_shapes(sizes, per_rows, batches):

        def build(n=n, d=d, b=b) -> Callable[[], object]:
            a = random_csr(n, n, d, device)
            shape = (n, b) if b > 1 else (n,)
            x = torch.randn(*shape, device=device)
            return lambda: a @ x

        yield {"nnz": n * d, "rows": n, "batch": b}, build


def outer_update_cases(
    sizes: Iterable[int], per_rows: Iterable[int], batches: Iterable[int], device
) -> Iterator[Case]:
    """Gradient step of a sparse layer at its non-zeros: ``W[nz] -= lr * (delta @ x^T)[nz]``."""
    for n, d, b in _sparse_shapes(sizes, per_rows, batches):

        def build(n=n, d=d, b=b) -> Callable[[], object]:
            a = random_csr(n, n, d, device)
            delta = torch.randn(n, b, device=device)
            x = torch.randn(b, n, device=device)
            if device.type == "cuda" and hasattr(torch.sparse, "sampled_addmm"):
                return lambda: torch.sparse.sampled_addmm(a, delta, x, alpha=-0.01)
            crow, col = a.crow_indices(), a.col_indices()
            row = torch.repeat_interleave(torch.arange(n, device=device), crow.diff())
            xt = x.t().contiguous()
            vals = a.values()

            def run() -> object:
                upd = (delta[row] * xt[col]).sum(dim=1)
                return vals.add_(upd, alpha=-0.01)

            return run

        yield {"nnz": n * d, "rows": n, "batch": b}, build


# ----------------------------------------------------------------------------- memory


#: most buffer sets a cold-operand benchmark cycles through (:func:`_cycle`)
MAX_SETS = 1024


def _cycle(make: Callable[[], tuple], per_set: int, evict_bytes: int) -> Callable[[], tuple]:
    """Buffer sets handed out in turn: enough sets of ``per_set`` bytes to fill
    ``evict_bytes`` (at most :data:`MAX_SETS`), so a set's operands left the cache by its
    next turn; one set when ``evict_bytes`` is 0 (operands stay cached)."""
    n = 1 if evict_bytes <= 0 else min(MAX_SETS, max(1, math.ceil(evict_bytes / per_set)))
    sets = [make() for _ in range(n)]
    state = [0]

    def nxt() -> tuple:
        i = state[0]
        state[0] = (i + 1) % n
        return sets[i]

    return nxt


def elementwise_cases(numels: Iterable[int], device, evict_bytes: int = 0) -> Iterator[Case]:
    """``c = a + b`` in fp32: ``nbytes`` = 12 bytes per element (two reads, one write).
    With ``evict_bytes`` (the CPU's: twice its last-level cache) each call works on the
    next of several buffer sets, so its operands come from memory as in a training step,
    where the gradients and parameters an op reads were last touched long before."""
    for n in numels:

        def build(n=n) -> Callable[[], object]:
            def make() -> tuple:
                a, b = torch.randn(n, device=device), torch.randn(n, device=device)
                return a, b, torch.empty_like(a)

            nxt = _cycle(make, 12 * n, evict_bytes)

            def run() -> object:
                a, b, c = nxt()
                return torch.add(a, b, out=c)

            return run

        yield {"nbytes": 12 * n}, build


def memcpy_cases(sizes: Iterable[int], device, evict_bytes: int = 0) -> Iterator[Case]:
    """``dst.copy_(src)`` of ``nbytes`` bytes: d2d on ``device``; host links on CUDA.
    ``evict_bytes``: d2d copies cycle through buffer pairs, as
    :func:`elementwise_cases`."""
    kinds = ["d2d"]
    if device.type == "cuda":
        kinds += ["h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable"]
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        for kind in kinds:

            def build(n=n, kind=kind) -> Callable[[], object]:
                if kind == "d2d":

                    def make() -> tuple:
                        dst = torch.empty(n, device=device).fill_(1.0)
                        return dst, torch.empty_like(dst).fill_(2.0)

                    nxt = _cycle(make, 8 * n, evict_bytes)

                    def run() -> object:
                        dst, src = nxt()
                        return dst.copy_(src)

                    return run
                dev = torch.empty(n, device=device).fill_(1.0)
                host = torch.empty(n, pin_memory=kind.endswith("pinned")).fill_(1.0)
                if kind.startswith("h2d"):
                    return lambda: dev.copy_(host, non_blocking=True)
                return lambda: host.copy_(dev, non_blocking=True)

            yield {"kind": kind, "nbytes": 4 * n}, build


#: bytes between the writes that touch every page of a fresh mapping (the smallest page)
PAGE = 4096


def fresh_output_cases(sizes: Iterable[int]) -> Iterator[Case]:
    """First touch of ``nbytes`` of freshly mapped memory (CPU): an anonymous mapping
    (what glibc's malloc makes for a large block), one byte written per page, unmapped.
    The page faults (and the zeroing and freeing of the pages) an op pays for a fresh
    output the allocator maps anew, beside the kernel's own time on reused buffers."""
    for nbytes in sizes:

        def build(nbytes=nbytes) -> Callable[[], object]:
            def run() -> object:
                m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
                t = torch.frombuffer(m, dtype=torch.uint8)
                t[::PAGE].fill_(1)
                del t
                m.close()
                return None

            return run

        yield {"nbytes": nbytes}, build


def optimizer_cases(numels: Iterable[int], device) -> Iterator[Case]:
    """One ``torch.optim.SGD(momentum=0.9)`` step over a flat fp32 parameter."""
    for n in numels:

        def build(n=n) -> Callable[[], object]:
            p = torch.nn.Parameter(torch.randn(n, device=device))
            p.grad = torch.randn(n, device=device)
            opt = torch.optim.SGD([p], lr=0.01, momentum=0.9)
            opt.step()  # creates the momentum buffer
            return opt.step

        yield {"num_params": n}, build


# ----------------------------------------------------------------------------- roofline


def roofline(device, timer, gemm: int = 1024, copy_bytes: int = 1 << 26, amp: bool = False) -> dict:
    """Attainable rates on this device: fp32 GEMM FLOP/s, copy bytes/s, per-op dispatch (s).

    ``memory_bandwidth`` counts the bytes read and written by a large ``copy_``
    (2 x size). ``launch_overhead_s`` is the time of an add on one-element tensors.
    """
    a = torch.randn(gemm, gemm, device=device)
    b = torch.randn(gemm, gemm, device=device)
    t_mm = timer.measure(lambda: a @ b)
    out = {"peak_flops": {"fp32": 2 * gemm**3 / t_mm.median}}
    if amp:
        dt = torch.float16 if device.type == "cuda" else torch.bfloat16
        ah, bh = a.to(dt), b.to(dt)
        t_h = timer.measure(lambda: ah @ bh)
        out["peak_flops"]["fp16_tensor"] = 2 * gemm**3 / t_h.median
    n = copy_bytes // 4
    src = torch.empty(n, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    t_cp = timer.measure(lambda: dst.copy_(src))
    out["memory_bandwidth"] = 2 * 4 * n / t_cp.median
    one_a, one_b = torch.ones(1, device=device), torch.ones(1, device=device)
    t_l = timer.measure(lambda: torch.add(one_a, one_b))
    out["launch_overhead_s"] = t_l.median
    out["probes"] = {
        "gemm": {"n": gemm, **t_mm.to_json()},
        "copy": {"nbytes": 4 * n, **t_cp.to_json()},
        "launch": t_l.to_json(),
    }
    return out
