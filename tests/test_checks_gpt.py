"""The lesson 11 checks bite: each known mistake fails with a message naming it, correct answers
written in other styles pass, and an answer computed in float32 keeps every point of its grade cell."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from notebook_cells import grade_cell, lesson_namespace

from helpers import gpt as ref
from helpers.block import encoder_block, layer_norm
from helpers.checks.core import CheckFailed
from helpers.checks.gpt import (
    _gpt_variant,
    check_gpt_logits,
    check_kv_cache_bytes,
    check_lm_loss,
    check_lr_at,
    check_repeat_kv,
    check_sample_next,
    check_shift_targets,
    check_train_step,
)
from helpers.masking import causal_mask
from helpers.positional import sinusoidal_encoding

LESSON = "11_tiny_gpt"

# ---------------------------------------------------------------- shift_targets


def shift_narrow(tokens):
    return tokens.narrow(1, 0, tokens.shape[1] - 1), tokens.narrow(1, 1, tokens.shape[1] - 1)


def shift_index(tokens):
    T = tokens.shape[1] - 1
    return tokens[:, torch.arange(T)], tokens[:, torch.arange(1, T + 1)]


def shift_copy_input(tokens):
    return tokens[:, :-1], tokens[:, :-1]


def shift_copy_next(tokens):
    return tokens[:, 1:], tokens[:, 1:]


def shift_reversed(tokens):
    return tokens[:, 1:], tokens[:, :-1]


def shift_batch_axis(tokens):
    return tokens[:-1], tokens[1:]


def shift_unsliced(tokens):
    return tokens, torch.roll(tokens, -1, dims=1)


def shift_float(tokens):
    return tokens[:, :-1].float(), tokens[:, 1:].float()


@pytest.mark.parametrize("fn", [ref.shift_targets, shift_narrow, shift_index])
def test_shift_targets_check_passes_correct_variants(fn, capsys):
    check_shift_targets(fn)
    check_shift_targets(fn, seed=5, batch=1, length=2, verbose=False)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (shift_copy_input, "your model is asked to copy its input"),
    (shift_copy_next, "your model is asked to copy its input"),
    (shift_reversed, "predict the past"),
    (shift_batch_axis, "along the batch"),
    (shift_unsliced, r"T = 9 − 1"),
    (shift_float, "torch.long"),
])
def test_shift_targets_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_shift_targets(fn, verbose=False)


# ---------------------------------------------------------------- lm_loss


def loss_by_hand(logits, targets):
    log_p = logits - torch.logsumexp(logits, dim=-1, keepdim=True)  # hand-written log-softmax
    return -log_p.gather(-1, targets[..., None]).mean()


def loss_transposed(logits, targets):
    return F.cross_entropy(logits.transpose(1, 2), targets)  # classes in dim 1, as F expects


def loss_nll_einsum(logits, targets):
    one_hot = F.one_hot(targets, logits.shape[-1]).to(logits.dtype)
    return -torch.einsum("btv,btv->", F.log_softmax(logits, -1), one_hot) / targets.numel()


def loss_float32(logits, targets):
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def loss_sum(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


def loss_per_sequence(logits, targets):
    return loss_sum(logits, targets) / logits.shape[0]


def loss_bits(logits, targets):
    return ref.lm_loss(logits, targets) / math.log(2)


def loss_raw_logits(logits, targets):
    return -logits.gather(-1, targets[..., None]).mean()


def loss_probability(logits, targets):
    return -torch.softmax(logits, -1).gather(-1, targets[..., None]).mean()


def loss_time_axis(logits, targets):
    return -torch.log_softmax(logits, 1).gather(-1, targets[..., None]).mean()


def loss_item(logits, targets):
    return torch.tensor(ref.lm_loss(logits, targets).item())


def loss_float(logits, targets):
    return ref.lm_loss(logits, targets).item()


def loss_numpy(logits, targets):
    z = logits.detach().numpy()
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return torch.tensor(-np.take_along_axis(log_p, targets.numpy()[..., None], -1).mean())


@pytest.mark.parametrize("fn", [ref.lm_loss, loss_by_hand, loss_transposed, loss_nll_einsum, loss_float32])
def test_lm_loss_check_passes_correct_variants(fn, capsys):
    check_lm_loss(fn)
    check_lm_loss(fn, seed=2, batch=1, length=1, vocab=2, verbose=False)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (loss_sum, "sum over all B·T positions"),
    (loss_per_sequence, "sum over the positions of each sequence"),
    (loss_bits, "in bits"),
    (loss_raw_logits, "log-softmax is missing"),
    (loss_probability, "takes the log"),
    (loss_time_axis, "over the time axis"),
    (loss_item, "no gradient"),
    (loss_numpy, "no gradient"),
    (loss_float, "not a torch tensor"),
])
def test_lm_loss_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_lm_loss(fn, verbose=False)


# ---------------------------------------------------------------- gpt_logits


def logits_loop_heads(tokens, params, n_heads):
    """Written out without encoder_block: heads by einsum, the mask by -inf."""
    T, D = tokens.shape[1], params["tok_emb"].shape[1]
    x = params["tok_emb"][tokens] * D**0.5 + sinusoidal_encoding(T, D).to(params["tok_emb"].dtype)
    blocked = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for p in params["blocks"]:
        h = layer_norm(x, p["ln1_gamma"], p["ln1_beta"], p["eps"])
        q, k, v = ((h @ p[f"w_{n}"] + p[f"b_{n}"]).unflatten(-1, (n_heads, -1)) for n in "qkv")  # B, T, H, d
        scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(q.shape[-1])
        w = torch.softmax(scores.masked_fill(blocked, float("-inf")), -1)
        out = torch.einsum("bhts,bshd->bthd", w, v).flatten(-2)
        x = x + out @ p["w_o"] + p["b_o"]
        h = layer_norm(x, p["ln2_gamma"], p["ln2_beta"], p["eps"])
        x = x + torch.relu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return layer_norm(x, params["ln_f_gamma"], params["ln_f_beta"]) @ params["tok_emb"].T


def logits_float32(tokens, params, n_heads):
    as32 = {k: (v.float() if torch.is_tensor(v) else v) for k, v in params.items() if k != "blocks"}
    as32["blocks"] = [{k: (v.float() if torch.is_tensor(v) else v) for k, v in b.items()}
                      for b in params["blocks"]]
    return ref.gpt_logits(tokens, as32, n_heads).to(params["tok_emb"].dtype)


def logits_no_mask(tokens, params, n_heads):
    return _gpt_variant(tokens, params, n_heads, mask=False)


def logits_inverted_mask(tokens, params, n_heads):
    T, D = tokens.shape[1], params["tok_emb"].shape[1]
    x = params["tok_emb"][tokens] * math.sqrt(D) + sinusoidal_encoding(T, D).to(params["tok_emb"].dtype)
    for p in params["blocks"]:
        x = encoder_block(x, p, n_heads, mask=~causal_mask(T) | torch.eye(T, dtype=torch.bool))
    return layer_norm(x, params["ln_f_gamma"], params["ln_f_beta"]) @ params["tok_emb"].T


def logits_no_positions(tokens, params, n_heads):
    return _gpt_variant(tokens, params, n_heads, positions=False)


def logits_no_scale(tokens, params, n_heads):
    return _gpt_variant(tokens, params, n_heads, scale=False)


def logits_no_final_norm(tokens, params, n_heads):
    return _gpt_variant(tokens, params, n_heads, final_norm=False)


def logits_post_norm(tokens, params, n_heads):
    return _gpt_variant(tokens, params, n_heads, norm_first=False)


@pytest.mark.parametrize("fn", [ref.gpt_logits, logits_loop_heads, logits_float32])
def test_gpt_logits_check_passes_correct_variants(fn, capsys):
    check_gpt_logits(fn)
    check_gpt_logits(fn, seed=4, batch=1, length=3, verbose=False)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (logits_no_mask, "your model sees the future"),
    (logits_inverted_mask, "your model sees the future"),
    (logits_no_positions, "positions are missing"),
    (logits_no_scale, "not multiplied by √D"),
    (logits_no_final_norm, "final LayerNorm is missing"),
    (logits_post_norm, "post-norm"),
])
def test_gpt_logits_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_gpt_logits(fn, verbose=False)


def test_the_future_probe_changes_token_t_plus_1_only_after_t():
    """The probe's claim: with the mask, changing every token after t leaves the logits up to t alone."""
    model = ref.TinyGPT(ref.GPTConfig(vocab=7, block_size=8, d_model=8, n_heads=2, dropout=0.0)).eval()
    tokens = torch.randint(0, 7, (2, 8))
    changed = tokens.clone()
    changed[:, 4:] = (changed[:, 4:] + 1) % 7
    with torch.no_grad():
        assert torch.allclose(model(tokens)[:, :4], model(changed)[:, :4], atol=1e-6)
        assert not torch.allclose(model(tokens)[:, 4:], model(changed)[:, 4:], atol=1e-3)


