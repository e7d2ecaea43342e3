"""Lesson 11's library: the references against PyTorch, the model against the course's own parts,
the key/value cache against recomputing, grouped-query attention against PyTorch's, the shipped
runs against their stored numbers, and what the lesson says about them."""

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT

from experiments import tiny_gpt
from helpers import gpt, masking
from helpers.block import encoder_layer, feed_forward, layer_norm
from helpers.heads import merge_heads, split_heads
from helpers.runtime import threads

SOURCE = ROOT / "solutions" / "11_tiny_gpt"


def lesson_source() -> str:
    return (SOURCE / "11_tiny_gpt.py").read_text()


def small(**changes) -> gpt.TinyGPT:
    torch.manual_seed(0)
    config = gpt.GPTConfig(**{"vocab": 11, "block_size": 16, "d_model": 16, "n_heads": 4, "n_layers": 2,
                              "dropout": 0.0, **changes})
    return gpt.TinyGPT(config).double().eval()


# ---------------------------------------------------------------- the references


def test_lm_loss_is_the_mean_negative_log_probability():
    logits, targets = torch.randn(3, 5, 7, dtype=torch.float64), torch.randint(0, 7, (3, 5))
    by_hand = -torch.log_softmax(logits, -1).gather(-1, targets[..., None]).mean()
    assert torch.allclose(gpt.lm_loss(logits, targets), by_hand)
    uniform = gpt.lm_loss(torch.zeros(2, 3, 9), torch.zeros(2, 3, dtype=torch.long))
    assert math.isclose(uniform.item(), math.log(9), rel_tol=1e-6)


def test_lr_at_warms_up_from_zero_and_decays_to_the_floor():
    lrs = [gpt.lr_at(s, 1.0, 10, 110, 0.1) for s in range(130)]
    assert lrs[0] == 0.0 and math.isclose(lrs[5], 0.5) and lrs[10] == 1.0
    assert math.isclose(lrs[60], 0.55) and math.isclose(lrs[110], 0.1) and lrs[129] == 0.1
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))


def test_train_step_equals_the_loop_written_out():
    a, b = small(), small()
    x, y = gpt.shift_targets(torch.randint(0, 11, (4, 9)))
    opt_a, opt_b = torch.optim.AdamW(a.parameters(), lr=1e-2), torch.optim.AdamW(b.parameters(), lr=1e-2)
    for _ in range(3):
        loss = gpt.train_step(a, x, y, opt_a, max_norm=0.1)
        opt_b.zero_grad()
        want = F.cross_entropy(b(x).reshape(-1, 11), y.reshape(-1))
        want.backward()
        torch.nn.utils.clip_grad_norm_(b.parameters(), 0.1)
        opt_b.step()
        assert math.isclose(loss, want.item(), rel_tol=1e-12)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_sample_next_follows_temperature_and_top_k():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(40_000, 1)
    g = torch.Generator().manual_seed(0)
    ids = gpt.sample_next(logits, temperature=0.5, top_k=3, generator=g)
    freq = torch.bincount(ids, minlength=4).double() / len(ids)
    want = torch.softmax(torch.tensor([4.0, 2.0, 0.0, -math.inf]), 0).double()
    assert (freq - want).abs().max() < 0.01
    assert torch.equal(gpt.sample_next(logits[:3], temperature=0), torch.zeros(3, dtype=torch.long))


def test_repeat_kv_is_what_pytorchs_grouped_query_attention_does():
    q, k, v = torch.randn(2, 6, 5, 4), torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    ours = F.scaled_dot_product_attention(q, gpt.repeat_kv(k, 2), gpt.repeat_kv(v, 2), is_causal=True)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert torch.allclose(ours, theirs, atol=1e-6)


def test_kv_cache_bytes_agrees_with_lesson_04s_formula():
    for args in [(80, 4096, 8, 128), (3, 10, 4, 16)]:
        layers, tokens, heads, d = args
        assert gpt.kv_cache_bytes(*args) == masking.kv_cache_bytes(tokens, heads, d, n_layers=layers)
    assert gpt.kv_cache_bytes(2, 3, 4, 5, bytes_per_element=4, batch=6) == 2 * 2 * 3 * 4 * 5 * 4 * 6


# ---------------------------------------------------------------- the model from the course's parts


def test_a_block_is_lesson_07s_pre_norm_layer_under_the_causal_mask():
    model = small()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    for block in model.blocks:
        want, _ = encoder_layer(x, block.params(), 4, norm_first=True, mask=masking.causal_mask(7))
        assert torch.allclose(block(x), want, atol=1e-12)


