"""Lesson 06 helpers: the references equal nn.MultiheadAttention, the cost formulas add up, the
functional forward reproduces the trained classifier, and head ablation agrees with it."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from experiments import training  # noqa: E402
from helpers import heads, paths
from helpers.checks.heads import to_torch_mha  # noqa: E402


def _inputs(B=2, T_q=4, T_kv=6, D=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    x_q = torch.randn(B, T_q, D, generator=g, dtype=torch.float64)
    x_kv = torch.randn(B, T_kv, D, generator=g, dtype=torch.float64)
    ws = tuple(torch.randn(D, D, generator=g, dtype=torch.float64) / D**0.5 for _ in range(4))
    return x_q, x_kv, ws


def test_split_and_merge_are_inverse_and_contiguous_per_head():
    x = torch.randn(2, 5, 12)
    s = heads.split_heads(x, 3)
    assert s.shape == (2, 3, 5, 4)
    assert torch.equal(s[:, 1], x[..., 4:8])  # head 1 owns features 4..7
    assert torch.equal(heads.merge_heads(s), x)


def test_split_and_merge_reject_bad_shapes():
    with pytest.raises(ValueError, match="divisible"):
        heads.split_heads(torch.zeros(1, 2, 10), 3)
    with pytest.raises(ValueError, match=r"\(B, T, D\)"):
        heads.split_heads(torch.zeros(2, 10), 2)
    with pytest.raises(ValueError, match=r"\(B, H, T, d_h\)"):
        heads.merge_heads(torch.zeros(2, 3, 4))


@pytest.mark.parametrize("H", [1, 3, 4, 12])
def test_reference_equals_torch_multihead_attention(H):
    x_q, x_kv, ws = _inputs()
    mha = to_torch_mha(ws, H)
    with torch.no_grad():
        want_out, want_w = mha(x_q, x_kv, x_kv, need_weights=True, average_attn_weights=False)
    out, w = heads.multi_head_attention(x_q, x_kv, *ws, H)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(w, want_w)
    assert heads.weights_from_torch(mha)[0].shape == (12, 12)
    for a, b in zip(heads.weights_from_torch(mha), ws):
        torch.testing.assert_close(a, b)


def test_reference_with_masks_equals_torch_with_inverted_masks():
    x_q, x_kv, ws = _inputs()
    mha = to_torch_mha(ws, 3)
    allowed = torch.rand(4, 6, generator=torch.Generator().manual_seed(1)) < 0.5
    allowed[:, 0] = True
    real = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])  # (B, T_kv)
    with torch.no_grad():
        o1, w1 = mha(x_q, x_kv, x_kv, attn_mask=heads.torch_mask(allowed), average_attn_weights=False)
        o2, w2 = mha(x_q, x_kv, x_kv, key_padding_mask=heads.torch_mask(real), average_attn_weights=False)
    torch.testing.assert_close(heads.multi_head_attention(x_q, x_kv, *ws, 3, allowed)[0], o1)
    torch.testing.assert_close(heads.multi_head_attention(x_q, x_kv, *ws, 3, real[:, None, None])[1], w2)
    with pytest.raises(ValueError, match="bool"):
        heads.torch_mask(allowed.float())


def test_fully_masked_query_gets_zeros():
    x_q, x_kv, ws = _inputs()
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[2] = False
    out, w = heads.multi_head_attention(x_q, x_kv, *ws, 3, mask)
    assert torch.all(w[:, :, 2] == 0) and torch.all(out[:, 2] == 0)
    assert not torch.isnan(out).any()


def test_reference_rejects_wrong_weight_shapes():
    x_q, x_kv, ws = _inputs()
    with pytest.raises(ValueError, match="w_o"):
        heads.multi_head_attention(x_q, x_kv, *ws[:3], torch.zeros(12, 6), 3)


def test_tagged_tokens_say_where_they_come_from():
    x = heads.tagged_tokens(3, 4)
    assert x.shape == (1, 3, 4) and int(x[0, 2, 3]) == 23
    with pytest.raises(ValueError):
        heads.tagged_tokens(3, 11)


def test_attention_cost_eight_heads_cost_one_wide_head():
    eight = heads.attention_cost(100, 512, 8)
    one = heads.attention_cost(100, 512, 1)
    assert eight["total"] == one["total"] and eight["parameters"] == one["parameters"] == 4 * 512**2
    assert eight["scores"] == 8 * 100 * 100 * 64
    assert eight["score_entries"] == 8 * one["score_entries"]
    wide = heads.attention_cost(100, 512, 8, d_head=512)
    assert wide["parameters"] == 8 * eight["parameters"]
    with pytest.raises(ValueError, match="divisible"):
        heads.attention_cost(10, 512, 7)


@pytest.fixture(scope="module")
def model():
    return training.load_model("attention", 0)


def test_functional_forward_reproduces_the_model_exactly(model):
    for data in training.test_data(True).values():
        ids, lengths = data.ids[:300], data.lengths[:300]
        want = model(ids, lengths)
        assert torch.equal(heads.classifier_logits(model, ids, lengths), want)
        assert torch.equal(heads.classifier_logits(model, ids, lengths, torch.ones(2, 4)), want)
    with pytest.raises(ValueError, match="head_on"):
        heads.classifier_logits(model, ids, lengths, torch.ones(4))


def test_removing_every_head_leaves_only_the_residual_path(model):
    data = training.test_data(True)["no_fillers"]
    ids, lengths = data.ids[:50], data.lengths[:50]
    off = heads.classifier_logits(model, ids, lengths, torch.zeros(2, 4))
    # Zeroing every head leaves W_O's bias: the model without attention reads [CLS] alone.
    assert torch.allclose(off, off[0].expand_as(off))


def test_fast_ablation_agrees_with_the_functional_forward(model):
    small = {name: type(d)(d.ids[:200], d.lengths[:200], d.labels[:200])
             for name, d in training.test_data(True).items()}
    result = heads.head_ablation(model, small)
    assert result.removed.shape == result.alone.shape == (2, 4, 4)

    def acc(on, d):
        predicted = heads.classifier_logits(model, d.ids, d.lengths, on) > 0
        return float((predicted == d.labels.bool()).float().mean())

    for s, d in enumerate(small.values()):
        assert result.full[s] == acc(None, d)
        for layer, head in [(0, 1), (1, 3)]:
            on = torch.ones(2, 4)
            on[layer, head] = 0
            assert result.removed[layer, head, s] == pytest.approx(acc(on, d), abs=1e-9)
            on = torch.zeros(2, 4)
            on[1 - layer] = 1
            on[layer, head] = 1
            assert result.alone[layer, head, s] == pytest.approx(acc(on, d), abs=1e-9)
    lines = heads.ablation_rows(result)
    assert len(lines) == 2 + 8 and "all heads" in lines[1]
    with pytest.raises(ValueError):
        heads.ablation_rows(result, "both")
    axes = heads.plot_ablation([result, result], [0, 1])
    assert len(axes) == 2
    plt.close("all")
    with pytest.raises(ValueError, match="one seed per result"):
        heads.plot_ablation([result], [0, 1])


# ---------------------------------------------------------------- lesson 06's review, head by head

SENTENCE = "the food was not good".split()


def test_review_patterns_are_the_models_weights_and_plot(model):
    tokens, patterns = heads.review_patterns(model, SENTENCE)
    assert tokens == ["[CLS]", *SENTENCE] and patterns.shape == (2, 4, 6, 6)
    torch.testing.assert_close(patterns.sum(-1), torch.ones(2, 4, 6))
    keys = heads.strongest_keys(tokens, patterns, query=0)
    assert len(keys) == 2 and all(len(row) == 4 for row in keys)
    for layer, head in [(0, 0), (1, 2)]:
        word, weight = keys[layer][head]
        assert weight == pytest.approx(float(patterns[layer, head, 0].max()))
        assert word == tokens[int(patterns[layer, head, 0].argmax())]
    assert heads.layers_splitting([[("not", 1.0), ("good", 0.9)], [("the", 1.0), ("not", 1.0)]],
                                  ("not", "good")) == [0]
    axes = heads.plot_head_patterns(tokens, patterns[0], "title")
    assert len(axes) == 4 and axes[0].get_ylabel() == "query (row)"
    with pytest.raises(ValueError, match="tokens"):
        heads.plot_head_patterns(tokens[:3], patterns[0])
    plt.close("all")
    assert training.span([0.5, 0.25, 1.0]) == "0.2–1.0" and training.span([7, 7.01], ".0f") == "7"


def test_lesson_06_statements_about_the_shipped_models():
    """What lesson 06's prose says about the review and the ablation, checked on the shipped weights."""
    models = {seed: training.load_model("attention", seed) for seed in (0, 1, 2)}
    keys = {}
    for seed, m in models.items():
        tokens, patterns = heads.review_patterns(m, SENTENCE)
        keys[seed] = heads.strongest_keys(tokens, patterns, query=0)
        assert heads.layers_splitting(keys[seed], ("not", "good")), f"seed {seed}: no layer splits not/good"
        if seed == 0:
            good_row = patterns[0, :, -1]  # layer 1, query 'good': (H, T)
            assert all(tokens[int(i)] == "was" for i in good_row.argmax(-1))
    assert [word for word, _ in keys[0][0]] == ["not", "the", "good", "good"]
    assert min(weight for _, weight in keys[0][0]) > 0.95
    assert any(word == "food" for word, _ in keys[2][1])
    data = training.test_data(True)
    for seed, m in models.items():
        summary = heads.ablation_summary(heads.head_ablation(m, data))
        costs = np.sort(summary["removal_cost"].ravel())
        assert costs[-1] > 2 * costs[-2] and summary["free"] >= 5, f"seed {seed}: {costs}"
        if seed == 0:
            assert summary["costliest"][:2] in [(0, 2), (0, 3)]  # one of the two heads reading 'good'
            assert summary["removal_cost"][0, 1] < 1.0  # the head parked on 'the'


