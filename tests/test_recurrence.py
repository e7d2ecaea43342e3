"""Lesson 01's references agree with PyTorch, its gradient measurement says what the lesson says,
and its figures draw what they claim."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import recurrence as rc  # noqa: E402
from helpers import sentiment as st  # noqa: E402
from helpers.recurrence_plots import plot_gradient_by_distance, plot_lengths, plot_paths  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_show")


def _weights(seed, T=7, d_in=3, d_h=5):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(T, d_in)), rng.normal(size=(d_in, d_h)), rng.normal(size=(d_h, d_h)) * 0.5,
            rng.normal(size=d_h), rng.uniform(-1, 1, size=d_h))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rnn_forward_equals_torch_rnn_with_copied_weights(seed):
    x, w_x, w_h, b, h0 = _weights(seed)
    np.testing.assert_allclose(rc.rnn_forward(x, w_x, w_h, b), rc.torch_rnn_forward(x, w_x, w_h, b),
                               atol=1e-12)
    np.testing.assert_allclose(rc.rnn_forward(x, w_x, w_h, b, h0), rc.torch_rnn_forward(x, w_x, w_h, b, h0),
                               atol=1e-12)
    assert not np.allclose(rc.rnn_forward(x, w_x, w_h, b, h0), rc.rnn_forward(x, w_x, w_h, b))


def test_torch_rnn_forward_uses_pytorchs_own_layout():
    """An nn.RNN with two random biases equals the reference given w_x = weight_ihᵀ, b = b_ih + b_hh."""
    torch.manual_seed(0)
    rnn = torch.nn.RNN(3, 4, dtype=torch.float64)
    x = torch.randn(6, 3, dtype=torch.float64)
    with torch.no_grad():
        want = rnn(x)[0].numpy()
    w_x, w_h = rnn.weight_ih_l0.detach().numpy().T, rnn.weight_hh_l0.detach().numpy().T
    b = (rnn.bias_ih_l0 + rnn.bias_hh_l0).detach().numpy()
    np.testing.assert_allclose(rc.rnn_forward(x.numpy(), w_x, w_h, b), want, atol=1e-12)


@pytest.mark.parametrize(
    "args, match",
    [
        (lambda x, w_x, w_h, b: (x[0], w_x, w_h, b), "x \\(T, d_in\\)"),
        (lambda x, w_x, w_h, b: (x, w_x.T, w_h, b), "w_x \\(d_in, d_h\\)"),
        (lambda x, w_x, w_h, b: (x, w_x, w_h, b[:2]), "b of shape \\(5,\\)"),
        (lambda x, w_x, w_h, b: (x, w_x, w_h, b, b[:3]), "h0 of shape \\(5,\\)"),
    ],
)
def test_rnn_forward_explains_bad_shapes(args, match):
    x, w_x, w_h, b, _ = _weights(0)
    with pytest.raises(ValueError, match=match):
        rc.rnn_forward(*args(x, w_x, w_h, b))


def test_gradient_by_position_matches_autograd_and_leaves_x_alone():
    torch.manual_seed(0)
    x = torch.randn(6, 4, dtype=torch.float64)
    w = torch.randn(4, dtype=torch.float64)
    scale = torch.arange(1.0, 7.0, dtype=torch.float64)[:, None]

    def f(z):
        return (torch.tanh(z * scale) @ w).sum()

    got = rc.gradient_by_position(f, x)
    want = ((1 - torch.tanh(x * scale) ** 2) * scale * w).norm(dim=1)  # the gradient by hand
    torch.testing.assert_close(got, want)
    assert got.shape == (6,) and not got.requires_grad
    assert not x.requires_grad and x.grad is None


def test_gradient_by_position_explains_bad_arguments():
    with pytest.raises(ValueError, match="must be a \\(T, d\\) torch tensor"):
        rc.gradient_by_position(lambda z: z.sum(), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="scalar tensor"):
        rc.gradient_by_position(lambda z: z.sum(dim=1), torch.zeros(3, 2))


@pytest.fixture(scope="module")
def profile():
    return rc.gradient_profile(seeds=(0, 1), n_reviews=4)


def test_gradient_profile_shows_what_the_lesson_says(profile):
    assert set(profile.ratios) == {"rnn", "lstm", "attention"}
    assert profile.ratios["rnn"].shape == (8, 42)
    for ratios in profile.ratios.values():
        np.testing.assert_allclose(ratios[:, 0], 1.0)  # relative to the last word
    assert 1e-14 < profile.at("rnn", 40) < 1e-10  # the seed's "about 10^10 to 10^12 times weaker"
    assert profile.at("rnn", 40) < profile.at("lstm", 40) < 1e-6  # the LSTM decays too, more slowly
    assert 0.3 < profile.at("attention", 40) < 3  # flat: one step from every word
    assert np.all(np.diff(np.log(profile.median("rnn"))) < 0.5)  # falls (nearly) every step


def test_gradient_profile_uses_the_given_gradient_function():
    calls = []

    def counting(f, x):
        calls.append(x.shape)
        return rc.gradient_by_position(f, x)

    rc.gradient_profile(names=("rnn",), seeds=(0,), n_reviews=2, grad_fn=counting)
    assert len(calls) == 2 and all(42 <= shape[0] <= 60 for shape in calls)


def test_gradient_profile_bad_arguments(profile):
    with pytest.raises(ValueError, match="distance must lie in 0..41"):
        profile.at("rnn", 42)
    with pytest.raises(ValueError, match="n_distances must be at most"):
        rc.gradient_profile(names=("rnn",), seeds=(0,), n_reviews=2, n_distances=100)


def test_long_reviews_are_long_and_reproducible():
    reviews = rc.long_reviews(20)
    assert reviews == rc.long_reviews(20) and reviews != rc.long_reviews(20, seed=1)
    assert all(42 <= len(words) <= 60 for words in reviews)


def test_plots_draw_and_return_their_axes(profile):
    ax = plot_gradient_by_distance(profile)
    assert ax.get_yscale() == "log" and len(ax.get_lines()) == 3 + 1  # three models and the mark
    labels = [t.get_text() for t in ax.texts]
    assert f"{profile.at('rnn', 40):.0e}" in labels
    axes = plot_paths("the lab was good".split())
    assert "5 steps" in axes[0].get_title() and "all 4 words" in axes[1].get_title()
    ax = plot_lengths(st.training_set(300))
    assert sum(p.get_height() for p in ax.patches if hasattr(p, "get_height")) >= 300
    with pytest.raises(ValueError, match="at least two words"):
        plot_paths(["alone"])
