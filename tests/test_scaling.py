"""Lesson 03's references and measurements agree with theory and with PyTorch; its figures and its
widget draw what they say."""

import math
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import scaling as sc  # noqa: E402
from helpers.plots import plot_scaling_sweep, plot_scaling_view, plot_score_std  # noqa: E402
from helpers.widgets import WithFallback, scaling_explorer  # noqa: E402

PNG = b"\x89PNG"


pytestmark = pytest.mark.usefixtures("no_show")


# ---------------------------------------------------------------- references


def test_score_std_is_sqrt_d_k_and_reproducible():
    for d_k in (1, 16, 64):
        assert sc.score_std(d_k, 50_000, seed=1) == pytest.approx(math.sqrt(d_k), rel=0.02)
    assert sc.score_std(8, 100, seed=3) == sc.score_std(8, 100, seed=3)
    assert sc.score_std(8, 100, seed=3) != sc.score_std(8, 100, seed=4)
    assert isinstance(sc.score_std(4), float)


def test_softmax_jacobian_matches_autograd():
    z = torch.tensor([0.3, -1.2, 2.0, 0.0, 0.7], dtype=torch.float64)
    want = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, 0), z).numpy()
    got = sc.softmax_jacobian(torch.softmax(z, 0).numpy())
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=0), 0.0, atol=1e-15)  # weights always sum to 1


