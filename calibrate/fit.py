"""Non-negative least squares on relative errors, for cost models ``t = sum c_i * x_i``.

Each cost model is linear in named features (``const`` = 1, ``flops``, ``bytes``,
``numel`` ...; see :mod:`simcluster.compute.measured`) with non-negative
coefficients (seconds per unit of the feature). Rows are weighted by ``1 / t`` so the
fit minimises the squared *relative* error: a 10 us kernel counts as much as a 1 s one.

The problems are tiny (at most a handful of features), so the exact NNLS solution is
found by solving the unconstrained least squares on every subset of features and
keeping the best one whose coefficients are all >= 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["nnls", "fit_cost_model", "fit_host_floor", "fit_alpha_beta"]


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``argmin ||a x - b||`` subject to ``x >= 0`` (exact, by subset enumeration).

    ``a`` is ``(rows, k)`` with ``k <= 8``; columns are scaled internally. Where several
    feature subsets fit equally well (within ``1e-12 ||b||^2`` of the least residual,
    as every exact fit of fewer samples than features does), the smallest subset wins,
    then the first in column order: the choice does not hang on rounding noise, which
    differs between numpy builds.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    rows, k = a.shape
    if k > 8:
        raise ValueError(f"nnls by enumeration supports at most 8 features, got {k}")
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    an = a / scale
    norm2 = float(np.sum(b * b))
    found: list[tuple[float, tuple[int, ...], np.ndarray]] = [(norm2, (), np.zeros(0))]
    for r in range(1, k + 1):
        for cols in itertools.combinations(range(k), r):
            sub = an[:, cols]
            x, *_ = np.linalg.lstsq(sub, b, rcond=None)
            if np.any(x < 0):
                continue
            found.append((float(np.sum((sub @ x - b) ** 2)), cols, x))
    least = min(res for res, _, _ in found)
    res, cols, x = next(f for f in found if f[0] <= least + 1e-12 * norm2)
    best = np.zeros(k)
    best[list(cols)] = x
    return best / scale


def fit_cost_model(
    rows: Sequence[Mapping[str, float]],
    times: Sequence[float],
    features: Sequence[str],
    floor: float | Sequence[float] = 0.0,
    edge: bool = False,
) -> dict:
    """Fit ``t = sum coef[f] * row[f]`` (coefficients >= 0) minimising relative error.

    rows: one mapping of feature values per sample (``const`` may be omitted: it is 1).
    times: measured seconds per sample (medians).
    floor: a sample's weight is ``1 / max(t, floor)`` (guards against t ~ 0); one number
        for all samples or one per sample (seconds).
    edge: also record the sampled range, ``edge``: the largest value of each feature
        (and of ``flops`` and ``bytes``) over ``rows``
        (:func:`simcluster.compute.extrapolation.fit_edge`), for the roofline past it.
    Returns the profile's fit record: features, coef (seconds per unit), sample count,
    median and max absolute relative error of the fit on its own samples.
    """
    if len(rows) != len(times):
        raise ValueError("rows and times differ in length")
    if not rows:
        raise ValueError("no samples to fit")
    t = np.asarray(times, dtype=np.float64)
    x = np.array([[1.0 if f == "const" else float(r[f]) for f in features] for r in rows])
    positive = t > 0
    if not positive.any():
        rec = _record(features, np.zeros(len(features)), x, t)
    else:
        floors = np.broadcast_to(np.asarray(floor, dtype=np.float64), t.shape)
        w = 1.0 / np.maximum(t, np.maximum(floors, 1e-12))
        coef = nnls(x * w[:, None], t * w)
        rec = _record(features, coef, x, t)
    if edge:
        from simcluster.compute.extrapolation import fit_edge

        rec["edge"] = fit_edge(rows, features)
    return rec


def fit_host_floor(
    rows: Sequence[Mapping[str, float]],
    times: Sequence[float],
    features: Sequence[str],
    floor: float | Sequence[float] = 0.0,
    edge: bool = False,
    roofline: Mapping[str, float] | None = None,
) -> dict:
    """Fit ``t = max(host_s, g(row))`` where the samples show a host-bound floor: calls
    of one layer pass timed back to back run at the pace of the slower of the host
    issuing them (``host_s`` seconds each) and the GPU running them (``g``).

    Three kinds of model are compared on the samples (seconds; weights as
    :func:`fit_cost_model`'s, relative errors):

    - the plain fit, ``g = sum coef[f] * row[f]`` over every sample, no floor;
    - a floor ``h`` (searched over the samples' times) over the plain model fitted to
      the samples slower than ``h`` only (the others measured the host);
    - a floor ``h`` over the device's ``roofline`` (``max_f roofline[f] * row[f]``,
      seconds per unit of each feature it names): the samples resolve no rate.

    The floor models are searched for the least squared error; the roofline one replaces
    the best linear one where its Bayesian information criterion (:func:`_bic`, one
    parameter against the linear model's non-zero coefficients and its floor) is lower
    or its error is. Returns the profile's fit record; a floor model adds ``host_s``
    (the floor, seconds); the roofline model has every coefficient 0 and an ``edge`` of
    0 for the roofline's features, so the roofline prices its work from the first FLOP
    or byte (:mod:`simcluster.compute.extrapolation`).
    """
    t = np.asarray(times, dtype=np.float64)
    if len(rows) != len(t):
        raise ValueError("rows and times differ in length")
    floors = np.broadcast_to(np.asarray(floor, dtype=np.float64), t.shape)
    w = 1.0 / np.maximum(t, np.maximum(floors, 1e-12))
    x = np.array([[1.0 if f == "const" else float(r[f]) for f in features] for r in rows])
    n = len(t)
    best: tuple[float, float, dict, np.ndarray] | None = None  # loss, floor, record, pred
    for h in [0.0, *sorted(set(float(v) for v in t if v > 0))]:
        above = np.flatnonzero(t > h)
        if not len(above):
            break
        rec = fit_cost_model(
            [rows[i] for i in above], t[above], features, floor=floors[above], edge=False
        )
        pred = np.maximum(h, x @ np.asarray(rec["coef"]))
        loss = float(np.sum(((pred - t) * w) ** 2))
        if best is None or loss < best[0] * (1 - 1e-9):
            best = (loss, h, rec, pred)
    if best is None:
        raise ValueError("no sample with a positive time to fit")
    loss, h, rec, pred = best
    kind = "linear"
    if roofline:
        k = int(sum(1 for c in rec["coef"] if c)) + (h > 0)
        roof = np.array([max(rate * float(r[f]) for f, rate in roofline.items()) for r in rows])
        for cand in sorted(set(float(v) for v in t if v > 0)):
            p2 = np.maximum(cand, roof)
            loss2 = float(np.sum(((p2 - t) * w) ** 2))
            simpler = kind == "linear" and _bic(loss2, 1, n) < _bic(loss, max(k, 1), n)
            if loss2 < loss * (1 - 1e-9) or simpler:
                loss, h, pred, kind = loss2, cand, p2, "roofline"
    ok = t > 0
    rel = np.abs(pred[ok] - t[ok]) / t[ok] if ok.any() else np.zeros(1)
    if kind == "roofline":
        rec = {"features": list(features), "coef": [0.0] * len(features), "gpu": "roofline"}
    rec["n"] = int(n)
    rec["rel_err_median"] = float(f"{np.median(rel):.4g}")
    rec["rel_err_max"] = float(f"{np.max(rel):.4g}")
    if h > 0:
        rec["host_s"] = float(f"{h:.6g}")
    if kind == "roofline":
        rec["edge"] = {f: 0.0 for f in roofline}
    elif edge:
        from simcluster.compute.extrapolation import fit_edge

        rec["edge"] = fit_edge(rows, features)
    return rec


def _bic(loss: float, k: int, n: int) -> float:
    """Bayesian information criterion of a least-squares fit: ``n ln(loss / n) + k ln n``."""
    return n * float(np.log(max(loss, 1e-300) / n)) + k * float(np.log(n))


def _record(features: Sequence[str], coef: np.ndarray, x: np.ndarray, t: np.ndarray) -> dict:
    pred = x @ coef
    ok = t > 0
    rel = np.abs(pred[ok] - t[ok]) / t[ok] if ok.any() else np.zeros(1)
    return {
        "features": list(features),
        "coef": [float(f"{c:.6g}") for c in coef],
        "n": int(len(t)),
        "rel_err_median": float(f"{np.median(rel):.4g}"),
        "rel_err_max": float(f"{np.max(rel):.4g}"),
    }


def fit_alpha_beta(nbytes: Sequence[float], times: Sequence[float]) -> dict:
    """``t = alpha + n * beta``: alpha in seconds, beta in seconds per byte."""
    rec = fit_cost_model([{"nbytes": float(n)} for n in nbytes], times, ["const", "nbytes"])
    rec["alpha_s"], rec["beta_s_per_byte"] = rec["coef"]
    return rec
