"""Time a training input pipeline per sample on this CPU, one thread: an input profile.

``python -m calibrate.input_pipeline --out calibrate/profiles/input/cifar10-autoaugment.json``
``python -m calibrate.input_pipeline --pipeline imagenet --out
calibrate/profiles/input/imagenet-train.json``

``--pipeline imagenet`` times the same paper's ImageNet training input (JPEG decode,
RandomResizedCrop(224), flip, ToTensor, Normalize, collate per batch of 64), written in
:mod:`calibrate.input_imagenet`, each part timed on its own. The default,
``--pipeline cifar10``, is the node-based paper's CIFAR-10 training input as its authors' code
builds it (github.com/mhaut/eDNNcomm, ``CIFAR/aux.py``, ``build_cifar10``), run the way
torch's single-process loader (``num_workers=0``, ColossalAI's ``get_dataloader``
default) runs it for every sample of a batch, then once per batch:

* ``torchvision.datasets.CIFAR10.__getitem__``: ``Image.fromarray`` of the 32x32x3 uint8 row;
* ``RandomCrop(32, padding=4)``: ``ImageOps.expand`` by 4 px of 0, two
  ``torch.randint`` draws, ``Image.crop``;
* ``AutoAugment(AutoAugmentPolicy.CIFAR10)`` (NEAREST, fill None): one of 25
  sub-policies drawn, each of its two ops applied with its probability and its
  magnitude bin, signed ops negated on a coin flip, the magnitude table rebuilt with
  ``torch.linspace`` for every op applied (as torchvision does). Policy and magnitudes
  from torchvision's ``torchvision/transforms/autoaugment.py`` (pytorch/vision, read at
  commit 0352a47a: ``_get_policies``, ``_augmentation_space``, ``get_params``,
  ``forward``, ``_apply_op``), each op the PIL call torchvision's functional_pil makes
  (``Image.transform`` AFFINE for shear and translate with torchvision's inverse
  affine matrix, ``Image.rotate``, ``ImageEnhance`` for brightness / color /
  contrast / sharpness, ``ImageOps`` for posterize / solarize / autocontrast /
  equalize / invert);
* ``ToTensor``: ``np.array`` copy, ``torch.from_numpy``, view, HWC -> CHW
  ``permute().contiguous()``, ``float`` and ``div(255)``;
* ``Normalize`` (CIFAR mean / std): a clone, the mean and std as tensors, the zero-std
  check, ``sub_`` and ``div_``;
* per batch, ``default_collate``: ``torch.stack`` of the images and ``torch.tensor`` of
  the labels (timed per batch, divided by the batch size).

Not timed: the loader's pinning of the batch (``pin_memory=True`` needs CUDA) and its
copy to the GPU. torchvision is not imported: it is not installed here (its wheel
pins another torch); the transforms above are written from its source with
PIL / numpy / torch and :func:`check_output` checks what they produce. Images are
random uint8 (seeded): every op's cost here depends on the image size, not its content.

Times are the thread's CPU time (``time.thread_time``; torch runs one thread, in the
caller), so other processes on a shared machine stay out of them. The profile holds
the median over ``--repeats`` timed passes of ``--samples`` samples each (after one
untimed warm-up pass), every pass's figure, the CPU's nominal clock
from ``/proc/cpuinfo`` (what :mod:`simcluster.compute.input_pipeline` transfers by) and
the provenance (command, date, machine, library versions).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

__all__ = [
    "CIFAR10_POLICY",
    "CIFAR_MEAN",
    "CIFAR_STD",
    "check_normalized",
    "check_output",
    "cpu_clock_ghz",
    "measure",
    "main",
    "transform",
]

#: the authors' Normalize constants (CIFAR/aux.py)
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2023, 0.1994, 0.2010)

#: torchvision's AutoAugmentPolicy.CIFAR10: (op, probability, magnitude bin or None) pairs
CIFAR10_POLICY: tuple[tuple[tuple[str, float, int | None], ...], ...] = (
    (("Invert", 0.1, None), ("Contrast", 0.2, 6)),
    (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
    (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)),
    (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
    (("AutoContrast", 0.5, None), ("Equalize", 0.9, None)),
    (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
    (("Color", 0.4, 3), ("Brightness", 0.6, 7)),
    (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
    (("Equalize", 0.6, None), ("Equalize", 0.5, None)),
    (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
    (("Color", 0.7, 7), ("TranslateX", 0.5, 8)),
    (("Equalize", 0.3, None), ("AutoContrast", 0.4, None)),
    (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)),
    (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
    (("Solarize", 0.5, 2), ("Invert", 0.0, None)),
    (("Equalize", 0.2, None), ("AutoContrast", 0.6, None)),
    (("Equalize", 0.2, None), ("Equalize", 0.6, None)),
    (("Color", 0.9, 9), ("Equalize", 0.6, None)),
    (("AutoContrast", 0.8, None), ("Solarize", 0.2, 8)),
    (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
    (("Solarize", 0.4, 5), ("AutoContrast", 0.9, None)),
    (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
    (("AutoContrast", 0.9, None), ("Solarize", 0.8, 3)),
    (("Equalize", 0.8, None), ("Invert", 0.1, None)),
    (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, None)),
)

SIDE = 32  # CIFAR image side, px
PADDING = 4  # RandomCrop padding, px
BATCH = 128  # the authors' CIFAR batch per replica (collate is timed per batch of this)


def _magnitudes(torch, width: int, height: int) -> dict[str, tuple[Any, bool]]:
    """torchvision's ``AutoAugment._augmentation_space(10, [width, height])``."""
    bins = 10
    return {
        "ShearX": (torch.linspace(0.0, 0.3, bins), True),
        "ShearY": (torch.linspace(0.0, 0.3, bins), True),
        "TranslateX": (torch.linspace(0.0, 150.0 / 331.0 * width, bins), True),
        "TranslateY": (torch.linspace(0.0, 150.0 / 331.0 * height, bins), True),
        "Rotate": (torch.linspace(0.0, 30.0, bins), True),
        "Brightness": (torch.linspace(0.0, 0.9, bins), True),
        "Color": (torch.linspace(0.0, 0.9, bins), True),
        "Contrast": (torch.linspace(0.0, 0.9, bins), True),
        "Sharpness": (torch.linspace(0.0, 0.9, bins), True),
        "Posterize": (8 - (torch.arange(bins) / ((bins - 1) / 4)).round().int(), False),
        "Solarize": (torch.linspace(255.0, 0.0, bins), False),
        "AutoContrast": (torch.tensor(0.0), False),
        "Equalize": (torch.tensor(0.0), False),
        "Invert": (torch.tensor(0.0), False),
    }


