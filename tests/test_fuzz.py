"""Property tests: mutated shipped inputs give exit 0 with sane numbers or one clean error.

Every shipped scenario, topology, device profile and network profile is a
base; hypothesis picks the base, the fields and the mutations (bench/fuzz.py
has the mutation list and runs thousands). Each input runs in this process
through ``simcluster.cli.main`` with a 60 s bound; the examples per kind are
few so that the four kinds together stay around a minute on a loaded 2-core
machine.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fuzz  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _private_partition_cache(tmp_path_factory):
    """Partitions of mutated sparse DNNs go to a throw-away cache, not ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIMCLUSTER_CACHE_DIR", str(tmp_path_factory.mktemp("partitions")))
        yield


PROPERTY = settings(
    max_examples=60,
    deadline=None,  # one input is bounded by fuzz.run_cli's 60 s alarm instead
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,  # the same examples every run: a failure reproduces
    database=None,
)


def _check(kind: str, seed: int, tmp_path: Path) -> None:
    rng = random.Random(f"{kind}:{seed}")
    work = tmp_path / f"{kind}-{seed}"
    work.mkdir(exist_ok=True)
    argv, results, desc = fuzz.make_input(kind, rng, work)
    cwd = work / "cwd"  # relative outputs (--out garbage, --out ..) land in the test's folder
    cwd.mkdir(exist_ok=True)
    with fuzz.inside(cwd):
        code, err, tb, _ = fuzz.run_cli(argv, 60.0)
    outcome, detail = fuzz.classify(code, err, tb, results, None if kind == "cli" else str(work))
    assert outcome in ("ok", "error"), f"{desc}: {outcome}: {detail}\n{tb}"
    if outcome == "error" and kind != "cli":  # the error names the mutated file
        assert str(work) in detail, detail


@pytest.mark.parametrize("kind", ["scenario", "topology", "device_profile", "network_profile"])
@PROPERTY
@given(seed=st.integers(0, 2**32))
def test_mutated_inputs_run_or_fail_cleanly(kind, seed, tmp_path):
    _check(kind, seed, tmp_path)


@settings(PROPERTY, max_examples=40)
@given(seed=st.integers(0, 2**32))
def test_mutated_command_lines_run_or_fail_cleanly(seed, tmp_path):
    _check("cli", seed, tmp_path)


def test_every_kind_has_shipped_bases():
    for kind in fuzz.KINDS[:-1]:
        assert fuzz.shipped(kind), kind


@pytest.mark.parametrize(
    "kind, examples", [("trace", 6), ("nccl_log", 2), ("live", 4), ("references", 2)]
)
def test_mutated_user_files_run_or_fail_cleanly(kind, examples, tmp_path):
    """Traces, nccl-tests logs, live runs and reference files: few examples each (a log
    fit or a reference case takes seconds); bench/fuzz.py runs hundreds."""

    @settings(PROPERTY, max_examples=examples)
    @given(seed=st.integers(0, 2**32))
    def check(seed):
        _check(kind, seed, tmp_path)

    check()
