"""Checks for lesson 11 (a small GPT): ``shift_targets``, ``lm_loss``, ``gpt_logits``, ``lr_at``,
``train_step``, ``sample_next``, ``repeat_kv``, ``kv_cache_bytes``.

Deterministic results are compared with the course's references in ``helpers.gpt``; each known
mistake is computed and named when the learner's result matches it. ``train_step`` is run on a
small model with plain SGD, so the change of every weight shows which gradient the step used.
``sample_next`` draws many samples and compares their frequencies with the distribution they
must come from — any correct sampler passes, ``torch.multinomial`` or an inverse CDF, as long as
it draws from the generator it is given.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from .. import gpt as ref
from ..block import encoder_block, layer_norm
from ..positional import sinusoidal_encoding
from .core import (
    CheckFailed,
    call,
    expect_close,
    expect_dtype,
    expect_pair,
    expect_returned,
    passed,
    same,
    single_output,
    with_course_callees,
)
from .failure import hinted

# ----------------------------------------------------------------------------- targets and loss

SHIFT_FIX = (
    "inputs = tokens[:, :-1] and targets = tokens[:, 1:]: position t reads token t and must predict "
    "token t + 1"
)


@hinted
def check_shift_targets(
    shift_targets: Callable, seed: int = 0, batch: int = 3, length: int = 9, verbose: bool = True
) -> None:
    """Check a learner's ``shift_targets(tokens)`` on random ids (B, T+1)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randperm(1000, generator=g)[: batch * length].view(batch, length)  # no id repeats
    before = tokens.clone()
    what = f"shift_targets of tokens {tuple(tokens.shape)}"
    inputs, targets = expect_pair(
        call(shift_targets, tokens, what=what, fix=SHIFT_FIX), what, "inputs", "targets"
    )
    if not torch.equal(tokens, before):
        raise CheckFailed(f"{what} changed the tokens it was given", "slice, do not assign into tokens")
    for name, got in (("inputs", inputs), ("targets", targets)):
        if not torch.is_tensor(got):
            raise CheckFailed(f"{what}: {name} is a {type(got).__name__}, not a torch tensor", SHIFT_FIX)
        if got.dtype != torch.long:
            raise CheckFailed(
                f"{what}: {name} has dtype {got.dtype}; token ids are torch.long (the "
                "embedding and the loss index with them)",
                "keep the slices of tokens as they are",
            )
        if tuple(got.shape) != (batch, length - 1):
            why = (
                "shifted along the batch (dim 0), not along time (dim 1)"
                if tuple(got.shape) == (batch - 1, length)
                else f"both must be (B, T) with T = {length} − 1: the last token has no next token to "
                "predict and the first is no one's target"
            )
            raise CheckFailed(
                f"{what}: {name} has shape {tuple(got.shape)}, expected {(batch, length - 1)} — {why}",
                SHIFT_FIX,
            )
    want_in, want_t = ref.shift_targets(tokens)
    if torch.equal(inputs, want_in) and torch.equal(targets, want_t):
        passed("shift_targets: targets[:, t] = tokens[:, t + 1], inputs = tokens[:, :-1]", verbose)
        return
    if torch.equal(inputs, targets):
        raise CheckFailed(
            f"{what}: the targets equal the inputs — your model is asked to copy its input. "
            "The loss collapses towards 0 (attending to its own position is enough) and the "
            "model learns nothing about the next token",
            SHIFT_FIX,
        )
    if torch.equal(inputs, want_t) and torch.equal(targets, want_in):
        raise CheckFailed(
            f"{what} returned (tokens[:, 1:], tokens[:, :-1]): each target is the token "
            "*before* its input, so the model would predict the past",
            "return inputs, targets — " + SHIFT_FIX,
        )
    raise CheckFailed(
        f"{what}: inputs or targets hold other tokens than tokens[:, :-1] and tokens[:, 1:]", SHIFT_FIX
    )


LOSS_FIX = (
    "F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)), or by hand: "
    "−log_softmax(logits, dim=-1) picked at each target with gather, then .mean()"
)


