"""``simcluster calibrate nccl-tests LOG [LOG ...] --topology T --out NAME.json``.

Reads the stdout of real nccl-tests runs (any of the ``*_perf`` binaries, one
node or several) and fits a *measured* network profile for the simulator.

Log format (NVIDIA/nccl-tests, src/common.cu): ``#`` header lines (``nThread
.. nGpus .. minBytes ..``, ``Using devices`` with one ``Rank N ... on HOST
device D [BUS] NAME`` line per rank, optionally ``nccl-tests version ...
nccl-library=NNNNN`` and ``Collective test starting: OP_perf``), a column
header (``size count type redop [root] time algbw busbw #wrong|error ...``),
one data row per size (out-of-place, then in-place columns) and a closing
``# Avg bus bandwidth`` line. NCCL's own ``NCCL version 2.x.y`` line
(``NCCL_DEBUG=VERSION`` or ``INFO``) is read when present.

The fit (no torch needed) uses the simulator itself as the model, starting
from a base profile (``nccl-spec``):

1. order: latency, bandwidth, latency again. Bandwidth: per log, the link
   kind that limits the simulated busbw at the
   largest size (the one whose efficiency moves it most) gets the efficiency
   that makes the simulated busbw match the measured one over every size of
   at least 1 MiB (least squares on log busbw); logs on one node are fitted
   first, so the intra-node kinds are known before the network is fitted;
2. latency: each protocol's step latencies of the hop class the log crosses
   (``nvlink``/``pcie`` inside a node, ``net`` between nodes; every class and
   the base latency when no one-node log is given) and, for a one-node log,
   its base latency are scaled by one factor that makes the simulated time match the
   measured time over sizes up to 64 KiB (least squares on log time).

3. protocols: per protocol, one factor on its bandwidth fractions and one on
   all its latencies, fitted over the sizes >= 1 MiB of every log.

Every factor is found by golden-section search on a bounded interval. The
result is a profile of kind ``measured`` whose provenance names the logs,
hosts, GPU count, NCCL version, op and sizes, and the fitted numbers.
A truncated or foreign log is a :class:`ConfigError` naming file and line.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simcluster.collectives.protocols import PROTOCOL_NAMES
from simcluster.errors import ConfigError
from simcluster.report.nccl_tests import MAX_SIZE  # the largest size -b / -e may name

__all__ = ["NcclLog", "parse_log", "fit_profile", "run"]

_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)")
_LIB = re.compile(r"nccl-library=(\d+)")
_NCCL = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_START = re.compile(r"Collective test starting:\s*(\w+?)(?:_perf)?(?:_mpi)?\s*$")


@dataclass
class NcclLog:
    """One parsed nccl-tests run. Times in us, sizes in bytes, bandwidths GB/s."""

    path: str
    op: str
    ranks: int
    hosts: list[str]
    nccl_version: str | None
    rows: list[dict[str, float]] = field(default_factory=list)

    @property
    def nodes(self) -> int:
        return len(self.hosts)


def _version_from_code(code: str) -> str:
    n = int(code)
    major, rest = divmod(n, 10000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def _op_from_name(path: Path) -> str | None:
    stem = path.name.lower()
    for op in sorted(_OPS, key=len, reverse=True):
        if op in stem or op.replace("_", "") in stem:
            return op
    return None


def parse_log(path: str | Path, op: str | None = None) -> NcclLog:
    """Parse one nccl-tests stdout file (see module doc); ConfigError on bad input."""
    p = Path(path)
    try:
        lines = p.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise ConfigError(
            str(p), "<file>", str(p), f"cannot read the log: {exc.strerror}"
        ) from None
    ranks: dict[int, str] = {}
    version = None
    found_op = op
    columns: list[str] | None = None
    rows: list[dict[str, float]] = []
    closed = False
    last_data = 0
    for i, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        s = line.strip()
        if not s:
            continue
        m = _RANK.search(s)
        if m:
            ranks[int(m.group(1))] = m.group(2)
            continue
        m = _LIB.search(s)
        if m and version is None:
            version = _version_from_code(m.group(1))
        m = _NCCL.search(s)
        if m:
            version = m.group(1)
        m = _START.search(s)
        if m and found_op is None:
            name = m.group(1).lower()
            found_op = name if name in _OPS else None
        if s.startswith("#"):
            body = s.lstrip("#").split()
            if body[:2] == ["size", "count"]:
                columns = body
            if s.startswith("# Avg bus bandwidth"):
                closed = True
            continue
        if columns is None:
            if "NCCL INFO" in s or "NCCL WARN" in s or not s[0].isdigit():
                continue
            raise ConfigError(
                str(p), f"line {i}", s[:60], "a data row before the nccl-tests column header",
                "nccl-tests stdout (all_reduce_perf, all_gather_perf, ...)",
            )  # fmt: skip
        tok = s.split()
        if not tok[0].isdigit():
            if "NCCL" in s:
                continue
            raise ConfigError(str(p), f"line {i}", s[:60], "not an nccl-tests data row")
        has_root = "root" in columns
        need = 9 if has_root else 8
        try:
            size, count = int(tok[0]), int(tok[1])
            k = 5 if has_root else 4
            root = int(tok[4]) if has_root else -1
            t_us, algbw, busbw = float(tok[k]), float(tok[k + 1]), float(tok[k + 2])
        except (ValueError, IndexError):
            raise ConfigError(
                str(p), f"line {i}", s[:60], f"truncated or malformed data row (needs {need} "
                "columns: size count type redop [root] time algbw busbw #wrong)",
            ) from None  # fmt: skip
        if len(tok) < need:
            raise ConfigError(str(p), f"line {i}", s[:60], "truncated data row")
        if size > MAX_SIZE or count > MAX_SIZE:
            raise ConfigError(
                str(p), f"line {i}: size", tok[0] if size > MAX_SIZE else tok[1],
                "out of range", f"size and count at most 2^50 ({MAX_SIZE})",
            )  # fmt: skip
        _check_row(str(p), i, t_us, algbw, busbw, [tok[j] for j in (k + 3, k + 7) if j < len(tok)])
        rows.append(
            {"size": size, "count": count, "redop": tok[3], "root": root,
             "time_us": t_us, "algbw": algbw, "busbw": busbw}
        )  # fmt: skip
        last_data = i
    if columns is None:
        raise ConfigError(
            str(p), f"line {len(lines) or 1}", p.name,
            "not nccl-tests output: no column header (size count type redop ...) found",
            "the stdout of an nccl-tests *_perf binary",
        )  # fmt: skip
    if not rows:
        raise ConfigError(str(p), f"line {len(lines)}", p.name, "no data rows after the header")
    if not closed:
        raise ConfigError(
            str(p), f"line {last_data}", p.name,
            "truncated log: no '# Avg bus bandwidth' line after the last data row",
        )  # fmt: skip
    if not ranks:
        raise ConfigError(str(p), "line 1", p.name, "no '# Rank N ... on HOST device D' lines")
    found_op = found_op or _op_from_name(p) or _infer_op(rows, len(ranks))
    if found_op is None:
        raise ConfigError(
            str(p), "line 1", p.name,
            "cannot tell which nccl-tests binary wrote this log",
            "a 'Collective test starting: OP_perf' header or the op name in the file name",
        )  # fmt: skip
    hosts = list(dict.fromkeys(ranks[r] for r in sorted(ranks)))
    return NcclLog(str(p), found_op, len(ranks), hosts, version, rows)


def _check_row(
    file: str, i: int, t_us: float, algbw: float, busbw: float, wrong: list[str]
) -> None:
    """Refuse a data row whose time (us) is not finite and > 0, whose bandwidths (GB/s) are
    not finite and >= 0, or whose ``#wrong`` column counts wrong results (a broken run)."""
    if not (math.isfinite(t_us) and t_us > 0):
        raise ConfigError(file, f"line {i}: time", t_us, "not a time", "a finite number of us > 0")
    for name, v in (("algbw", algbw), ("busbw", busbw)):
        if not (math.isfinite(v) and v >= 0):
            raise ConfigError(file, f"line {i}: {name}", v, "not a bandwidth", "GB/s >= 0")
    for w in wrong:
        if w.isdigit() and int(w) > 0:
            raise ConfigError(
                file, f"line {i}: #wrong", int(w),
                "nccl-tests counted wrong results: the run is broken, its times are no measurement",
                "0 (or N/A with -c 0)",
            )  # fmt: skip


