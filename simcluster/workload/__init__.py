"""Workload zoo: per-layer tables (parameters, FLOPs, activations) of well-known models.

Tables are computed from architecture definitions, not typed in. Units: parameter counts
and activation sizes in elements, compute in forward FLOPs per sample (one multiply-add =
2 FLOPs), ``Model.gradient_bytes`` in bytes.

>>> m = build_model("resnet50")
>>> m.params, len(m.trainable_layers())  # doctest: +SKIP
"""

from .model import OP_CLASSES, FrozenDict, Layer, Model, ShapeError
from .radixnet import GRAPH_CHALLENGE_NEURONS, graph_challenge_radixnet, radixnet
from .sparse import SparseDNN, SparseLayer, from_rows, random_k_per_row
from .zoo import MODELS, ModelSpec, build_model, input_size_rule, list_models

__all__ = [
    "OP_CLASSES",
    "FrozenDict",
    "Layer",
    "Model",
    "ShapeError",
    "MODELS",
    "ModelSpec",
    "build_model",
    "input_size_rule",
    "list_models",
    "GRAPH_CHALLENGE_NEURONS",
    "SparseDNN",
    "SparseLayer",
    "from_rows",
    "graph_challenge_radixnet",
    "radixnet",
    "random_k_per_row",
]
