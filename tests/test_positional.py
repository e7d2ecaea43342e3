"""Lesson 05's references agree with the formulas and with independent implementations; its
measurements, figures and widget do what they say."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import positional as pos  # noqa: E402
from helpers.widgets import WithFallback  # noqa: E402

PNG = b"\x89PNG"


pytestmark = pytest.mark.usefixtures("no_show")


# ---------------------------------------------------------------- sinusoidal_encoding


def test_sinusoidal_encoding_follows_the_formula_entry_by_entry():
    n, d, base = 7, 10, 321.0
    pe = pos.sinusoidal_encoding(n, d, base)
    assert pe.shape == (n, d) and pe.dtype == torch.float32
    for p in range(n):
        for i in range(d // 2):
            angle = p / base ** (2 * i / d)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert torch.equal(pos.sinusoidal_encoding(3, 6)[0], torch.tensor([0.0, 1, 0, 1, 0, 1]))


def test_sinusoidal_encoding_default_base_and_bad_input():
    torch.testing.assert_close(pos.sinusoidal_encoding(20, 8), pos.sinusoidal_encoding(20, 8, 10000.0))
    assert pos.sinusoidal_encoding(0, 4).shape == (0, 4)
    for n, d, base in [(5, 7, 10000.0), (5, 0, 10000.0), (-1, 4, 10000.0), (5, 4, 0.0)]:
        with pytest.raises(ValueError):
            pos.sinusoidal_encoding(n, d, base)


def test_pair_frequencies_run_from_one_to_almost_one_over_base():
    f = pos.pair_frequencies(8, 10000.0)
    torch.testing.assert_close(f, torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64))


# ---------------------------------------------------------------- rope


def rope_complex(x, positions, base):
    """Independent: each pair (x_2i, x_2i+1) as the complex number x_2i + i·x_2i+1, times e^{iθ}."""
    d = x.shape[-1]
    theta = torch.as_tensor(positions, dtype=torch.float64)[:, None] * base ** (
        -torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * torch.exp(1j * theta)).flatten(-2)


def test_rope_is_complex_multiplication_by_e_i_theta():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    torch.testing.assert_close(pos.rope(x), rope_complex(x, range(5), 10000.0))
    p = torch.tensor([4, 0, 17, 9, 2])
    torch.testing.assert_close(pos.rope(x, p, base=50.0), rope_complex(x, p, 50.0))
    torch.testing.assert_close(pos.rope(x, p.double(), base=50.0), rope_complex(x, p, 50.0))


def test_rope_direction_on_a_unit_vector():
    """Pair 0 turns by θ = p counter-clockwise: (1, 0) → (cos p, sin p)."""
    x = torch.zeros(3, 2)
    x[:, 0] = 1.0
    got = pos.rope(x)
    want = torch.tensor([[math.cos(p), math.sin(p)] for p in range(3)])
    torch.testing.assert_close(got, want)


def test_rope_keeps_norms_dtype_and_relative_scores():
    torch.manual_seed(1)
    x = torch.randn(4, 7, 16)
    out = pos.rope(x, base=500.0)
    assert out.dtype == x.dtype and out.shape == x.shape
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    for offset in (-5, 0, 3):
        scores = [float(pos.rope(q[None], torch.tensor([p]))[0]
                        @ pos.rope(k[None], torch.tensor([p + offset]))[0]) for p in range(0, 40, 7)]
        assert np.ptp(scores) < 1e-10
    before = float(pos.rope(q[None], torch.tensor([0]))[0] @ pos.rope(k[None], torch.tensor([3]))[0])
    after = float(pos.rope(q[None], torch.tensor([3]))[0] @ pos.rope(k[None], torch.tensor([0]))[0])
    assert abs(before - after) > 1e-3  # unlike PE·PE, RoPE's scores tell before from after


def test_rope_bad_input():
    with pytest.raises(ValueError, match="even"):
        pos.rope(torch.randn(3, 5))
    with pytest.raises(ValueError, match="one entry per token"):
        pos.rope(torch.randn(3, 4), torch.arange(4))
    with pytest.raises(ValueError, match="floating-point"):
        pos.rope(torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="shape"):
        pos.rope(torch.randn(4))


# ---------------------------------------------------------------- measurements


def test_shift_matrix_moves_the_encoding_and_is_a_rotation():
    pe = pos.sinusoidal_encoding(40, 12, 100.0).double()
    for offset in (1, 5, 13):
        m = pos.shift_matrix(offset, 12, 100.0)
        torch.testing.assert_close(pe[:-offset] @ m, pe[offset:], atol=1e-6, rtol=0)
        torch.testing.assert_close(m @ m.T, torch.eye(12, dtype=torch.float64))


def test_dot_by_offset_and_diagonal_spread():
    pe = pos.sinusoidal_encoding(30, 16).double()
    gram = (pe @ pe.T).numpy()
    np.testing.assert_allclose(gram[0], pos.dot_by_offset(np.arange(30), 16), atol=1e-6)
    np.testing.assert_allclose(gram[:, 0], pos.dot_by_offset(-np.arange(30), 16), atol=1e-6)
    assert pos.diagonal_spread(gram) < 1e-5
    assert pos.diagonal_spread(torch.from_numpy(gram)) < 1e-5
    toeplitz = np.array([[abs(i - j) ** 2 for j in range(6)] for i in range(6)], dtype=float)
    assert pos.diagonal_spread(toeplitz) == 0.0
    assert pos.diagonal_spread(np.subtract.outer(np.arange(4.0), np.arange(4.0))) == 0.0  # i − j
    assert pos.diagonal_spread(np.arange(16.0).reshape(4, 4)) == 15.0  # 4i + j: main diagonal 0 … 15
    assert pos.diagonal_spread(np.diag([1.0, 2.0, 3.0])) == 2.0
    with pytest.raises(ValueError, match="square"):
        pos.diagonal_spread(np.zeros((2, 3)))


def test_pair_view_points_turn_and_dots():
    view = pos.pair_view(pair=3, offset=4, d_model=32, n_positions=50, start=7)
    np.testing.assert_allclose((view.points ** 2).sum(axis=1), 1.0, atol=1e-6)
    assert view.frequency == pytest.approx(10000 ** (-6 / 32))
    assert view.wavelength == pytest.approx(2 * math.pi / view.frequency)
    assert view.turn == pytest.approx((4 * view.frequency) % (2 * math.pi))
    assert view.dots.shape == (46,) and np.ptp(view.dots) < 1e-5
    assert view.dots[0] == pytest.approx(pos.dot_by_offset([4], 32)[0], abs=1e-5)
    text = pos.view_summary(view)
    assert "pair 3" in text and "offset of 4" in text and f"{view.dots.mean():.4f}" in text
    slow = pos.view_summary(pos.pair_view(pair=15, offset=1, d_model=32))
    assert "e+" not in slow and "every 35,333 positions" in slow  # 2π · 10000^(30/32), not 3.53e+04
    bad = ({"pair": 16, "offset": 1}, {"pair": 0, "offset": 50}, {"pair": 0, "offset": 5, "start": 45})
    for kwargs in bad:
        with pytest.raises(ValueError):
            pos.pair_view(d_model=32, n_positions=50, **kwargs)


# ---------------------------------------------------------------- figures and widget


def test_plots_return_their_axes():
    pe = pos.sinusoidal_encoding(40, 16)
    assert pos.plot_encoding(pe).images
    assert pos.plot_counter(16, 5).images
    ax = pos.plot_dimension_curves(pe, [0, 3, 10])
    assert len(ax.lines) == 3 and "dim 3 (cos)" in ax.get_legend().get_texts()[1].get_text()
    assert pos.plot_position_matrix(pe @ pe.T, title="t").get_title() == "t"
    ax = pos.plot_rows_by_offset((pe @ pe.T).numpy(), [5, 20])
    assert len(ax.lines) == 2 and ax.lines[1].get_xdata()[0] == -20
    axes = pos.plot_pair_view(pos.pair_view(1, 2))
    assert len(axes) == 2 and "offset 2" in axes[1].get_title()
    fig, given = plt.subplots()
    assert pos.plot_encoding(pe, ax=given) is given


def test_plots_reject_bad_input():
    with pytest.raises(ValueError):
        pos.plot_encoding(np.zeros(5))
    with pytest.raises(ValueError):
        pos.plot_counter(0, 3)
    with pytest.raises(ValueError, match="dims"):
        pos.plot_dimension_curves(np.zeros((4, 6)), [6])
    with pytest.raises(ValueError, match="square"):
        pos.plot_rows_by_offset(np.zeros((4, 4)), [4])


def test_pair_explorer_has_a_static_fallback():
    shown = pos.pair_explorer(pair=1, offset=2, d_model=16, n_positions=32)
    assert isinstance(shown, WithFallback) and shown.static.startswith(PNG)
    html = shown.widget.children[-1].value
    assert "pair 1" in html
    shown.widget.children[0].children[1].value = 5  # move the offset slider: the caption follows
    assert "offset of 5" in shown.widget.children[-1].value


# ---------------------------------------------------------------- lesson 01's learned table


@pytest.fixture(scope="module")
def learned():
    return pos.learned_positions(seeds=(0, 1, 2))


def test_learned_positions_backs_lesson_05s_sentences(learned):
    acc = learned.accuracy
    for s in learned.seeds:
        # "a row is no more like its neighbour than like a row far away"
        assert abs(pos.mean_by_offset(learned.trained[s], 3).mean()) < 0.1
        assert np.abs(pos.mean_by_offset(learned.trained[s], learned.n_positions // 2)).max() < 0.15
        # "training left it close to the random vectors it started from" (a wrong start: about √2)
        assert learned.moved[s] < 0.5
        # "the model cannot do without it … that start still does much of the job … shuffled rows
        # … do as badly as no positions at all"
        assert acc[s, "trained table"] > 0.99
        assert acc[s, "no positions"] < 0.65 and acc[s, "rows shuffled"] < 0.65
        assert abs(acc[s, "rows shuffled"] - acc[s, "no positions"]) < 0.1
        assert acc[s, "table it started from"] > max(acc[s, "rows shuffled"], acc[s, "no positions"]) + 0.2
    # the sinusoidal table has the geometry the learned ones lack
    assert pos.mean_by_offset(learned.sinusoidal, 3).mean() > 0.5


def test_learned_positions_measures_what_it_says(learned):
    from experiments.training import initial_model, load_model

    n = learned.n_positions
    table = load_model("attention", 2).positions.weight.detach()[:n]
    assert np.allclose(learned.trained[2], torch.nn.functional.cosine_similarity(
        table[:, None], table[None], dim=-1).numpy(), atol=1e-5)
    start = initial_model("attention", 2).positions.weight.detach()[:n]
    assert learned.moved[2] == pytest.approx(float((table - start).norm() / start.norm()), rel=1e-6)
    assert np.allclose(learned.sinusoidal, pos.cosine_similarity(pos.sinusoidal_encoding(n, 32)))
    m = np.arange(16.0).reshape(4, 4)
    assert pos.mean_by_offset(m, 2).tolist() == [(1 + 6 + 11) / 3, (2 + 7) / 2]
    with pytest.raises(ValueError, match="max_offset"):
        pos.mean_by_offset(m, 4)


def test_learned_positions_table_reading_and_figure(learned):
    assert pos.learned_positions_table(learned).count("%") == len(pos.ABLATIONS)
    assert "shuffled" in pos.learned_positions_reading(learned)
    axes = pos.plot_learned_positions(learned)
    assert len(axes[2].lines) == 1 + 2 * 3 + 1  # sinusoidal, trained and untrained per seed, zero line
    plt.close("all")
    with pytest.raises(ValueError, match="seed"):
        pos.learned_positions(seeds=())