def _infer_op(rows: list[dict[str, float]], n: int) -> str | None:
    """The op when the columns leave one choice (redop, root, count per rank)."""
    r = max(rows, key=lambda x: x["size"])
    per_rank = n > 1 and r["count"] * 4 * n == r["size"]
    if r["root"] >= 0:
        return "broadcast" if r["redop"] == "none" else "reduce"
    if r["redop"] == "sum":
        return "reduce_scatter" if per_rank else "all_reduce"
    return None


# ------------------------------------------------------------------------ fitting


def _golden(f, lo: float, hi: float, iters: int = 40) -> float:
    """argmin of a unimodal f on [lo, hi] in log space."""
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(math.exp(d))
    return math.exp((a + b) / 2)


def _simulate(profile: dict, topology: str, log: NcclLog, sizes: list[int]) -> list[dict]:
    from simcluster.collectives import CommContext
    from simcluster.compute.loader import NetworkProfile
    from simcluster.report.nccl_tests import run_nccl_tests
    from simcluster.topology import load_topology

    cluster = load_topology(topology, num_nodes=log.nodes)
    net = profile["network"]
    netp = NetworkProfile(
        name=profile["name"], kind=profile["kind"],
        per_message_overhead_s=net["per_message_overhead_s"],
        link_efficiency=dict(net.get("link_efficiency", {})),
        protocols=dict(net.get("protocols", {})),
    )  # fmt: skip
    ctx = CommContext.from_profile(cluster, netp)
    return run_nccl_tests(ctx, log.op, sizes, "maxmin")


