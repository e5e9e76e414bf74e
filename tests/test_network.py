"""Closed-form cases for the network backends and the max-min allocation."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from simcluster.network import FlowSpec, make_network, maxmin_rates

B = 10e9  # bytes/s
L = 2e-6  # s


def run(backend: str, capacity, batches):
    """Run batches [(start_time, [FlowSpec])]; returns each batch's end time."""
    env = simpy.Environment()
    net = make_network(backend, env, np.asarray(capacity, float), np.ones(len(capacity), bool))
    ends = {}

    def launch(i, at, flows):
        yield env.timeout(at)
        yield net.transfer(flows)
        ends[i] = env.now

    for i, (at, flows) in enumerate(batches):
        env.process(launch(i, at, flows))
    env.run()
    return ends, net


@pytest.mark.parametrize("backend", ["maxmin", "closed-form"])
def test_one_flow_takes_latency_plus_bytes_over_bandwidth(backend):
    ends, net = run(backend, [B], [(0.0, [FlowSpec((0,), 1e9, L)])])
    assert ends[0] == pytest.approx(L + 1e9 / B, rel=1e-12)
    assert net.inter_node_bytes == 1e9


def test_two_flows_share_one_link_equally():
    ends, _ = run("maxmin", [B], [(0.0, [FlowSpec((0,), 1e9, L)]), (0.0, [FlowSpec((0,), 1e9, L)])])
    assert ends[0] == pytest.approx(L + 2e9 / B, rel=1e-12)
    assert ends[1] == pytest.approx(L + 2e9 / B, rel=1e-12)


def test_short_flow_leaves_and_long_flow_speeds_up():
    small, big = 1e8, 1e9
    ends, net = run(
        "maxmin", [B], [(0.0, [FlowSpec((0,), small, 0.0)]), (0.0, [FlowSpec((0,), big, 0.0)])]
    )
    assert ends[0] == pytest.approx(2 * small / B, rel=1e-12)
    assert ends[1] == pytest.approx((small + big) / B, rel=1e-12)
    assert net.rate_updates >= 2


def test_late_arrival_recomputes_rates():
    # flow A alone for 0.05 s at B, then shares with B until done.
    a, b = 1e9, 1e9
    ends, _ = run(
        "maxmin", [B], [(0.0, [FlowSpec((0,), a, 0.0)]), (0.05, [FlowSpec((0,), b, 0.0)])]
    )
    sent_alone = 0.05 * B
    t_share = 2 * (a - sent_alone) / B
    assert ends[0] == pytest.approx(0.05 + t_share, rel=1e-9)
    assert ends[1] == pytest.approx(0.05 + t_share + (b - (a - sent_alone)) / B, rel=1e-9)


def test_closed_form_backend_ignores_contention():
    ends, _ = run("closed-form", [B], [(0.0, [FlowSpec((0,), 1e9, L), FlowSpec((0,), 1e9, L)])])
    assert ends[0] == pytest.approx(L + 1e9 / B)


def test_flow_with_no_links_takes_its_latency():
    ends, _ = run("maxmin", [B], [(0.0, [FlowSpec((), 1e9, 3e-6)])])
    assert ends[0] == pytest.approx(3e-6)


def test_maxmin_textbook_allocation():
    # link 0 (cap 10): flows 0 and 1; link 1 (cap 4): flows 1 and 2.
    entry_flow = np.array([0, 1, 1, 2])
    entry_link = np.array([0, 0, 1, 1])
    rates = maxmin_rates(entry_flow, entry_link, 3, np.array([10.0, 4.0]))
    np.testing.assert_allclose(rates, [8.0, 2.0, 2.0])


def test_maxmin_is_fair_and_feasible_on_random_instances():
    rng = np.random.default_rng(0)
    for _ in range(50):
        nf, nl = rng.integers(1, 30), rng.integers(1, 10)
        cap = rng.uniform(1, 100, nl)
        ef, el = [], []
        for f in range(nf):
            for link in rng.choice(nl, size=rng.integers(1, nl + 1), replace=False):
                ef.append(f)
                el.append(link)
        ef, el = np.array(ef), np.array(el)
        rates = maxmin_rates(ef, el, nf, cap)
        load = np.bincount(el, weights=rates[ef], minlength=nl)
        assert np.all(load <= cap * (1 + 1e-9))
        # every flow crosses a saturated link on which it has the largest rate
        for f in range(nf):
            links = el[ef == f]
            ok = False
            for link in links:
                users = ef[el == link]
                if load[link] >= cap[link] * (1 - 1e-9) and rates[f] >= rates[users].max() * (
                    1 - 1e-9
                ):
                    ok = True
            assert ok


