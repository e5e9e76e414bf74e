"""Processor sharing of a host's cores (simcluster.validation.host_sharing), closed forms."""

from __future__ import annotations

import json

import pytest

from simcluster.engine import SimulationError
from simcluster.errors import ConfigError
from simcluster.network.gloo import exit_spread, fit_worlds
from simcluster.validation.host_sharing import Task, simulate, slowdown, sweep_work


def _ends(spans, rank):
    return [round(b, 9) for _, _, _, b in spans[rank]]


def test_two_tasks_on_one_core_each_take_twice_as_long():
    # priced alone (ref 1): sharing one core, each gets half of it
    prog = {r: [Task("compute", 1.0, "f", "f@0", ref=1)] for r in (0, 1)}
    spans, end = simulate(prog, cores=1)
    assert end == pytest.approx(2.0)
    assert _ends(spans, 0) == _ends(spans, 1) == [2.0]


def test_tasks_up_to_the_core_count_run_alone():
    prog = {r: [Task("compute", 1.0, "f", "f@0", ref=1)] for r in range(2)}
    assert simulate(prog, cores=2)[1] == pytest.approx(1.0)
    prog = {r: [Task("compute", 1.0, "f", "f@0", ref=1)] for r in range(3)}
    assert simulate(prog, cores=2)[1] == pytest.approx(1.5)  # 3 tasks, 2 cores


def test_a_task_speeds_up_when_the_other_finishes():
    # 1 core: together until the short one ends at 2 s (1 s of work each at half a
    # core), then the long one alone does its last 2 s of work in 2 s
    prog = {0: [Task("compute", 1.0, "f", "a", ref=1)], 1: [Task("compute", 3.0, "f", "b", ref=1)]}
    spans, end = simulate(prog, cores=1)
    assert _ends(spans, 0) == [2.0]
    assert end == pytest.approx(4.0)


def test_durations_priced_with_every_process_active_are_kept():
    # the static model's case: all P ranks always active, at ref = P
    prog = {
        r: [
            Task("compute", 2.0, "fwd", "fwd@0", ref=4),
            Task("collective", 0.5, "ar", "ar#0", ref=4, group=(0, 1, 2, 3)),
            Task("compute", 1.0, "opt", "opt@2", ref=4),
        ]
        for r in range(4)
    }
    spans, end = simulate(prog, cores=2)
    assert end == pytest.approx(3.5)
    assert [round(b - a, 9) for _, _, a, b in spans[0]] == [2.0, 0.5, 1.0]


def test_a_rank_waiting_at_a_rendezvous_frees_its_core():
    # 2 ranks on 1 core, priced at ref 2: rank 1 has 1 s, rank 0 3 s of such work.
    # Together until 1 s; then rank 1 waits (no task) and rank 0 runs twice as fast:
    # 2 s of work in 1 s. The collective (0.5 s at its sweep's 2 members) then.
    grp = (0, 1)
    prog = {
        0: [Task("compute", 3.0, "c", "c@0", ref=2), Task("collective", 0.5, "x", "x#0", 2, grp)],
        1: [Task("compute", 1.0, "c", "c@0", ref=2), Task("collective", 0.5, "x", "x#0", 2, grp)],
    }
    spans, end = simulate(prog, cores=1)
    assert _ends(spans, 0) == [2.0, 2.5]
    assert spans[1][1][2:] == (1.0, 2.5)  # the wait counts in its call's span
    assert end == pytest.approx(2.5)


def test_fixed_durations_ignore_sharing():
    prog = {r: [Task("compute", 1.0, "f", "f@0", ref=0)] for r in range(5)}
    assert simulate(prog, cores=1)[1] == pytest.approx(1.0)


@pytest.mark.parametrize("g,tail,chain", [(8, 1.0, 0.0), (8, 0.375, 1.0), (4, 0.3, 0.5), (2, 1, 0)])
def test_the_sweeps_arrangement_takes_the_sweeps_seconds(g, tail, chain):
    # members alone on the host, blocking once out: the call ends at its seconds
    prog = {r: [Task("collective", 0.01, "c", "c#0", g, tuple(range(g)), tail, chain)]
            for r in range(g)}  # fmt: skip
    assert simulate(prog, cores=2)[1] == pytest.approx(0.01, rel=1e-9)


