"""The lesson 07 checks bite: each known mistake fails with a message naming it, and correct
answers written in other styles pass."""

import math

import pytest
import torch
import torch.nn.functional as F
from notebook_cells import grade_cell, lesson_namespace, notebook

from helpers import block as ref
from helpers.attention import scaled_dot_product_attention
from helpers.checks.block import check_encoder_block, check_feed_forward, check_layer_norm
from helpers.checks.core import CheckFailed

# ---------------------------------------------------------------- layer_norm


def ln_builtin(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def ln_var_mean(x, gamma, beta, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * gamma + beta


def ln_second_moment(x, gamma, beta, eps=1e-5):
    mean = x.sum(-1, keepdim=True) / x.shape[-1]
    var = (x * x).mean(-1, keepdim=True) - mean**2
    return gamma * ((x - mean) / (var + eps) ** 0.5) + beta


def ln_float32(x, gamma, beta, eps=1e-5):
    """Statistics and normalisation in float32 (mixed-precision style), cast back to x's dtype."""
    return F.layer_norm(x.float(), x.shape[-1:], gamma.float(), beta.float(), eps).to(x.dtype)


@pytest.mark.parametrize("fn", [ref.layer_norm, ln_builtin, ln_var_mean, ln_second_moment, ln_float32])
def test_layer_norm_check_passes_correct_variants(fn, capsys):
    check_layer_norm(fn)
    check_layer_norm(fn, seed=3, shape=(1, 1, 4), verbose=False)
    assert "✓" in capsys.readouterr().out


def _ln(dims, unbiased=False, eps_inside=True, affine=True):
    def wrong(x, gamma, beta, eps=1e-5):
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, unbiased=unbiased, keepdim=True)
        out = (x - mean) / (torch.sqrt(var + eps) if eps_inside else torch.sqrt(var) + eps)
        return out * gamma + beta if affine else out
    return wrong


def ln_gamma_only(x, gamma, beta, eps=1e-5):
    return _ln(-1)(x, gamma, torch.zeros_like(beta), eps)


def ln_no_eps(x, gamma, beta, eps=1e-5):
    return _ln(-1)(x, gamma, beta, 0.0)


def ln_swapped_affine(x, gamma, beta, eps=1e-5):
    return _ln(-1, affine=False)(x, gamma, beta, eps) * beta + gamma


def ln_std_plus_eps(x, gamma, beta, eps=1e-5):
    """torch's std is the unbiased one, and eps is added to it outside the root."""
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * gamma + beta


def ln_default_eps_wrong(x, gamma, beta, eps=1e-3):
    return ref.layer_norm(x, gamma, beta, eps)


LN_MISTAKES = [
    (_ln(-1, unbiased=True), "unbiased variance"),
    (_ln(0), "over the batch"),
    (_ln((0, 1)), "over the batch"),
    (_ln(1), "wrong dim"),
    (_ln(-1, eps_inside=False), "eps is outside the square root: std \\+ eps is not"),
    (_ln(-1, affine=False), "gamma and beta are ignored"),
    (ln_gamma_only, "beta is ignored"),
    (ln_no_eps, "eps is ignored"),
    (ln_swapped_affine, "gamma and beta are swapped"),
    (ln_std_plus_eps, "eps is outside the square root and the variance is unbiased"),
    (ln_default_eps_wrong, "the default eps is not 1e-5"),
]


@pytest.mark.parametrize("fn, message", LN_MISTAKES)
def test_layer_norm_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_layer_norm(fn, verbose=False)


@pytest.mark.parametrize("seed", range(8))
def test_layer_norm_check_tells_eps_ignored_from_eps_outside_the_root(seed):
    """With the default eps both give nearly the right numbers, and each other's: the check tells them
    apart where eps is large (at seed 1 an eps-less answer was once called "eps outside the root")."""
    for fn, message in LN_MISTAKES:
        with pytest.raises(AssertionError, match=message):
            check_layer_norm(fn, seed=seed, verbose=False)


def test_layer_norm_check_lets_not_implemented_through():
    def todo(x, gamma, beta, eps=1e-5):
        raise NotImplementedError

    with pytest.raises(NotImplementedError):
        check_layer_norm(todo)


def test_layer_norm_check_catches_in_place_edits():
    def in_place(x, gamma, beta, eps=1e-5):
        x -= x.mean(-1, keepdim=True)
        return x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * gamma + beta

    with pytest.raises(AssertionError, match="in place"):
        check_layer_norm(in_place, verbose=False)


# ---------------------------------------------------------------- feed_forward


def ffn_linear(x, w1, b1, w2, b2):
    return F.linear(F.relu(F.linear(x, w1.T, b1)), w2.T, b2)


def ffn_clamp(x, w1, b1, w2, b2):
    h = torch.matmul(x, w1).add(b1).clamp(min=0)
    return torch.einsum("...f,fd->...d", h, w2) + b2


def ffn_float32(x, w1, b1, w2, b2):
    return ref.feed_forward(*(t.float() for t in (x, w1, b1, w2, b2))).to(x.dtype)


@pytest.mark.parametrize("fn", [ref.feed_forward, ffn_linear, ffn_clamp, ffn_float32])
def test_feed_forward_check_passes_correct_variants(fn, capsys):
    check_feed_forward(fn)
    check_feed_forward(fn, seed=5, shape=(7, 3), d_ff=1, verbose=False)
    assert "✓" in capsys.readouterr().out


def test_feed_forward_check_allows_float32_rounding_of_outputs_near_zero():
    """An output near 0 is a sum of 32 terms as large as 60: float32 leaves ~1e-5 of them."""
    for seed in range(40):
        check_feed_forward(ffn_float32, seed=seed, shape=(4, 6, 8), d_ff=32, verbose=False)


@pytest.mark.parametrize("fn, message", [
    (lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1) @ w2 + b2, "GELU"),
    (lambda x, w1, b1, w2, b2: (x @ w1 + b1) @ w2 + b2, "no non-linearity"),
    (lambda x, w1, b1, w2, b2: torch.relu((x @ w1 + b1) @ w2 + b2), "after the second layer"),
    (lambda x, w1, b1, w2, b2: F.relu(F.relu(x @ w1 + b1) @ w2 + b2),
     "^ReLU after both layers.*\n  checked: feed_forward"),
    (lambda x, w1, b1, w2, b2: (x @ w1 + b1).clamp(min=0).matmul(w2).add(b2).clamp(min=0), "ReLU after both"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2, "b2 is missing"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1) @ w2 + b2, "b1 is missing"),
    (lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2 + b2, "raised RuntimeError"),
])
def test_feed_forward_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_feed_forward(fn, verbose=False)


