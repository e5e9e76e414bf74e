"""Transformer layer tables: ViT (torchvision-style), BERT (encoder + pooler) and GPT-2.

Each encoder/decoder block is recorded as: the QKV projection(s) (``linear``), one
``attention`` layer for the score and context batched matmuls with softmax
(``4 * seq * seq * dim`` FLOPs per sample), the output projection (``linear``), and the
norms, dropouts, residual adds, MLP linears and activation (GELU) as separate layers.

* ViT-B/16, ViT-L/16: 16x16 patch embedding (a stride-16 convolution with bias), a class
  token, learned position embeddings (``(side/16)^2 + 1`` rows, so the parameter count
  depends on the image side), pre-norm encoder with fused QKV ``in_proj``, final
  LayerNorm and a ``heads.head`` linear on the class token. ``input_size`` is the image
  side in pixels and must be a multiple of 16.
* BERT-base, BERT-large: word (``num_classes`` = vocabulary, 30522 by default), position
  (512) and token-type (2) embeddings + LayerNorm, post-norm encoder with separate
  query/key/value linears, and the pooler (linear + tanh on the first token). No MLM
  head. ``input_size`` is the sequence length (at most 512).
* GPT-2 large / XL: token (``num_classes`` = vocabulary, 50257) and position (1024)
  embeddings, pre-norm causal decoder with fused ``c_attn``, final LayerNorm and an LM
  head whose weight is tied to the token embedding (its parameters are counted once, on
  ``transformer.wte``; the head is a zero-parameter ``linear``). ``input_size`` is the
  sequence length (at most 1024).

Units: parameters and activations in elements, compute in forward FLOPs per sample
(one image or one sequence).
"""

from __future__ import annotations

from typing import NamedTuple

from .model import (
    FMap,
    Layer,
    ShapeError,
    Tape,
    attention,
    conv2d,
    elementwise,
    embedding,
    layernorm,
    linear,
    tied_linear,
)

__all__ = [
    "TransformerConfig",
    "VIT_CONFIGS",
    "BERT_CONFIGS",
    "GPT2_CONFIGS",
    "BERT_HEADS",
    "vit_layers",
    "bert_layers",
    "gpt2_layers",
    "vit_from",
    "bert_from",
    "gpt_from",
]


class TransformerConfig(NamedTuple):
    """Width ``dim``, ``depth`` blocks, ``heads`` attention heads, MLP hidden width ``mlp``."""

    dim: int
    depth: int
    heads: int
    mlp: int


VIT_CONFIGS = {
    "b16": TransformerConfig(768, 12, 12, 3072),
    "l16": TransformerConfig(1024, 24, 16, 4096),
}
BERT_CONFIGS = {
    "base": TransformerConfig(768, 12, 12, 3072),
    "large": TransformerConfig(1024, 24, 16, 4096),
}
GPT2_CONFIGS = {
    "large": TransformerConfig(1280, 36, 20, 5120),
    "xl": TransformerConfig(1600, 48, 25, 6400),
}

VIT_PATCH = 16
BERT_MAX_POSITIONS = 512
BERT_TOKEN_TYPES = 2
GPT2_MAX_POSITIONS = 1024


class _PreNormNames(NamedTuple):
    """Per-block layer names (relative to the block prefix) of a pre-norm block."""

    ln1: str
    qkv: str
    attn: str
    proj: str
    drop1: str
    add1: str
    ln2: str
    fc1: str
    act: str
    fc2: str
    drop2: str
    add2: str


_VIT_NAMES = _PreNormNames(
    "ln_1", "self_attention.in_proj", "self_attention.attn", "self_attention.out_proj",
    "dropout", "add_1", "ln_2", "mlp.0", "mlp.1", "mlp.3", "mlp.4", "add_2",
)  # fmt: skip
_GPT2_NAMES = _PreNormNames(
    "ln_1", "attn.c_attn", "attn.attn", "attn.c_proj", "attn.resid_dropout", "add_1",
    "ln_2", "mlp.c_fc", "mlp.act", "mlp.c_proj", "mlp.dropout", "add_2",
)  # fmt: skip


def _mlp(t: Tape, names: tuple[str, str, str, str], cfg: TransformerConfig, seq: int) -> None:
    """fc1, GELU, fc2, dropout."""
    fc1, act, fc2, drop = names
    t.add(linear(fc1, cfg.dim, cfg.mlp, seq))
    t.add(elementwise(act, seq * cfg.mlp, "gelu"))
    t.add(linear(fc2, cfg.mlp, cfg.dim, seq))
    t.add(elementwise(drop, seq * cfg.dim, "dropout"))