# ---------------------------------------------------------------- one head instead of four

def test_one_head_classifier_is_the_same_size_and_trains(tmp_path):
    from experiments import head_count

    model = head_count.one_head()
    assert model.config.n_heads == 1 and training.n_parameters(model) == 22_689
    config = training.TrainConfig(n_train=64, epochs=1, seeds=(0,), models=("attention",))
    results = head_count.run_experiment(config, out_dir=tmp_path, processes=1)
    assert results["n_heads"] == 1 and [run["seed"] for run in results["runs"]] == [0]
    assert set(training.TEST_SETS) <= set(results["runs"][0])
    assert head_count.load_model(0, tmp_path).config.n_heads == 1
    with pytest.raises(FileNotFoundError, match="experiments.head_count"):
        head_count.load_results(tmp_path / "nowhere")


def test_shipped_one_head_results_and_what_lesson_06_says_about_them():
    from experiments import head_count

    one, four = head_count.load_results(), training.load_results()
    assert one["command"] == "python -m experiments.head_count" and one["parameters"] == 22_689
    assert [run["seed"] for run in one["runs"]] == list(training.DEFAULT.seeds)
    for run in one["runs"]:  # the shipped weights give the stored accuracies
        model = head_count.load_model(run["seed"])
        got = training.evaluate(model)
        for name in training.TEST_SETS:
            assert abs(got[name] - run[name]) <= 0.002, (run["seed"], name)
        # the shipped three "come close to the four-head ones"
        assert min(run[name] for name in training.TEST_SETS) > 0.9
        tokens, patterns = heads.review_patterns(model, SENTENCE)
        keys = heads.strongest_keys(tokens, patterns, query=0)
        assert all(row[0][1] > 0.75 for row in keys), "each layer's one head reads mostly one word"
        assert any(row[0] == ("not", pytest.approx(1.0, abs=0.05)) for row in keys)
    lines = head_count.comparison(one, four)
    assert len(lines) == 1 + len(training.TEST_SETS) and "1 head of 32" in lines[0]


