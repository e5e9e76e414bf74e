"""The node-based paper's ImageNet training input, one sample at a time (needs torch).

:mod:`calibrate.input_pipeline` times it (``--pipeline imagenet``). What the authors'
code builds (github.com/mhaut/eDNNcomm, ``IMAGENET/aux.py``, ``build_imagenet``):
``datasets.ImageFolder(traindir, Compose([RandomResizedCrop(224),
RandomHorizontalFlip(), ToTensor(), normalize]))`` with the ImageNet mean / std, loaded
through ColossalAI's ``get_dataloader`` with no ``num_workers`` (its default 0), so
the training process runs, for every sample of a batch:

* ``ImageFolder.__getitem__`` -> torchvision's ``pil_loader``: ``open(path, 'rb')``,
  ``Image.open``, ``convert('RGB')`` (the JPEG decode);
* ``RandomResizedCrop(224)``: ``get_params`` with scale (0.08, 1) and ratio (3/4, 4/3),
  up to 10 draws of ``torch.empty(1).uniform_`` for the area and the log aspect
  ratio, two ``torch.randint`` for the corner, else the centre fallback; then
  ``F.resized_crop``: ``Image.crop`` and ``Image.resize((224, 224), BILINEAR)``
  (pytorch/vision ``transforms/transforms.py``, read at commit 6247d96d);
* ``RandomHorizontalFlip()``: ``torch.rand(1) < 0.5`` -> ``Image.transpose``;
* ``ToTensor`` and ``Normalize`` as in :mod:`calibrate.input_pipeline`;

then per batch ``default_collate`` (``torch.stack`` and ``torch.tensor`` of the labels).

The JPEG: no ImageNet image is at hand, so the photo is matplotlib's sample
``grace_hopper.jpg`` (512 x 600, 61 kB, quality ~90, 4:2:0), by default cut (centre
crop, no resampling) to ImageNet's average size and re-encoded the way most ImageNet
files are (:data:`MEAN_SIZE`, :data:`QUALITY`, 4:4:4; see their docstrings), so the
decode sees about as many pixels and bytes as an average ImageNet file.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

__all__ = [
    "BATCH",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "MEAN_SIZE",
    "OUT_SIDE",
    "QUALITY",
    "RATIO",
    "SCALE",
    "check_output",
    "load",
    "rrc_params",
    "sample_image_path",
    "benchmark_jpeg",
    "transform",
]

#: the authors' Normalize constants (IMAGENET/aux.py)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
OUT_SIDE = 224  # RandomResizedCrop(224)
SCALE = (0.08, 1.0)  # RandomResizedCrop's default area range
RATIO = (3.0 / 4.0, 4.0 / 3.0)  # and aspect-ratio range
BATCH = 64  # the paper's ImageNet batch per replica (section IV), collate timed per batch
#: ImageNet's average image size (width, height), px: 482 x 415, the ILSVRC challenge
#: pages' figure (image-net.org/challenges/LSVRC/2014, quoted second-hand; there it is
#: the ILSVRC detection data's, PASCAL VOC's being the 469 x 387 also quoted). Check:
#: ILSVRC2012_img_train.tar is 147,897,477,120 bytes for 1,281,167 images, 115.4 kB
#: a file, 4.6 bits a pixel at 482 x 415.
MEAN_SIZE = (482, 415)
#: JPEG quality of the re-encoded test image, with 4:4:4 chroma: what most ImageNet
#: training files use per a survey of their quantisation tables ("Compression in the
#: ImageNet Dataset": most colour images quality 96, not chroma-subsampled).
QUALITY = 96


def sample_image_path() -> Path:
    """matplotlib's sample photo ``grace_hopper.jpg`` (a real JPEG)."""
    from matplotlib import cbook

    return Path(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))


def benchmark_jpeg(src: Path, size: tuple[int, int] | None, quality: int | None) -> bytes:
    """The JPEG the benchmark decodes: ``src``'s bytes as they are (``quality`` None),
    or its centre ``size`` (width, height; None: whole) re-encoded at ``quality``, 4:4:4."""
    from PIL import Image

    raw = Path(src).read_bytes()
    if quality is None:
        return raw
    img = Image.open(io.BytesIO(raw)).convert("RGB")
    if size is not None:
        w, h = size
        if w > img.width or h > img.height:
            raise ValueError(f"{src} is {img.width}x{img.height}, smaller than {w}x{h}")
        left, top = (img.width - w) // 2, (img.height - h) // 2
        img = img.crop((left, top, left + w, top + h))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality, subsampling=0)
    return buf.getvalue()


def load(path: Path | str):
    """torchvision's ``pil_loader``: the decoded RGB image of a file."""
    from PIL import Image

    with open(path, "rb") as f:
        img = Image.open(f)
        return img.convert("RGB")


