"""Whole training steps on one device: samples/s per model, batch and precision.

``python -m calibrate.anchors --device cuda --out anchors.json`` times full training
steps (forward, loss or fixed output gradient, backward, optimizer step, zero_grad) of
plain PyTorch models built like the zoo's layer tables, on random data already on the
device, at each precision of :data:`calibrate.layers.CALIBRATION_PRECISIONS`. The result
is a single-GPU throughput measured by us, in the same unit as the published anchors of
``shared/design/ANCHORS.md`` (samples/s), so that a device profile can be checked
against whole steps it was not fitted to.

Cases (``--cases`` picks a subset):

* ``resnet50`` at 224 px: :func:`calibrate.models.torch_model` (the zoo's ResNet-50),
  cross-entropy loss, SGD with momentum 0.9;
* ``bert_large`` at 128 and 512 tokens: word + position + token-type embeddings and
  LayerNorm, 24 post-norm encoder layers (1,024 wide, 16 heads, 4,096 MLP, GELU), the
  pooler; as the zoo's ``bert_large`` table (no MLM head); backward from a fixed output
  gradient; AdamW.

Timing: CUDA events (wall clock on a CPU), ``--warmup`` steps, then ``--rounds`` rounds of
``--reps`` steps; the estimate is the median of the quietest round. Seconds per step and
samples/s are both written.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import CALIBRATION_PRECISIONS, amp_context, math_mode
from .timing import Timer

__all__ = ["CASES", "bert_encoder", "time_step", "main"]

#: case name -> (model, input size (px or tokens), batch sizes)
CASES: dict[str, tuple[str, int, tuple[int, ...]]] = {
    "resnet50": ("resnet50", 224, (64, 256)),
    "bert_large-128": ("bert_large", 128, (32, 64)),
    "bert_large-512": ("bert_large", 512, (8, 16)),
}


class _Bert(nn.Module):
    """BERT encoder + pooler (post-norm), as ``simcluster.workload.transformer.bert_layers``."""

    def __init__(self, depth: int, dim: int, heads: int, vocab: int = 30522) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(512, dim)
        self.token_type = nn.Embedding(2, dim)
        self.norm = nn.LayerNorm(dim)
        self.drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(
            dim, heads, 4 * dim, dropout=0.1, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.pooler = nn.Linear(dim, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.word(ids) + self.pos(pos)[None] + self.token_type(torch.zeros_like(ids))
        x = self.encoder(self.drop(self.norm(x)))
        return torch.tanh(self.pooler(x[:, 0]))


def bert_encoder(variant: str = "large") -> nn.Module:
    """BERT-base (12 x 768, 12 heads) or BERT-large (24 x 1,024, 16 heads)."""
    depth, dim, heads = {"base": (12, 768, 12), "large": (24, 1024, 16)}[variant]
    return _Bert(depth, dim, heads)


def _step_fn(
    model_name: str, size: int, batch: int, device: torch.device, precision: str
) -> Callable[[], None]:
    if model_name == "resnet50":
        from .models import torch_model

        module = torch_model("resnet50", 1000).to(device).train()
        x = torch.randn(batch, 3, size, size, device=device)
        y = torch.randint(0, 1000, (batch,), device=device)
        opt = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)

        def loss() -> torch.Tensor:
            return F.cross_entropy(module(x).float(), y)

    else:
        module = bert_encoder(model_name.removeprefix("bert_")).to(device).train()
        x = torch.randint(0, 30522, (batch, size), device=device)
        g = torch.ones(batch, module.pooler.out_features, device=device)
        opt = torch.optim.AdamW(module.parameters(), lr=1e-4)

        def loss() -> torch.Tensor:
            return (module(x).float() * g).sum()

    scaler = torch.amp.GradScaler(device.type, enabled=precision == "amp")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with amp_context(device, precision):
            out = loss()
        scaler.scale(out).backward()
        scaler.step(opt)
        scaler.update()

    return step


def time_step(
    model_name: str,
    size: int,
    batch: int,
    device: torch.device,
    precision: str,
    warmup: int = 3,
    reps: int = 10,
    rounds: int = 3,
) -> dict:
    """Seconds per training step (median of the quietest round) and samples/s."""
    with math_mode(precision):
        step = _step_fn(model_name, size, batch, device, precision)
        timer = Timer(device, warmup=warmup, reps=reps, min_sample_s=0.0)
        rounds_s = [timer.measure(step).samples for _ in range(rounds)]
    est = min(statistics.median(r) for r in rounds_s)
    return {
        "model": model_name,
        "input_size": size,
        "batch": batch,
        "precision": precision,
        "step_s": est,
        "samples_per_s": batch / est,
        "rounds_s": [[float(f"{s:.6g}") for s in r] for r in rounds_s],
    }


def _check_args(a: argparse.Namespace) -> tuple[torch.device, tuple[int, ...]]:
    """The device and the --batches override, after every flag is checked (ConfigError)."""
    import math

    from simcluster.errors import ConfigError

    from .cli import _device

    device = _device(a.device)
    for flag, value, low in (("--warmup", a.warmup, 0), ("--reps", a.reps, 1),
                             ("--rounds", a.rounds, 1)):  # fmt: skip
        if value < low:
            raise ConfigError(None, flag, value, "out of range", f"an integer >= {low}")
    if not math.isfinite(a.deadline_s) or a.deadline_s < 0:
        raise ConfigError(None, "--deadline-s", a.deadline_s, "out of range",
                          "seconds >= 0 (0: no deadline)")  # fmt: skip
    batches: tuple[int, ...] = ()
    if a.batches:
        try:
            batches = tuple(int(b) for b in a.batches.split(",") if b.strip())
        except ValueError:
            batches = ()
        if not batches or min(batches) < 1:
            raise ConfigError(None, "--batches", a.batches, "not a comma list of batch sizes",
                              "integers >= 1, e.g. 64,128")  # fmt: skip
    from simcluster.atomic import check_output_file

    check_output_file([("--out", a.out)], a.force)
    return device, batches


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m calibrate.anchors",
        description="Time whole training steps (samples/s) per model, batch and precision.",
    )
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)}")
    ap.add_argument(
        "--precisions",
        default=",".join(CALIBRATION_PRECISIONS),
        help="comma list of " + ", ".join(CALIBRATION_PRECISIONS),
    )
    ap.add_argument("--batches", help="override the batch sizes (comma list)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps (default 3)")
    ap.add_argument("--reps", type=int, default=10, help="steps per round (default 10)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--deadline-s", type=float, default=0.0, help="stop starting cases after")
    ap.add_argument("--force", action="store_true", help="overwrite an existing --out")
    a = ap.parse_args(argv)
    cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    precs = [p.strip() for p in a.precisions.split(",") if p.strip()]
    bad = [c for c in cases if c not in CASES] + [
        p for p in precs if p not in CALIBRATION_PRECISIONS
    ]
    if bad:
        print(f"calibrate.anchors: error: unknown case or precision {bad}", file=sys.stderr)
        return 2
    from simcluster.errors import UserError

    try:
        device, batches_override = _check_args(a)
    except UserError as exc:
        print(f"calibrate.anchors: error: {exc}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    rows = []
    meta = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python -m calibrate.anchors " + " ".join(argv or sys.argv[1:]),
        "method": __doc__.split("Timing:")[1].strip().split("\n\n")[0].replace("\n", " "),
    }
    for case in cases:
        model, size, batches = CASES[case]
        if batches_override:
            batches = batches_override
        for batch in batches:
            for p in precs:
                if a.deadline_s and time.perf_counter() - t0 > a.deadline_s:
                    print(f"deadline: skipped {case} b{batch} {p}", flush=True)
                    continue
                try:
                    r = time_step(model, size, batch, device, p, a.warmup, a.reps, a.rounds)
                except (RuntimeError, torch.OutOfMemoryError) as exc:
                    print(f"{case} b{batch} {p}: failed: {exc}", flush=True)
                    continue
                finally:
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                r["case"] = case
                rows.append(r)
                print(
                    f"{case:15s} batch {batch:4d} {p:9s} {r['step_s'] * 1e3:9.2f} ms/step "
                    f"{r['samples_per_s']:10.1f} samples/s",
                    flush=True,
                )
                Path(a.out).parent.mkdir(parents=True, exist_ok=True)  # checked at the start
                with open(a.out, "w") as f:  # after every row: a stop keeps what ran
                    json.dump({"provenance": meta, "rows": rows}, f, indent=1)
    meta["duration_s"] = round(time.perf_counter() - t0, 1)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"provenance": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
