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