# ---------------------------------------------------------------- lr_at


def lr_numpy(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    warm = peak_lr * step / max(warmup_steps, 1)
    progress = np.clip((step - warmup_steps) / max(total_steps - warmup_steps, 1), 0.0, 1.0)
    decay = min_lr + (peak_lr - min_lr) * (1 + np.cos(np.pi * progress)) / 2
    return float(np.where(step < warmup_steps, warm, decay))


def lr_torch_tensor(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    return torch.tensor(ref.lr_at(step, peak_lr, warmup_steps, total_steps, min_lr))


def _lr(warm=lambda s, w: s / w, start=None, floor=None, end=True, linear=False):
    def wrong(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
        if step < warmup_steps:
            return peak_lr * warm(step, warmup_steps)
        if end and step >= total_steps:
            return min_lr
        first = warmup_steps if start is None else start
        progress = (step - first) / (total_steps - first)
        low = min_lr if floor is None else floor
        if linear:
            return peak_lr - (peak_lr - low) * progress
        return low + 0.5 * (peak_lr - low) * (1 + math.cos(math.pi * progress))
    return wrong


@pytest.mark.parametrize("fn", [ref.lr_at, lr_numpy, lr_torch_tensor])
def test_lr_at_check_passes_correct_variants(fn, capsys):
    check_lr_at(fn)
    check_lr_at(fn, seed=9, verbose=False)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (_lr(warm=lambda s, w: (s + 1) / w), "warm-up is off by one step"),
    (_lr(warm=lambda s, w: s / (w - 1)), "warm-up is off by one step"),
    (_lr(warm=lambda s, w: 1.0), "no warm-up"),
    (_lr(start=0), "counts from step 0"),
    (_lr(floor=0.0), "decays to 0, not to min_lr"),
    (_lr(end=False), "rises again"),
    (_lr(linear=True), "linear"),
])
def test_lr_at_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_lr_at(fn, verbose=False)


# ---------------------------------------------------------------- train_step


def step_zero_grad_on_model(model, inputs, targets, optimizer, max_norm=1.0):
    model.zero_grad(set_to_none=False)
    loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=max_norm)
    optimizer.step()
    return float(loss)