def test_ranks_that_leave_and_compute_slow_the_call():
    # 8 members on 2 cores, leaving evenly over the whole call (tail 1), then computing.
    # Chain only (one task): with k members out computing it runs at min(1, 2/(1+k)),
    # each eighth of its work at k = 0..7: (1/8) sum max(1, (1+k)/2) = 18.5/8
    g = 8
    prog = {
        r: [
            Task("collective", 1.0, "c", "c#0", g, tuple(range(g)), tail=1.0, chain=1.0),
            Task("compute", 100.0, "f", "f@1", ref=g),
        ]
        for r in range(g)
    }
    spans, _ = simulate(prog, cores=2)
    assert spans[0][0][3] - spans[0][0][2] == pytest.approx(18.5 / 8)
    # bytes only (a task per member inside, sweep at g): the members still inside
    # share with those out; the sweep's work is 1 / mean_j(slowdown(g - j) / 4)
    prog = {
        r: [
            Task("collective", 1.0, "c", "c#0", 4, tuple(range(4)), tail=1.0, chain=0.0),
            Task("compute", 100.0, "f", "f@1", ref=4),
        ]
        for r in range(4)
    }
    spans, _ = simulate(prog, cores=2)
    assert spans[0][0][3] - spans[0][0][2] == pytest.approx(4 / (1 + 0.75 + 0.5 + 0.5))
    assert sweep_work(1.0, 4, 2, tail=1.0) == pytest.approx(4 / (1 + 0.75 + 0.5 + 0.5))
    # no spread: all leave together, nothing overlaps the call
    prog = {r: [Task("collective", 1.0, "c", "c#0", 4, tuple(range(4))),
                Task("compute", 1.0, "f", "f@1", ref=4)] for r in range(4)}  # fmt: skip
    spans, end = simulate(prog, cores=2)
    assert spans[0][0][3] == pytest.approx(1.0) and end == pytest.approx(2.0)


def test_members_leave_in_the_order_they_arrived():
    g = 2
    prog = {
        0: [Task("compute", 1.0, "f", "f@0", ref=0),
            Task("collective", 1.0, "c", "c#0", g, (0, 1), tail=1.0, chain=1.0),
            Task("compute", 5.0, "f", "f@2", ref=0)],
        1: [Task("collective", 1.0, "c", "c#0", g, (0, 1), tail=1.0, chain=1.0),
            Task("compute", 5.0, "f", "f@2", ref=0)],
    }  # fmt: skip
    spans, _ = simulate(prog, cores=1)
    # rank 1 arrived first and leaves at half the work (1.5 s), rank 0 at its end, 2.5 s
    # (with 2 tasks on 1 core the chain then runs at half speed: 0.5 s of work in 1 s)
    assert spans[1][1][2] == pytest.approx(1.5)  # rank 1's compute after the call
    assert spans[0][1][3] == pytest.approx(2.5)
    assert spans[1][0][3] == spans[0][1][3]  # the call's span ends at its end on both


def test_a_member_that_left_and_moved_on_keeps_the_calls_phase():
    """Was: the call's span was labelled with the op before the member's current one,
    so a member that had left, packed and reached the next call filed the first call's
    span under ``pack`` (a 0.3 ms pack phase read 218 ms in an 8-process fused run)."""
    g = 2
    prog = {
        0: [Task("compute", 1.0, "f", "f@0", ref=0),
            Task("collective", 1.0, "c", "c#0", g, (0, 1), tail=1.0, chain=1.0),
            Task("compute", 0.01, "pack", "pack@2", ref=0),
            Task("collective", 1.0, "d", "d#0", g, (0, 1), chain=1.0)],
        1: [Task("collective", 1.0, "c", "c#0", g, (0, 1), tail=1.0, chain=1.0),
            Task("compute", 0.01, "pack", "pack@1", ref=0),
            Task("collective", 1.0, "d", "d#0", g, (0, 1), chain=1.0)],
    }  # fmt: skip
    spans, _ = simulate(prog, cores=1)
    # rank 1 leaves c at 1.5 s, packs for 0.01 s (sharing the core with c's chain, which
    # loses 0.005 s) and waits at d before c ends at 2.005 s
    phases = {(ph, key): b - a for ph, key, a, b in spans[1]}
    assert phases[("c", "c#0")] == pytest.approx(2.005)
    assert phases[("pack", "pack@1")] == pytest.approx(0.01)
    assert [key for _, key, _, _ in spans[1]].count("pack@1") == 1