def _kinds(topology: str, nodes: int) -> list[str]:
    from simcluster.topology import load_topology

    c = load_topology(topology, num_nodes=nodes)
    return sorted(set(c.link_kind))


def _bottleneck_kind(profile: dict, topology: str, log: NcclLog, size: int) -> str:
    base = _simulate(profile, topology, log, [size])[0]["busbw_GBps"]
    best, kind = 0.0, None
    for k in _kinds(topology, log.nodes):
        trial = json.loads(json.dumps(profile))
        eff = trial["network"].setdefault("link_efficiency", {})
        eff[k] = eff.get(k, 1.0) * 0.5
        drop = base - _simulate(trial, topology, log, [size])[0]["busbw_GBps"]
        if drop > best * (1 + 1e-9):
            best, kind = drop, k
    if kind is None:
        raise ConfigError(log.path, "<fit>", log.op, "no link limits this log's bandwidth")
    return kind


def _check_log_fits_topology(log: NcclLog, topology: str) -> None:
    from simcluster.topology import load_topology

    per_node = load_topology(topology, num_nodes=1).ranks_per_node
    if log.ranks != log.nodes * per_node:
        raise ConfigError(
            log.path, "<ranks>", log.ranks,
            f"{log.ranks} ranks on {log.nodes} host(s) do not fill {topology} nodes of "
            f"{per_node} GPUs", f"{log.nodes * per_node} ranks",
        )  # fmt: skip