def test_the_model_equals_the_exercise_reference_and_sees_no_future():
    model = small()
    tokens = torch.randint(0, 11, (3, 9))
    with torch.no_grad():
        logits = model(tokens)
        assert torch.allclose(logits, gpt.gpt_logits(tokens, model.params(), 4), atol=1e-12)
        changed = tokens.clone()
        changed[:, 5:] = (changed[:, 5:] + 3) % 11
        assert torch.allclose(model(changed)[:, :5], logits[:, :5], atol=1e-12)


def test_dropout_acts_in_training_only():
    model = small(dropout=0.3)
    tokens = torch.randint(0, 11, (2, 8))
    with torch.no_grad():
        assert torch.equal(model(tokens), model(tokens))  # eval: deterministic
        model.train()
        assert not torch.allclose(model(tokens), model(tokens))
        plain = small(dropout=0.0).train()
        assert torch.allclose(plain(tokens), small(dropout=0.0)(tokens))


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_generating_with_the_cache_equals_recomputing(kv_heads):
    model = small(n_kv_heads=kv_heads)
    prompt = torch.randint(0, 11, (2, 3))
    fast = gpt.generate(model, prompt, 10, temperature=0.9, top_k=5, seed=4)
    slow = gpt.generate(model, prompt, 10, temperature=0.9, top_k=5, seed=4, cache=False)
    assert torch.equal(fast.tokens, slow.tokens)
    assert torch.allclose(fast.logits, slow.logits, atol=1e-10)
    c = model.config
    assert fast.cache_bytes == gpt.kv_cache_bytes(c.n_layers, 12, kv_heads, c.d_head, 8, batch=2)  # float64


def test_a_grouped_query_block_equals_pytorchs_enable_gqa():
    """A block with 4 query heads and 2 key/value heads, written out with PyTorch's own sharing."""
    block = small(n_kv_heads=2).blocks[0]
    p, x = block.p, torch.randn(1, 6, 16, dtype=torch.float64)
    with torch.no_grad():
        h = layer_norm(x, p["ln1_gamma"], p["ln1_beta"], block.eps)
        q = split_heads(h @ p["w_q"] + p["b_q"], 4)  # (B, 4, T, d_h)
        k, v = (split_heads(h @ p[f"w_{n}"] + p[f"b_{n}"], 2) for n in "kv")  # (B, 2, T, d_h)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        mid = x + merge_heads(out) @ p["w_o"] + p["b_o"]
        h = layer_norm(mid, p["ln2_gamma"], p["ln2_beta"], block.eps)
        want = mid + feed_forward(h, p["w1"], p["b1"], p["w2"], p["b2"])
        assert torch.allclose(block(x), want, atol=1e-12)


# ---------------------------------------------------------------- the corpus and the shipped runs


def test_the_corpus_is_small_and_its_licence_is_stated():
    corpus_file = gpt.DATA_DIR / gpt.CORPUS
    assert corpus_file.stat().st_size <= 1_000_000
    readme = (ROOT / "data" / "README.md").read_text()
    section = readme[readme.index("## `tiny_gpt/`"):]
    assert "MIT" in section and "python -m experiments.tiny_gpt" in section
    assert "MIT" in lesson_source()
    corpus = gpt.load_corpus()
    assert corpus.decode(corpus.encode("attention")) == "attention"
    assert len(corpus.train) + len(corpus.val) == len(corpus.text)


def test_a_run_is_reproducible():
    """Two runs of one seed give the same numbers and sample (what makes a rerun byte-identical)."""
    config = tiny_gpt.RunConfig(steps=6, eval_every=3, eval_batches=1, sample_chars=20, d_model=16,
                                n_layers=1, block_size=16, batch=4, seeds=(0,))
    corpus = gpt.load_corpus()
    first, second = tiny_gpt.train(0, config, corpus)[1], tiny_gpt.train(0, config, corpus)[1]
    assert first == second


@pytest.fixture(scope="module")
def shipped():
    return tiny_gpt.load_results()