def step_clip_by_hand(model, inputs, targets, optimizer, max_norm=1.0):
    for p in model.parameters():
        p.grad = None
    loss = ref.lm_loss(model(inputs), targets)
    loss.backward()
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
    if norm > max_norm:
        for p in model.parameters():
            p.grad.mul_(max_norm / norm)
    optimizer.step()
    return loss.item()


def _step(zero=True, clip="before", step=True, report="before", what="norm"):
    def wrong(model, inputs, targets, optimizer, max_norm=1.0):
        if zero:
            optimizer.zero_grad()
        loss = ref.lm_loss(model(inputs), targets)
        loss.backward()

        def do_clip():
            if what == "value":
                torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0 if what == "one" else max_norm)

        if clip == "before":
            do_clip()
        if step:
            optimizer.step()
        if clip == "after":
            do_clip()
        if report == "after":
            with torch.no_grad():
                return ref.lm_loss(model(inputs), targets).item()
        if report == "tensor":
            return loss
        return loss.item()
    return wrong


@pytest.mark.parametrize("fn", [ref.train_step, step_zero_grad_on_model, step_clip_by_hand])
def test_train_step_check_passes_correct_variants(fn, capsys):
    check_train_step(fn)
    check_train_step(fn, seed=6, vocab=4, width=2, verbose=False)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (_step(zero=False), "gradients not zeroed"),
    (_step(zero=False, clip="none"), "gradients not zeroed"),
    (_step(clip="after"), "clipping after the optimiser step"),
    (_step(clip="none"), "was not clipped before the step"),
    (_step(what="one"), "clipped to norm 1.0, not to the max_norm"),
    (_step(what="value"), "clip_grad_value_"),
    (_step(step=False), "optimizer.step.. was not called"),
    (_step(report="after"), "loss after the step"),
    (_step(report="tensor"), "still holds its graph"),
])
def test_train_step_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_train_step(fn, verbose=False)


def test_train_step_check_grades_with_the_course_lm_loss():
    """A wrong lm_loss is charged in lm_loss_tests only: train_step is checked with the course's."""
    namespace = {"lm_loss": loss_sum, "torch": torch}
    exec("def train_step(model, inputs, targets, optimizer, max_norm=1.0):\n"
         "    optimizer.zero_grad()\n    loss = lm_loss(model(inputs), targets)\n    loss.backward()\n"
         "    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n    optimizer.step()\n"
         "    return loss.item()\n", namespace)
    check_train_step(namespace["train_step"], verbose=False)
    assert namespace["lm_loss"] is loss_sum


