"""Gloo over TCP on one host: per-collective message counts and bytes, and their cost.

A gloo collective on P processes is a sequence of messages on the critical path;
each costs a per-message time ``alpha`` (syscalls, the wake-up of gloo's threads,
torch's dispatch; the mean of small calls) and moves bytes at ``1 / beta``
bytes/s (loopback copy and, for allreduce, the reduction). Both are measured per op
and process count by
``python -m calibrate.gloo`` (and by every ``calibrate.live`` run on its own
processes), so they include what P processes sharing this host's cores cost
each other.

Algorithms (gloo's collectives as torch's ProcessGroupGloo calls them for dense
CPU tensors; the counts are what the fit's per-op constants multiply):

- allreduce, ring: reduce-scatter then allgather, 2(P-1) steps of n/P bytes, in two
  segments per process; a buffer of fewer elements than segments sends only the
  segments that hold data (:func:`ring_segments`: 16 bytes on 8 processes, 1/4);
- allgather, ring: P-1 steps, each forwarding one rank's n bytes;
- broadcast, binomial tree: ceil(log2 P) rounds of n bytes.

In training every rank computes before a collective, so ranks arrive apart and the
early ones block; waking them costs ``wake_s`` per call (the sweep's skewed-arrival
test: the last rank computes a few ms first). Where the sweep also timed calls made
right after every rank computed (``wake_by_bytes``: [bytes, seconds] over the aligned
call of the same size, at 4, 32 and 256 KiB), that replaces it, interpolated linearly in
log2(bytes), the end values beyond: on a host with more busy threads than cores, the
collective's threads (torch's gloo worker, gloo's socket loop, in every process) wait
for a core each time they wake, the more often the more pieces a message moves in.
Live validation adds it to every call.

A process count that was not measured takes the nearest measured one below it
with alpha and beta scaled by the ratio of the CPU-sharing factors (measured at
both; above the largest measured count, by P / P_max): more processes than
cores slow every message as they slow compute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "OPS",
    "cost_terms",
    "ring_segments",
    "fit_alpha_beta",
    "fit_worlds",
    "exit_spread",
    "wake_by_bytes",
    "GlooModel",
]

OPS = ("allreduce", "allgather", "broadcast")


def ring_segments(world: int, nbytes: float, element_bytes: int = 4) -> tuple[int, int]:
    """(segments, segments holding data) of gloo's ring allreduce on ``nbytes`` bytes
    over ``world`` processes.

    gloo/allreduce.cc cuts the buffer into at least two segments per process (a
    multiple of the process count), each ``ceil(bytes / segments)`` rounded up to whole
    elements, and skips the sends and receives of a segment that holds no data: 16
    bytes of fp32 on 8 processes fill 4 of 16 segments, on 4 processes 4 of 8, on 2
    all 4. (gloo also caps a segment at 1 MiB, so a buffer above 2P MiB has more
    segments; the model leaves those in the per-byte cost, which is fitted at 16 MiB:
    counting them scored the committed and fresh AMD runs worse, see README *Live
    runs*.) element_bytes: 4, fp32, what ``calibrate.gloo`` and ``calibrate.live``
    reduce; their one uint8 buffer (``hsadmm``'s 3,840-byte mask) fills every segment
    at 2-8 processes either way.
    """
    p = max(1, int(world))
    e = max(1, int(element_bytes))
    total = _round_up(max(1, math.ceil(float(nbytes))), e)
    segments = 2 * p
    size = _round_up(_ceil_div(total, segments), e)
    return segments, min(segments, _ceil_div(total, size))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


def cost_terms(op: str, world: int, nbytes: float) -> tuple[float, float]:
    """(messages, bytes) on the critical path of ``op`` over ``world`` processes.

    nbytes: the buffer in bytes (allgather: each rank's contribution). Allreduce's
    messages: each segment holding data (:func:`ring_segments`) is sent P-1 times in
    the reduce-scatter and P-1 times in the allgather, so a rank sends ``2 (P-1) / P``
    of them; counted in steps of two segments, ``2(P-1)`` when every segment holds data
    (the sweep's 16-byte call on 8 processes: 3.5, about a quarter of its 256-byte
    call's time in every committed run).
    """
    p = int(world)
    if p < 2:
        return 0.0, 0.0
    if op == "allreduce":
        segments, full = ring_segments(p, nbytes)
        return 2.0 * (p - 1) * full / segments, 2.0 * (p - 1) / p * nbytes
    if op == "allgather":
        return float(p - 1), (p - 1) * nbytes
    if op == "broadcast":
        r = math.ceil(math.log2(p))
        return float(r), r * nbytes
    raise ValueError(f"gloo model: unknown collective {op!r}; known: {', '.join(OPS)}")


#: sizes (bytes) at or below which a call is all start-up, and at or above which the
#: bytes may dominate; between them the points only check the model
SMALL_BYTES = 4096
LARGE_BYTES = 1 << 20
#: suffixes of a sweep's op names for the skewed-arrival and after-compute tests
#: (``calibrate.gloo`` writes them)
SKEWED = "~skewed"
COMPUTED = "~computed"


def fit_alpha_beta(op: str, world: int, points: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """alpha (s/message) and beta (s/byte) from ``points`` = (bytes, mean seconds).

    alpha: the mean over the small sizes of seconds per message; beta: (seconds -
    alpha * messages) / bytes at the largest size (at least 1 MiB), at least 0: on a
    host with more processes than cores the messages still cost most of a 1 MiB call
    (4 processes on this 2-core host: 6 messages of about 0.8 ms against 2-3 ms of
    bytes), and the per-byte cost grows with the size (16 MiB: 2-3x the 1-4 MiB rate
    in every committed live run's sweep), so the largest size is the one that speaks
    for the large buckets training moves. A sweep without one of the regimes falls
    back to least squares on relative errors. Returns them with the median and max
    relative error over every point.
    """
    terms = [cost_terms(op, world, n) for n, _ in points]
    small = [t / m for (n, t), (m, _) in zip(points, terms, strict=True) if n <= SMALL_BYTES]
    large = [(t, m, b) for (n, t), (m, b) in zip(points, terms, strict=True)
             if n >= LARGE_BYTES and b > 0]  # fmt: skip
    if small and large:
        alpha = float(np.mean(small))
        t, m, b = max(large, key=lambda x: x[2])
        beta = max(0.0, (t - alpha * m) / b)
    else:
        y = np.array([t for _, t in points], dtype=np.float64)
        a = np.array(terms, dtype=np.float64) / y[:, None]
        coef, *_ = np.linalg.lstsq(a, np.ones(len(points)), rcond=None)
        alpha, beta = max(0.0, float(coef[0])), max(0.0, float(coef[1]))
    errs = np.array([abs((alpha * m + beta * b - t) / t)
                     for (_, t), (m, b) in zip(points, terms, strict=True)])  # fmt: skip
    return {
        "alpha_s": alpha,
        "beta_s_per_byte": beta,
        "rel_err_median": float(np.median(errs)),
        "rel_err_max": float(errs.max()),
        "points": len(points),
    }


def fit_worlds(worlds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per process count and op: the gloo model's constants from a sweep's samples.

    worlds: ``[{"world": P, "ops": {op: rows, op~skewed: rows, op~computed: rows},
    "compute": {"factor": f}}]`` as ``calibrate.gloo`` records them (rows: ``nbytes``
    and ``mean_s`` seconds per call). Returns ``{"P": {"cpu_share_factor": f, op:
    fit_alpha_beta(...) plus wake_s and wake_by_bytes where the tests ran, and
    exit_spread where the rows hold the per-rank means}}``.
    """
    out: dict[str, Any] = {}
    for w in worlds:
        p = int(w["world"])
        entry: dict[str, Any] = {"cpu_share_factor": w["compute"]["factor"]}
        for op, samples in w["ops"].items():
            if op.endswith((SKEWED, COMPUTED)):
                continue
            # the mean, not the median: a phase sums many calls, and on a shared host
            # a call now and then waits a scheduler tick (4 ms here)
            pts = [(float(s["nbytes"]), float(s.get("mean_s", s["median_s"]))) for s in samples]
            entry[op] = fit_alpha_beta(op, p, pts)
            spread = exit_spread(samples)
            if spread is not None:
                entry[op]["exit_spread"] = spread
            skew = w["ops"].get(f"{op}{SKEWED}")
            if skew:  # what waking blocked peers adds to a call, over the fit at that size
                m, b = cost_terms(op, p, float(skew[0]["nbytes"]))
                base = entry[op]["alpha_s"] * m + entry[op]["beta_s_per_byte"] * b
                entry[op]["wake_s"] = max(0.0, float(skew[0]["mean_s"]) - base)
            computed = w["ops"].get(f"{op}{COMPUTED}")
            if computed:  # after compute on every rank, per size, over the aligned call
                entry[op]["wake_by_bytes"] = wake_by_bytes(samples, computed)
        out[str(p)] = entry
    return out


def exit_spread(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Fraction of an aligned call over which its ranks leave it, from the sweep's
    rows: a call's ranks take the least time ``t`` (``median_s``) to the mean over
    ranks (``rank_mean_median_s``); ranks leaving evenly over ``s`` seconds after
    the first give a mean ``t + s / 2``, so ``s = 2 (mean - t)`` and the fraction is
    ``s / (t + s)``. The median over the sizes; None without the per-rank means."""
    fr = []
    for r in rows:
        t, mean = r.get("median_s"), r.get("rank_mean_median_s")
        if t is None or mean is None or float(t) <= 0:
            return None
        s = 2.0 * max(0.0, float(mean) - float(t))
        fr.append(s / (float(t) + s))
    return float(np.median(fr)) if fr else None


def wake_by_bytes(aligned: Sequence[Mapping[str, Any]], skew: Sequence[Mapping[str, Any]]):
    """``[bytes, seconds]`` per size of ``skew`` (the after-compute test's rows): its mean
    call less the mean aligned call of the same size (both timed in the same sweep), at
    least 0; sizes without an aligned row are left out."""
    at = {int(r["nbytes"]): float(r.get("mean_s", r["median_s"])) for r in aligned}
    return [
        [int(r["nbytes"]), max(0.0, float(r["mean_s"]) - at[int(r["nbytes"])])]
        for r in skew
        if int(r["nbytes"]) in at
    ]


class GlooModel:
    """Seconds of a gloo collective from measured per-op constants per process count.

    worlds: ``{"P": {"cpu_share_factor": f, op: {"alpha_s", "beta_s_per_byte"}}}``
    (a network profile's ``network.gloo.worlds``, or a live run's own sweep).
    """

    def __init__(self, worlds: Mapping[str, Mapping[str, Any]], source: str = "") -> None:
        if not worlds:
            raise ValueError("gloo model: no measured process counts")
        self.worlds = {int(k): v for k, v in worlds.items()}
        self.source = source

    def constants(self, op: str, world: int) -> tuple[float, float, str]:
        """(alpha, beta, how) for ``op`` on ``world`` processes."""
        if world in self.worlds:
            c = self._timed(op, world)
            return float(c["alpha_s"]), float(c["beta_s_per_byte"]), f"measured at P={world}"
        below = [p for p in self.worlds if p < world]
        base = max(below) if below else min(self.worlds)
        share = self.share(world) / self.share(base)
        c = self._timed(op, base)
        how = f"P={base} scaled by CPU sharing x{share:.2f}"
        return float(c["alpha_s"]) * share, float(c["beta_s_per_byte"]) * share, how

    def priced_as(self, world: int) -> int:
        """The process count whose sweep arrangement the seconds of a ``world``-process
        call stand for: ``world`` itself where it was measured or scaled to it by the
        sharing factors (:meth:`constants`), else (below every measured count) the
        smallest measured count, whose constants it takes unscaled: those include the
        contention of that many processes in the call, not of ``world``."""
        ps = sorted(self.worlds)
        return ps[0] if world < ps[0] else world

    def _timed(self, op: str, world: int) -> Mapping[str, Any]:
        """The constants of ``op`` measured at ``world`` processes; a sweep that did not
        time ``op`` there is the user's one line (it was a KeyError)."""
        c = self.worlds[world].get(op)
        if not isinstance(c, Mapping):
            have = sorted(k for k, v in self.worlds[world].items() if isinstance(v, Mapping))
            from simcluster.errors import UserError

            raise UserError(
                f"{self.source or 'gloo model'}: {op} was not timed at P={world} (timed: "
                f"{', '.join(have) or 'none'}); the run calls it, so its sweep must time it"
            )
        return c

    def share(self, world: int) -> float:
        """CPU-sharing factor at ``world`` processes: measured, or interpolated
        linearly in P between measured counts, or P / P_max times the largest."""
        if world in self.worlds:
            return float(self.worlds[world]["cpu_share_factor"])
        ps = sorted(self.worlds)
        if world > ps[-1]:
            return float(self.worlds[ps[-1]]["cpu_share_factor"]) * world / ps[-1]
        if world < ps[0]:
            return float(self.worlds[ps[0]]["cpu_share_factor"])
        hi = min(p for p in ps if p > world)
        lo = max(p for p in ps if p < world)
        f_lo = float(self.worlds[lo]["cpu_share_factor"])
        f_hi = float(self.worlds[hi]["cpu_share_factor"])
        return f_lo + (f_hi - f_lo) * (world - lo) / (hi - lo)

    def scaled(self, factor: float) -> GlooModel:
        """The same model with every alpha and beta times ``factor`` (the host's CPU
        sharing measured at another moment over the one of the sweep)."""
        worlds = {}
        for p, v in self.worlds.items():
            w = dict(v)
            for op in OPS:
                if op in w:
                    c = dict(w[op])
                    c["alpha_s"] = float(c["alpha_s"]) * factor
                    c["beta_s_per_byte"] = float(c["beta_s_per_byte"]) * factor
                    if "wake_s" in c:
                        c["wake_s"] = float(c["wake_s"]) * factor
                    if "wake_by_bytes" in c:
                        c["wake_by_bytes"] = [[n, float(s) * factor] for n, s in c["wake_by_bytes"]]
                    w[op] = c
            worlds[str(p)] = w
        return GlooModel(worlds, self.source)

    def exit_spread(self, op: str, world: int) -> float:
        """Fraction of a call of ``op`` over which its ``world`` ranks leave it, as the
        sweep at that process count measured it (:func:`exit_spread`); 0 where it did
        not (a count not swept, a sweep without per-rank means)."""
        c = (self.worlds.get(world) or {}).get(op) or {}
        return float(c.get("exit_spread", 0.0))

    def wake(self, op: str, world: int, nbytes: float | None = None) -> float:
        """Seconds a call adds when its ranks arrive apart (the early ones block and
        must be woken): measured by the sweep's skewed-arrival test, at ``nbytes`` when
        it ran at several sizes; 0 if absent."""
        if world < 2:
            return 0.0
        if world in self.worlds:
            return _wake_at(self.worlds[world][op], nbytes)
        below = [p for p in self.worlds if p < world]
        base = max(below) if below else min(self.worlds)
        w = _wake_at(self.worlds[base][op], nbytes)
        return w * self.share(world) / self.share(base)

    def with_wake_sizes(self, other: GlooModel) -> GlooModel:
        """This model where a count and op lacks ``wake_by_bytes`` and ``other`` has it:
        ``other``'s, scaled by the ratio of the CPU-sharing factors (this model's over
        ``other``'s: the cost is threads waiting for a core)."""
        worlds = {}
        for p, v in self.worlds.items():
            w = dict(v)
            src = other.worlds.get(p)
            for op in OPS:
                if op not in w or "wake_by_bytes" in w[op] or src is None:
                    continue
                pairs = (src.get(op) or {}).get("wake_by_bytes")
                if not pairs:
                    continue
                ratio = self.share(p) / other.share(p)
                c = dict(w[op])
                c["wake_by_bytes"] = [[n, float(s) * ratio] for n, s in pairs]
                w[op] = c
            worlds[str(p)] = w
        return GlooModel(worlds, self.source)

    def seconds(self, op: str, world: int, nbytes: float, skewed: bool = False) -> float:
        """Seconds of ``op`` over ``world`` processes on ``nbytes`` (see cost_terms),
        plus the wake-up cost when ``skewed`` (ranks arrive at different times)."""
        if world < 2:
            return 0.0
        alpha, beta, _ = self.constants(op, world)
        m, b = cost_terms(op, world, nbytes)
        return alpha * m + beta * b + (self.wake(op, world, nbytes) if skewed else 0.0)


def _wake_at(c: Mapping[str, Any], nbytes: float | None) -> float:
    """``wake_s``, or ``wake_by_bytes`` interpolated in log2(bytes) at ``nbytes``."""
    pairs = c.get("wake_by_bytes")
    if nbytes is None or not pairs:
        return float(c.get("wake_s", 0.0))
    xs = [math.log2(max(1.0, float(n))) for n, _ in pairs]
    ys = [float(s) for _, s in pairs]
    return float(np.interp(math.log2(max(1.0, float(nbytes))), xs, ys))