# ---------------------------------------------------------------- encoder_block


def block_with_torch_sdpa(x, params, n_heads, norm_first=True, mask=None):
    """Written differently: nn.functional's fused attention and LayerNorm, heads by view/permute."""
    B, T, D = x.shape
    p = params

    def attend(h):
        q, k, v = ((h @ p[f"w_{n}"] + p[f"b_{n}"]).view(B, T, n_heads, -1).permute(0, 2, 1, 3) for n in "qkv")
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out.permute(0, 2, 1, 3).reshape(B, T, D) @ p["w_o"] + p["b_o"]

    def ln(h, i):
        return F.layer_norm(h, (D,), p[f"ln{i}_gamma"], p[f"ln{i}_beta"], p["eps"])

    def ffn(h):
        return F.relu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    if norm_first:
        h = x + attend(ln(x, 1))
        return h + ffn(ln(h, 2))
    h = ln(x + attend(x), 1)
    return ln(h + ffn(h), 2)


def block_head_loop(x, params, n_heads, norm_first=True, mask=None):
    """Written differently again: one head at a time with the course's attention, then concatenated."""
    p = params
    D = x.shape[-1]
    d_h = D // n_heads

    def attend(h):
        q, k, v = (h @ p[f"w_{n}"] + p[f"b_{n}"] for n in "qkv")
        outs = [scaled_dot_product_attention(q[..., i * d_h:(i + 1) * d_h], k[..., i * d_h:(i + 1) * d_h],
                                             v[..., i * d_h:(i + 1) * d_h],
                                             None if mask is None else mask[..., 0, :, :] if mask.ndim == 4
                                             else mask)[0] for i in range(n_heads)]
        return torch.cat(outs, -1) @ p["w_o"] + p["b_o"]

    def ln(h, i):
        return ref.layer_norm(h, p[f"ln{i}_gamma"], p[f"ln{i}_beta"], p["eps"])

    def ffn(h):
        return ref.feed_forward(h, p["w1"], p["b1"], p["w2"], p["b2"])

    if norm_first:
        h = x + attend(ln(x, 1))
        return h + ffn(ln(h, 2))
    h = ln(x + attend(x), 1)
    return ln(h + ffn(h), 2)