def test_unknown_backend_is_a_user_error():
    from simcluster.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="did you mean 'maxmin'"):
        make_network("maxmn", simpy.Environment(), np.ones(1), np.ones(1, bool))


def _reference_ends(capacity, batches):
    """Flow-level max-min by brute force: every start and end re-solves all flows.

    batches: [(start_time, [FlowSpec])] as for ``run``; returns each batch's end time.
    """
    flows = []  # [batch, start, remaining, links]
    for i, (at, specs) in enumerate(batches):
        for f in specs:
            flows.append([i, at + f.latency, f.nbytes, f.links])
    pending = {i: len(specs) for i, (_, specs) in enumerate(batches)}
    ends, now = {}, 0.0
    while flows:
        live = [f for f in flows if f[1] <= now]
        ef = np.array([k for k, f in enumerate(live) for _ in f[3]], dtype=np.int64)
        el = np.array([x for f in live for x in f[3]], dtype=np.int64)
        rates = maxmin_rates(ef, el, len(live), np.asarray(capacity, float))
        t_end = min((f[2] / r for f, r in zip(live, rates, strict=True)), default=np.inf)
        t_next = min((f[1] - now for f in flows if f[1] > now), default=np.inf)
        dt = min(t_end, t_next)
        for f, r in zip(live, rates, strict=True):
            f[2] -= r * dt
        now += dt
        for f in [f for f in live if f[2] <= 1e-9 * max(f[2], 1.0) + 1e-6]:
            flows.remove(f)
            pending[f[0]] -= 1
            if pending[f[0]] == 0:
                ends[f[0]] = now
    return ends


@pytest.mark.parametrize("seed", range(12))
def test_incremental_rates_match_brute_force(seed):
    """Re-solving only the flows at or above the ended flows' rate changes nothing."""
    rng = np.random.default_rng(seed)
    nl = int(rng.integers(2, 9))
    capacity = rng.choice([1e9, 2.5e9, 4e9, 10e9], nl)
    batches = []
    for _ in range(int(rng.integers(1, 6))):
        specs = [
            FlowSpec(
                tuple(int(x) for x in rng.choice(nl, int(rng.integers(1, nl + 1)), False)),
                float(rng.choice([1e6, 3e6, 1e7, 2.5e7])),
                float(rng.choice([0.0, 1e-6, 3e-6])),
            )
            for _ in range(int(rng.integers(1, 12)))
        ]
        batches.append((float(rng.choice([0.0, 1e-3, 2.5e-3])), specs))
    ends, _ = run("maxmin", capacity, batches)
    want = _reference_ends(capacity, batches)
    assert sorted(ends) == sorted(want)
    for i in want:
        assert ends[i] == pytest.approx(want[i], rel=1e-9)


def _random_batches(rng, nl: int, most: int, flows: tuple[int, int], sizes, latencies):
    """1 to ``most - 1`` batches [(start s, [FlowSpec])] of ``flows`` (a range) flows over
    random links of ``nl``, bytes from ``sizes`` times 0.5-2, latencies from ``latencies``."""
    batches = []
    for _ in range(int(rng.integers(1, most))):
        specs = [
            FlowSpec(
                tuple(int(x) for x in rng.choice(nl, int(rng.integers(1, nl + 1)), False)),
                float(rng.choice(sizes) * rng.uniform(0.5, 2.0)),
                float(rng.choice(latencies)),
            )
            for _ in range(int(rng.integers(*flows)))
        ]
        batches.append((float(rng.choice([0.0, 1e-3, 2.5e-3])), specs))
    return batches