def _loss_mistakes(logits: torch.Tensor, targets: torch.Tensor) -> list[tuple]:
    B, T, V = logits.shape
    right = ref.lm_loss(logits, targets).item()
    picked = logits.gather(-1, targets[..., None])[..., 0]  # (B, T): the target's logit
    return [
        (
            right * B * T,
            "this is the sum over all B·T positions; the loss is their mean (a sum grows with "
            "the batch and the length, and so would every step size)",
        ),
        (
            right * T,
            "this is the sum over the positions of each sequence, averaged over the batch; the "
            "loss is the mean over every position",
        ),
        (
            right / math.log(2),
            "this is in bits (log base 2); the loss is in nats (natural log), as F.cross_entropy gives it",
        ),
        (
            -right,
            "the sign is flipped: this is the mean log-probability of the targets; the loss is its negative",
        ),
        (
            -picked.mean().item(),
            "this is minus the mean of the targets' raw logits — the log-softmax is "
            "missing, so nothing stops the model from raising every logit",
        ),
        (
            -torch.softmax(logits, -1).gather(-1, targets[..., None]).mean().item(),
            "this is minus the targets' mean probability; the loss takes the log of it (cross-entropy)",
        ),
        (
            -torch.log_softmax(logits, 1).gather(-1, targets[..., None]).mean().item(),
            "the log-softmax ran over the time axis (dim 1); it runs over the vocabulary (the last dim)",
        ),
    ]


@hinted
def check_lm_loss(
    lm_loss: Callable, seed: int = 0, batch: int = 3, length: int = 5, vocab: int = 11, verbose: bool = True
) -> None:
    """Check a learner's ``lm_loss(logits, targets)``: value and gradient, on random float64 logits."""
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(batch, length, vocab, generator=g, dtype=torch.float64) * 2).requires_grad_()
    targets = torch.randint(0, vocab, (batch, length), generator=g)
    what = f"lm_loss of logits {tuple(logits.shape)}"
    got = call(lm_loss, logits, targets, what=what, fix=LOSS_FIX)
    expect_returned(got, what, "the loss")
    if not torch.is_tensor(got):
        raise CheckFailed(
            f"{what}: a {type(got).__name__}, not a torch tensor — train_step calls .backward() on it",
            "return the tensor; call .item() only where you need a number",
        )
    if got.numel() != 1 or got.ndim:
        raise CheckFailed(
            f"{what} has shape {tuple(got.shape)}; the loss is one number (a 0-d tensor), the "
            "mean over every position",
            LOSS_FIX,
        )
    with torch.no_grad():
        mistakes = _loss_mistakes(logits.detach(), targets)
        want = ref.lm_loss(logits.detach(), targets).item()
    expect_close(got.detach(), want, what, mistakes, fix=LOSS_FIX)
    if not got.requires_grad:
        raise CheckFailed(
            f"{what} has the right value but no gradient: it was computed outside torch's graph "
            "(NumPy, .item(), .detach() or torch.no_grad), so training could not learn from it",
            "compute it with torch operations on logits, and return the tensor",
        )
    (grad,) = torch.autograd.grad(got, logits)
    (want_grad,) = torch.autograd.grad(ref.lm_loss(logits, targets), logits)
    expect_close(grad, want_grad, f"the gradient of {what}", fix=LOSS_FIX)
    passed(
        "lm_loss is the mean cross-entropy in nats over every position, and its gradient is right", verbose
    )


# ----------------------------------------------------------------------------- the assembled model

GPT_FIX = (
    "x = tok_emb[tokens] · √D + sinusoidal_encoding(T, D); for each block: x = encoder_block(x, p, "
    "n_heads, norm_first=True, mask=causal_mask(T)); x = layer_norm(x, ln_f_gamma, ln_f_beta); "
    "logits = x @ tok_emb.T"
)