def _pre_norm_block(
    t: Tape, prefix: str, n: _PreNormNames, cfg: TransformerConfig, seq: int, causal: bool
) -> None:
    d, elems = cfg.dim, seq * cfg.dim
    t.add(layernorm(prefix + n.ln1, d, seq))
    t.add(linear(prefix + n.qkv, d, 3 * d, seq))
    t.add(attention(prefix + n.attn, cfg.heads, seq, d, causal))
    t.add(linear(prefix + n.proj, d, d, seq))
    t.add(elementwise(prefix + n.drop1, elems, "dropout"))
    t.add(elementwise(prefix + n.add1, elems, "add", 2))
    t.add(layernorm(prefix + n.ln2, d, seq))
    _mlp(t, tuple(prefix + s for s in (n.fc1, n.act, n.fc2, n.drop2)), cfg, seq)
    t.add(elementwise(prefix + n.add2, elems, "add", 2))


def _add_norm(t: Tape, prefix: str, d: int, seq: int) -> None:
    """Residual add then LayerNorm (BERT's post-norm)."""
    t.add(elementwise(f"{prefix}.add", seq * d, "add", 2))
    t.add(layernorm(f"{prefix}.LayerNorm", d, seq))


def _post_norm_block(t: Tape, prefix: str, cfg: TransformerConfig, seq: int) -> None:
    """A BERT encoder layer (HF naming)."""
    d = cfg.dim
    for proj in ("query", "key", "value"):
        t.add(linear(f"{prefix}attention.self.{proj}", d, d, seq))
    t.add(attention(f"{prefix}attention.self.attn", cfg.heads, seq, d))
    t.add(linear(f"{prefix}attention.output.dense", d, d, seq))
    t.add(elementwise(f"{prefix}attention.output.dropout", seq * d, "dropout"))
    _add_norm(t, f"{prefix}attention.output", d, seq)
    mlp = ("intermediate.dense", "intermediate.act", "output.dense", "output.dropout")
    _mlp(t, tuple(prefix + n for n in mlp), cfg, seq)
    _add_norm(t, f"{prefix}output", d, seq)


def vit_from(
    cfg: TransformerConfig, patch: int, input_size: int, num_classes: int
) -> tuple[Layer, ...]:
    """Layer table of a ViT of shape ``cfg`` with ``patch`` x ``patch`` patches on
    ``input_size``-pixel images (``input_size`` a multiple of ``patch``)."""
    if input_size % patch:
        raise ShapeError(f"image side must be a multiple of the patch size {patch}")
    t = Tape()
    x = t.push(conv2d("conv_proj", FMap(3, input_size, input_size), cfg.dim, patch, patch,
                      bias=True))  # fmt: skip
    seq = x.h * x.w + 1
    t.add(embedding("class_token", 1, cfg.dim, 1))
    t.add(embedding("encoder.pos_embedding", seq, cfg.dim, seq))
    t.add(elementwise("encoder.pos_add", seq * cfg.dim, "add", 2))
    t.add(elementwise("encoder.dropout", seq * cfg.dim, "dropout"))
    for i in range(cfg.depth):
        _pre_norm_block(t, f"encoder.layers.encoder_layer_{i}.", _VIT_NAMES, cfg, seq, False)
    t.add(layernorm("encoder.ln", cfg.dim, seq))
    t.add(linear("heads.head", cfg.dim, num_classes, 1))
    return tuple(t.layers)


def vit_layers(variant: str, input_size: int, num_classes: int) -> tuple[Layer, ...]:
    """Layer table of ViT-``variant`` (``b16``, ``l16``) on ``input_size``-pixel images."""
    return vit_from(VIT_CONFIGS[variant], VIT_PATCH, input_size, num_classes)


def _check_seq(seq: int, limit: int) -> None:
    if seq > limit:
        raise ShapeError(f"sequence length {seq} exceeds the {limit} position embeddings")


#: BERT output heads: ``pooler`` (the zoo's: pooler only), ``pretraining`` (pooler + MLM
#: head with its transform and a decoder tied to the word embeddings + NSP classifier),
#: ``none`` (the bare encoder).
BERT_HEADS = ("pooler", "pretraining", "none")


