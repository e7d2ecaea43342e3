"""Lesson 08 helpers: the counts add up, blocked attention equals torch's, the meter measures, the
figures draw, the benchmark runs."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from experiments import cost_benchmark as bench  # noqa: E402
from helpers import cost  # noqa: E402

# ---------------------------------------------------------------- counting


def test_vit_base_shares_are_the_papers_four_and_forty_seven_percent():
    assert cost.score_share(197, 768, 3072) == pytest.approx(0.041, abs=0.001)
    assert cost.score_share(4097, 768, 3072) == pytest.approx(0.471, abs=0.001)


def test_layer_macs_match_the_shapes_of_the_matrix_products():
    n, d, f = 7, 5, 11
    m = cost.layer_macs(n, d, f)
    assert m == {"projections": 4 * n * d * d, "scores": n * n * d, "mix": n * n * d, "ffn": 2 * n * d * f}
    assert all(isinstance(v, int) for v in m.values())


def test_crossover_is_where_the_share_is_one_half():
    for d, f in [(768, 3072), (512, 2048), (64, 100)]:
        n = cost.crossover_n(d, f)
        assert cost.score_share(n, d, f) == pytest.approx(0.5)
        assert cost.score_share(n - 1, d, f) < 0.5 < cost.score_share(n + 1, d, f)


@pytest.mark.parametrize("args, message", [((0, 8, 8), "n must be"), ((4, 2.5, 8), "d_model"),
                                           ((4, 8, True), "d_ff"), ((-3, 8, 8), "positive integer")])
def test_counts_reject_bad_sizes(args, message):
    with pytest.raises(ValueError, match=message):
        cost.layer_macs(*args)


def test_layer_type_costs_follow_vaswanis_table():
    rows = {r.name.split(" (")[0] + (" dilated" if "dilated" in r.name else ""): r
            for r in cost.layer_type_costs(n=81, d=16, k=3)}
    assert rows["self-attention"].ops == 81 * 81 * 16 and rows["self-attention"].max_path == 1
    assert rows["recurrent"].ops == 81 * 16 * 16 and rows["recurrent"].sequential_steps == 81
    assert rows["convolution dilated"].max_path == 4  # log_3 81
    assert rows["convolution"].max_path == 27  # 81 / 3
    assert rows["convolution"].ops == 3 * 81 * 16 * 16


# ---------------------------------------------------------------- attention


@pytest.mark.parametrize("batch, n_q, n_k, block", [((), 7, 13, 4), ((2, 3), 5, 64, 64), ((4,), 9, 33, 100),
                                                    ((2,), 3, 10, 1)])
def test_online_attention_equals_torch_sdpa(batch, n_q, n_k, block):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(*batch, n_q, 8, generator=g, dtype=torch.float64)
    k = torch.randn(*batch, n_k, 8, generator=g, dtype=torch.float64) * 3
    v = torch.randn(*batch, n_k, 5, generator=g, dtype=torch.float64)
    want = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(cost.online_softmax_attention(q, k, v, block), want)
    torch.testing.assert_close(cost.naive_attention(q, k, v), want)


def test_online_attention_survives_scores_in_the_thousands():
    q = torch.ones(2, 4, dtype=torch.float64)
    k = torch.arange(40, dtype=torch.float64)[:, None].expand(40, 4) * 50  # scores up to 3900
    v = torch.eye(40, dtype=torch.float64)[:, :3]
    out = cost.online_softmax_attention(q, k, torch.randn(40, 3, dtype=torch.float64), block_size=8)
    assert torch.isfinite(out).all()
    assert cost.online_softmax_attention(q, k, v, block_size=8).abs().max() < 1e-12  # all weight on key 39


@pytest.mark.parametrize("kwargs, message", [
    ({"block_size": 0}, "block_size"), ({"block_size": 2.5}, "block_size"),
])
def test_online_attention_rejects_bad_block_sizes(kwargs, message):
    q = torch.randn(3, 4)
    with pytest.raises(ValueError, match=message):
        cost.online_softmax_attention(q, q, q, **kwargs)


def test_attention_rejects_mismatched_shapes():
    q = torch.randn(3, 4)
    with pytest.raises(ValueError, match="same width"):
        cost.naive_attention(q, torch.randn(3, 5), q)
    with pytest.raises(ValueError, match="one row per key"):
        cost.online_softmax_attention(q, q, torch.randn(2, 4))
    with pytest.raises(ValueError, match="at least one key"):
        cost.online_softmax_attention(q, q[:0], q[:0])


# ---------------------------------------------------------------- memory


def test_meter_sees_the_two_n_by_n_matrices_of_naive_attention():
    n, d = 256, 16
    q = torch.randn(n, d)
    meter = cost.tensor_memory(cost.naive_attention, q, q, q)
    matrix = n * n * 4
    assert meter.largest_bytes == matrix and meter.largest_shape == (n, n)
    assert 2 * matrix <= meter.peak_bytes <= 2 * matrix + n * d * 4 * 2


def test_meter_finds_online_memory_linear_in_n():
    peaks = []
    for n in (512, 1024, 2048):
        q = torch.randn(n, 16)
        meter = cost.tensor_memory(cost.online_softmax_attention, q, q, q, block_size=32)
        assert meter.largest_numel < n * n / 8
        peaks.append(meter.peak_bytes)
    assert peaks[1] / peaks[0] == pytest.approx(2, rel=0.05)
    assert peaks[2] / peaks[1] == pytest.approx(2, rel=0.05)


def test_meter_ignores_views_and_in_place_results_and_frees_dead_tensors():
    x = torch.zeros(100, 100)
    meter = cost.TensorMeter()
    with meter:
        x.T.add_(1.0)  # a view of existing memory, changed in place: nothing new
        assert meter.peak_bytes == 0
        y = torch.ones(50, 50)  # 10,000 bytes
        y_view = y[:10]
        del y
        assert meter._current == 10_000  # still alive through the view
        del y_view
        assert meter._current == 0
        torch.ones(10, 10)
    assert meter.peak_bytes == 10_000
    assert {"add_", "ones"} <= meter.op_names


def test_fused_kernel_shows_only_its_output():
    q = torch.randn(1, 1, 512, 64)
    meter = cost.tensor_memory(F.scaled_dot_product_attention, q, q, q)
    assert any("scaled_dot_product" in op for op in meter.op_names)
    assert meter.peak_bytes < 2 * q.numel() * 4


# ---------------------------------------------------------------- measuring, figures, benchmark


@pytest.fixture(scope="module")
def points():
    return cost.measure_methods([64, 128], d=16, repeats=1)


def test_measure_methods_gives_one_point_per_method_and_n(points):
    methods = ("naive", "online", "sdpa")
    assert [(p.method, p.n) for p in points] == [(m, n) for n in (64, 128) for m in methods]
    assert all(p.seconds > 0 and p.peak_bytes > 0 for p in points)
    naive = [p for p in points if p.method == "naive"]
    assert naive[1].peak_bytes / naive[0].peak_bytes == pytest.approx(4, rel=0.1)
    with pytest.raises(ValueError, match="repeats"):
        cost.measure_methods([64], repeats=0)


def test_measure_methods_uses_the_given_online_function():
    calls = []

    def mine(q, k, v, block_size=64):
        calls.append(block_size)
        return cost.online_softmax_attention(q, k, v, block_size)

    cost.measure_methods([32], d=8, repeats=1, block_size=16, online=mine)
    assert calls and set(calls) == {16}


def test_table_and_ratios_list_every_n(points):
    table = cost.cost_table(points)
    assert "naive ms" in table and "sdpa MiB" in table
    assert len(table.splitlines()) == 3
    ratios = cost.cost_ratios(points)
    assert ratios.count("naive/online") == 2 and ratios.count("naive/sdpa") == 2
    # sdpa's working memory is hidden inside its kernel: no memory ratio is claimed for it
    for line in ratios.splitlines()[:2]:
        assert line.split("naive/sdpa")[1].split("memory ×")[1].strip() == "n/a"
        assert "n/a" not in line.split("naive/online")[1].split("naive/sdpa")[0]
    assert "sees only the output of sdpa" in ratios


def test_plot_method_costs_draws_each_method_and_guides(points):
    axes = cost.plot_method_costs(points)
    assert len(axes[0].lines) == 4 and len(axes[1].lines) == 5  # 3 methods + guides (∝ n² | ∝ n², ∝ n)
    with pytest.raises(ValueError, match="at least one"):
        cost.plot_method_costs([])
    plt.close("all")


def test_plot_layer_shares_stacks_to_one_and_marks_the_crossover():
    ax = cost.plot_layer_shares([64, 512, 4096, 16384], 768, 3072, marks=(197, 4097))
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "4,608" in texts and "4%" in texts and "47%" in texts
    assert len(ax.collections) == 4
    with pytest.raises(ValueError, match="two sequence lengths"):
        cost.plot_layer_shares([10], 768, 3072)
    plt.close("all")


def test_benchmark_lengths_and_main(capsys):
    assert bench.sequence_lengths(4096) == [256, 512, 1024, 2048, 4096]
    assert bench.sequence_lengths(100, 32) == [32, 64]
    with pytest.raises(ValueError, match="min_n"):
        bench.sequence_lengths(10, 32)
    assert bench.main(["--max-n", "64", "--min-n", "32", "--repeats", "1", "--d", "8"]) == 0
    out = capsys.readouterr().out
    assert "naive/online" in out and "    64" in out


def test_share_matches_macs_for_many_sizes():
    for n in (1, 10, 197, 1000, 4097):
        m = cost.layer_macs(n, 64, 256)
        assert cost.score_share(n, 64, 256) == pytest.approx((m["scores"] + m["mix"]) / sum(m.values()))
    assert math.isclose(cost.score_share(1, 1, 1), 2 / (4 + 2 + 2))
