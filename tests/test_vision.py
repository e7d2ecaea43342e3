"""Lesson 09's image task, its two models, their training, and the shipped weights and results."""

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from experiments import vision as v
from helpers import image_task as it  # never `from ... import test_set`: pytest would collect it
from helpers import patches as pt

# ---------------------------------------------------------------- the task


@pytest.fixture(scope="module")
def held_out() -> it.ImageSet:
    return it.test_set()


def test_task_is_deterministic_and_seeds_differ():
    a, b = it.make_images(64, seed=5), it.make_images(64, seed=5)
    assert np.array_equal(a.images, b.images) and np.array_equal(a.labels, b.labels)
    assert not np.array_equal(a.images, it.make_images(64, seed=6).images)
    assert not np.array_equal(it.training_set(64).images, it.test_set(64).images)


def test_task_shapes_and_balance(held_out):
    assert held_out.images.shape == (it.N_TEST, 1, 32, 32) and held_out.images.dtype == np.float32
    assert held_out.labels.mean() == 0.5
    assert set(np.unique(held_out.shapes)) == set(range(len(it.SHAPE_NAMES)))
    x, y = held_out.tensors()
    assert x.shape == (it.N_TEST, 1, 32, 32) and y.dtype == torch.float32


def test_label_is_whether_the_opposite_corners_match(held_out):
    """The rule, re-derived from the pixels: find each corner's shape by matching the stamps."""
    stamps = {name: m for name, m in it.SHAPES.items()}
    clean = it.make_images(200, seed=3, noise=0.0)
    for i in range(len(clean)):
        found = []
        for corner in range(4):
            r, c = clean.offsets[i, corner]
            patch = clean.images[i, 0, r:r + it.STAMP, c:c + it.STAMP]
            lit = patch > 0
            found.append(next(name for name, m in stamps.items() if np.array_equal(lit, m > 0)))
            quadrant = clean.images[i, 0, 16 * (corner // 2):16 * (corner // 2 + 1),
                                    16 * (corner % 2):16 * (corner % 2 + 1)]
            assert np.isclose(quadrant.sum(), patch.sum()), "each shape stays inside its own quadrant"
        assert clean.labels[i] == int(found[0] == found[3]), clean.describe(i)
    assert "top-left" in held_out.describe(0)


def test_distractors_are_independent_of_the_label(held_out):
    s = held_out.shapes
    for corner in (1, 2):
        agree = (s[:, corner] == s[:, 0]).astype(float)
        assert abs(agree[held_out.labels == 1].mean() - agree[held_out.labels == 0].mean()) < 0.06


def test_make_images_refuses_nothing():
    with pytest.raises(ValueError):
        it.make_images(0, seed=0)


def test_accuracy_by_pair_and_plots(held_out):
    table = it.accuracy_by_pair(held_out, held_out.labels)
    assert table.shape == (5, 5) and np.all(table == 1.0)
    table = it.accuracy_by_pair(held_out, 1 - held_out.labels)
    assert np.all(table == 0.0)
    with pytest.raises(ValueError):
        it.accuracy_by_pair(held_out, held_out.labels[:10])
    assert it.plot_pair_accuracy(table).get_xlabel() == "bottom-right shape"
    with pytest.raises(ValueError):
        it.plot_pair_accuracy(np.zeros((3, 3)))
    axes = it.plot_examples(held_out, [0, 1], predictions={"cnn": held_out.labels})
    assert "cnn" in axes[0].get_title()
    plt.close("all")


# ---------------------------------------------------------------- the models


def test_models_shapes_and_parameter_counts():
    x = torch.randn(3, 1, 32, 32)
    for name, count in (("vit", 36_929), ("cnn", 34_713)):
        model = v.build(name)
        assert model(x).shape == (3,)
        assert v.n_parameters(model) == count
    with pytest.raises(ValueError, match="unknown model"):
        v.build("mlp")
    with pytest.raises(ValueError, match="must divide"):
        v.TinyViT(v.ViTConfig(patch_size=5))


def test_vit_patch_embedding_is_patchify_times_a_matrix():
    torch.manual_seed(0)
    vit = v.TinyViT()
    x = torch.randn(2, 1, 32, 32)
    weight, bias = pt.conv_to_linear(vit.patch_embed)
    with torch.no_grad():
        tokens = vit.tokens(x)  # (B, 65, D)
        want = pt.patchify(x, 4) @ weight + bias + vit.positions[:, 1:]
    torch.testing.assert_close(tokens[:, 1:], want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tokens[:, 0], (vit.cls + vit.positions[:, :1])[0].expand(2, -1))


def test_vit_attention_matches_torch_and_cls_maps_are_distributions():
    torch.manual_seed(1)
    vit = v.TinyViT().eval()
    block = vit.blocks[0]
    x = torch.randn(2, 65, 32)
    D, H = 32, vit.config.n_heads
    with torch.no_grad():
        _, weights = block(x)
        q, k, _ = block.qkv(block.norm1(x)).split(D, dim=-1)
        q, k = (t.view(2, 65, H, D // H).transpose(1, 2) for t in (q, k))
        ones = torch.eye(65).expand(2, H, 65, 65)  # values = identity: the output is the weights
        want = torch.nn.functional.scaled_dot_product_attention(q, k, ones)
    torch.testing.assert_close(weights, want, rtol=1e-5, atol=1e-6)
    maps = vit.cls_attention(torch.randn(3, 1, 32, 32))  # (L, B, H, 8, 8)
    assert maps.shape == (4, 3, 2, 8, 8)
    assert torch.all(maps.sum(dim=(-2, -1)) < 1.0) and torch.all(maps >= 0)  # the rest goes to [CLS]


def test_training_runs_and_learns_a_little():
    """A few steps on a small slice: the loop runs, the loss is finite, the weights move."""
    config = v.TrainConfig(n_train=256, epochs=1, batch_size=64)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(2)  # not the one thread training uses, so that its return shows
    try:
        for name in v.MODEL_NAMES:
            torch.manual_seed(config.seed)
            before = [p.detach().clone() for p in v.build(name).parameters()]
            model, history = v.train(name, config, max_steps=3)
            assert history == [] and not model.training
            after = list(model.parameters())
            assert any(not torch.equal(a, b) for a, b in zip(before, after))
        assert torch.get_num_threads() == 2  # one thread while training, then restored
    finally:
        torch.set_num_threads(threads_before)
    with pytest.raises(ValueError):
        v.TrainConfig(epochs=0)


def test_run_experiment_writes_loadable_files(tmp_path):
    config = v.TrainConfig(n_train=128, epochs=1, batch_size=64)
    results = v.run_experiment(config, seeds=(0, 1), out_dir=tmp_path, processes=1, verbose=False)
    assert set(results["models"]) == set(v.MODEL_NAMES) and results["seeds"] == [0, 1]
    assert json.loads((tmp_path / "results.json").read_text()) == results
    for name in v.MODEL_NAMES:
        entry = results["models"][name]
        assert [run["seed"] for run in entry["runs"]] == [0, 1]
        for run in entry["runs"]:
            assert len(run["history"]) == 1 and 0.0 <= run["test_accuracy"] <= 1.0
            model = v.load_model(name, run["seed"], tmp_path)
            assert v.n_parameters(model) == entry["parameters"]
    assert v.plot_histories(results).get_ylabel() == "test accuracy"
    plt.close("all")
    assert len(v.runs_table(results).splitlines()) == 1 + 2 * len(v.MODEL_NAMES)
    with pytest.raises(FileNotFoundError, match="python -m experiments.vision"):
        v.load_model("vit", 2, tmp_path)
    with pytest.raises(FileNotFoundError, match="python -m experiments.vision"):
        v.load_results(tmp_path / "nowhere")


def test_first_epoch_and_summaries_of_runs():
    assert v.first_epoch_at([0.5, 0.7, 0.95, 0.9], 0.9) == 3 and v.first_epoch_at([0.5], 0.9) is None
    runs = [{"seed": s, "test_accuracy": h[-1], "train_accuracy": t, "history": h}
            for s, h, t in [(0, [0.5, 0.5, 0.8], 0.82), (1, [0.5, 0.6, 0.78], 0.79)]]
    results = {"models": {"vit": {"runs": runs}}}
    assert v.ranges(results)["vit"]["test_accuracy"] == (0.78, 0.8)
    sentence = v.run_summary(results)["vit"]
    assert "test accuracy 78.0%–80.0%" in sentence and "for the first 1–2 epochs" in sentence
    assert sentence.endswith("never 90%; never 99%.")


# ---------------------------------------------------------------- the shipped files


@pytest.fixture(scope="module")
def shipped() -> dict:
    return v.load_results()


@pytest.mark.parametrize("n_train", sorted((v.DEFAULT.n_train, *v.SWEEP_SIZES)))
def test_shipped_weights_reproduce_the_shipped_results(held_out, n_train):
    """Load every data/vision/[n_train_N/]*_seed*.pt, re-evaluate on the regenerated test set, compare."""
    folder = v.sweep_dir(n_train)
    results = v.load_results(folder)
    command = "python -m experiments.vision" + ("" if n_train == v.DEFAULT.n_train else " --sweep")
    assert results["command"] == command and results["seeds"] == list(v.SEEDS)
    training = dict(v.TrainConfig(n_train=n_train).__dict__)
    training.pop("seed")
    assert results["task"]["n_test"] == len(held_out) and results["task"]["n_train"] == n_train
    assert results["training"] == json.loads(json.dumps(training))
    x, y = held_out.tensors()
    for name in v.MODEL_NAMES:
        entry = results["models"][name]
        assert [run["seed"] for run in entry["runs"]] == list(v.SEEDS)
        for run in entry["runs"]:
            model = v.load_model(name, run["seed"], directory=folder)
            assert v.n_parameters(model) == entry["parameters"]
            assert run["test_accuracy"] == run["history"][-1]
            assert len(run["history"]) == v.TrainConfig().epochs
            # Another machine may round a logit near 0 the other way: allow two images of 2,000.
            assert abs(v.accuracy(model, x, y) - run["test_accuracy"]) <= 2 / len(y)


def test_lesson_09_statements_about_the_shipped_runs(held_out, shipped):
    """What lesson 09's prose says without printing it: checked against the shipped results."""
    vit, cnn = (shipped["models"][name]["runs"] for name in ("vit", "cnn"))
    for a, b in zip(vit, cnn):
        assert b["test_accuracy"] > a["test_accuracy"] + 0.1, "the CNN wins in every seed"
        # underfitting: the ViT fits its own training images hardly better than new ones
        assert a["train_accuracy"] < 0.9 and a["train_accuracy"] - a["test_accuracy"] < 0.05
        assert a["history"][0] < 0.55, "the ViT starts at chance"
        assert v.first_epoch_at(b["history"], 0.99) > v.first_epoch_at(b["history"], 0.9), "not at once"
    # The seed-0 ViT's pair table: straight strokes (square, plus, bars) against diagonal ones
    # (cross, diamond) always right, matches mostly right, two different shapes of one kind wrong.
    model = v.load_model("vit", 0)
    x, _ = held_out.tensors()
    with torch.no_grad():
        cnn_table = it.accuracy_by_pair(held_out, (v.load_model("cnn", 0)(x) > 0).long().numpy())
    assert cnn_table.min() > 0.9, "the CNN's table is close to 1 for every pair"
    with torch.no_grad():
        table = it.accuracy_by_pair(held_out, (model(x) > 0).long().numpy())
    straight, diagonal = [0, 1, 4], [2, 3]
    assert table[np.ix_(straight, diagonal)].min() > 0.9 and table[np.ix_(diagonal, straight)].min() > 0.9
    assert np.diag(table).min() > 0.85
    assert max(table[i, j] for group in (straight, diagonal) for i in group for j in group if i != j) < 0.2
    # Where [CLS] looks (200 test images): in every seed some layer gives most of its attention to
    # the two deciding corners.
    for seed in v.SEEDS:
        shares = pt.quadrant_shares(v.load_model("vit", seed).cls_attention(x[:200]))  # (L, 4)
        on, off = shares[:, [0, 3]].sum(axis=1), shares[:, [1, 2]].sum(axis=1)
        assert on.max() > 0.75 and off[on.argmax()] < 0.25, f"seed {seed}: {on}, {off}"


def test_lesson_09_statements_about_the_sweep():
    """What lesson 09 says about fewer and more images, checked against the shipped runs."""
    sweep = v.load_sweep()
    assert sorted(sweep) == [2_500, 5_000, 10_000, 20_000]
    # "With 2,500 or 5,000 images the CNN learns its training images by heart and stays close to
    # chance on new ones; from 10,000 on, it generalises."
    cnn = v.sweep_regimes(sweep, "cnn")
    assert cnn == {2_500: "memorises", 5_000: "memorises", 10_000: "generalises", 20_000: "generalises"}
    cnn_test = v._by_size(sweep, "cnn", "test_accuracy")
    assert max(cnn_test[2_500] + cnn_test[5_000]) < 0.65
    # "The ViT underfits at every size. With 2,500 or 5,000 images it stays within 3 points of
    # chance on new images, and it is far from right on its own training images too; only from
    # 10,000 on does its test accuracy climb, and with 20,000 images its three seeds land close
    # together."
    assert set(v.sweep_regimes(sweep, "vit").values()) == {"underfits"}
    vit_test = v._by_size(sweep, "vit", "test_accuracy")
    vit_train = v._by_size(sweep, "vit", "train_accuracy")
    assert max(abs(a - 0.5) for n in (2_500, 5_000) for a in vit_test[n]) < 0.03
    assert max(vit_train[2_500] + vit_train[5_000]) < 0.7
    assert min(vit_test[10_000]) > max(vit_test[5_000]) + 0.1
    assert np.mean(vit_test[20_000]) > np.mean(vit_test[10_000])
    assert np.ptp(vit_test[20_000]) < 0.02 and np.ptp(vit_test[20_000]) < np.ptp(vit_test[10_000])
    # "the CNN is at 100% from 10,000 images on — a ceiling"
    assert min(cnn_test[10_000] + cnn_test[20_000]) > 0.99
    table = v.sweep_table(sweep).splitlines()
    assert len(table) == 1 + 4 and table[-1].split()[0] == "20,000"
    reading = v.sweep_reading(sweep)
    assert reading["cnn"].startswith("cnn: memorises") and "underfits at every size" in reading["vit"]


def test_sweep_regimes_name_each_case():
    def fake(train, test):
        runs = [{"seed": s, "train_accuracy": train, "test_accuracy": test} for s in range(3)]
        return {"models": {"m": {"runs": runs}}}

    sweep = {100: fake(1.0, 0.5), 200: fake(0.7, 0.6), 400: fake(0.99, 0.95)}
    assert v.sweep_regimes(sweep, "m") == {100: "memorises", 200: "underfits", 400: "generalises"}
    assert v.sweep_reading(sweep)["m"].count(";") == 3  # three regimes, the underfit one with its test list
    ax = v.plot_sweep(sweep)
    assert len(ax.lines) == 2 * 3 + 1  # test and train per seed, and chance
    plt.close("all")