@pytest.mark.parametrize("seed", range(8))
def test_sorted_wakeups_equal_table_scans(seed, monkeypatch):
    """Flow-end wake-ups read from per-epoch sorted orders give the very floats
    (end times and rate updates) of scanning the whole flow table."""
    from simcluster.network import backend

    rng = np.random.default_rng(100 + seed)
    nl = int(rng.integers(2, 9))
    capacity = rng.choice([1e9, 2.5e9, 4e9, 10e9], nl)
    batches = _random_batches(rng, nl, 5, (20, 60), [1e6, 3e6, 1e7, 2.5e7], [0.0, 1e-6, 3e-6])
    built = []
    real = backend._Order.__init__

    def counting(self, *args):
        built.append(1)
        real(self, *args)

    monkeypatch.setattr(backend._Order, "__init__", counting)
    monkeypatch.setattr(backend, "_ORDER_MIN_FLOWS", 0)  # these tables are small
    fast, fast_net = run("maxmin", capacity, batches)
    assert built, "the sorted orders were never used"
    monkeypatch.setattr(backend._FlowTable, "order", lambda self, build=False: None)
    slow, slow_net = run("maxmin", capacity, batches)
    assert fast == slow  # exact
    assert fast_net.rate_updates == slow_net.rate_updates


@pytest.mark.parametrize("seed", range(6))
def test_order_suffixes_are_the_live_flows_extremes(seed):
    """A per-epoch order ends flows in ``tslack`` order and reads the least
    ``tdone`` and the highest rate of the flows left from its suffixes: the very
    floats a scan of the live flows gives, ties included."""
    from simcluster.network.backend import _Order

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    tdone = rng.choice([1.0, 2.0, 2.5, 3.0], n) + rng.integers(0, 3, n) * 1e-9
    tslack = tdone - rng.choice([0.0, 1e-9, 1e-3], n)
    rate = rng.choice([1e9, 2e9, 2.5e9], n)
    live = np.sort(rng.choice(n + 5, n, replace=False))  # table indices of the live flows
    big = int(live.max()) + 1
    ts, td, r = np.full(big, np.inf), np.full(big, np.inf), np.zeros(big)
    ts[live], td[live], r[live] = tslack, tdone, rate
    order = _Order(0, live, ts, td, r)
    alive = np.zeros(big, dtype=bool)
    alive[live] = True
    for now in sorted(rng.choice(np.concatenate([tslack, tdone, [0.5, 9.0]]), 8)):
        ended, rates = order.ending(float(now))
        want = np.flatnonzero(alive & (ts <= now))
        assert np.array_equal(np.sort(ended), want)
        assert np.array_equal(rates, r[ended])
        alive[want] = False
        assert order.first_done() == (td[alive].min() if alive.any() else np.inf)
        assert order.top_rate() == (r[alive].max() if alive.any() else 0.0)


def _busy_run(capacity, batches, ticks):
    """``run`` plus processes that only wait (``ticks``: their wake times, s), so that
    other events fall between flow ends; returns the batches' ends in event order."""
    env = simpy.Environment()
    net = make_network("maxmin", env, np.asarray(capacity, float), np.ones(len(capacity), bool))
    ends = []

    def launch(i, at, flows):
        yield env.timeout(at)
        yield net.transfer(flows)
        ends.append((i, env.now))

    def tick(at):
        yield env.timeout(at)
        ends.append(("tick", env.now))

    for i, (at, flows) in enumerate(batches):
        env.process(launch(i, at, flows))
    for at in ticks:
        env.process(tick(at))
    env.run()
    return ends, net