def small_gpt(
    seed: int, vocab: int = 13, d_model: int = 16, n_heads: int = 4, n_layers: int = 2
) -> ref.TinyGPT:
    """A TinyGPT in float64, eval mode, its LayerNorms and biases random too (none is an identity)."""
    torch.manual_seed(seed)
    model = (
        ref.TinyGPT(
            ref.GPTConfig(
                vocab=vocab, block_size=32, d_model=d_model, n_heads=n_heads, n_layers=n_layers, dropout=0.0
            )
        )
        .double()
        .eval()
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "gamma" in name:
                p.uniform_(0.5, 1.5)
            elif "beta" in name or ".b" in name:
                p.normal_(0.0, 0.1)
            else:
                p.normal_(0.0, 0.3)
    return model


def _gpt_variant(tokens, params, n_heads, mask=True, positions=True, final_norm=True, norm_first=True,
                 scale=True):
    T, D = tokens.shape[1], params["tok_emb"].shape[1]
    x = params["tok_emb"][tokens] * (math.sqrt(D) if scale else 1.0)
    if positions:
        x = x + sinusoidal_encoding(T, D).to(x.dtype)
    causal = torch.ones(T, T, dtype=torch.bool).tril() if mask else None
    for p in params["blocks"]:
        x = encoder_block(x, p, n_heads, norm_first=norm_first, mask=causal)
    if final_norm:
        x = layer_norm(x, params["ln_f_gamma"], params["ln_f_beta"])
    return x @ params["tok_emb"].T


@hinted
def check_gpt_logits(
    gpt_logits: Callable, seed: int = 0, batch: int = 2, length: int = 7, verbose: bool = True
) -> None:
    """Check a learner's ``gpt_logits(tokens, params, n_heads)`` against ``TinyGPT``; probe for the future."""
    model = small_gpt(seed)
    params = {k: (v if isinstance(v, list) else v.detach()) for k, v in model.params().items()}
    params["blocks"] = [
        {k: (v.detach() if torch.is_tensor(v) else v) for k, v in b.items()} for b in params["blocks"]
    ]
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.config.vocab, (batch, length), generator=g)
    what = f"gpt_logits of tokens {tuple(tokens.shape)}"
    got = call(gpt_logits, tokens, params, 4, what=what, fix=GPT_FIX)
    expect_returned(got, what, "the logits")
    single_output(got, what, "(B, T, V)")
    with torch.no_grad():
        want = model(tokens)
    if torch.is_tensor(got) and tuple(got.shape) == tuple(want.shape) and not same(got.detach(), want):
        t = length // 2
        changed = tokens.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % model.config.vocab  # every later token
        again = call(gpt_logits, changed, params, 4, what=what, fix=GPT_FIX)
        if torch.is_tensor(again) and not same(
            again[:, : t + 1].detach(), got[:, : t + 1].detach(), 1e-6, 1e-9
        ):
            raise CheckFailed(
                f"{what}: your model sees the future — changing the tokens after position {t} "
                f"changed the logits at position {t} and before. A model that can read token "
                "t + 1 learns to copy it instead of predicting it",
                "pass mask=causal_mask(T) (True where key j ≤ query i) to every block",
            )
    with torch.no_grad():
        mistakes = [
            (
                _gpt_variant(tokens, params, 4, positions=False),
                "the positions are missing: without them the model cannot tell `ab` from `ba` in its context",
                "add sinusoidal_encoding(T, D) to the embeddings",
            ),
            (
                _gpt_variant(tokens, params, 4, scale=False),
                "the embeddings are not multiplied by √D: each token's row is then about √D times smaller "
                "than its position vector, and the model barely sees which character it reads",
                "x = tok_emb[tokens] * math.sqrt(D) + sinusoidal_encoding(T, D)",
            ),
            (
                _gpt_variant(tokens, params, 4, final_norm=False),
                "the final LayerNorm is missing (ln_f_gamma, "
                "ln_f_beta): a pre-norm stack's residual path is never normalised before the read-out",
                "x = layer_norm(x, params['ln_f_gamma'], params['ln_f_beta']) before the logits",
            ),
            (
                _gpt_variant(tokens, params, 4, norm_first=False),
                "these blocks are post-norm; GPT's are pre-norm",
                "encoder_block(…, norm_first=True, …)",
            ),
        ]
    expect_close(got, want, what, mistakes, fix=GPT_FIX)
    passed("gpt_logits equals TinyGPT, and no position reads a later token", verbose)


# ----------------------------------------------------------------------------- the schedule

LR_FIX = (
    "step < warmup_steps: peak_lr · step / warmup_steps; step ≥ total_steps: min_lr; between: "
    "progress = (step − warmup_steps) / (total_steps − warmup_steps), "
    "min_lr + ½ (peak_lr − min_lr)(1 + cos(π · progress))"
)


def _schedule(
    steps, peak, warmup, total, min_lr, warm=lambda s, w: s / w, start=None, end=True, floor=None, shape="cos"
) -> np.ndarray:
    out = []
    for s in steps:
        if s < warmup:
            out.append(peak * warm(s, warmup))
            continue
        if end and s >= total:
            out.append(min_lr)
            continue
        progress = (s - (warmup if start is None else start)) / (total - (warmup if start is None else start))
        low = min_lr if floor is None else floor
        if shape == "cos":
            out.append(low + 0.5 * (peak - low) * (1 + math.cos(math.pi * progress)))
        else:
            out.append(peak - (peak - low) * progress)
    return np.array(out)