def _inverse_affine(
    center: tuple[float, float],
    angle: float,
    translate: tuple[float, float],
    shear: tuple[float, float],
) -> list[float]:
    """torchvision's ``_get_inverse_affine_matrix`` at scale 1 (the matrix PIL wants:
    output pixel -> input pixel)."""
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    m = [d, -b, 0.0, -c, a, 0.0]
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty)
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty)
    m[2] += cx
    m[5] += cy
    return m


def _affine(img, translate=(0.0, 0.0), shear=(0.0, 0.0), center=None):
    """``F.affine`` on a PIL image: NEAREST, fill 0 (AutoAugment's fill None)."""
    from PIL import Image

    w, h = img.size
    if center is None:
        center = (w * 0.5, h * 0.5)
    matrix = _inverse_affine(center, 0.0, translate, shear)
    return img.transform(img.size, Image.AFFINE, matrix, Image.NEAREST, fillcolor=(0, 0, 0))


def _apply_op(img, name: str, magnitude: float):
    """torchvision's ``_apply_op`` for a PIL image (the functional_pil call of each op)."""
    from PIL import Image, ImageEnhance, ImageOps

    if name == "ShearX":
        return _affine(img, shear=(math.degrees(math.atan(magnitude)), 0.0), center=(0, 0))
    if name == "ShearY":
        return _affine(img, shear=(0.0, math.degrees(math.atan(magnitude))), center=(0, 0))
    if name == "TranslateX":
        return _affine(img, translate=(float(int(magnitude)), 0.0))
    if name == "TranslateY":
        return _affine(img, translate=(0.0, float(int(magnitude))))
    if name == "Rotate":
        return img.rotate(magnitude, Image.NEAREST, False, None, fillcolor=(0, 0, 0))
    if name == "Brightness":
        return ImageEnhance.Brightness(img).enhance(1.0 + magnitude)
    if name == "Color":
        return ImageEnhance.Color(img).enhance(1.0 + magnitude)
    if name == "Contrast":
        return ImageEnhance.Contrast(img).enhance(1.0 + magnitude)
    if name == "Sharpness":
        return ImageEnhance.Sharpness(img).enhance(1.0 + magnitude)
    if name == "Posterize":
        return ImageOps.posterize(img, int(magnitude))
    if name == "Solarize":
        return ImageOps.solarize(img, magnitude)
    if name == "AutoContrast":
        return ImageOps.autocontrast(img)
    if name == "Equalize":
        return ImageOps.equalize(img)
    if name == "Invert":
        return ImageOps.invert(img)
    raise ValueError(f"unknown AutoAugment op {name!r}")


