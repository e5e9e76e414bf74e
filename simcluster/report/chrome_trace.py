"""Chrome trace format (opens in Perfetto / chrome://tracing).

One process per schedule, one thread per (rank class, stream); network-level
collective spans get a thread of their own. Times are microseconds. When every
rank runs its own program (jitter simulated apart), only the first
``max_classes`` rank classes are written, so the file stays small enough for
Perfetto. A jittered class simulated folded (the default), and an spmv class
of ranks with the same ops but their own kernel times, has the spans of its
lowest rank only.
"""

from __future__ import annotations

from pathlib import Path

from simcluster.engine import Trace

__all__ = ["trace_events", "write_chrome_trace"]


def trace_events(traces: dict[str, Trace], max_classes: int = 32) -> list[dict]:
    events: list[dict] = []
    for pid, (label, trace) in enumerate(traces.items(), start=1):
        shown = set(list(trace.classes)[:max_classes]) | {"<network>"}
        if len(trace.classes) > max_classes:
            label += f" (first {max_classes} of {len(trace.classes)} rank classes)"
        events.append(
            {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}}
        )
        tids: dict[tuple[str, str], int] = {}
        for s in trace.spans:
            if s.rank_class not in shown:
                continue
            key = (s.rank_class, s.stream)
            if key not in tids:
                tids[key] = len(tids) + 1
                events.append(
                    {
                        "name": "thread_name",
                        "ph": "M",
                        "pid": pid,
                        "tid": tids[key],
                        "args": {"name": f"{s.rank_class}:{s.stream}"},
                    }
                )
            ev = {
                "name": s.op,
                "cat": s.category or s.stream,
                "ph": "X",
                "pid": pid,
                "tid": tids[key],
                "ts": s.start * 1e6,
                "dur": (s.end - s.start) * 1e6,
            }
            if s.bytes or s.algorithm:
                ev["args"] = {"bytes": s.bytes, "algorithm": s.algorithm}
            events.append(ev)
    return events


def write_chrome_trace(path: Path, traces: dict[str, Trace]) -> None:
    from simcluster.report.outdir import write_text_atomic

    payload = {"traceEvents": trace_events(traces), "displayTimeUnit": "ms"}
    from simcluster.report.files import dumps

    write_text_atomic(path, dumps(payload, indent=None, what="trace"))