def test_what_lesson_06_says_of_one_head_over_seeds_and_kernel_paths():
    """"most runs do, but some stop well short — the same seed can land either way"."""
    from experiments import head_count

    spread = head_count.load_spread()
    assert spread["command"] == "python -m experiments.head_count --spread"
    assert {(r["path"], r["seed"]) for r in spread["runs"]} == \
        {(p, s) for p in spread["kernel_paths"] for s in spread["seeds"]}
    assert {r["capability"] for r in spread["runs"] if r["path"] == "default"} == {"DEFAULT"}
    worst = head_count.worst_sets(spread["runs"])
    assert sum(w >= 0.95 for w in worst) > len(worst) / 2, "not 'most runs'"
    assert min(worst) < 0.9, "no run 'well short'"
    by_seed = {}
    for w, r in zip(worst, spread["runs"]):
        by_seed.setdefault(r["seed"], []).append(w >= 0.95)
    assert any(len(set(v)) == 2 for v in by_seed.values()), "no seed lands either way"
    text = head_count.spread_reading(spread)
    assert "The rounding alone moves a run" in text and f"{len(worst)} runs" in text
    lesson = (paths.CHECKOUT_DATA.parent / "solutions" / "06_multi_head" / "06_multi_head.py").read_text()
    assert "most runs do, but some stop well short — the same seed can land either way" in lesson
    assert "one head costs far more than the rest." in lesson