def _auto_augment(torch, img):
    """``AutoAugment(AutoAugmentPolicy.CIFAR10).forward`` on a PIL image."""
    policy_id = int(torch.randint(len(CIFAR10_POLICY), (1,)).item())
    probs = torch.rand((2,))
    signs = torch.randint(2, (2,))
    for i, (name, p, bin_) in enumerate(CIFAR10_POLICY[policy_id]):
        if probs[i] <= p:
            magnitudes, signed = _magnitudes(torch, *img.size)[name]
            magnitude = float(magnitudes[bin_].item()) if bin_ is not None else 0.0
            if signed and signs[i] == 0:
                magnitude *= -1.0
            img = _apply_op(img, name, magnitude)
    return img


def _random_crop(torch, img):
    """``RandomCrop(32, padding=4)`` on a PIL image (constant padding of 0)."""
    from PIL import ImageOps

    img = ImageOps.expand(img, border=PADDING, fill=0)
    w, h = img.size
    top = int(torch.randint(0, h - SIDE + 1, size=(1,)).item())
    left = int(torch.randint(0, w - SIDE + 1, size=(1,)).item())
    return img.crop((left, top, left + SIDE, top + SIDE))


def _to_tensor(torch, np, img):
    """``ToTensor`` on an RGB PIL image: float32 CHW in [0, 1]."""
    t = torch.from_numpy(np.array(img, np.uint8, copy=True))
    t = t.view(img.size[1], img.size[0], len(img.getbands()))
    t = t.permute((2, 0, 1)).contiguous()
    return t.to(dtype=torch.get_default_dtype()).div(255)


def _normalize(torch, t, mean_=CIFAR_MEAN, std_=CIFAR_STD):
    """``Normalize(mean_, std_)`` (not in place: torchvision clones first)."""
    t = t.clone()
    mean = torch.as_tensor(mean_, dtype=t.dtype, device=t.device)
    std = torch.as_tensor(std_, dtype=t.dtype, device=t.device)
    if (std == 0).any():
        raise ValueError("std evaluated to zero")
    return t.sub_(mean.view(-1, 1, 1)).div_(std.view(-1, 1, 1))


def transform(row, torch=None, np=None):
    """One training sample as the authors' loader makes it from a 32x32x3 uint8 array:
    ``Image.fromarray``, RandomCrop, AutoAugment, ToTensor, Normalize."""
    if torch is None:
        import torch
    if np is None:
        import numpy as np
    from PIL import Image

    img = Image.fromarray(row)
    img = _random_crop(torch, img)
    img = _auto_augment(torch, img)
    return _normalize(torch, _to_tensor(torch, np, img))


def _collate(torch, samples: list, labels: list[int]):
    """``default_collate`` of (image, label) pairs: the stacked images, the labels."""
    return torch.stack(samples, 0), torch.tensor(labels)


def check_normalized(out, side: int, mean, std) -> None:
    """Raise ValueError unless ``out`` is a finite float32 (3, side, side) tensor within
    what Normalize(``mean``, ``std``) can produce from [0, 1] inputs."""
    import torch

    if tuple(out.shape) != (3, side, side) or out.dtype != torch.float32:
        raise ValueError(
            f"sample is {tuple(out.shape)} {out.dtype}, not (3, {side}, {side}) float32"
        )
    lo = min(-m / s for m, s in zip(mean, std, strict=True))
    hi = max((1 - m) / s for m, s in zip(mean, std, strict=True))
    if not bool(torch.isfinite(out).all()) or out.min() < lo - 1e-5 or out.max() > hi + 1e-5:
        raise ValueError("sample values outside Normalize's range for inputs in [0, 1]")


def check_output(out) -> None:
    """:func:`check_normalized` for a CIFAR-10 sample: (3, 32, 32), CIFAR's constants."""
    check_normalized(out, SIDE, CIFAR_MEAN, CIFAR_STD)