def test_entropy_values_axis_and_silence():
    p = np.array([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy warning would raise here
        with np.errstate(all="warn"):
            h = sc.entropy(p)
    np.testing.assert_allclose(h, [math.log(2), 0.0, math.log(4)])
    np.testing.assert_allclose(sc.entropy(p.T, axis=0), h)
    want = torch.special.entr(torch.from_numpy(p)).sum(-1).numpy()
    np.testing.assert_allclose(h, want)


# ---------------------------------------------------------------- measurements


def test_measure_score_std_uses_the_given_function():
    calls = []

    def fake(d_k, n_pairs=10_000, seed=0):
        calls.append((d_k, n_pairs, seed))
        return 2.0 * d_k

    np.testing.assert_array_equal(sc.measure_score_std([2, 4], n_pairs=7, seed=5, score_std=fake), [4.0, 8.0])
    assert calls == [(2, 7, 5), (4, 7, 5)]
    measured = sc.measure_score_std([4, 256], n_pairs=20_000)
    np.testing.assert_allclose(measured, [2.0, 16.0], rtol=0.03)


def test_random_scores_shape_spread_and_reproducibility():
    s = sc.random_scores(64, n_queries=300, n_keys=10, seed=2)
    assert s.shape == (300, 10)
    assert s.std() == pytest.approx(8.0, rel=0.05)
    np.testing.assert_array_equal(s, sc.random_scores(64, n_queries=300, n_keys=10, seed=2))
    assert not np.array_equal(s, sc.random_scores(64, n_queries=300, n_keys=10, seed=3))


def test_softmax_stats_at_the_two_extremes():
    n = 8
    flat = sc.softmax_stats(np.zeros((5, n)), d_k=4, scale=True)  # equal scores: uniform weights
    assert flat.max_weight == pytest.approx(1 / n)
    assert flat.entropy == pytest.approx(math.log(n))
    assert flat.jacobian_norm == pytest.approx(math.sqrt(n - 1) / n)  # ‖diag(p) − p pᵀ‖ for uniform p
    assert flat.stalled == 0.0 and flat.score_std == 0.0
    peaked = np.zeros((5, n))
    peaked[:, 0] = 100.0  # one key far ahead: one-hot weights
    sharp = sc.softmax_stats(peaked, d_k=4, scale=False)
    assert sharp.max_weight == pytest.approx(1.0)
    assert sharp.entropy == pytest.approx(0.0, abs=1e-30)
    assert sharp.jacobian_norm < 1e-30 and sharp.stalled == 1.0
    halved = sc.softmax_stats(peaked, d_k=4, scale=True)  # ÷√4: scores of 50, still one-hot
    assert halved.score_std == pytest.approx(sharp.score_std / 2)


def test_softmax_stats_uses_the_given_functions():
    seen = {"entropy": 0, "jacobian": 0}

    def my_entropy(p, axis=-1):
        seen["entropy"] += 1
        return sc.entropy(p, axis)

    def my_jacobian(p):
        seen["jacobian"] += 1
        return sc.softmax_jacobian(p)

    sc.softmax_stats(sc.random_scores(8, n_queries=20), 8, True, my_entropy, my_jacobian)
    assert seen == {"entropy": 1, "jacobian": 20}


def test_sweep_shows_the_lesson_claims():
    d_ks = [2, 16, 128, 512]
    sweep = sc.scaling_sweep(d_ks, n_queries=300)
    raw, scaled = sweep.raw, sweep.scaled
    assert sweep.d_ks == tuple(d_ks) and len(raw) == len(scaled) == len(d_ks)
    # without the scale the spread grows like √d_k, with it the spread stays near 1
    for d, r, s in zip(d_ks, raw, scaled):
        assert r.score_std == pytest.approx(math.sqrt(d), rel=0.1)
        assert s.score_std == pytest.approx(1.0, rel=0.1)
    # without the scale: more peaked, less entropy, smaller Jacobian, more stalls as d_k grows
    assert [r.max_weight for r in raw] == sorted(r.max_weight for r in raw)
    assert [r.entropy for r in raw] == sorted((r.entropy for r in raw), reverse=True)
    assert raw[-1].jacobian_norm < 0.01 * scaled[-1].jacobian_norm
    assert raw[-1].stalled > 0.5 and raw[0].stalled == 0.0
    # with the scale: the same behaviour at every width
    assert np.ptp([s.max_weight for s in scaled]) < 0.05
    assert np.ptp([s.entropy for s in scaled]) < 0.1
    assert all(s.stalled == 0.0 for s in scaled)


def test_sweep_table_has_one_line_per_width():
    sweep = sc.scaling_sweep([4, 64], n_queries=50, n_keys=8)
    lines = sc.sweep_table(sweep).splitlines()
    assert lines[0].split("|")[0].strip() == "d_k"
    assert [line.split("|")[0].strip() for line in lines[2:4]] == ["4", "64"]
    assert "log 8 = 2.079" in lines[-1] and "→" in lines[2]


def test_scaling_view_and_its_summary():
    raw, scaled = sc.scaling_view(64, False, n_queries=101), sc.scaling_view(64, True, n_queries=101)
    assert raw.weights.shape == (101, 16)
    np.testing.assert_allclose(raw.weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(scaled.scores * 8, raw.scores)  # same queries and keys, ÷√64
    assert raw.shown == scaled.shown  # the same typical query in both
    peaks = raw.weights.max(axis=1)
    assert (peaks < peaks[raw.shown]).sum() == 50  # the median query by its largest weight
    text = sc.view_summary(raw)
    assert "d_k = 64" in text and "not scaled" in text and "log 16" in text
    assert "√d_k" in sc.view_summary(scaled)
    with pytest.raises(ValueError, match="d_k must be a positive integer"):
        sc.scaling_view(0, True)


def test_init_spread_is_pytorchs_default_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    spread = sc.init_spread(d_model=256, d_k=64, n_tokens=512)
    assert torch.equal(torch.rand(3), expected_next)
    # nn.Linear draws weights from U(±1/√d_in): variance 1/(3 d_in), so components have std 1/√3
    assert spread.component_std == pytest.approx(1 / math.sqrt(3), rel=0.05)
    assert spread.score_std == pytest.approx(8 / 3, rel=0.1)
    assert spread.scaled_score_std == pytest.approx(spread.score_std / 8)


# ---------------------------------------------------------------- figures and widget


def test_plot_score_std_draws_prediction_and_both_measurements():
    d_ks = [2, 8, 32]
    ax = plot_score_std(d_ks, [1.5, 2.8, 5.6])
    assert len(ax.lines) == 4  # √d_k, raw, scaled, the line at 1
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.sqrt(d_ks))
    np.testing.assert_allclose(ax.lines[2].get_ydata(), np.array([1.5, 2.8, 5.6]) / np.sqrt(d_ks))
    fig, given = plt.subplots()
    assert plot_score_std(d_ks, [1, 2, 3], ax=given) is given
    with pytest.raises(ValueError, match="one measurement per d_k"):
        plot_score_std(d_ks, [1.0, 2.0])


def test_plot_scaling_view_draws_on_given_axes():
    view = sc.scaling_view(16, True, n_queries=50, n_keys=6)
    fig, axes = plt.subplots(1, 2)
    assert list(plot_scaling_view(view, axes)) == list(axes)
    heights = [bar.get_height() for bar in axes[1].patches]
    np.testing.assert_allclose(heights, view.weights[view.shown])
    assert "÷√d_k" in axes[1].get_title()
    assert len(plot_scaling_view(view)) == 2


def test_plot_scaling_sweep_draws_three_panels():
    sweep = sc.scaling_sweep([2, 32], n_queries=20, n_keys=4)
    axes = plot_scaling_sweep(sweep)
    assert len(axes) == 3
    np.testing.assert_allclose(axes[0].lines[0].get_ydata(), [s.max_weight for s in sweep.raw])
    np.testing.assert_allclose(axes[1].lines[1].get_ydata(), [s.entropy for s in sweep.scaled])
    assert axes[2].get_yscale() == "log"


def test_scaling_explorer_updates_and_has_a_static_picture():
    shown = scaling_explorer(d_k=8, scale=False)
    assert isinstance(shown, WithFallback) and shown.static.startswith(PNG)
    controls, picture, numbers = shown.widget.children
    slider, switch = controls.children
    assert slider.value == 8 and switch.value is False and "d_k = 8" in numbers.value
    before = picture.value
    slider.value = 256
    assert "d_k = 256" in numbers.value and picture.value != before
    switch.value = True
    assert "√d_k" in numbers.value and bytes(picture.value).startswith(PNG)
    assert "image/png" in shown._repr_mimebundle_()


def test_sweep_reading_follows_the_numbers():
    """The sentences under lesson 03's table are computed from the sweep: they name where the
    unscaled Jacobian is the larger one, where it falls behind, d_k = 64 and where it stalls."""
    from helpers.scaling import scaling_sweep, sweep_reading

    sweep = scaling_sweep((2, 4, 8, 16, 32, 64, 128, 256, 512), n_queries=200)
    text = " ".join(sweep_reading(sweep).split())
    at = {r.d_k: (r, s) for r, s in zip(sweep.raw, sweep.scaled)}
    ahead = max(d for d, (r, s) in at.items() if r.jacobian_norm > s.jacobian_norm)
    assert f"larger one up to d_k = {ahead} " in text and ahead <= 32
    r64, s64 = at[64]
    assert f"{r64.jacobian_norm:.3f} against {s64.jacobian_norm:.3f}" in text
    assert f"{r64.stalled:.0%} of the queries stall" in text
    dead = min(d for d, (r, _) in at.items() if r.jacobian_norm < 1e-2)
    assert f"stalls (‖J‖ < 0.01) from d_k = {dead}:" in text and dead >= 128
    assert "no query stalls" in text
    # widths where scaling never loses: no sentence about the unscaled softmax being larger
    small = scaling_sweep((128, 256), n_queries=100)
    assert "larger one" not in sweep_reading(small)


# ---------------------------------------------------------------- the trained model (lesson 01's)


@pytest.fixture(scope="module")
def spreads():
    return sc.trained_spread(seeds=(0, 1, 2))


@pytest.fixture(scope="module")
def predicted():
    from experiments.training import load_model

    return sc.init_prediction(load_model("attention", 0))


def test_init_prediction_is_sigma_squared_of_xavier_on_unit_inputs(predicted):
    # Xavier on the (3D, D) projection: weight variance 2/(4D), component variance D·2/(4D) = ½.
    assert predicted == pytest.approx(0.5)
    # and a measurement agrees: unit-variance tokens through a freshly initialised projection
    from experiments.training import initial_model

    layer = initial_model("attention", 7).layers[0]
    x = torch.randn(4000, 32)
    with torch.no_grad():
        q, k, _ = torch.nn.functional.linear(x, layer.self_attn.in_proj_weight).chunk(3, dim=-1)
    assert float(q.var()) == pytest.approx(0.5, rel=0.2) and float(k.var()) == pytest.approx(0.5, rel=0.2)


def test_initial_model_is_where_training_started():
    """The untrained model of a seed is the one train_run starts from: same weights after zero steps."""
    from dataclasses import replace

    from experiments import training

    config = replace(training.DEFAULT, epochs=1, n_train=64)
    trained = training.train_run("attention", 3, config, fast=True)
    start = training.initial_model("attention", 3)
    # one epoch of one batch moves each weight by at most about the learning rate (Adam)
    for (name, a), b in zip(trained.state_dict().items(), start.state_dict().values()):
        assert (a - b).abs().max() <= 1.5 * config.lr, name
    assert any((a - b).abs().max() > 0
               for a, b in zip(trained.state_dict().values(), start.state_dict().values()))


def test_trained_spread_backs_lesson_03s_sentences(spreads, predicted):
    assert len(spreads) == 3 * 2 * 2 * 4  # seeds × (untrained, trained) × layers × heads
    start = [h for h in spreads if not h.trained]
    trained = [h for h in spreads if h.trained]
    # "every head's spread sits near the predicted σ², and the weights are close to uniform"
    assert all(0.7 * predicted < h.score_std < 1.3 * predicted for h in start)
    assert all(h.entropy > 0.9 and h.stalled == 0 for h in start)
    # "Some heads stay broad …; others turn into sharp lookups, with scores spread wider than
    # unscaled scores at d_k = 64. Many of their queries are stalled"
    assert any(h.entropy > 0.8 for h in trained)
    sharp = [h for h in trained if h.largest > 0.9 and h.score_std > sc.UNSCALED_64]
    assert sharp and all(h.stalled > 0.5 for h in sharp)
    # training moved every head away from the start, wider
    for t in trained:
        (u,) = [u for u in start if (u.seed, u.layer, u.head) == (t.seed, t.layer, t.head)]
        assert t.score_std > u.score_std


def test_trained_spread_measures_what_it_says():
    """The statistics of one head agree with a direct computation, review by review."""
    from experiments.training import load_model, test_data

    (h,) = [s for s in sc.trained_spread(seeds=(1,), per_set=1) if s.trained and s.layer == 1 and s.head == 2]
    model = load_model("attention", 1)
    scores, rows = [], []
    for data in test_data(add_cls=True).values():  # the first review of each of the four test sets
        n = int(data.lengths[0])
        s = model.attention_scores(data.ids[:1, :n], data.lengths[:1])[0][0, 1].double()  # (n, n)
        scores.append(s.flatten())
        rows += [(p, n) for p in s.softmax(-1).numpy()]
    assert h.score_std == pytest.approx(float(torch.cat(scores).std()), rel=1e-6)
    assert h.entropy == pytest.approx(np.mean([sc.entropy(p) / np.log(n) for p, n in rows]), rel=1e-6)
    assert h.largest == pytest.approx(np.mean([p.max() for p, _ in rows]), rel=1e-6)
    assert h.stalled == pytest.approx(np.mean([np.linalg.norm(sc.softmax_jacobian(p)) < sc.STALLED
                                               for p, _ in rows]))


def test_trained_spread_table_reading_and_figure(spreads, predicted):
    table = sc.trained_spread_table(spreads).splitlines()
    assert [line.split()[0] for line in table[1:]] == ["at", "trained,", "trained,"]
    reading = sc.trained_spread_reading(spreads, predicted)
    assert f"predicts {predicted:.2f}" in reading and "24 trained heads" in reading
    from helpers.plots import plot_trained_spread

    axes = plot_trained_spread(spreads, predicted)
    assert len(axes[0].collections) == 3 * 3  # groups × seeds
    plt.close("all")
    with pytest.raises(ValueError, match="per_set"):
        sc.trained_spread(per_set=0)
    with pytest.raises(ValueError, match="seed"):
        sc.trained_spread(seeds=())
