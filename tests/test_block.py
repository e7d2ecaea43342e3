"""Lesson 07's helpers: the block references against torch, the weight dicts, the gradient study,
and the inspection of the trained sentiment models (functional forward, shares, widget logic)."""

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from torch import nn

from experiments.training import load_model
from helpers import block, inspect_models, sentiment
from helpers.checks.block import random_encoder_layer, run_layer
from helpers.widgets import WithFallback


def _encoder_layer(norm_first: bool, d=16, h=4, f=40, seed=0):
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layer = nn.TransformerEncoderLayer(d, h, f, dropout=0.0, batch_first=True, norm_first=norm_first)
    return layer.double()


def test_layer_norm_equals_nn_layer_norm():
    torch.manual_seed(1)
    norm = nn.LayerNorm(10, eps=1e-3).double()
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    x = torch.randn(3, 4, 10, dtype=torch.float64) * 5 + 2
    torch.testing.assert_close(block.layer_norm(x, norm.weight, norm.bias, 1e-3), norm(x))


def test_layer_norm_and_feed_forward_reject_wrong_shapes():
    with pytest.raises(ValueError, match="gamma and beta must have shape"):
        block.layer_norm(torch.zeros(2, 5), torch.ones(4), torch.zeros(4))
    with pytest.raises(ValueError, match="w1 .D, F."):
        block.feed_forward(torch.zeros(2, 5), torch.zeros(4, 8), torch.zeros(8), torch.zeros(8, 5),
                           torch.zeros(5))


def test_feed_forward_equals_two_linear_layers():
    torch.manual_seed(2)
    l1, l2 = nn.Linear(6, 24).double(), nn.Linear(24, 6).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    got = block.feed_forward(x, l1.weight.T, l1.bias, l2.weight.T, l2.bias)
    torch.testing.assert_close(got, l2(torch.relu(l1(x))))


def test_encoder_params_keys_and_shapes():
    params = block.encoder_params(_encoder_layer(True))
    assert set(params) == set(block.ENCODER_KEYS)
    assert params["w_q"].shape == (16, 16) and params["w1"].shape == (16, 40)
    assert params["w2"].shape == (40, 16)
    assert params["eps"] == 1e-5
    with pytest.raises(ValueError, match="expected an nn.TransformerEncoderLayer"):
        block.encoder_params(nn.Linear(3, 3))


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_encoder_block_equals_nn_layer(norm_first, masked):
    layer = random_encoder_layer(16, 4, 40, norm_first, seed=3)
    x = torch.randn(3, 6, 16, dtype=torch.float64)
    keep = (torch.arange(6)[None] < torch.tensor([6, 2, 4])[:, None])[:, None, None, :] if masked else None
    got = block.encoder_block(x, block.encoder_params(layer), 4, norm_first, keep)
    want = run_layer(layer, x, keep)
    real = keep[:, 0, 0, :] if masked else torch.ones(3, 6, dtype=torch.bool)
    torch.testing.assert_close(got[real], want[real])


def test_encoder_block_with_a_causal_mask_equals_nn_layer():
    layer = _encoder_layer(False)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(block.encoder_block(x, block.encoder_params(layer), 4, False, causal),
                               run_layer(layer, x, causal))


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_equals_nn_decoder_layer(norm_first):
    torch.manual_seed(4)
    layer = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
    layer = layer.double()
    y, memory = torch.randn(2, 5, 16, dtype=torch.float64), torch.randn(2, 7, 16, dtype=torch.float64)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    memory_keep = (torch.arange(7)[None] < torch.tensor([7, 3])[:, None])[:, None, None, :]
    with torch.no_grad():
        got = block.decoder_block(y, memory, block.decoder_params(layer), 4, norm_first, causal, memory_keep)
        want = layer(y, memory, tgt_mask=~causal, memory_key_padding_mask=~memory_keep[:, 0, 0])
    torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match="TransformerDecoderLayer"):
        block.decoder_params(_encoder_layer(True))


def test_multi_head_rejects_indivisible_width():
    params = block.encoder_params(_encoder_layer(True))
    with pytest.raises(ValueError, match="divisible"):
        x = torch.zeros(1, 2, 16, dtype=torch.float64)
        block.multi_head(x, x, params, 3)


def test_transformer_parameters_count_nn_transformer():
    model = nn.Transformer(64, 4, 2, 3, 96, dropout=0.0, batch_first=True)
    count = block.transformer_parameters(64, 96, 2, 3, vocab=100)
    assert count["encoder"] + count["decoder"] == sum(p.numel() for p in model.parameters())
    assert count["embedding"] == 6400 and count["total"] == sum(p.numel() for p in model.parameters()) + 6400
    base = block.transformer_parameters()
    assert 60e6 < base["total"] < 66e6  # Vaswani et al. 2017 report 65 M


