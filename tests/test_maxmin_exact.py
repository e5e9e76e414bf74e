"""maxmin_rates against plain progressive filling, float for float.

The reference below is the textbook loop (a mask of busy links, every
link's share and remaining capacity recomputed each round, the flows of
the saturated links found by scanning every entry), doing the same float
operations in the same order; the solver must give the same rates bit for
bit on instances that cover its paths (even and uneven path lengths,
entries in any order, a (flow, link) pair listed twice, ties between links,
load, flows without links, wide flow ids).
"""

from __future__ import annotations

import numpy as np
import pytest

from simcluster.network.maxmin import REL_TOL, maxmin_rates


def _reference(ef, el, num_flows, capacity, load=None):
    rates = np.full(num_flows, np.inf)
    if num_flows == 0 or ef.size == 0:
        return rates
    used, el = np.unique(el, return_inverse=True)
    n = used.size
    cap = capacity[used].astype(np.float64)
    tol = REL_TOL * cap
    if load is not None:
        cap = np.maximum(cap - load[used], 0.0)
    counts = np.bincount(el, minlength=n)
    frozen = np.zeros(num_flows, dtype=bool)
    level = 0.0
    while (counts > 0).any():
        busy = counts > 0
        share = np.full(n, np.inf)
        np.divide(cap, counts, out=share, where=busy)
        inc = float(share.min())
        level += inc
        cap -= inc * counts
        sat = busy & (cap <= tol)
        if not sat.any():
            sat = busy & (share <= inc * (1 + 1e-12))
        hit = np.unique(ef[sat[el]])
        hit = hit[~frozen[hit]]
        rates[hit] = level
        frozen[hit] = True
        counts = counts - np.bincount(el[np.isin(ef, hit)], minlength=n)
    return rates


def _instance(rng, kind):
    nf = int(rng.integers(1, 400))
    nl = int(rng.integers(1, 60))
    if kind == "even":  # every flow the same number of links, in flow order
        width = int(rng.integers(1, min(nl, 6) + 1))
        el = np.concatenate([rng.choice(nl, width, replace=False) for _ in range(nf)])
        ef = np.repeat(np.arange(nf), width)
    else:
        lens = rng.integers(0 if kind == "holes" else 1, min(nl, 5) + 1, nf)
        if kind == "one-long":  # padding would more than double: CSR rows
            lens[0] = nl
        el = np.concatenate([rng.choice(nl, k, replace=False) for k in lens])
        ef = np.repeat(np.arange(nf), lens)
        if kind == "twice" and ef.size:
            pick = rng.integers(0, ef.size, 3)
            ef, el = np.concatenate([ef, ef[pick]]), np.concatenate([el, el[pick]])
        order = rng.permutation(ef.size)
        ef, el = ef[order], el[order]
    # whole-number capacities make ties (several links saturating in a round)
    if rng.random() < 0.5:
        cap = rng.integers(1, 8, nl) * 10.0
    else:
        cap = rng.uniform(1.0, 100.0, nl)
    load = cap * rng.uniform(0.0, 0.9, nl) if rng.random() < 0.3 else None
    if load is not None and rng.random() < 0.3:
        load[0] = cap[0]  # a link with nothing left
    return ef, el, nf, cap, load


@pytest.mark.parametrize("kind", ["even", "uneven", "holes", "one-long", "twice"])
def test_rates_equal_plain_progressive_filling_bit_for_bit(kind):
    rng = np.random.default_rng(["even", "uneven", "holes", "one-long", "twice"].index(kind))
    for _ in range(60):
        ef, el, nf, cap, load = _instance(rng, kind)
        got = maxmin_rates(ef, el, nf, cap, load)
        want = _reference(ef, el, nf, cap, load)
        assert np.array_equal(got, want)


def test_wide_flow_and_link_ids_use_the_64_bit_keys():
    # 2**20 flow ids and 5,000 links do not pack into 32 bits
    rng = np.random.default_rng(7)
    nf, nl = 1 << 20, 5000
    flows = rng.choice(nf, 3000, replace=False)
    ef = np.repeat(flows, 3)
    el = np.concatenate([rng.choice(nl, 3, replace=False) for _ in flows])
    cap = rng.integers(1, 5, nl) * 1e9
    got = maxmin_rates(ef, el, nf, cap)
    assert np.array_equal(got, _reference(ef, el, nf, cap))
    idle = np.ones(nf, dtype=bool)
    idle[flows] = False
    assert np.isinf(got[idle]).all() and np.isfinite(got[flows]).all()


def test_concat_ranges_is_every_range_back_to_back():
    """concat_ranges against a plain loop: empty ranges, ranges out of order,
    overlapping and backwards jumps, no ranges at all."""
    from simcluster.network.maxmin import concat_ranges

    rng = np.random.default_rng(7)
    for i in range(300):
        n = int(rng.integers(0, 40)) if i % 10 else int(rng.integers(1000, 3000))  # both ways
        starts = rng.integers(0, 60, n)
        lens = rng.integers(0, 6, n)
        want = [
            s + k for s, m in zip(starts.tolist(), lens.tolist(), strict=True) for k in range(m)
        ]
        got = concat_ranges(starts, lens)
        assert got.dtype == np.int64
        assert got.tolist() == want


@pytest.mark.parametrize("seed", range(6))
def test_a_link_of_infinite_capacity_limits_no_flow(seed):
    # the same rates as the problem without those links' entries; a flow on unbounded
    # links only is unbounded (it once got the rate of another flow's link)
    rng = np.random.default_rng(seed)
    ef, el, nf, cap, load = _instance(rng, "uneven")
    unbounded = rng.random(cap.size) < 0.3
    cap = cap.copy()
    cap[unbounded] = np.inf
    keep = ~unbounded[el]
    want = _reference(ef[keep], el[keep], nf, cap, load)
    np.testing.assert_array_equal(maxmin_rates(ef, el, nf, cap, load), want)
    two = maxmin_rates(np.array([0, 1]), np.array([0, 1]), 2, np.array([np.inf, 10.0]))
    np.testing.assert_array_equal(two, [np.inf, 10.0])


def test_finite_capacities_whose_sum_overflows_are_solved_as_they_are():
    cap = np.array([1e308, 1e308])  # their sum is inf; each limits its flow
    ef, el = np.array([0, 1]), np.array([0, 1])
    np.testing.assert_array_equal(maxmin_rates(ef, el, 2, cap), _reference(ef, el, 2, cap))


def test_a_nan_capacity_is_a_clear_error():
    with pytest.raises(ValueError, match=r"capacity is NaN on link\(s\) \[1\]"):
        maxmin_rates(np.array([0, 0]), np.array([0, 1]), 1, np.array([5.0, np.nan]))
