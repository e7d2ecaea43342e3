"""Lesson 01's three classifiers: parameter counts, what they read, padding, and the attention
layer against PyTorch's own."""

import dataclasses

import pytest
import torch
from torch import nn

from helpers import models as m
from helpers import sentiment as st

REVIEWS = [
    "the lab was good".split(),
    "honestly the lecture was not very helpful in the winter semester although the coffee was great".split(),
    "the exercises were never boring".split(),
]


def _model(name: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return m.build(name).eval()


def test_parameter_counts_follow_from_the_widths():
    vocab, d_e, d_h = 91, 16, 32
    embedding, head = vocab * d_e, d_h + 1
    rnn = embedding + (d_e * d_h + d_h * d_h + d_h + d_h) + head  # PyTorch keeps two biases
    lstm = embedding + 4 * (d_e * d_h + d_h * d_h + 2 * d_h) + head  # four gates
    assert (rnn, lstm) == (3089, 7889)
    assert m.n_parameters(_model("rnn")) == 3089
    assert m.n_parameters(_model("lstm")) == 7889


def test_attention_parameter_count_is_documented_and_matches_pytorchs_layer():
    c = m.AttentionConfig()
    layer = nn.TransformerEncoderLayer(c.d_model, c.n_heads, c.d_ff, dropout=0.0, batch_first=True,
                                       norm_first=True)
    expected = (c.vocab_size * c.d_model + c.max_len * c.d_model + c.n_layers * m.n_parameters(layer)
                + 2 * c.d_model + c.d_model + 1)  # final LayerNorm, head
    assert m.n_parameters(_model("attention")) == expected == 22689
    assert "22,689" in m.__doc__


def test_configs_are_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.RecurrentConfig().d_hidden = 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.AttentionConfig().n_heads = 2
    with pytest.raises(ValueError, match="divisible by n_heads"):
        m.AttentionConfig(n_heads=5)
    assert m.AttentionConfig().max_len > max(st.length_range(8, True))  # the longest review fits


@pytest.mark.parametrize("name", ["rnn", "lstm", "attention"])
def test_one_logit_per_review_and_padding_changes_nothing(name):
    model = _model(name)
    ids, lengths = st.encode(REVIEWS, add_cls=model.needs_cls)
    logits = model(ids, lengths)
    assert logits.shape == (3,)
    more_padding, _ = st.encode(REVIEWS, max_len=ids.shape[1] + 7, add_cls=model.needs_cls)
    torch.testing.assert_close(model(more_padding, lengths), logits)
    alone = torch.cat([model(*st.encode([r], add_cls=model.needs_cls)) for r in REVIEWS])
    torch.testing.assert_close(alone, logits, rtol=1e-5, atol=1e-6)  # the batch does not matter
    torch.testing.assert_close(model.from_embeddings(model.embed(ids), lengths), logits)


@pytest.mark.parametrize("name, cell", [("rnn", nn.RNN), ("lstm", nn.LSTM)])
def test_recurrent_models_read_the_state_after_the_last_real_word(name, cell):
    model = _model(name)
    assert isinstance(model.recurrent, cell)
    ids, lengths = st.encode(REVIEWS)
    for i, words in enumerate(REVIEWS):
        alone = torch.tensor([st.token_ids(words)])
        h = model.recurrent(model.embedding(alone))[0][0, -1]  # no padding at all
        torch.testing.assert_close(model(ids, lengths)[i], model.head(h)[0], rtol=1e-5, atol=1e-6)


def test_attention_model_reads_cls_and_its_layers_equal_pytorchs():
    model = _model("attention")
    assert model.needs_cls and not m.RNNClassifier.needs_cls
    c = model.config
    x, lengths = torch.randn(3, 9, c.d_model), torch.tensor([9, 5, 1])
    keep = torch.arange(9) < lengths[:, None]
    for layer in model.layers:
        theirs = nn.TransformerEncoderLayer(c.d_model, c.n_heads, c.d_ff, dropout=0.0, batch_first=True,
                                            norm_first=True)
        theirs.load_state_dict(layer.state_dict())  # same names and shapes
        torch.testing.assert_close(layer(x, keep)[keep], theirs(x, src_key_padding_mask=~keep)[keep],
                                   rtol=1e-5, atol=1e-5)


def test_attention_maps_are_distributions_over_real_tokens():
    model = _model("attention")
    ids, lengths = st.encode(REVIEWS, add_cls=True)
    maps = model.attention_maps(ids, lengths)
    assert len(maps) == 2
    T = ids.shape[1]
    for w in maps:
        assert w.shape == (3, 4, T, T)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, T))
        pad = torch.arange(T) >= lengths[:, None]  # (B, T)
        assert w.masked_select(pad[:, None, None, :].expand_as(w)).abs().max() == 0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: m.build("gru"), "unknown model 'gru'"),
        (lambda: _model("rnn")(torch.zeros(2, 4, dtype=torch.long), torch.tensor([4])), r"lengths \(B,\)"),
        (lambda: _model("lstm")(torch.ones(1, 4, dtype=torch.long), torch.tensor([5])), "1..T = 1..4"),
        (lambda: _model("attention")(torch.ones(1, 90, dtype=torch.long), torch.tensor([90])),
         "at most max_len = 81"),
    ],
)
def test_bad_inputs_are_explained(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_cls_only_gives_the_same_logits_and_gradients():
    """The fast training path computes the last layer at [CLS] alone: nothing it reads changes."""
    model = _model("attention").train()
    ids, lengths = st.encode(REVIEWS, add_cls=True)
    labels = torch.tensor([1.0, 0.0, 1.0])
    grads = []
    for cls_only in (False, True):
        model.zero_grad()
        logits = model(ids, lengths, cls_only=cls_only)
        nn.functional.binary_cross_entropy_with_logits(logits, labels).backward()
        grads.append((logits.detach(), [p.grad.clone() for p in model.parameters()]))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-5, atol=1e-6)
    for full, short in zip(grads[0][1], grads[1][1]):
        torch.testing.assert_close(full, short, rtol=1e-4, atol=1e-6)
    layer, x = model.layers[-1], torch.randn(3, 8, model.config.d_model)
    keep = torch.arange(8) < torch.tensor([8, 3, 1])[:, None]
    torch.testing.assert_close(layer(x, keep, 1), layer(x, keep)[:, :1], rtol=1e-5, atol=1e-6)