def _pass(torch, np, rows, labels) -> tuple[float, float]:
    """(seconds per sample of getitem + transform, seconds per sample of collate) of one
    pass over ``rows`` in batches of :data:`BATCH` (the last batch may be smaller)."""
    t_item = 0.0
    t_collate = 0.0
    for start in range(0, len(rows), BATCH):
        t0 = time.thread_time()
        samples = [
            transform(rows[i], torch, np) for i in range(start, min(start + BATCH, len(rows)))
        ]
        t1 = time.thread_time()
        _collate(torch, samples, labels[start : start + len(samples)])
        t2 = time.thread_time()
        t_item += t1 - t0
        t_collate += t2 - t1
    return t_item / len(rows), t_collate / len(rows)


def cpu_clock_ghz() -> tuple[float | None, str]:
    """(nominal clock in GHz from ``/proc/cpuinfo``'s ``cpu MHz``, None where unreadable;
    the CPU model name, :func:`calibrate.runner.cpu_model`)."""
    from .runner import cpu_model

    clock = None
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "cpu MHz":
            clock = round(float(value) / 1000.0, 4)
            break
    return clock, cpu_model()


def measure(samples: int, repeats: int, seed: int = 0) -> dict[str, Any]:
    """Time the pipeline: ``repeats`` passes of ``samples`` samples (one warm-up pass
    first), one torch thread. Returns the figures of an input profile."""
    import numpy as np
    import PIL
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    random.seed(seed)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 256, size=(samples, SIDE, SIDE, 3), dtype=np.uint8)
    labels = [int(x) for x in rng.integers(0, 10, size=samples)]
    check_output(transform(rows[0], torch, np))
    _pass(torch, np, rows, labels)  # warm-up
    item, coll = [], []
    for _ in range(repeats):
        a, b = _pass(torch, np, rows, labels)
        item.append(a)
        coll.append(b)
    total = [a + b for a, b in zip(item, coll, strict=True)]
    clock, model = cpu_clock_ghz()
    return {
        "per_sample_s": statistics.median(total),
        "parts_s": {
            "getitem_transform": statistics.median(item),
            "collate": statistics.median(coll),
        },
        "passes_s": total,
        "clock_ghz": clock,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "pillow": PIL.__version__,
            "numpy": np.__version__,
        },
        "cpu_model": model,
    }


def _size(text: str) -> tuple[int, int] | None:
    """``--size``: ``WxH`` in px, or ``asis``."""
    if text == "asis":
        return None
    w, sep, h = text.partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or int(w) < 1 or int(h) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give WIDTHxHEIGHT in px (e.g. 482x415) or asis"
        )
    return int(w), int(h)


def _cifar10(args) -> dict[str, Any]:
    fig = measure(args.samples, args.repeats, args.seed)
    fig["pipeline"] = (
        "cifar10: fromarray, RandomCrop(32, padding=4), "
        "AutoAugment(CIFAR10), ToTensor, Normalize; default_collate per batch of 128"
    )
    fig["images"] = "random uint8 32x32x3, seeded"
    return fig


def _imagenet(args) -> dict[str, Any]:
    import numpy as np
    import PIL
    import torch

    from . import input_imagenet as ini

    quality = None if args.quality == 0 else args.quality
    fig = ini.measure(args.samples, args.repeats, args.seed, args.image, args.size, quality)
    im = fig["image"]
    src_px = im["source_size"][0] * im["source_size"][1]
    px = im["size"][0] * im["size"][1]
    fig["pipeline"] = (
        "imagenet: ImageFolder pil_loader (open, Image.open, convert RGB), "
        "RandomResizedCrop(224) (scale 0.08-1, ratio 3/4-4/3, bilinear), "
        f"RandomHorizontalFlip, ToTensor, Normalize; default_collate per batch of {ini.BATCH}"
    )
    fig["images"] = (
        f"{Path(im['source']).name} ({im['source_size'][0]}x{im['source_size'][1]}, "
        f"{im['source_bytes']} B)"
        + (
            ""
            if quality is None
            else f", centre {im['size'][0]}x{im['size'][1]} re-encoded at quality "
            f"{quality} 4:4:4 ({im['bytes']} B); the same file every sample, from the page cache"
        )
    )
    decode = fig.pop("source_decode_s")
    fig["check"] = {
        "source_decode_s": decode,
        "source_decode_scaled_by_pixels_s": decode * px / src_px,
        "note": "the decode of the file as shipped, and that scaled by pixel count to the "
        "benchmark image's size: the transfer a pixel-count model would make",
    }
    fig["versions"] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "pillow": PIL.__version__,
        "numpy": np.__version__,
    }
    fig["clock_ghz"], fig["cpu_model"] = cpu_clock_ghz()
    return fig