def test_collectives_that_do_not_pair_up_are_an_error():
    prog = {0: [Task("collective", 1.0, "c", "c#0", 2, (0, 1))], 1: []}
    with pytest.raises(SimulationError, match="did not finish"):
        simulate(prog, cores=2)
    with pytest.raises(ValueError, match="cores"):
        slowdown(1, 0)


def test_exit_spread_from_the_sweeps_per_rank_means():
    # least 4 ms, mean over ranks 5 ms: leaving over s = 2 ms after the first: 2 / 6
    rows = [{"nbytes": 16, "median_s": 0.004, "mean_s": 0.004, "rank_mean_median_s": 0.005}]
    assert exit_spread(rows) == pytest.approx(2 / 6)
    assert exit_spread([{"nbytes": 16, "median_s": 0.004}]) is None
    world = {"world": 2, "ops": {"allreduce": rows}, "compute": {"factor": 1.0}}
    assert fit_worlds([world])["2"]["allreduce"]["exit_spread"] == pytest.approx(1 / 3)


def test_a_bad_core_count_in_a_live_run_is_named(tmp_path):
    from simcluster.paths import project_root
    from simcluster.validation.live import validate_live

    src = project_root() / "scenarios/references/live/epyc-2x1-r1.json"
    data = json.loads(src.read_text())
    data["machine"]["cpus"] = "two"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="machine.cpus"):
        validate_live(bad, tmp_path / "work")


def _sweep_rows(data):
    s = data["gloo"]["samples"]
    return s if isinstance(s, list) else [s]


@pytest.mark.parametrize(
    "change, match",
    [
        # each was "<root>: malformed live-run file (AttributeError / ZeroDivisionError /
        # ValueError / KeyError: ...)", naming no field
        (lambda d: d.__setitem__("machine", None), r"machine: not a mapping \(got None\)"),
        (lambda d: d.__setitem__("machine", "vm"), r"machine: not a mapping \(got 'vm'\)"),
        (
            lambda d: [w.__setitem__("world", 1.5) for w in _sweep_rows(d)],
            r"gloo.samples.world: not a process count \(got 1.5\)",
        ),
        (
            lambda d: [
                w["ops"]["allreduce"][0].__setitem__("rank_mean_median_s", "x")
                for w in _sweep_rows(d)
            ],  # fmt: skip
            r"gloo.samples.ops.allreduce\[0\].rank_mean_median_s: not a positive finite",
        ),
        (
            lambda d: [w["ops"].pop("allreduce") for w in _sweep_rows(d)],
            r"bad.json: the run's own gloo sweep .*: allreduce was not timed at P=2 "
            r"\(timed: allgather, broadcast\)",
        ),
    ],
)
def test_a_malformed_machine_or_sweep_in_a_live_run_is_named(tmp_path, change, match):
    from simcluster.errors import UserError
    from simcluster.paths import project_root
    from simcluster.validation.live import validate_live

    src = project_root() / "scenarios/references/live/epyc-2x1-r1.json"
    data = json.loads(src.read_text())
    change(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(UserError, match=match) as err:
        validate_live(bad, tmp_path / "work")
    assert "malformed live-run file" not in str(err.value)


def test_subgroup_calls_priced_from_a_larger_sweep_are_not_shared_twice():
    # Two 2-member allreduces at once on 2 cores (4 processes, ranks per node 2), each
    # priced at 1 s from constants a 4-process sweep measured: that sweep's 4 members
    # already shared the 2 cores, so the pair of calls takes its 1 s, not 2 s.
    def prog(swept):
        return {
            r: [Task("collective", 1.0, "ar", "ar#0", swept, (r - r % 2, r - r % 2 + 1))]
            for r in range(4)
        }

    assert simulate(prog(4), cores=2)[1] == pytest.approx(1.0)
    # priced as if its 2 members had been alone in the sweep: shared once more
    assert simulate(prog(2), cores=2)[1] == pytest.approx(2.0)
    assert sweep_work(1.0, 2, 2, swept=4) == pytest.approx(0.5)
    assert sweep_work(1.0, 2, 2) == sweep_work(1.0, 2, 2, swept=2) == pytest.approx(1.0)