# ---------------------------------------------------------------- sample_next


def sample_inverse_cdf(logits, temperature=1.0, top_k=None, generator=None):
    if temperature == 0:
        return logits.argmax(-1)
    z = logits / temperature
    if top_k is not None:
        kth = z.sort(dim=-1, descending=True).values[:, top_k - 1 : top_k]
        z = torch.where(z >= kth, z, torch.full_like(z, -math.inf))
    cdf = torch.softmax(z, -1).cumsum(-1)
    u = torch.rand(z.shape[0], 1, generator=generator, dtype=cdf.dtype)
    return (cdf < u).sum(-1).clamp(max=z.shape[-1] - 1)


def sample_gumbel(logits, temperature=1.0, top_k=None, generator=None):
    if temperature == 0:
        return logits.argmax(-1)
    z = logits / temperature
    if top_k is not None:
        values, idx = torch.topk(z, top_k, dim=-1)
        z = torch.full_like(z, -math.inf).scatter(-1, idx, values)
    u = torch.rand(z.shape, generator=generator, dtype=z.dtype).clamp_min(1e-12)
    return (z - torch.log(-torch.log(u))).argmax(-1)


def _sample(after_softmax=False, multiply=False, keep=0, argmax=False, no_generator=False, zero_fill=False,
            ignore_k=False):
    def wrong(logits, temperature=1.0, top_k=None, generator=None):
        if temperature == 0 or argmax:
            return logits.argmax(-1)
        z = logits * temperature if multiply else logits if after_softmax else logits / temperature
        if top_k is not None and not ignore_k:
            kth = torch.topk(z, top_k + keep, dim=-1).values[:, -1:]
            z = z.masked_fill(z < kth, 0.0 if zero_fill else -math.inf)
        p = torch.softmax(z, -1)
        if after_softmax:
            p = p / temperature
        return torch.multinomial(p, 1, generator=None if no_generator else generator).squeeze(-1)
    return wrong


@pytest.mark.parametrize("fn", [ref.sample_next, sample_inverse_cdf, sample_gumbel])
def test_sample_next_check_passes_correct_variants(fn, capsys):
    check_sample_next(fn)
    check_sample_next(fn, seed=7, vocab=8, temperature=0.7, top_k=4, verbose=False)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (_sample(after_softmax=True), "temperature had no effect — applied after the softmax"),
    (_sample(multiply=True), "multiplied by the temperature"),
    (_sample(keep=-1), "top-k keeps k − 1 tokens"),
    (_sample(keep=1), "top-k keeps k \\+ 1 tokens"),
    (_sample(argmax=True), "argmax — that is greedy decoding, not sampling"),
    (_sample(no_generator=True), "do not come from the generator"),
    (_sample(zero_fill=True), "outside the top 3"),
    (_sample(ignore_k=True), "top_k was ignored"),
])
def test_sample_next_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_sample_next(fn, verbose=False)


@pytest.mark.parametrize("seed", range(6))
def test_sample_next_check_passes_the_reference_on_many_seeds(seed):
    """A statistical check must not fail a right answer by bad luck: the hidden tests' range of sizes."""
    for vocab, temperature, top_k in ((5, 0.5, 2), (8, 0.8, 6), (6, 0.6, 3)):
        check_sample_next(ref.sample_next, seed=1000 + seed, vocab=vocab, temperature=temperature,
                          top_k=top_k,
                          verbose=False)
        check_sample_next(sample_inverse_cdf, seed=2000 + seed, vocab=vocab, temperature=temperature,
                          top_k=top_k, verbose=False)


# ---------------------------------------------------------------- repeat_kv and kv_cache_bytes


def repeat_expand(x, n_rep):
    B, H, T, d = x.shape
    return x[:, :, None].expand(B, H, n_rep, T, d).reshape(B, H * n_rep, T, d)