@pytest.mark.parametrize("seed", range(10))
def test_chained_wakeups_equal_one_event_each(seed, monkeypatch):
    """Wake-ups run back to back up to the next queued event (and flows ended in
    sorted runs) give the very floats, events and event order of one simpy event
    per wake-up, also where a delay cannot land on a wake-up time exactly."""
    from simcluster.network import backend

    rng = np.random.default_rng(300 + seed)
    nl = int(rng.integers(2, 7))
    capacity = rng.choice([1e9, 2.5e9, 4e9, 10e9], nl)
    batches = _random_batches(rng, nl, 4, (5, 80), [1e6, 3e6, 1e7], [0.0, 1e-6])
    ticks = rng.uniform(0.0, 0.02, int(rng.integers(0, 6))).tolist()
    monkeypatch.setattr(backend, "_ORDER_MIN_FLOWS", 0)  # these tables are small
    chained, chained_net = _busy_run(capacity, batches, ticks)
    real_delay = backend.exact_delay

    def refusing(now, when):  # a third of the (now, when) pairs cannot be reached
        return None if when > now and hash((now, when)) % 3 == 0 else real_delay(now, when)

    monkeypatch.setattr(backend, "exact_delay", refusing)
    refused, refused_net = _busy_run(capacity, batches, ticks)
    monkeypatch.setattr(backend.MaxMinNetwork, "_horizon", lambda self: self.env.now)
    single, single_net = _busy_run(capacity, batches, ticks)
    assert chained == single  # exact, in the same order
    assert refused == single
    assert chained_net.rate_updates == refused_net.rate_updates == single_net.rate_updates


def test_exact_delay_lands_on_the_time_or_says_it_cannot():
    from simcluster.network.backend import exact_delay

    for now, when in [(0.1, 0.3), (0.0, 1e-9), (3.0, 3.0), (1e-7, 12.5)]:
        d = exact_delay(now, when)
        assert d is not None and d >= 0.0 and now + d == when
    assert exact_delay(1.0, 2.0**53 + 2) is None  # no float d gives 1 + d == 2**53 + 2


def test_flows_that_free_nothing_end_in_one_run(monkeypatch):
    """One transfer whose flows each have a link of their own, the fastest ending
    first: every end frees bandwidth no live flow can use, so the wake-ups up to
    the last run as one sorted run; the transfer ends when its slowest flow does."""
    from simcluster.network import backend

    capacity = [1e9 * (20 - i) for i in range(20)]
    flows = [FlowSpec((i,), 1e6, L) for i in range(20)]
    monkeypatch.setattr(backend, "_ORDER_MIN_FLOWS", 0)
    runs = []
    real_steps = backend.MaxMinNetwork._quiet_steps

    def counting(self, now, horizon):
        out = real_steps(self, now, horizon)
        runs.append(out != now)
        return out

    monkeypatch.setattr(backend.MaxMinNetwork, "_quiet_steps", counting)
    ends, net = _busy_run(capacity, [(0.0, flows)], [])
    assert any(runs)
    assert ends == [(0, pytest.approx(L + 1e6 / 1e9, rel=1e-12))]
    monkeypatch.setattr(backend.MaxMinNetwork, "_horizon", lambda self: self.env.now)
    assert _busy_run(capacity, [(0.0, flows)], [])[0] == ends


@pytest.mark.parametrize("seed", range(4))
def test_batches_that_know_their_flow_order_select_and_cross_as_a_scan(seed):
    """A batch told its entries' flow order (as the route memo builds them) splits
    and tells which flows cross a link set exactly as one that works it out, flows
    without links included (first, last, in between)."""
    from simcluster.network.flow import FlowBatch

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    lengths = rng.integers(0, 5, n)
    lengths[[0, -1]] = 0 if seed % 2 else lengths[[0, -1]]
    flow = np.repeat(np.arange(n, dtype=np.int64), lengths)
    link = rng.integers(0, 12, flow.size)
    nbytes, lat = rng.uniform(1, 9, n), rng.choice([1e-6, 2e-6], n)
    known = FlowBatch(flow, link, nbytes, lat)
    known.know_flow_order(lengths.astype(np.int64))
    plain = FlowBatch(flow.copy(), link, nbytes, lat)
    links = rng.random(12) < 0.4
    np.testing.assert_array_equal(known.crosses(links), plain.crosses(links), strict=True)
    mask = lat == 1e-6
    a, b = known.select(mask), plain.select(mask)
    for x, y in zip((a.entry_flow, a.entry_link), (b.entry_flow, b.entry_link), strict=True):
        np.testing.assert_array_equal(x, y, strict=True)
    for x, y in zip(a.by_flow(), b.by_flow(), strict=True):
        np.testing.assert_array_equal(x, y, strict=True)
    np.testing.assert_array_equal(a.crosses(links), b.crosses(links), strict=True)