def fit_profile(logs: list[NcclLog], topology: str, base: dict, name: str) -> dict:
    """The measured profile (a JSON-ready dict) fitted to ``logs`` (see module doc)."""
    prof = json.loads(json.dumps(base))
    prof["name"] = name
    prof["kind"] = "measured"
    net = prof["network"]
    protos = net.get("protocols")
    if not protos:
        raise ConfigError(None, "base profile", base.get("name"), "needs network.protocols")
    fitted: dict[str, Any] = {"link_efficiency": {}, "latency_scale": {}, "protocols": {}}
    for log in logs:
        _check_log_fits_topology(log, topology)
    ordered = sorted(logs, key=lambda x: x.nodes)

    def fit_bandwidth() -> None:
        for log in ordered:
            big = [r for r in log.rows if r["size"] >= 1 << 20 and r["busbw"] > 0]
            if not big:
                continue
            kind = _bottleneck_kind(prof, topology, log, int(big[-1]["size"]))
            eff = net.setdefault("link_efficiency", {})
            start = eff.get(kind, 1.0)
            sizes = [int(r["size"]) for r in big]

            def err(x, kind=kind, sizes=sizes, big=big, log=log):
                net["link_efficiency"][kind] = x
                sim = _simulate(prof, topology, log, sizes)
                return sum(
                    math.log(max(s["busbw_GBps"], 1e-12) / r["busbw"]) ** 2
                    for s, r in zip(sim, big, strict=True)
                )

            best = _golden(err, max(start / 10, 1e-3), min(start * 10, 1.0), 30)
            net["link_efficiency"][kind] = round(best, 4)
            fitted["link_efficiency"][kind] = {"value": round(best, 4), "from": log.path}

    def fit_latency() -> None:
        for log in ordered:
            small = [r for r in log.rows if 0 < r["size"] <= 1 << 16 and r["time_us"] > 0]
            if not small:
                continue
            alone = log.nodes > 1 and not any(x.nodes == 1 for x in logs)
            classes = ["net"] if log.nodes > 1 else ["nvlink", "pcie"]
            if alone:  # no one-node log: one factor for every step and base latency
                classes = ["nvlink", "pcie", "net"]
            original = json.loads(json.dumps(net["protocols"]))
            sizes = [int(r["size"]) for r in small]

            def apply(x, classes=classes, original=original, alone=alone, log=log):
                for pname, pd in net["protocols"].items():
                    if pname not in PROTOCOL_NAMES:  # source, NVLS
                        continue
                    o = original[pname]
                    for fam in pd["hop_latency_s"]:
                        for c in classes:
                            pd["hop_latency_s"][fam][c] = o["hop_latency_s"][fam][c] * x
                    if "net" in classes:
                        pd["net_overhead_s"] = o.get("net_overhead_s", 0.0) * x
                    if log.nodes == 1 or alone:
                        for fam in pd["base_latency_s"]:
                            pd["base_latency_s"][fam] = o["base_latency_s"][fam] * x

            def err(x, sizes=sizes, small=small, log=log, apply=apply):
                apply(x)
                sim = _simulate(prof, topology, log, sizes)
                return sum(
                    math.log(s["time_us"] / r["time_us"]) ** 2
                    for s, r in zip(sim, small, strict=True)
                )

            best = _golden(err, 0.05, 20.0, 30)
            apply(best)
            for pname, pd in net["protocols"].items():
                if pname not in PROTOCOL_NAMES:  # source, NVLS
                    continue
                for key in ("hop_latency_s", "base_latency_s"):
                    for fam, v in pd[key].items():
                        if isinstance(v, dict):
                            pd[key][fam] = {c: float(f"{x:.4g}") for c, x in v.items()}
                        else:
                            pd[key][fam] = float(f"{v:.4g}")
            fitted["latency_scale"]["+".join(classes)] = {"value": round(best, 4), "from": log.path}

    def fit_protocols() -> None:
        """Per protocol: one factor on its bandwidth fractions, one on its
        latencies, each fitted over the sizes >= 1 MiB of every log (log
        time), where bandwidth shows and the protocols take turns."""
        for pname in [k for k in net["protocols"] if k in PROTOCOL_NAMES]:
            pd = net["protocols"][pname]
            for what in ("bandwidth", "latency"):
                original = json.loads(json.dumps(pd))

                def apply(x, pd=pd, original=original, what=what):
                    if what == "bandwidth":
                        for fam, v in original["bandwidth_fraction"].items():
                            pd["bandwidth_fraction"][fam] = min(1.0, v * x)
                        return
                    for fam, v in original["base_latency_s"].items():
                        pd["base_latency_s"][fam] = v * x
                    for fam, per in original["hop_latency_s"].items():
                        pd["hop_latency_s"][fam] = {c: v * x for c, v in per.items()}
                    pd["net_overhead_s"] = original.get("net_overhead_s", 0.0) * x

                def err(x, apply=apply):
                    apply(x)
                    total = 0.0
                    for log in ordered:
                        rows = [r for r in log.rows if r["size"] >= 1 << 20 and r["time_us"] > 0]
                        sim = _simulate(prof, topology, log, [int(r["size"]) for r in rows])
                        total += sum(
                            math.log(a["time_us"] / r["time_us"]) ** 2
                            for a, r in zip(sim, rows, strict=True)
                        )
                    return total

                hi = (
                    1.0 / max(original["bandwidth_fraction"].values())
                    if what == "bandwidth"
                    else 3.0
                )
                best = _golden(err, 0.33, max(hi, 0.34), 20)
                apply(best)
                fitted["protocols"].setdefault(pname, {})[what] = round(best, 4)

    # latency first (small sizes barely see bandwidth), then bandwidth over
    # sizes >= 1 MiB with those latencies, then latency once more; then each
    # protocol's own bandwidth and latency factors over sizes >= 1 MiB
    fit_latency()
    fit_bandwidth()
    fit_latency()
    fit_protocols()
    for pname, pd in net["protocols"].items():
        if pname not in PROTOCOL_NAMES:  # source, NVLS
            continue
        for key in ("bandwidth_fraction", "base_latency_s", "hop_latency_s"):
            for fam, v in pd[key].items():
                if isinstance(v, dict):
                    pd[key][fam] = {c: float(f"{x:.4g}") for c, x in v.items()}
                else:
                    pd[key][fam] = float(f"{v:.4g}")
        if "net_overhead_s" in pd:
            pd["net_overhead_s"] = float(f"{pd['net_overhead_s']:.4g}")
    net["protocols"]["source"] = (
        "fitted by simcluster calibrate nccl-tests to the logs in provenance, starting from "
        f"profile {base.get('name')!r}: " + str(base["network"]["protocols"].get("source", ""))
    )
    net.pop("collectives", None)
    net.pop("samples", None)
    prof["provenance"] = {
        "description": f"fitted to nccl-tests logs on topology {topology}",
        "method": "calibrate/nccl_tests.py: bandwidth efficiency of the limiting link kind per "
        "log (sizes >= 1 MiB), protocol latencies of the crossed hop class (sizes <= 64 KiB), "
        "least squares on log values, simulator as the model",
        "topology": topology,
        "base_profile": base.get("name"),
        "logs": [
            {
                "file": log.path,
                "op": log.op,
                "hosts": log.hosts,
                "nodes": log.nodes,
                "gpus": log.ranks,
                "nccl_version": log.nccl_version,
                "sizes_bytes": [int(r["size"]) for r in log.rows],
            }
            for log in logs
        ],
        "fitted": fitted,
    }
    return prof