def repeat_index(x, n_rep):
    return x[:, torch.arange(x.shape[1] * n_rep) // n_rep]


def repeat_einsum(x, n_rep):
    return torch.einsum("bhtd,r->bhrtd", x, torch.ones(n_rep, dtype=x.dtype)).flatten(1, 2)


def repeat_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_positions(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)


@pytest.mark.parametrize("fn", [ref.repeat_kv, repeat_expand, repeat_index, repeat_einsum])
def test_repeat_kv_check_passes_correct_variants(fn, capsys):
    check_repeat_kv(fn)
    check_repeat_kv(fn, seed=1, batch=1, kv_heads=2, n_rep=4, length=1, d_head=3, verbose=False)
    assert "✓" in capsys.readouterr().out


def repeat_float32(x, n_rep):
    return ref.repeat_kv(x.float(), n_rep)  # the exercise states that the copies keep x's dtype


@pytest.mark.parametrize("fn, message", [(repeat_tiled, "tiled"),
                                         (repeat_positions, "positions were repeated"),
                                         (repeat_float32, "dtype torch.float32")])
def test_repeat_kv_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_repeat_kv(fn, verbose=False)


def cache_math(n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element=2, batch=1):
    return math.prod([2, n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element, batch])


def cache_keys_only(n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element=2, batch=1):
    return n_layers * batch * n_tokens * n_kv_heads * d_head * bytes_per_element


def cache_elements(n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element=2, batch=1):
    return 2 * n_layers * batch * n_tokens * n_kv_heads * d_head


def cache_no_batch(n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element=2, batch=1):
    return 2 * n_layers * n_tokens * n_kv_heads * d_head * bytes_per_element


def cache_one_layer(n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element=2, batch=1):
    return 2 * batch * n_tokens * n_kv_heads * d_head * bytes_per_element


def cache_float(n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element=2, batch=1):
    return 2.0 * n_layers * batch * n_tokens * n_kv_heads * d_head * bytes_per_element


def cache_wrong_default(n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element=4, batch=1):
    return ref.kv_cache_bytes(n_layers, n_tokens, n_kv_heads, d_head, bytes_per_element, batch)


@pytest.mark.parametrize("fn", [ref.kv_cache_bytes, cache_math])
def test_kv_cache_bytes_check_passes_correct_variants(fn, capsys):
    check_kv_cache_bytes(fn)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (cache_keys_only, "keys or the values, not both"),
    (cache_elements, "number of stored elements"),
    (cache_no_batch, "batch is left out"),
    (cache_one_layer, "n_layers is left out"),
    (cache_float, "whole numbers"),
    (cache_wrong_default, "default"),
])
def test_kv_cache_bytes_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_kv_cache_bytes(fn, verbose=False)


def test_every_failure_keeps_a_fix_for_hint():
    wrong = [(check_shift_targets, shift_copy_input), (check_lm_loss, loss_sum),
             (check_gpt_logits, logits_no_mask),
             (check_lr_at, _lr(warm=lambda s, w: (s + 1) / w)), (check_train_step, _step(zero=False)),
             (check_sample_next, _sample(keep=1)), (check_repeat_kv, repeat_tiled),
             (check_kv_cache_bytes, cache_keys_only)]
    for check, fn in wrong:
        with pytest.raises(CheckFailed) as caught:
            check(fn, verbose=False)
        err = caught.value
        assert err.fix and err.fix not in err.message, (check.__name__, err)


# ---------------------------------------------------------------- grade cells with float32 answers


@pytest.fixture
def own_work_off(monkeypatch):
    """These answers are the course's functions run in float32: the tests measure the tolerance."""
    monkeypatch.setattr("helpers.checks.own_work.check_own_work", lambda *args, **kwargs: None)


@pytest.mark.parametrize("name, answer", [("lm_loss", loss_float32), ("gpt_logits", logits_float32)])
def test_a_float32_answer_keeps_its_points(name, answer, own_work_off):
    namespace = lesson_namespace(LESSON)
    namespace[name] = answer
    source = grade_cell(LESSON, f"{name}_tests")
    for _ in range(2):  # fresh hidden inputs each run
        exec(source, namespace)


@pytest.mark.parametrize("name, answer", [("shift_targets", shift_copy_input), ("lm_loss", loss_bits),
                                          ("lr_at", _lr(warm=lambda s, w: (s + 1) / w)),
                                          ("train_step", _step(clip="after")),
                                          ("sample_next", _sample(keep=-1)),
                                          ("repeat_kv", repeat_tiled), ("kv_cache_bytes", cache_no_batch),
                                          ("gpt_logits", logits_no_mask)])
def test_the_hidden_tests_alone_catch_the_mistakes(name, answer, own_work_off):
    namespace = lesson_namespace(LESSON)
    namespace[name] = answer
    namespace[f"check_{name}"] = lambda *args, **kwargs: None
    with pytest.raises(Exception):  # noqa: B017 - any error fails a grade cell
        exec(grade_cell(LESSON, f"{name}_tests"), namespace)