def _unreadable_image(path: Path) -> str | None:
    """Why ``path`` is not an image PIL can decode, or None (asked before the timing:
    a text file was a PIL.UnidentifiedImageError traceback)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        return f"not an image PIL can decode ({type(exc).__name__})"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibrate.input_pipeline", description=__doc__)
    ap.add_argument("--out", required=True, help="input profile to write (.json)")
    ap.add_argument("--name", default=None, help="profile name (default: the file's stem)")
    ap.add_argument(
        "--pipeline",
        choices=("cifar10", "imagenet"),
        default="cifar10",
        help="cifar10 (CIFAR/aux.py) or imagenet (IMAGENET/aux.py, calibrate.input_imagenet)",
    )
    ap.add_argument("--samples", type=int, default=2048, help="samples per timed pass")
    ap.add_argument("--repeats", type=int, default=7, help="timed passes (the median is kept)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--image",
        type=Path,
        default=None,
        help="imagenet: the JPEG (default: matplotlib's grace_hopper.jpg)",
    )
    ap.add_argument(
        "--size",
        default="482x415",
        help="imagenet: centre WxH of --image to re-encode, or asis (default 482x415)",
    )
    ap.add_argument(
        "--quality",
        type=int,
        default=96,
        help="imagenet: JPEG quality of the re-encoding, 4:4:4 (0: the file's own bytes)",
    )
    ap.add_argument("--force", action="store_true", help="overwrite an existing --out")
    args = ap.parse_args(argv)
    for flag, value, top in (("--samples", args.samples, 10_000_000),
                             ("--repeats", args.repeats, 1000)):  # fmt: skip
        if not 1 <= value <= top:
            print(f"calibrate.input_pipeline: {flag}: out of range (got {value}); "
                  f"allowed: an integer 1..{top}", file=sys.stderr)  # fmt: skip
            return 2
    from simcluster.atomic import output_file_problem

    problem = output_file_problem((("--out", args.out),), args.force)
    if problem:  # asked before the minutes of timing, and never over a file unasked
        print(f"calibrate.input_pipeline: {problem}", file=sys.stderr)
        return 2
    try:
        args.size = _size(args.size)
    except argparse.ArgumentTypeError as exc:
        print(f"calibrate.input_pipeline: --size: {exc}", file=sys.stderr)
        return 2
    if not 0 <= args.quality <= 100:
        print(f"calibrate.input_pipeline: --quality: out of range (got {args.quality}); "
              "allowed: an integer 0..100 (0: the file's own bytes)", file=sys.stderr)  # fmt: skip
        return 2
    if args.image is not None and not args.image.is_file():
        print(f"calibrate.input_pipeline: --image: no such file (got {args.image}); "
              "allowed: a JPEG file", file=sys.stderr)  # fmt: skip
        return 2
    if args.image is not None:
        problem = _unreadable_image(args.image)
        if problem:
            print(f"calibrate.input_pipeline: --image: {problem} (got {args.image}); "
                  "allowed: a JPEG file", file=sys.stderr)  # fmt: skip
            return 2
    out = Path(args.out)
    load_before = os.getloadavg()[0]
    fig = (_imagenet if args.pipeline == "imagenet" else _cifar10)(args)
    load_after = os.getloadavg()[0]
    profile = {
        "schema_version": 1,
        "name": args.name or out.stem,
        "kind": "input",
        "pipeline": fig["pipeline"],
        "per_sample_s": fig["per_sample_s"],
        "clock_ghz": fig["clock_ghz"],
        "parts_s": fig["parts_s"],
        "passes_s": fig["passes_s"],
        **({"check": fig["check"]} if "check" in fig else {}),
        "provenance": {
            "command": "python -m calibrate.input_pipeline "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": platform.node(),
            "cpu_model": fig["cpu_model"],
            "clock_source": "/proc/cpuinfo 'cpu MHz' (the nominal clock the OS reports)",
            "threads": 1,
            "clock": "thread CPU time (time.thread_time)",
            "statistic": f"median of {args.repeats} passes of {args.samples} samples "
            "(after one warm-up pass)",
            "images": fig["images"],
            "not_timed": "pin_memory of the batch and its copy to the GPU",
            "load_average_1min": [load_before, load_after],
            **fig["versions"],
        },
    }
    from simcluster.atomic import write_text_atomic

    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(profile, indent=1) + "\n")
    parts = ", ".join(f"{k} {v * 1e6:.1f}" for k, v in fig["parts_s"].items())
    print(
        f"{profile['name']}: {fig['per_sample_s'] * 1e6:.1f} us per sample "
        f"({parts}) at {fig['clock_ghz']} GHz -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