def block_float32(x, params, n_heads, norm_first=True, mask=None):
    """The whole layer in float32, as a model's default dtype would run it, cast back to x's dtype."""
    p32 = {key: value.float() if torch.is_tensor(value) else value for key, value in params.items()}
    return ref.encoder_block(x.float(), p32, n_heads, norm_first, mask).to(x.dtype)


@pytest.mark.parametrize("fn", [ref.encoder_block, block_with_torch_sdpa, block_head_loop, block_float32])
def test_encoder_block_check_passes_correct_variants(fn, capsys):
    check_encoder_block(fn)
    check_encoder_block(fn, seed=7, batch=2, length=6, d_model=12, n_heads=3, d_ff=20, verbose=False)
    assert "✓" in capsys.readouterr().out


def _block(norm_first_flip=False, residual=(True, True), act=torch.relu, ln=ref.layer_norm, mask_op=None,
           attention_biases=True):
    """The reference layer with one piece swapped for a learner's mistake."""
    def wrong(x, params, n_heads, norm_first=True, mask=None):
        p = params
        if not attention_biases:
            p = {**p, **{f"b_{n}": torch.zeros_like(p[f"b_{n}"]) for n in "qkvo"}}
        if mask_op is not None:
            mask = mask_op(mask)
        nf = norm_first != norm_first_flip

        def attend(h):
            return ref.multi_head(h, h, p, n_heads, mask)[0]

        def norm(h, i):
            return ln(h, p[f"ln{i}_gamma"], p[f"ln{i}_beta"], p["eps"])

        def ffn(h):
            return act(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

        r1, r2 = (1.0 if r else 0.0 for r in residual)
        if nf:
            h = r1 * x + attend(norm(x, 1))
            return r2 * h + ffn(norm(h, 2))
        h = norm(r1 * x + attend(x), 1)
        return norm(r2 * h + ffn(h), 2)
    return wrong


def _ln_fn(dims, unbiased=False, eps_inside=True, affine=True):
    def wrong(x, gamma, beta, eps=1e-5):
        return _ln(dims, unbiased, eps_inside, affine)(x, gamma, beta, eps)
    return wrong


def block_always_pre_norm(x, params, n_heads, norm_first=True, mask=None):
    return ref.encoder_block(x, params, n_heads, True, mask)


def block_written(eps=None, split="view_transpose", merge="transpose", ffn="relu", norm="placed"):
    """An encoder layer written the way public codebases write it, with one mistake switched on: ``eps``
    hard-coded, the heads split or merged by a bare view/reshape, a ReLU after both FFN layers, or
    each sub-layer written x + LN(f(x))."""
    def wrong(x, params, n_heads, norm_first=True, mask=None):
        B, T, D = x.shape
        p = params

        def attend(h):
            def heads(t):
                if split == "view":  # (B, T, D) viewed as (B, H, T, D/H): no transpose
                    return t.view(B, n_heads, T, D // n_heads)
                return t.view(B, T, n_heads, D // n_heads).transpose(1, 2)

            q, k, v = (heads(h @ p[f"w_{n}"] + p[f"b_{n}"]) for n in "qkv")
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, D/H)
            if merge == "reshape":  # (B, H, T, D/H) read straight as (B, T, D): no transpose
                out = out.reshape(B, T, D)
            else:
                out = out.transpose(1, 2).contiguous().view(B, T, D)
            return out @ p["w_o"] + p["b_o"]

        def ln(h, i):
            if eps is None:
                return F.layer_norm(h, (D,), p[f"ln{i}_gamma"], p[f"ln{i}_beta"], p["eps"])
            if eps == "default":
                return F.layer_norm(h, (D,), p[f"ln{i}_gamma"], p[f"ln{i}_beta"])  # F's own eps=1e-5
            return ref.layer_norm(h, p[f"ln{i}_gamma"], p[f"ln{i}_beta"], eps)

        def feed(h):
            out = F.relu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
            return F.relu(out) if ffn == "relu_both" else out

        if norm == "on_output":
            h = x + ln(attend(x), 1)
            return h + ln(feed(h), 2)
        if norm_first:
            h = x + attend(ln(x, 1))
            return h + feed(ln(h, 2))
        h = ln(x + attend(x), 1)
        return ln(h + feed(h), 2)
    return wrong


def test_the_block_written_in_public_style_is_right_when_nothing_is_switched_on():
    check_encoder_block(block_written(), verbose=False)
    check_encoder_block(block_written(), seed=3, eps=1e-5, verbose=False)


EPS_IGNORED = r"the LayerNorms ignore params\['eps'\] \(= 0.1 here\)"


@pytest.mark.parametrize("fn, message", [
    (block_written(eps=1e-5), EPS_IGNORED),
    (block_written(eps="default"), EPS_IGNORED),
    (block_written(eps=1e-12), EPS_IGNORED),  # BERT's
    (block_written(eps=1e-6), EPS_IGNORED),
    (block_written(split="view"), "the heads are split without a transpose"),
    (block_written(merge="reshape"), "the heads are merged without a transpose"),
    (block_written(split="view", merge="reshape"), "split and merged without a transpose"),
    (block_written(ffn="relu_both"), "ReLU after both FFN layers"),
    (block_written(norm="on_output"), r"you wrote x \+ LN\(f\(x\)\)"),
    (_block(norm_first_flip=True), "this is post-norm"),
    (block_always_pre_norm, "this is pre-norm"),
    (_block(residual=(False, True)), "residual around the attention"),
    (_block(residual=(True, False)), "residual around the feed-forward"),
    (_block(residual=(False, False)), "both residual"),
    (_block(act=F.gelu), "GELU"),
    (_block(attention_biases=False), "the attention's biases are left out"),
    (_block(ln=_ln_fn(-1, unbiased=True)), "unbiased variance"),
    (_block(ln=_ln_fn(0)), "over the batch"),
    (_block(ln=_ln_fn(1)), "over the tokens"),
    (_block(ln=_ln_fn(-1, eps_inside=False)), "eps outside the square root"),
    (_block(ln=_ln_fn(-1, affine=False)), "ignore their gamma and beta"),
    (_block(ln=ln_swapped_affine), "gamma and beta are swapped"),
    (_block(mask_op=lambda m: None), "mask is ignored"),
    (_block(mask_op=lambda m: None if m is None else ~m), "mask is inverted"),
])
def test_encoder_block_check_names_mistakes(fn, message):
    with pytest.raises(AssertionError, match=message):
        check_encoder_block(fn, verbose=False)


@pytest.mark.parametrize("seed, eps", [(11, 0.02), (12, 0.2)])
def test_a_hard_coded_eps_is_named_at_the_hidden_tests_eps(seed, eps):
    """The hidden tests draw eps from 0.01 … 0.2: a hard-coded 1e-5 is named with the eps of the run."""
    with pytest.raises(AssertionError, match=rf"ignore params\['eps'\] \(= {eps:g} here\)"):
        check_encoder_block(block_written(eps=1e-5), seed=seed, batch=2, length=7, d_model=12, n_heads=3,
                            d_ff=20, eps=eps, verbose=False)
    check_encoder_block(block_written(), seed=seed, batch=2, length=7, d_model=12, n_heads=3, d_ff=20,
                        eps=eps, verbose=False)


def test_lesson_07s_hidden_tests_vary_eps_and_name_a_hard_coded_one(monkeypatch):
    """The grade cell fails a hard-coded eps by name in its visible check (eps 0.1), and its hidden
    tests alone do too, with eps of their own (the own-work guard, which reruns the visible check,
    is off here)."""
    namespace = lesson_namespace("07_transformer")
    namespace["encoder_block"] = block_written(eps=1e-5)
    cell = grade_cell("07_transformer", "encoder_block_tests")
    with pytest.raises(CheckFailed, match=EPS_IGNORED):
        exec(cell, namespace)
    monkeypatch.setattr("helpers.checks.own_work.check_own_work", lambda *args, **kwargs: None)
    hidden = cell.split("### BEGIN HIDDEN TESTS", 1)[1]
    assert "check_encoder_block(encoder_block)" not in hidden
    drawn = r"ignore params\['eps'\] \(= 0\.(0[1-9]|1|2)\d* here\)"  # from 0.01 to 0.2
    for _ in range(3):
        with pytest.raises(CheckFailed, match=drawn) as caught:
            exec(hidden, namespace)
        assert "(= 0.1 here)" not in str(caught.value)
    namespace["encoder_block"] = block_written()
    exec(hidden, namespace)


@pytest.mark.parametrize("seed", range(12))
def test_encoder_block_check_always_pads_a_sequence(seed):
    """With a batch of two, both lengths were once drawn at random: when both were full the mask blocked
    nothing and a block that ignores it passed. One sequence is always padded now."""
    with pytest.raises(AssertionError, match="mask is ignored"):
        check_encoder_block(_block(mask_op=lambda m: None), seed=seed, batch=2, verbose=False)
    with pytest.raises(AssertionError, match="mask is ignored"):
        check_encoder_block(_block(mask_op=lambda m: None), seed=seed, batch=1, verbose=False)
    check_encoder_block(ref.encoder_block, seed=seed, batch=2, verbose=False)


def test_encoder_block_check_reports_unknown_mistakes_with_the_hint():
    def scaled_wrong(x, params, n_heads, norm_first=True, mask=None):
        return ref.encoder_block(x, params, n_heads, norm_first, mask) * (1 + 1 / math.pi)

    pattern = (r"differs from the reference: at index \(\d+, \d+, \d+\)(?s:.*)"
               r"call hint\(\) for a hint, and again for the fix$")
    with pytest.raises(AssertionError, match=pattern) as err:
        check_encoder_block(scaled_wrong, verbose=False)
    assert err.value.fix.startswith("pre-norm: h = x + attention(LN1(x))")


def test_encoder_block_check_writes_no_warnings(recwarn, capsys):
    check_encoder_block(ref.encoder_block, verbose=False)
    assert not recwarn.list
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- one mistake, one charge

# A learner's notebook: layer_norm with the unbiased variance, feed_forward with GELU, and an
# encoder_block that is right but calls both (and the course's scaled_dot_product_attention).
NOTEBOOK = """
import torch

def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) + beta

def feed_forward(x, w1, b1, w2, b2):
    return torch.nn.functional.gelu(x @ w1 + b1) @ w2 + b2

def encoder_block(x, params, n_heads, norm_first=True, mask=None):
    B, T, D = x.shape
    p = params

    def attend(h):
        q, k, v = ((h @ p[f"w_{n}"] + p[f"b_{n}"]).reshape(B, T, n_heads, -1).transpose(1, 2) for n in "qkv")
        out, _ = scaled_dot_product_attention(q, k, v, mask)
        return out.transpose(1, 2).reshape(B, T, D) @ p["w_o"] + p["b_o"]

    def ln(h, i):
        return layer_norm(h, p[f"ln{i}_gamma"], p[f"ln{i}_beta"], p["eps"])

    def ffn(h):
        return feed_forward(h, p["w1"], p["b1"], p["w2"], p["b2"])

    if norm_first:
        x = x + attend(ln(x, 1))
        return x + ffn(ln(x, 2))
    x = ln(x + attend(x), 1)
    return ln(x + ffn(x), 2)
"""


def test_encoder_block_is_checked_with_the_course_layer_norm_and_feed_forward(capsys):
    nb = notebook(NOTEBOOK, scaled_dot_product_attention=scaled_dot_product_attention)
    learners = nb["layer_norm"], nb["feed_forward"]
    with pytest.raises(CheckFailed, match="unbiased variance"):
        check_layer_norm(nb["layer_norm"])
    with pytest.raises(CheckFailed, match="GELU"):
        check_feed_forward(nb["feed_forward"])
    block = nb["encoder_block"]
    with pytest.raises(CheckFailed):  # with the learner's layer_norm and feed_forward: charged again
        check_encoder_block.__wrapped__(block)
    check_encoder_block(block)
    out = capsys.readouterr().out
    assert "costs points only in layer_norm_tests or feed_forward_tests" in out and "✓" in out
    assert (nb["layer_norm"], nb["feed_forward"]) == learners


def test_a_wrong_encoder_block_still_fails_with_the_course_layer_norm_and_feed_forward():
    nb = notebook(NOTEBOOK.replace("if norm_first:", "if not norm_first:"),
                  scaled_dot_product_attention=scaled_dot_product_attention)
    block = nb["encoder_block"]
    with pytest.raises(CheckFailed, match="post-norm"):
        check_encoder_block(block)
