"""LSTM language model layer table (the PyTorch word-language-model "medium" configuration).

Architecture (untied weights)::

    encoder  Embedding(num_classes = 33278 Wikitext-2 vocabulary, 650)
    drop     Dropout
    rnn      2-layer LSTM, input 650, hidden 650, dropout between the layers
    drop     Dropout
    decoder  Linear(650, num_classes) with bias, applied to every time step

``input_size`` is the unrolled sequence length (BPTT steps, 35 by default). Default total
parameters: 21,630,700 (embedding) + 2 x 3,385,200 (LSTM) + 21,663,978 (decoder)
= 50,065,078, computed from the architecture, not typed in.

Units: parameters and activations in elements, compute in forward FLOPs per sequence.
"""

from __future__ import annotations

from .model import Layer, Tape, elementwise, embedding, linear, lstm

__all__ = ["LSTM_EMBED", "LSTM_HIDDEN", "LSTM_LAYERS", "lstm_lm_layers"]

LSTM_EMBED = 650
LSTM_HIDDEN = 650
LSTM_LAYERS = 2


def lstm_lm_layers(
    input_size: int,
    num_classes: int,
    embed: int = LSTM_EMBED,
    hidden: int = LSTM_HIDDEN,
    layers: int = LSTM_LAYERS,
) -> tuple[Layer, ...]:
    """Layer table of the LSTM language model on ``input_size``-token sequences.

    ``num_classes`` is the vocabulary size (embedding rows and decoder outputs).
    """
    seq = input_size
    t = Tape()
    t.add(embedding("encoder", num_classes, embed, seq))
    t.add(elementwise("drop.in", seq * embed, "dropout"))
    width = embed
    for i in range(layers):
        t.add(lstm(f"rnn.l{i}", width, hidden, seq))
        width = hidden
        if i < layers - 1:
            t.add(elementwise(f"rnn.dropout{i}", seq * hidden, "dropout"))
    t.add(elementwise("drop.out", seq * hidden, "dropout"))
    t.add(linear("decoder", hidden, num_classes, seq))
    return tuple(t.layers)
