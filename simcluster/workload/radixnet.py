"""RadiX-Net sparse DNN topologies (Robinett and Kepner, "RadiX-Net: Structured
Sparse Matrices for Deep Neural Networks", IPDPS GrAPL 2019), written from the
published description.

Construction, in this module's terms:

- A *mixed-radix system* is a list of radices ``(r_1, ..., r_d)`` whose product
  is ``n``. It defines ``d`` layers of ``n`` neurons. Layer ``i`` has place
  value ``p_i = r_1 * ... * r_(i-1)`` and joins input neuron ``x`` to output
  neurons ``x, x + p_i, ..., x + (r_i - 1) p_i`` (mod ``n``). After the ``d``
  layers every input reaches every output along exactly one path, and every
  neuron of layer ``i`` has ``r_i`` inputs.
- Several systems (same ``n``) are chained for deeper networks; here the
  system list is repeated cyclically until the requested number of layers is
  reached, so any depth is possible.
- Each layer is then widened by a Kronecker product with a dense block: with
  widths ``B_0 .. B_L``, layer ``k`` has ``B_k * n`` neurons, neuron
  ``(a, y)`` (index ``a * n + y``) is joined to every ``(b, x)`` whose base
  neurons ``x -> y`` are joined, so a neuron has ``B_(k-1) * r_k`` inputs.
- Optionally (``relabel_inputs``, on for :func:`graph_challenge_radixnet`), as in
  the published challenge files: from the second system pass on (for one system
  of ``d`` radices, layers ``d + 1 .. L``, 1-based), the columns (inputs) of every
  layer of a pass are relabelled by one permutation of all ``B * n`` neurons per
  pass, the rows (outputs) keep the layout. The cycle is the generator's own: the
  total number of radices in the system list (``d = log2(N / 16)`` for the
  challenge sizes: 6 layers for N = 1024, 8 for 4096, 10 for 16384, 12 for
  65536; only the N = 1024 files were read, so the period for the other sizes
  is this construction's, an assumption). Pass ``g`` (1, 2, ...) draws its permutation from
  ``numpy.random.default_rng([0x72656C, seed, B * n, g])``: the same ``seed`` and
  size give the same network, and a deeper network starts with the shallower one.
- Optionally (``permute``) the neurons of every layer are relabelled by a
  seeded random permutation. Relabelling changes no property of the network or
  of any partition quality; it only hides the block structure, as a file of
  the Graph Challenge networks would.

:func:`graph_challenge_radixnet` picks the parameters for the Sparse DNN Graph
Challenge sizes (N = 1024, 4096, 16384, 65536 neurons, 32 connections per
neuron). The SpMV paper (shared/papers/004_*) only says the networks come
from RadiX-Net with a given number of layers and neurons; the exact radices
are an assumption of this module: radix-2 systems (``n = N / 16 = 2^d``
neurons, place values 1, 2, ..., n/2) widened by dense 16 x 16 blocks. That
gives every challenge size exactly 32 inputs and 32 outputs per neuron.

What is checked, and what is assumed (issue 16):

- With 32 inputs per neuron and a constant width, the published construction
  (the Kronecker product of ``ones(B, B)`` with a mixed-radix layer, as in
  Robinett and Kepner's reference code ``kemr_net``) leaves one choice per size:
  radix ``r`` and width ``B`` with ``r * B = 32`` and ``N / B`` a power of ``r``.
  Radix 2 with ``B = 16`` is the only one that fits all four challenge sizes
  (radix 32 with ``B = 1`` fits N = 1024 only, radix 8 with ``B = 4`` N = 16384
  only). A public inference code for the N = 1024 challenge file regroups
  neuron ``b * 64 + x`` as ``x * 16 + b``: the index layout of this product.
- Checked against the SpMV paper: its SGD (random rows) figures of Table 1
  depend only on how many rows use each column; every column here has 32, and
  the paper's SGD volumes and message counts for N = 16384 and 65536 and every
  P follow from that within 5 % (tests/test_spmv_table1.py; one normalisation
  constant, see scenarios/references/spmv.yaml).
- Not checked by the paper's random rows: the radix order inside a system and
  whether the challenge files relabel neurons between layers; the random rows
  cannot see either (the published files can: see the last two points).
  The paper's H-SGD figures could, and they disagree: the B = 16 product makes
  every neuron one of 16 twins (same inputs), and merely placing twin groups
  at random already gives a volume / message ratio of 0.09 / 0.14 against
  random rows (N = 1024, P = 32), where the paper's PaToH partitions give
  0.34 / 0.96 and KaHyPar 0.05 / 0.06. Either the networks the paper
  partitioned had no such twins, or its partitioner did not use them; which,
  the published material does not say (an open gap, noted in the cases).
- Issue 16 follow-up (what the published networks are): twins are a property
  of one layer's matrix (rows with the same column set), so no relabelling of
  neurons, per layer or per Kronecker factor, consistent between layers or
  not, can remove them; only a different construction could. The challenge
  files keep the Kronecker layout in every layer: a 2021 challenge code
  (ftxj, ``HashReorder(64, 1024)``) regroups neuron ``b * 64 + x`` as
  ``x * 16 + b`` in ``n1024-l1.tsv`` and ``n1024-l120.tsv`` alike, which turns
  each layer into dense 16 x 16 tiles, so those files have the twins too.
  Measured here with KaHyPar (6 layers, H / R ratios of average volume and
  messages at N = 1024, P = 32; the paper: 0.34 / 0.96): this generator 0.05 /
  0.06; every layer relabelled independently of the previous one (breaking the
  inter-layer alignment, twins kept) 0.06 / 0.63; radix 32 without widening
  (no twins except in the last layer of each system) 0.06 / 0.84; a random
  16-lift (each of the 16 x 16 blocks with its own random permutation, no
  twins) 0.70 / 1.00. The paper's figures lie between the structured variants
  and the random one and none of these candidates reproduces them, so the
  generator was left unchanged then (GENERATOR_VERSION 1).
- ``permute`` relabels consistently (the rows of ``W^k`` and the columns of
  ``W^(k+1)`` alike), so no metric depends on it.
- The published N = 1024 files themselves (issue 16; read from a public copy,
  nothing shipped; ``python bench/graph_challenge_files.py FOLDER --layers
  120 --parts 32 64``): every layer has 32 inputs and 32 outputs per neuron
  and is, up to separate row and column relabelling, this module's layer
  ``kron(ones(16, 16), A)`` with the radix-2 place values 1, 2, ..., 32 in
  turn (the bipartite quotient over twin groups has the same cycle structure,
  layer by layer), so the 16 (last layer of a system: 32) twins are there.
  Layers 1-6 are exactly that product in the layout ``b * 64 + x`` (output
  ``y`` reads inputs ``y`` and ``y + p`` there, ``y`` and ``y - p`` here: the
  same up to ``x -> -x``). From layer 7 on, the rows keep that layout but the columns of
  the six layers of each later system are relabelled by one permutation of
  all 1024 neurons (their input twin groups coincide within a system and
  differ between systems), which does not match the previous layer's rows: a
  twin group of layer k's outputs meets up to 31 input twin groups of layer
  k + 1 (the aligned layout: at most 2). The random rows cannot see this
  (files and generator alike: R average volume 638.8 / 403.5 words, 31.00 /
  62.97 messages at P = 32 / 64). KaHyPar (shipped preset, epsilon 0.01, 120
  layers) gives H / R ratios on the files of 0.064 / 0.071 (average volume) and
  0.72 / 0.37 (average messages) at P = 32 / 64, against 0.046 / 0.043 and 0.059
  / 0.021 for GENERATOR_VERSION 1 (aligned layers) and the paper's 0.34 / 0.31
  and 0.96 / 0.82. GENERATOR_VERSION 2 (``relabel_inputs``, one permutation per
  6-layer pass, as the files) gives 0.064 / 0.071 and 0.72 / 0.37, the files'
  figures (H average volume 40.6 / 28.8 words, 22.46 / 23.47 messages; the files
  40.6 / 28.8 and 22.41 / 23.47), and up to 32 input twin groups met (files: 31).
  So the network explains part of the message-count gap (0.06 -> 0.72 at P = 32)
  but not the volume gap (0.06 against 0.34): on the published network KaHyPar
  still moves about 5x less
  than the paper's partitions. Neither the backend nor the pinned inputs
  change that: Mt-KaHyPar (deterministic preset) on the files gives 0.066 /
  0.075 and 0.72 / 0.38, and partitioning every layer alone
  (``--independent``, inputs not pinned where the previous layer put them)
  0.068 / 0.078 and 0.73 / 0.38. A 16-twin layer lets any partitioner keep
  each twin group's rows together, so an input goes to about two ranks against
  about 20 for random rows, which bounds the volume ratio near 0.1 whatever
  the inter-layer labelling. What the paper's H figures measured (PaToH and
  its settings, another hypergraph model or balance rule, other networks)
  stays open.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from simcluster.workload.sparse import SparseDNN, SparseLayer

__all__ = [
    "radixnet",
    "graph_challenge_radixnet",
    "GRAPH_CHALLENGE_NEURONS",
    "GENERATOR_VERSION",
]

#: bumped whenever a change makes any network come out different; partitions shipped
#: with the package (:mod:`simcluster.partition.shipped`) are used only for this version
GENERATOR_VERSION = 2

#: neurons per layer of the Sparse DNN Graph Challenge networks
GRAPH_CHALLENGE_NEURONS = (1024, 4096, 16384, 65536)


def _mixed_radix_block(n: int, radix: int, place: int, b_in: int) -> np.ndarray:
    """Column ids ``(n, b_in * radix)`` of the first ``n`` rows of one Kronecker-widened
    radix layer; row ``i`` of the layer (``b_out * n`` rows) is row ``i % n`` of this."""
    y = np.arange(n, dtype=np.int64)
    base = (y[:, None] - place * np.arange(radix, dtype=np.int64)[None, :]) % n  # (n, r)
    blocks = np.arange(b_in, dtype=np.int64)[None, :, None] * n
    return (blocks + base[:, None, :]).reshape(n, b_in * radix)


def _layer_from_table(rows: int, cols: int, table: np.ndarray) -> SparseLayer:
    # column ids < 2**31: sorted in 32 bits
    table = np.sort(table.astype(np.int32, copy=False), axis=1)
    k = table.shape[1]
    if k > 1 and np.any(table[:, 1:] == table[:, :-1]):
        raise ValueError("a neuron would be joined twice to the same input; check the radices")
    indptr = np.arange(rows + 1, dtype=np.int64) * k
    return SparseLayer(rows, cols, indptr, table.reshape(-1))


def radixnet(
    radix_lists: Sequence[Sequence[int]],
    widths: int | Sequence[int] = 1,
    layers: int | None = None,
    permute: bool = False,
    seed: int = 0,
    name: str | None = None,
    relabel_inputs: bool = False,
) -> SparseDNN:
    """A RadiX-Net (see the module docstring).

    radix_lists: mixed-radix systems; every list's product must be the same ``n``.
    widths: dense Kronecker widths ``B_0 .. B_L`` (one int = the same for every layer).
    layers: number of weight layers (default: the total number of radices);
        the radices are repeated cyclically.
    permute: relabel each layer's neurons by a random permutation drawn from ``seed``.
    relabel_inputs: from the second system on (the systems repeated cyclically, so
        for one system of ``d`` radices: layers ``d + 1 .. L``, 1-based), relabel the
        columns (inputs) of every layer of a system by one permutation of all its
        inputs per system pass, rows unchanged, as the Graph Challenge files do (see
        the module docstring). Pass ``g = 1, 2, ...`` draws its permutation from
        ``numpy.random.default_rng([0x72656C, seed, inputs, g])``, so it depends on
        ``seed``, the layer width and ``g`` only (not on the depth). Needs one width
        for all layers.
    """
    systems = [tuple(int(r) for r in rl) for rl in radix_lists]
    if not systems or any(not rl for rl in systems):
        raise ValueError("radix_lists must hold at least one non-empty list")
    if any(r < 1 for rl in systems for r in rl):
        raise ValueError("radices must be positive integers")
    n = math.prod(systems[0])
    if any(math.prod(rl) != n for rl in systems):
        raise ValueError(f"every radix list must multiply to the same n (first gives {n})")
    flat: list[tuple[int, int]] = []  # (radix, place value)
    first_of_system: list[bool] = []  # the layer that starts a system
    for rl in systems:
        place = 1
        for i, r in enumerate(rl):
            flat.append((r, place))
            first_of_system.append(i == 0)
            place *= r
    num = layers if layers is not None else len(flat)
    if num < 1:
        raise ValueError("layers must be >= 1")
    if isinstance(widths, int):
        bw = [widths] * (num + 1)
    else:
        bw = [int(b) for b in widths]
        if len(bw) != num + 1:
            raise ValueError(f"widths needs layers + 1 = {num + 1} entries, got {len(bw)}")
    if any(b < 1 for b in bw):
        raise ValueError("widths must be >= 1")
    sizes = [b * n for b in bw]
    if relabel_inputs and len(set(bw)) > 1:
        raise ValueError("relabel_inputs needs one width for every layer")
    rng = np.random.default_rng([seed, n, num]) if permute else None
    perms = [rng.permutation(s) for s in sizes] if rng is not None else None
    out = []
    system_pass = -1  # 0: the first system, not relabelled
    sigma = None
    for k in range(num):
        r, place = flat[k % len(flat)]
        # the layer's first n rows; the column maps below act on this block only, and
        # the layer's rows are gathered from it once (in 32 bits: ids < 2**31)
        block = _mixed_radix_block(n, r, place, bw[k])
        if first_of_system[k % len(flat)]:
            system_pass += 1
            if relabel_inputs and system_pass > 0:
                grng = np.random.default_rng([0x72656C, seed, sizes[k], system_pass])
                sigma = grng.permutation(sizes[k])
        if sigma is not None:
            block = sigma[block]  # inputs relabelled, rows (outputs) kept
        if perms is not None:
            # new row perm[k+1][i] is old row i: reorder rows, relabel columns
            inv = np.empty(sizes[k + 1], dtype=np.int64)
            inv[perms[k + 1]] = np.arange(sizes[k + 1])  # argsort of a permutation
            table = perms[k][block].astype(np.int32)[inv % n]
        else:
            table = np.tile(block.astype(np.int32), (bw[k + 1], 1))
        out.append(_layer_from_table(sizes[k + 1], sizes[k], table))
    label = name or f"radixnet-{sizes[1]}x{num}" + (f"-p{seed}" if permute else "")
    desc = (
        f"RadiX-Net: radices {[list(s) for s in systems]} (n = {n}), dense widths "
        f"{bw[0] if len(set(bw)) == 1 else bw}, {num} layers"
        + (f", neurons permuted with seed {seed}" if permute else "")
        + (
            f", inputs relabelled per system pass from the second (seed {seed})"
            if relabel_inputs
            else ""
        )
    )
    return SparseDNN(
        name=label,
        layers=tuple(out),
        description=desc,
        params={
            "generator": "radixnet",
            "radix_lists": [list(s) for s in systems],
            "widths": bw if len(set(bw)) > 1 else bw[0],
            "layers": num,
            "permute": permute,
            "seed": seed,
            "relabel_inputs": relabel_inputs,
        },
    )


def graph_challenge_radixnet(
    neurons: int,
    layers: int,
    connections: int = 32,
    permute: bool = True,
    seed: int = 0,
    radix: int = 2,
) -> SparseDNN:
    """A Graph-Challenge-sized RadiX-Net: ``neurons`` per layer, ``connections`` per neuron.

    Systems of equal radices ``radix`` widened by dense blocks of ``connections / radix``
    (radix 2 by default, see the module docstring); ``neurons / (connections / radix)``
    must be a power of ``radix`` (>= radix). Radix 32 with width 1, say, fits N = 1024.
    """
    if radix < 2 or connections < radix or connections % radix:
        raise ValueError(
            f"connections ({connections}) must be a multiple of the radix ({radix} >= 2)"
        )
    width = connections // radix
    n, rem = divmod(neurons, width)
    d = round(math.log(n, radix)) if n >= radix else 0
    if rem or d < 1 or radix**d != n:
        raise ValueError(
            f"neurons ({neurons}) must be {width} x a power of {radix} for "
            f"{connections} connections per neuron with radix {radix}"
        )
    net = radixnet(
        [[radix] * d], width, layers=layers, permute=permute, seed=seed, relabel_inputs=True
    )
    name = f"radixnet-{neurons}x{layers}" + (f"-r{radix}" if radix != 2 else "")
    name += f"-p{seed}" if permute else ""
    return SparseDNN(name=name, layers=net.layers, description=net.description, params=net.params)
