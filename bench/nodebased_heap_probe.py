"""Check (not a test): does ``nodebased``'s 44.7 MB flat copy of the parameters map
fresh pages, and what free chunks did glibc's main arena hold just before?

Usage: python bench/nodebased_heap_probe.py [--patterns ddp,topk,hsadmm,nodebased]
       [--iterations 4]

Runs ``calibrate.live``'s patterns in this process as ``bench/live_phases_alone.py``
does (collectives faked, rank 0 of 2), ``--iterations`` each, and before every flat
copy of at least 40 MB prints its wall time beside the arena's state
(``mallinfo2``: heap size, free bytes, releasable top) and its largest free chunk
(the highest ``to`` of the main heap's ``<size>`` bins in ``malloc_info``).
glibc's ``_int_malloc`` serves a request from a free chunk or the top before
``sysmalloc`` maps it anew, so the copy pays the first touch of fresh pages (the
profile's ``fresh_output``) only when no free chunk holds it. glibc only (Linux).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]  # fmt: skip


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    return libc


def _largest_free(libc: ctypes.CDLL) -> int:
    """Bytes of the largest free chunk in the main arena's bins (``malloc_info``)."""
    fd, path = tempfile.mkstemp()
    os.close(fd)
    fp = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, fp)
    libc.fclose(fp)
    xml = Path(path).read_text()
    os.unlink(path)
    main = xml.split("</heap>")[0]
    sizes = re.findall(r'<size from="\d+" to="(\d+)" total="\d+" count="\d+"/>', main)
    return max((int(s) for s in sizes), default=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--patterns", default="ddp,topk,hsadmm,nodebased")
    ap.add_argument("--iterations", type=int, default=4)
    a = ap.parse_args(argv)

    import torch
    from live_phases_alone import RUN, _fake_dist

    import calibrate.live.run as R

    libc = _libc()
    torch.set_num_threads(1)
    R.dist = _fake_dist(2)
    world = types.SimpleNamespace(
        rank=0, size=2, per_node=1, nodes=2, node=0, is_leader=True,
        node_ranks=[[0], [1]], leaders=[0, 1], intra=None, leader_group=None,
    )  # fmt: skip
    cfg = {**json.loads(Path(RUN).read_text())["config"], "world_size": 2, "nodes": 2}
    flat = R._flat

    def probe(tensors):
        largest, m = _largest_free(libc), libc.mallinfo2()
        t0 = time.perf_counter()
        out = flat(tensors)
        dt = time.perf_counter() - t0
        if out.numel() * 4 >= 40e6:
            mb = 1e6
            print(f"  flat {out.numel() * 4 / mb:.1f} MB {dt * 1e3:6.1f} ms; heap "
                  f"{m.arena / mb:.1f} MB, free {m.fordblks / mb:.1f} MB, top "
                  f"{m.keepcost / mb:.1f} MB, largest free {largest / mb:.1f} MB")  # fmt: skip
        return out

    R._flat = probe
    for name in a.patterns.split(","):
        print(name)
        trainer, rec = R.Trainer(cfg, world, torch.device("cpu")), R.Recorder()
        for it in range(a.iterations):
            rec.start()
            R.RUNNERS[name](trainer, rec, it)
            rec.finish(True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