@hinted
def check_lr_at(lr_at: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``lr_at(step, peak_lr, warmup_steps, total_steps, min_lr)`` over whole schedules."""
    rng = np.random.default_rng(seed)
    cases = [
        (1e-3, 10, 100, 1e-4),
        (float(rng.uniform(1e-3, 1e-2)), int(rng.integers(3, 8)), int(rng.integers(30, 60)), 0.0),
    ]
    for peak, warmup, total, min_lr in cases:
        steps = list(range(0, total + 6))
        what = (
            f"lr_at(step, peak_lr={peak:.3g}, warmup_steps={warmup}, total_steps={total}, min_lr={min_lr:g})"
        )
        got = []
        for s in steps:
            value = call(lr_at, s, peak, warmup, total, min_lr, what=what, fix=LR_FIX)
            expect_returned(value, f"{what} at step {s}", "the learning rate")
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                value = value.item()
            if not isinstance(value, numbers.Real):
                raise CheckFailed(f"{what} at step {s} is a {type(value).__name__}, not a number", LR_FIX)
            got.append(float(value))
        args = (steps, peak, warmup, total, min_lr)
        mistakes = [
            (
                _schedule(*args, warm=lambda s, w: (s + 1) / w),
                "the warm-up is off by one step: at step 0 the rate "
                "must be 0 and it reaches peak_lr at step warmup_steps, not one step earlier",
                "peak_lr * step / warmup_steps for step < warmup_steps",
            ),
            (
                _schedule(*args, warm=lambda s, w: s / (w - 1)),
                "the warm-up is off by one step: it reaches "
                "peak_lr at step warmup_steps − 1, one step early (divide by warmup_steps)",
                "peak_lr * step / warmup_steps for step < warmup_steps",
            ),
            (
                _schedule(*args, warm=lambda s, w: 1.0),
                "there is no warm-up: the rate starts at peak_lr, and the first steps of Adam are the "
                "noisiest",
                "peak_lr * step / warmup_steps for step < warmup_steps",
            ),
            (
                _schedule(*args, start=0),
                "the cosine counts from step 0, not from the end of the warm-up, so it starts below "
                "peak_lr",
                "progress = (step − warmup_steps) / (total_steps − warmup_steps)",
            ),
            (
                _schedule(*args, floor=0.0),
                "the cosine decays to 0, not to min_lr",
                "min_lr + ½ (peak_lr − min_lr)(1 + cos(π · progress))",
            ),
            (
                _schedule(*args, end=False),
                "after total_steps the cosine rises again; the rate stays at min_lr",
                "if step >= total_steps: return min_lr",
            ),
            (
                _schedule(*args, shape="linear"),
                "the decay is linear; it follows a half cosine",
                "min_lr + ½ (peak_lr − min_lr)(1 + cos(π · progress))",
            ),
        ]
        expect_close(
            np.array(got), _schedule(*args), what + " over steps 0 … " + str(steps[-1]), mistakes, fix=LR_FIX
        )
    passed("lr_at: linear warm-up from 0, cosine decay to min_lr, min_lr after total_steps", verbose)


# ----------------------------------------------------------------------------- one optimisation step

STEP_FIX = (
    "optimizer.zero_grad(); loss = lm_loss(model(inputs), targets); loss.backward(); "
    "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm); optimizer.step(); return loss.item()"
)


class ToyLM(nn.Module):
    """The smallest language model with two weight matrices: ids (B, T) -> logits (B, T, V)."""

    def __init__(self, vocab: int, width: int, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(vocab, width, generator=g, dtype=torch.float64))
        self.out = nn.Parameter(torch.randn(width, vocab, generator=g, dtype=torch.float64))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.emb[tokens] @ self.out


def _grads(model: nn.Module, inputs, targets) -> list[torch.Tensor]:
    model.zero_grad()
    ref.lm_loss(model(inputs), targets).backward()
    return [p.grad.clone() for p in model.parameters()]


def _clipped(grads: list[torch.Tensor], max_norm: float) -> list[torch.Tensor]:
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    scale = min(1.0, max_norm / (float(norm) + 1e-6))
    return [g * scale for g in grads]


@hinted
@with_course_callees("lm_loss")
def check_train_step(
    train_step: Callable, seed: int = 0, vocab: int = 7, width: int = 5, verbose: bool = True
) -> None:
    """Check a learner's ``train_step`` with SGD on a toy model whose ``.grad`` holds an old gradient."""
    g = torch.Generator().manual_seed(seed)
    model = ToyLM(vocab, width, seed)
    inputs, targets = (
        torch.randint(0, vocab, (3, 6), generator=g),
        torch.randint(0, vocab, (3, 6), generator=g),
    )
    fresh = _grads(model, inputs, targets)
    norm = float(torch.sqrt(sum((f**2).sum() for f in fresh)))
    max_norm, lr = 0.3 * norm, 0.5  # the clip must act
    stale = [torch.randn(p.shape, generator=g, dtype=p.dtype) * norm for p in model.parameters()]
    start = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        loss_before = ref.lm_loss(model(inputs), targets).item()
    for p, s in zip(model.parameters(), stale):
        p.grad = s.clone()  # an earlier step's gradient, left behind
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    what = "train_step on a model whose .grad still holds the previous step's gradient"
    result = call(train_step, model, inputs, targets, optimizer, max_norm, what=what, fix=STEP_FIX)
    moved = [
        (p.detach() - s) / -lr for p, s in zip(model.parameters(), start)
    ]  # the gradient each weight stepped with
    flat = torch.cat([m.flatten() for m in moved])

    def as_flat(grads):
        return torch.cat([x.flatten() for x in grads])

    with_stale = [f + s for f, s in zip(fresh, stale)]
    left = [p.grad for p in model.parameters()]
    clipped_after = all(x is not None for x in left) and abs(
        float(torch.sqrt(sum((x**2).sum() for x in left))) - max_norm
    ) < 1e-6 * max(1.0, max_norm)
    mistakes = [
        (
            as_flat(_clipped(with_stale, max_norm)),
            "gradients not zeroed: the step used this batch's gradient "
            "plus the one left in .grad from before (backward() adds to .grad, it does not overwrite it)",
            "call optimizer.zero_grad() before loss.backward()",
        ),
        (
            as_flat(with_stale),
            "gradients not zeroed (backward() adds to what .grad holds) and not clipped before the step",
            "optimizer.zero_grad() before loss.backward(); clip_grad_norm_ before optimizer.step()",
        ),
        (
            as_flat(fresh),
            (
                "clipping after the optimiser step: the step used the unclipped gradient, and the "
                "clipping then changed gradients nobody reads"
                if clipped_after
                else "the gradient was not clipped before the step (its norm here is "
                f"{norm:.3g}, max_norm {max_norm:.3g})"
            ),
            "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) between loss.backward() and "
            "optimizer.step()",
        ),
        (
            as_flat(_clipped(fresh, 1.0)),
            "the gradient was clipped to norm 1.0, not to the max_norm passed in",
            "pass max_norm to clip_grad_norm_",
        ),
        (
            as_flat([f.clamp(-max_norm, max_norm) for f in fresh]),
            "each gradient entry was clamped to ±max_norm "
            "(clip_grad_value_); the contract clips the global norm of all gradients together",
            "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)",
        ),
        (
            torch.zeros_like(flat),
            "no weight changed: optimizer.step() was not called (or ran before backward())",
            STEP_FIX,
        ),
    ]
    expect_close(
        flat,
        as_flat(_clipped(fresh, max_norm)),
        "the gradient the step used (weight change / −lr)",
        mistakes,
        fix=STEP_FIX,
    )
    expect_returned(result, what, "the loss")
    if torch.is_tensor(result):
        if result.requires_grad:
            raise CheckFailed(
                f"{what} returned a tensor that still holds its graph; return a float (loss.item()), "
                "or every loss kept in a list keeps a whole graph alive",
                "return loss.item()",
            )
        result = result.item() if result.numel() == 1 else result
    if not isinstance(result, numbers.Real):
        raise CheckFailed(
            f"{what} returned a {type(result).__name__}; return the loss as a float", "return loss.item()"
        )
    with torch.no_grad():
        loss_after = ref.lm_loss(model(inputs), targets).item()
    expect_close(
        float(result),
        loss_before,
        f"the loss {what} returned",
        [
            (
                loss_after,
                "this is the loss after the step; return the one computed before it (the one the "
                "step learned from)",
                "keep loss.item() from before optimizer.step()",
            )
        ],
        fix="return loss.item()",
    )
    passed(
        "train_step zeroes old gradients, clips the global norm before the step, and returns the loss "
        "before it",
        verbose,
    )


# ----------------------------------------------------------------------------- sampling

SAMPLE_FIX = (
    "logits = logits / temperature; keep the top_k largest (the others -> -inf); probs = softmax(logits, "
    "dim=-1); torch.multinomial(probs, 1, generator=generator).squeeze(-1)"
)
N_DRAWS = 12_000  # per row kind: frequencies within about ±0.015 of the probabilities (3 standard errors)
TOLERANCE = 0.03


def _frequencies(ids: torch.Tensor, kinds: int, vocab: int) -> np.ndarray:
    """(kinds, vocab): how often each id was drawn for each kind of row (rows alternate kinds)."""
    ids = ids.view(-1, kinds).T  # (kinds, N_DRAWS)
    return np.stack([np.bincount(row.numpy(), minlength=vocab) / row.numel() for row in ids])


def _distribution(logits: torch.Tensor, temperature: float, top_k: int | None) -> np.ndarray:
    z = logits / temperature
    if top_k is not None:
        kth = torch.topk(z, top_k, dim=-1).values[:, -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    return torch.softmax(z, dim=-1).numpy()


def _draw(sample_next, logits, temperature, top_k, seed, what):
    generator = torch.Generator().manual_seed(seed)
    got = call(
        sample_next,
        logits,
        temperature=temperature,
        top_k=top_k,
        generator=generator,
        what=what,
        fix=SAMPLE_FIX,
    )
    expect_returned(got, what, "the sampled ids")
    single_output(got, what, f"({logits.shape[0]},)")
    if not torch.is_tensor(got):
        raise CheckFailed(f"{what} is a {type(got).__name__}; return a torch tensor of ids", SAMPLE_FIX)
    if got.shape == (logits.shape[0], 1):
        raise CheckFailed(
            f"{what} has shape {tuple(got.shape)}, expected ({logits.shape[0]},) — one id per row, "
            "without the last dim that torch.multinomial(probs, 1) keeps",
            "….squeeze(-1)",
        )
    if tuple(got.shape) != (logits.shape[0],):
        raise CheckFailed(
            f"{what} has shape {tuple(got.shape)}, expected ({logits.shape[0]},): one id per row", SAMPLE_FIX
        )
    if got.dtype != torch.long:
        raise CheckFailed(
            f"{what} has dtype {got.dtype}; ids are torch.long (they index the embedding)", SAMPLE_FIX
        )
    if got.min() < 0 or got.max() >= logits.shape[1]:
        raise CheckFailed(f"{what} holds ids outside 0 … {logits.shape[1] - 1}", SAMPLE_FIX)
    return got


@hinted
def check_sample_next(
    sample_next: Callable,
    seed: int = 0,
    vocab: int = 6,
    temperature: float = 0.6,
    top_k: int = 3,
    verbose: bool = True,
) -> None:
    """Check a learner's ``sample_next``: argmax at temperature 0; otherwise the frequencies of many
    draws, from two kinds of rows, against the distribution; the generator must decide the draws."""
    rng = np.random.default_rng(seed)
    base = np.linspace(2.0, 0.0, vocab)  # logits far enough apart that every mistake shows
    rows = torch.tensor(np.stack([rng.permutation(base) for _ in range(2)]), dtype=torch.float64)  # (2, V)
    logits = rows.repeat(N_DRAWS, 1)  # (2 N, V): the kinds alternate
    argmax = logits.argmax(-1)

    what = "sample_next(logits, temperature=0)"
    got = _draw(sample_next, logits[:4], 0, None, seed, what)
    if not torch.equal(got, argmax[:4]):
        raise CheckFailed(
            f"{what} must return the argmax of each row (greedy decoding); it returned other ids",
            "if temperature == 0: return logits.argmax(dim=-1)",
        )

    for temp, k in ((temperature, None), (1.0, top_k), (temperature, top_k)):
        what = f"sample_next(logits, temperature={temp}, top_k={k}) over {N_DRAWS:,} draws of each of 2 rows"
        got = _draw(sample_next, logits, temp, k, seed, what)
        freq = _frequencies(got, 2, vocab)
        want = _distribution(rows, temp, k)
        if np.abs(freq - want).max() <= TOLERANCE:
            continue
        if torch.equal(got, argmax):
            raise CheckFailed(
                f"{what}: every draw is the argmax — that is greedy decoding, not sampling; "
                "temperature > 0 draws at random from the distribution",
                "torch.multinomial(probs, 1, generator=generator)",
            )
        support = (freq > 0).sum(-1)
        if k is not None and (support == k - 1).all():
            raise CheckFailed(
                f"{what}: your draws use only {k - 1} distinct ids — top-k keeps k − 1 tokens, "
                f"one too few (is the k-th largest logit itself dropped, `>` instead of `>=`?)",
                "keep logits >= the k-th largest: torch.topk(logits, k).values[:, -1:]",
            )
        if k is not None and (support == k + 1).all():
            raise CheckFailed(
                f"{what}: your draws use {k + 1} distinct ids — top-k keeps k + 1 tokens, one too many",
                "keep logits >= torch.topk(logits, k).values[:, -1:] (the k-th largest)",
            )
        if k is not None and np.abs(freq - _distribution(rows, temp, None)).max() <= TOLERANCE:
            raise CheckFailed(
                f"{what}: these are draws over the whole vocabulary: top_k was ignored",
                "keep only the top_k largest logits (the others -> -inf) before the softmax",
            )
        if k is not None and (support > k).all():
            raise CheckFailed(
                f"{what}: ids outside the top {k} logits were drawn ({int(support.min())} distinct "
                "ids per row) — the others must get probability 0 (logit −inf, not 0)",
                "logits.masked_fill(logits < kth, float('-inf')) before the softmax",
            )
        mistakes = [
            (
                _distribution(rows, 1.0, k),
                "these are draws at temperature 1: the temperature had no effect — "
                "applied after the softmax (probabilities / T are renormalised away) it does nothing; divide "
                "the logits by it before the softmax",
                "softmax(logits / temperature)",
            ),
            (
                _distribution(rows, 1 / temp, k),
                "the logits were multiplied by the temperature; divide them (T < 1 sharpens, T > 1 flattens)",
                "logits / temperature",
            ),
            (
                np.full_like(want, 1 / vocab),
                "every id is drawn equally often: the draws ignore the logits",
                SAMPLE_FIX,
            ),
            (
                _distribution(rows, temp, None),
                "these are draws over the whole vocabulary: top_k was ignored",
                "keep only the top_k largest logits (the others -> -inf) before the softmax",
            ),
            (
                _distribution(rows.flip(0), temp, k),
                "each row was sampled from the other row's distribution: keep the batch dimension apart",
                SAMPLE_FIX,
            ),
        ]
        for dist, message, fix in mistakes:
            if np.abs(freq - dist).max() <= TOLERANCE:
                raise CheckFailed(f"{what}: {message}", fix)
        bad = np.unravel_index(np.argmax(np.abs(freq - want)), want.shape)
        raise CheckFailed(
            f"{what}: id {bad[1]} of row kind {bad[0]} was drawn {freq[bad]:.1%} of the time; "
            f"its probability is {want[bad]:.1%}",
            SAMPLE_FIX,
        )

    what = f"sample_next(logits, temperature={temperature}, top_k={top_k}) twice with generators of one seed"
    first = _draw(sample_next, logits[:200], temperature, top_k, seed + 1, what)
    second = _draw(sample_next, logits[:200], temperature, top_k, seed + 1, what)
    other = _draw(sample_next, logits[:200], temperature, top_k, seed + 2, what)
    if not torch.equal(first, second) or torch.equal(first, other):
        raise CheckFailed(
            f"{what} gave different ids: the draws do not come from the generator passed in, so "
            "a run cannot be repeated",
            "pass generator=generator to torch.multinomial (or torch.rand)",
        )
    passed(
        "sample_next: argmax at temperature 0; draws follow softmax(logits / T) over the top k; the "
        "generator decides them",
        verbose,
    )


# ----------------------------------------------------------------------------- grouped-query attention

REPEAT_FIX = "x.repeat_interleave(n_rep, dim=1): copies of one head sit next to each other"


@hinted
def check_repeat_kv(
    repeat_kv: Callable,
    seed: int = 0,
    batch: int = 2,
    kv_heads: int = 3,
    n_rep: int = 2,
    length: int = 4,
    d_head: int = 5,
    verbose: bool = True,
) -> None:
    """Check a learner's ``repeat_kv(x, n_rep)`` on random (B, H_kv, T, d_h), and n_rep = 1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, kv_heads, length, d_head, generator=g, dtype=torch.float64)
    for rep in (n_rep, 1):
        what = f"repeat_kv(x {tuple(x.shape)}, n_rep={rep})"
        got = call(repeat_kv, x, rep, what=what, fix=REPEAT_FIX)
        expect_returned(got, what, "the repeated heads")
        single_output(got, what, "(B, H_kv·n_rep, T, d_h)")
        expect_dtype(got, x.dtype, what, "the heads it copies")
        mistakes = [
            (
                x.repeat(1, rep, 1, 1),
                "the heads are tiled (0, 1, 2, 0, 1, 2, …, `repeat`): query head h would read "
                "key/value head h % H_kv, but grouped-query attention gives each key/value head to n_rep "
                "consecutive query heads (0, 0, 1, 1, …): h // n_rep",
                REPEAT_FIX,
            ),
            (
                x.repeat_interleave(rep, dim=2),
                "the positions were repeated (dim 2), not the heads (dim 1)",
                REPEAT_FIX,
            ),
        ]
        expect_close(
            got,
            ref.repeat_kv(x, rep),
            what,
            mistakes,
            fix=REPEAT_FIX,
            why="query head h must hold key/value head h // n_rep",
        )
    passed("repeat_kv: query head h reads key/value head h // n_rep", verbose)


# ----------------------------------------------------------------------------- the cache's bill

CACHE_FIX = "2 * n_layers * batch * n_tokens * n_kv_heads * d_head * bytes_per_element (keys and values)"


@hinted
def check_kv_cache_bytes(kv_cache_bytes: Callable, seed: int = 0, verbose: bool = True) -> None:
    """Check a learner's ``kv_cache_bytes`` on a known model and random sizes, defaults included."""
    rng = np.random.default_rng(seed)
    cases = [
        (3, 10, 5, 7, 4, 6),  # every mistake gives a different number here
        (80, 4096, 8, 128, 2, 1),
        tuple(int(v) for v in rng.integers(2, 40, size=4)) + (4, int(rng.integers(2, 9))),
    ]
    for layers, tokens, heads, d_head, nbytes, batch in cases:
        what = (
            f"kv_cache_bytes(n_layers={layers}, n_tokens={tokens}, n_kv_heads={heads}, d_head={d_head}, "
            f"bytes_per_element={nbytes}, batch={batch})"
        )
        got = call(
            kv_cache_bytes,
            layers,
            tokens,
            heads,
            d_head,
            bytes_per_element=nbytes,
            batch=batch,
            what=what,
            fix=CACHE_FIX,
        )
        expect_returned(got, what, "the number of bytes")
        if isinstance(got, bool) or not isinstance(got, numbers.Integral):
            raise CheckFailed(
                f"{what} = {got!r}: a {type(got).__name__}, but bytes are counted in whole numbers (an int)",
                "multiply ints, or wrap the product in int(…)",
            )
        want = ref.kv_cache_bytes(layers, tokens, heads, d_head, nbytes, batch)
        numbers_ = want // nbytes
        mistakes = [
            (
                want // 2,
                "this counts the keys or the values, not both: the cache holds a key and a value per "
                "token, head and layer (the factor 2)",
                CACHE_FIX,
            ),
            (
                numbers_,
                "this is the number of stored elements; multiply by bytes_per_element for bytes",
                CACHE_FIX,
            ),
            (want // batch, "batch is left out: every sequence of the batch has its own cache", CACHE_FIX),
            (want // layers, "n_layers is left out: every layer caches its own keys and values", CACHE_FIX),
        ]
        expect_close(
            got,
            want,
            what,
            mistakes[:4] if batch > 1 else mistakes[:2] + mistakes[3:],
            fix=CACHE_FIX,
            rtol=0,
            atol=0.5,
        )
    what = "kv_cache_bytes(2, 10, 3, 4) with the default bytes_per_element and batch"
    got = call(kv_cache_bytes, 2, 10, 3, 4, what=what, fix=CACHE_FIX)
    expect_close(
        got,
        ref.kv_cache_bytes(2, 10, 3, 4),
        what,
        fix="defaults: bytes_per_element=2 (fp16), batch=1",
        rtol=0,
        atol=0.5,
    )
    passed(
        "kv_cache_bytes = 2 · n_layers · batch · n_tokens · n_kv_heads · d_head · bytes_per_element", verbose
    )