def test_gradient_study_and_plot():
    study = block.gradient_study(n_layers=4, depths=(2, 4))
    assert set(study.per_layer) == {"post-norm", "pre-norm"}
    assert study.per_layer["pre-norm"].shape == (4,) and study.top_layer["post-norm"].shape == (2,)
    assert np.all(study.per_layer["post-norm"] > 0)
    assert study.top_layer["pre-norm"][-1] == study.per_layer["pre-norm"][-1]  # same stack, same seed
    axes = block.plot_gradient_study(study)
    assert len(axes) == 2 and len(axes[0].lines) == 2
    plt.close("all")
    with pytest.raises(ValueError, match="n_layers"):
        block.layer_gradient_norms(True, 0)


# ---------------------------------------------------------------- the trained models


@pytest.fixture(scope="module")
def models():
    return inspect_models.load_models(seed=0)


def test_attention_forward_reproduces_the_model(models):
    reviews = sentiment.test_sets(n=64)["fillers_4"]
    ids, lengths = sentiment.encode(reviews.sentences, add_cls=True)
    logits, maps = inspect_models.attention_forward(models["attention"], ids, lengths)
    with torch.no_grad():
        torch.testing.assert_close(logits, models["attention"](ids, lengths), rtol=1e-5, atol=1e-5)
    for ours, theirs in zip(maps, models["attention"].attention_maps(ids, lengths)):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="AttentionClassifier"):
        inspect_models.attention_forward(models["LSTM"], ids, lengths)


@pytest.mark.parametrize("text, target, negated, distractor", [
    ("the lecture was good", 3, False, None),
    ("the lecture was not very good although the coffee was bad", 3, True, 10),
    ("honestly the exam was never boring but the food was not great", 4, True, 11),
    ("the slides were really clear", 4, False, None),
])
def test_roles(text, target, negated, distractor):
    found = inspect_models.roles(text.split())
    assert (found.target, found.negated, found.distractor) == (target, negated, distractor)


def test_cls_shares(models):
    reviews = sentiment.test_sets(n=50)["fillers_4"]
    shares = inspect_models.cls_shares(models["attention"], reviews)
    assert shares.target.shape == shares.distractor.shape == shares.itself.shape == (2, 4)
    assert shares.n_reviews == 50 and shares.n_distractors == 50
    assert np.all((shares.target >= 0) & (shares.target <= 1))
    assert 0 <= shares.best_head() < 4
    no_distractor = inspect_models.cls_shares(models["attention"], sentiment.test_sets(n=5)["no_fillers"])
    assert np.all(np.isnan(no_distractor.distractor))


def test_prefix_probabilities_equal_reading_every_state(models):
    words = inspect_models.EXAMPLES[1].split()
    ids = sentiment.token_ids(words)
    lstm = models["LSTM"]
    with torch.no_grad():
        states = lstm.states(lstm.embed(torch.tensor([ids])))  # (1, T, d_hidden)
        want = torch.sigmoid(lstm.head(states)[0, :, 0]).numpy()
    np.testing.assert_allclose(inspect_models.prefix_probabilities(lstm, ids), want, rtol=1e-5, atol=1e-6)
    last = inspect_models.prefix_probabilities(models["attention"], ids)[-1]
    batch, lengths = sentiment.encode([words], add_cls=True)
    with torch.no_grad():
        assert last == pytest.approx(torch.sigmoid(models["attention"](batch, lengths)).item(), abs=1e-6)


def test_examples_use_the_vocabulary():
    for text in inspect_models.EXAMPLES:
        sentiment.token_ids(text.split())
        sentiment.label_of(text.split())


def test_parse_words_names_unknown_words_and_close_ones():
    with pytest.raises(ValueError, match="did you mean 'lecture'") as err:
        inspect_models.parse_words("the lectur was gud")
    assert "'gud': close words — good" in str(err.value)
    with pytest.raises(ValueError, match="type a review"):
        inspect_models.parse_words("   ")
    assert inspect_models.parse_words("The lecture, was good.") == ["the", "lecture", "was", "good"]


def test_sentence_view_html_and_plot(models):
    view = inspect_models.sentence_view("the lecture was not good", models)
    assert view.attention.shape == (2, 4, 5) and view.label == 0
    np.testing.assert_allclose(view.attention.sum(-1) + view.on_cls, 1.0, atol=1e-5)
    assert set(view.after_word) == {"LSTM", "plain RNN"} and view.after_word["LSTM"].shape == (5,)
    page = inspect_models.sentence_html(view)
    assert all(f">{w}<br>" in page for w in view.words) and "negative" in page
    assert "head 2" in inspect_models.sentence_html(view, head=2)
    no_label = inspect_models.sentence_view(["the", "lecture", "was", "quite"], models)
    assert no_label.label is None and "no sentiment adjective" in inspect_models.sentence_html(no_label)
    axes = inspect_models.plot_sentence_view(view, head=1)
    assert len(axes) == 2 and "head 1" in axes[0].get_title()
    plt.close("all")


def test_attention_explorer_has_a_static_fallback(models):
    shown = inspect_models.attention_explorer(models)
    assert isinstance(shown, WithFallback)
    assert shown.static[:8] == b"\x89PNG\r\n\x1a\n"
    plt.close("all")


def test_load_model_is_the_one_inspected(models):
    fresh = load_model("attention", 0)
    for (name, a), b in zip(fresh.state_dict().items(), models["attention"].state_dict().values()):
        assert torch.equal(a, b), name