def rrc_params(
    torch, width: int, height: int, scale=SCALE, ratio=RATIO
) -> tuple[int, int, int, int]:
    """``RandomResizedCrop.get_params``: (top, left, height, width) of the crop."""
    area = height * width
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
        log_ratio = torch.log(torch.tensor(ratio))
        aspect_ratio = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            i = int(torch.randint(0, height - h + 1, size=(1,)).item())
            j = int(torch.randint(0, width - w + 1, size=(1,)).item())
            return i, j, h, w
    in_ratio = float(width) / float(height)  # centre fallback
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def random_resized_crop(torch, img):
    """``RandomResizedCrop(224)`` on a PIL image: crop, then bilinear resize."""
    from PIL import Image

    i, j, h, w = rrc_params(torch, img.width, img.height)
    img = img.crop((j, i, j + w, i + h))
    return img.resize((OUT_SIDE, OUT_SIDE), Image.Resampling.BILINEAR)


def hflip(torch, img):
    """``RandomHorizontalFlip()`` (p = 0.5)."""
    from PIL import Image

    if torch.rand(1) < 0.5:
        return img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return img


def transform(img, torch=None, np=None):
    """One decoded sample through the authors' training transform: a float32
    (3, 224, 224) tensor."""
    if torch is None:
        import torch
    if np is None:
        import numpy as np
    from .input_pipeline import _normalize, _to_tensor

    img = hflip(torch, random_resized_crop(torch, img))
    return _normalize(torch, _to_tensor(torch, np, img), IMAGENET_MEAN, IMAGENET_STD)


def check_output(out: Any) -> None:
    """:func:`calibrate.input_pipeline.check_normalized` for an ImageNet sample:
    (3, 224, 224), the authors' Normalize constants."""
    from .input_pipeline import check_normalized

    check_normalized(out, OUT_SIDE, IMAGENET_MEAN, IMAGENET_STD)


PARTS = ("decode", "random_resized_crop", "flip", "to_tensor", "normalize")


def _pass(torch, np, path: Path, samples: int) -> dict[str, float]:
    """Thread CPU seconds per sample of each part, and of collate, over one pass of
    ``samples`` samples of ``path`` in batches of :data:`BATCH`."""
    from time import thread_time

    from .input_pipeline import _collate, _normalize, _to_tensor

    acc = dict.fromkeys((*PARTS, "collate"), 0.0)
    done = 0
    while done < samples:
        n = min(BATCH, samples - done)
        outs = []
        for _ in range(n):
            t0 = thread_time()
            img = load(path)
            t1 = thread_time()
            img = random_resized_crop(torch, img)
            t2 = thread_time()
            img = hflip(torch, img)
            t3 = thread_time()
            t = _to_tensor(torch, np, img)
            t4 = thread_time()
            outs.append(_normalize(torch, t, IMAGENET_MEAN, IMAGENET_STD))
            t5 = thread_time()
            for part, dt in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
                acc[part] += dt
        t6 = thread_time()
        _collate(torch, outs, list(range(n)))
        acc["collate"] += thread_time() - t6
        done += n
    return {k: v / samples for k, v in acc.items()}


def _decode_pass(path: Path, samples: int) -> float:
    """Thread CPU seconds per decode (``pil_loader``) of ``path``."""
    from time import thread_time

    t0 = thread_time()
    for _ in range(samples):
        load(path)
    return (thread_time() - t0) / samples


def measure(
    samples: int,
    repeats: int,
    seed: int = 0,
    image: Path | None = None,
    size: tuple[int, int] | None = MEAN_SIZE,
    quality: int | None = QUALITY,
) -> dict[str, Any]:
    """Time the pipeline on one thread: ``repeats`` passes of ``samples`` samples of
    the benchmark JPEG (:func:`benchmark_jpeg` of ``image``) after one warm-up pass;
    also the decode of ``image`` as shipped, for the pixel-count transfer check."""
    import statistics
    import tempfile

    import numpy as np
    import torch
    from PIL import Image

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    src = Path(image) if image is not None else sample_image_path()
    data = benchmark_jpeg(src, size, quality)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sample.JPEG"
        path.write_bytes(data)
        shipped = Path(tmp) / "shipped.jpg"
        shipped.write_bytes(src.read_bytes())
        img = load(path)
        check_output(transform(img, torch, np))
        _pass(torch, np, path, min(samples, BATCH))  # warm-up
        passes = [_pass(torch, np, path, samples) for _ in range(repeats)]
        shipped_decode = [_decode_pass(shipped, samples) for _ in range(repeats)]
        with Image.open(shipped) as s:
            shipped_size = s.size
    total = [sum(p.values()) for p in passes]
    parts = {k: statistics.median(p[k] for p in passes) for k in passes[0]}
    return {
        "per_sample_s": statistics.median(total),
        "parts_s": parts,
        "passes_s": total,
        "image": {
            "source": str(src),
            "source_size": list(shipped_size),
            "source_bytes": src.stat().st_size,
            "size": list(img.size),
            "bytes": len(data),
            "quality": quality,
            "subsampling": "as shipped" if quality is None else "4:4:4",
        },
        "source_decode_s": statistics.median(shipped_decode),
    }