def test_the_shipped_models_give_their_stored_numbers(shipped):
    corpus = gpt.load_corpus()
    config = tiny_gpt.RunConfig(**{**shipped["config"], "seeds": tuple(shipped["config"]["seeds"])})
    assert shipped["vocab"] == corpus.vocab and shipped["n_val"] == len(corpus.val)
    val = tiny_gpt.validation_batches(corpus, config)
    with threads(1):
        for run in shipped["runs"]:
            model = tiny_gpt.load_model(run["seed"])
            assert gpt.n_parameters(model) == shipped["parameters"]
            assert math.isclose(tiny_gpt.evaluate(model, val), run["val_loss"][-1][1], rel_tol=1e-5)
            assert tiny_gpt.sample_text(model, corpus, config, seed=run["seed"]) == run["sample"]
    assert math.isclose(shipped["unigram_loss"], gpt.unigram_loss(corpus))
    assert math.isclose(shipped["bigram_loss"], gpt.bigram_loss(corpus))


def test_what_the_lesson_says_about_the_shipped_runs(shipped):
    runs, unigram, bigram = shipped["runs"], shipped["unigram_loss"], shipped["bigram_loss"]
    finals = tiny_gpt.final_val_losses(shipped)
    assert len(runs) == 3 and [r["seed"] for r in runs] == [0, 1, 2]
    for run in runs:
        steps = dict(run["val_loss"])
        assert min(s for s, v in steps.items() if v < unigram) <= 100, "the frequency line within 100 steps"
        assert min(s for s, v in steps.items() if v < bigram) <= 300, "the bigram line within 300"
        last, before = run["val_loss"][-1][1], run["val_loss"][-2][1]
        assert last < before, "the validation loss is still falling at the last step"
        assert np.mean(run["loss"][-50:]) > last, "the training loss (dropout on) lies above the validation"
        sample = run["sample"]
        assert sample.startswith(tiny_gpt.PROMPT) and len(sample) == len(tiny_gpt.PROMPT) + 300
        assert " the " in sample, "common words of the course in every sample"
    # "in some samples Markdown's backticks, headings or list items": under PyTorch's plainest
    # kernels (ATEN_CPU_CAPABILITY=default) one of the three retrained seeds wrote no backtick
    assert any("`" in r["sample"] for r in runs), "backticks in some samples"
    headings_or_lists = [re.search(r"^(#+ |- )", r["sample"], re.M) is not None for r in runs]
    assert 0 < sum(headings_or_lists), "headings or list items in some samples"
    assert "and in some samples Markdown's backticks,\n# headings or list items" in lesson_source()
    assert max(finals) - min(finals) < 0.05, "the seeds end within a few hundredths of each other"
    assert max(finals) < bigram - 0.3


@pytest.mark.kernels
def test_the_in_lesson_run_reaches_what_the_lesson_says():
    """The lesson's own loop, with the references and its settings: the loss it states."""
    source = lesson_source()
    steps, peak, warmup, min_lr = (float(v) for v in re.search(
        r"STEPS, PEAK_LR, WARMUP, MIN_LR = ([\d.e-]+), ([\d.e-]+), ([\d.e-]+), ([\d.e-]+)", source).groups())
    config_line = re.search(r"config = gpt\.GPTConfig\((.*)\)\n", source).group(1)
    corpus = gpt.load_corpus()
    config = eval(f"gpt.GPTConfig({config_line})", {"gpt": gpt, "corpus": corpus})
    torch.manual_seed(0)
    model = gpt.TinyGPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=peak, weight_decay=0.1)
    batches = torch.Generator().manual_seed(0)
    val = tiny_gpt.validation_batches(corpus, tiny_gpt.RunConfig(block_size=config.block_size))
    with threads(1):
        for step in range(int(steps)):
            for group in optimizer.param_groups:
                group["lr"] = gpt.lr_at(step, peak, int(warmup), int(steps), min_lr)
            x, y = gpt.shift_targets(gpt.random_windows(corpus.train, 32, config.block_size + 1, batches))
            gpt.train_step(model, x, y, optimizer, max_norm=1.0)
        loss = tiny_gpt.evaluate(model, val)
    assert loss < gpt.unigram_loss(corpus) - 0.3, "well below the frequency table"


def test_no_unknown_data_file():
    names = {p.name for p in Path(gpt.DATA_DIR).iterdir()}
    weights = {f"tiny_gpt_seed{seed}.pt" for seed in (0, 1, 2)}
    assert names == {"corpus.txt", "results.json", *weights}


def test_plot_runs_draws_every_seed_and_both_yardsticks(shipped, no_show):
    ax = tiny_gpt.plot_runs(shipped)
    labels = " | ".join(line.get_label() for line in ax.get_lines())
    assert labels.count("validation") == 3 and labels.count("training") == 3
    assert "frequency" in labels and "previous character" in labels