def bert_from(
    cfg: TransformerConfig,
    seq: int,
    vocab: int,
    positions: int = BERT_MAX_POSITIONS,
    heads_out: str = "pooler",
) -> tuple[Layer, ...]:
    """Layer table of a BERT encoder of shape ``cfg`` on ``seq``-token sequences.

    ``vocab`` is the word-piece vocabulary, ``positions`` the rows of the position table;
    ``heads_out`` one of :data:`BERT_HEADS`.
    """
    if heads_out not in BERT_HEADS:
        raise ValueError(f"heads_out must be one of {BERT_HEADS}, got {heads_out!r}")
    d = cfg.dim
    _check_seq(seq, positions)
    t = Tape()
    t.add(embedding("embeddings.word_embeddings", vocab, d, seq))
    t.add(embedding("embeddings.position_embeddings", positions, d, seq))
    t.add(embedding("embeddings.token_type_embeddings", BERT_TOKEN_TYPES, d, seq))
    t.add(elementwise("embeddings.add", seq * d, "add", 3))
    t.add(layernorm("embeddings.LayerNorm", d, seq))
    t.add(elementwise("embeddings.dropout", seq * d, "dropout"))
    for i in range(cfg.depth):
        _post_norm_block(t, f"encoder.layer.{i}.", cfg, seq)
    if heads_out in ("pooler", "pretraining"):
        t.add(linear("pooler.dense", d, d, 1))
        t.add(elementwise("pooler.activation", d, "tanh"))
    if heads_out == "pretraining":
        # MLM: transform (dense, GELU, LayerNorm) then the decoder tied to the word
        # embeddings plus its own vocabulary bias; NSP: a 2-way linear on the pooled token.
        p = "cls.predictions."
        t.add(linear(p + "transform.dense", d, d, seq))
        t.add(elementwise(p + "transform.act", seq * d, "gelu"))
        t.add(layernorm(p + "transform.LayerNorm", d, seq))
        t.add(tied_linear(p + "decoder", d, vocab, seq))
        t.add(_with_tensors(elementwise(p + "bias", seq * vocab, "add", 2), (vocab,)))
        t.add(linear("cls.seq_relationship", d, 2, 1))
    return tuple(t.layers)


def _with_tensors(layer: Layer, tensors: tuple[int, ...]) -> Layer:
    """``layer`` owning trainable tensors ``tensors`` (a bias add that has its own bias)."""
    return Layer(layer.name, layer.op, sum(tensors), tensors, layer.flops, layer.in_elems,
                 layer.out_elems, layer.shape)  # fmt: skip


def bert_layers(variant: str, input_size: int, num_classes: int) -> tuple[Layer, ...]:
    """Layer table of BERT-``variant`` (``base``, ``large``) on ``input_size``-token sequences.

    ``num_classes`` is the word-piece vocabulary size.
    """
    return bert_from(BERT_CONFIGS[variant], input_size, num_classes)


def gpt_from(
    cfg: TransformerConfig, seq: int, vocab: int, positions: int = GPT2_MAX_POSITIONS
) -> tuple[Layer, ...]:
    """Layer table of a GPT-2-style decoder of shape ``cfg`` on ``seq``-token sequences.

    ``vocab`` is the BPE vocabulary (the tied LM head's output width), ``positions`` the
    rows of the learned position table.
    """
    d = cfg.dim
    _check_seq(seq, positions)
    t = Tape()
    t.add(embedding("transformer.wte", vocab, d, seq))
    t.add(embedding("transformer.wpe", positions, d, seq))
    t.add(elementwise("transformer.add", seq * d, "add", 2))
    t.add(elementwise("transformer.drop", seq * d, "dropout"))
    for i in range(cfg.depth):
        _pre_norm_block(t, f"transformer.h.{i}.", _GPT2_NAMES, cfg, seq, True)
    t.add(layernorm("transformer.ln_f", d, seq))
    t.add(tied_linear("lm_head", d, vocab, seq))
    return tuple(t.layers)


def gpt2_layers(variant: str, input_size: int, num_classes: int) -> tuple[Layer, ...]:
    """Layer table of GPT-2 ``variant`` (``large``, ``xl``) on ``input_size``-token sequences.

    ``num_classes`` is the BPE vocabulary size (the tied LM head's output width).
    """
    return gpt_from(GPT2_CONFIGS[variant], input_size, num_classes)