def run(args) -> int:
    """CLI entry: parse the logs, fit, write ``--out``; prints a short summary."""
    from simcluster.compute import load_network_profile

    logs_in = list(getattr(args, "logs", None) or [])
    if not logs_in:
        raise ConfigError(None, "LOG", None, "give at least one nccl-tests log file")
    if not args.out:
        raise ConfigError(None, "--out", None, "missing; the profile to write (NAME.json)")
    out = Path(args.out)
    if out.suffix != ".json":
        raise ConfigError(None, "--out", str(out), "a profile file ends in .json")
    from simcluster.atomic import check_output_file

    check_output_file([("--out", out)], args.force)
    topology = getattr(args, "topology", None) or "dgx-a100"
    from simcluster.topology import load_topology

    load_topology(topology, num_nodes=1)  # a bad name stops here with exit 2
    base_name = getattr(args, "base_profile", None) or "nccl-spec"
    # by name or path; a misspelt name gets "did you mean" from the loader
    base_path = Path(load_network_profile(base_name).file)
    base = json.loads(base_path.read_text())
    logs = [parse_log(p) for p in logs_in]
    prof = fit_profile(logs, topology, base, args.name or out.stem)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(prof, indent=2) + "\n")
    print(f"wrote {out} (kind measured) from {len(logs)} log(s) on topology {topology}")
    for k, v in prof["provenance"]["fitted"]["link_efficiency"].items():
        print(f"  link_efficiency.{k} = {v['value']}  ({v['from']})")
    for k, v in prof["provenance"]["fitted"]["latency_scale"].items():
        print(f"  protocol latencies ({k}) x {v['value']}  ({v['from']})")
    for k, v in prof["provenance"]["fitted"]["protocols"].items():
        print(f"  {k}: bandwidth fraction x {v['bandwidth']}, latencies x {v['latency']}")
    return 0
