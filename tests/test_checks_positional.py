"""The lesson 05 checks bite: each known mistake fails with a message naming it, and correct
answers written in other styles pass."""

import math

import numpy as np
import pytest
import torch
from notebook_cells import notebook

from helpers import positional as ref
from helpers.checks.core import CheckFailed
from helpers.checks.positional import check_rope, check_sinusoidal_encoding

# ---------------------------------------------------------------- sinusoidal_encoding


def pe_div_term(n_positions, d_model, base=10000.0):
    """The PyTorch-tutorial style: exp(-log(base) 2i/d), float32 throughout."""
    position = torch.arange(n_positions, dtype=torch.float32).unsqueeze(1)  # (n, 1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def pe_loops_numpy(n_positions, d_model, base=10000.0):
    pe = np.zeros((n_positions, d_model))
    for p in range(n_positions):
        for i in range(d_model // 2):
            angle = p / base ** (2 * i / d_model)
            pe[p, 2 * i], pe[p, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return torch.from_numpy(pe)  # float64 is fine


def pe_stack(n_positions, d_model, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, d_model, 2).float() / d_model))
    angles = torch.outer(torch.arange(n_positions).float(), inv)  # (n, d/2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(n_positions, d_model)


@pytest.mark.parametrize("fn", [ref.sinusoidal_encoding, pe_div_term, pe_loops_numpy, pe_stack])
def test_sinusoidal_check_passes_correct_variants(fn, capsys):
    check_sinusoidal_encoding(fn)
    check_sinusoidal_encoding(fn, seed=11, n_positions=3, d_model=2, verbose=False)
    check_sinusoidal_encoding(fn, seed=5, n_positions=120, d_model=64, verbose=False)
    assert "✓" in capsys.readouterr().out


def _pe(freq_fn, first="sin", layout="interleaved", start=0, ignore_base=False):
    """A learner's encoding with one knob turned: freq_fn(i_pair, d, base) -> (d/2,) frequencies."""
    def fn(n_positions, d_model, base=10000.0):
        b = 10000.0 if ignore_base else base
        i = torch.arange(d_model // 2, dtype=torch.float64)
        angles = (torch.arange(n_positions, dtype=torch.float64) + start)[:, None] * freq_fn(i, d_model, b)
        a, c = (angles.sin(), angles.cos()) if first == "sin" else (angles.cos(), angles.sin())
        if layout == "half":
            return torch.cat([a, c], dim=1).float()
        return torch.stack([a, c], dim=-1).reshape(n_positions, d_model).float()
    return fn


RIGHT = lambda i, d, b: b ** (-2 * i / d)  # noqa: E731


def pe_dim_index(n_positions, d_model, base=10000.0):
    j = torch.arange(d_model, dtype=torch.float64)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] / base ** (j / d_model)
    pe = angles.cos()
    pe[:, 0::2] = angles[:, 0::2].sin()
    return pe


def pe_dim_index_doubled(n_positions, d_model, base=10000.0):
    pe = torch.zeros(n_positions, d_model)
    for p in range(n_positions):
        for j in range(d_model):
            angle = p / base ** (2 * j / d_model)
            pe[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def pe_integer_division(n_positions, d_model, base=10000.0):
    pe = torch.zeros(n_positions, d_model)
    for i in range(d_model // 2):
        angle = torch.arange(n_positions) / base ** (2 * i // d_model)
        pe[:, 2 * i], pe[:, 2 * i + 1] = angle.sin(), angle.cos()
    return pe


SINUSOIDAL_MISTAKES = [
    (_pe(RIGHT, first="cos"), "sin and cos are swapped"),
    (_pe(RIGHT, layout="half"), "concatenated layout"),
    (_pe(RIGHT, layout="half", first="cos"), "all the cosines in the first half"),
    (_pe(lambda i, d, b: b ** (-i / d)), "exponent is i/d"),
    (_pe(lambda i, d, b: b ** (-4 * i / d)), "twice too large"),
    (pe_dim_index, "dimension index j"),
    (pe_dim_index_doubled, "2j/d"),
    (_pe(lambda i, d, b: b ** (2 * i / d)), "the frequencies grow"),
    (_pe(RIGHT, start=1), "positions start at 1"),
    (pe_integer_division, "integer division"),
    (_pe(RIGHT, ignore_base=True), "`base` argument is ignored"),
    (lambda n, d, base=10000.0: ref.sinusoidal_encoding(n, d, base).T, "transposed"),
    (lambda n, d, base=10000.0: ref.sinusoidal_encoding(n, d, base).numpy(), "must return a torch tensor"),
    (lambda n, d, base=10000.0: None, "forget to `return`"),
    (lambda n, d, base=10000.0: ref.sinusoidal_encoding(n, d, base).long(), "floating point"),
    (lambda n, d, base=10000.0: ref.sinusoidal_encoding(n, d, base)[:, : d // 2], "shape"),
    (lambda n, d, base=10000.0: ref.sinusoidal_encoding(n, d, base) * 0.5, "differs from the reference"),
]


@pytest.mark.parametrize("fn, message", SINUSOIDAL_MISTAKES)
def test_sinusoidal_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_sinusoidal_encoding(fn)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sinusoidal_check_names_mistakes_on_other_seeds(seed):
    for fn, message in SINUSOIDAL_MISTAKES[:11]:
        with pytest.raises(CheckFailed, match=message):
            check_sinusoidal_encoding(fn, seed=seed, n_positions=30, d_model=8, verbose=False)


def test_unfinished_exercises_are_not_failures():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError):
        check_sinusoidal_encoding(stub)
    with pytest.raises(NotImplementedError):
        check_rope(stub)


# ---------------------------------------------------------------- rope


def _theta(n, d, positions, base):
    pos = torch.arange(n) if positions is None else torch.as_tensor(positions)
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    return pos.double()[:, None] * inv_freq  # (n, d/2)


def rope_complex(x, positions=None, base=10000.0):
    """RoFormer / Meta-Llama style: each pair is a complex number, multiplied by e^{iθ}."""
    theta = _theta(x.shape[-2], x.shape[-1], positions, base)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    rotated = z * torch.polar(torch.ones_like(theta), theta)
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)


def rope_matrices(x, positions=None, base=10000.0):
    """An explicit 2 × 2 rotation matrix per position and pair."""
    theta = _theta(x.shape[-2], x.shape[-1], positions, base).float()
    c, s = theta.cos(), theta.sin()
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (n, d/2, 2, 2)
    pairs = x.reshape(*x.shape[:-1], -1, 2)  # (..., n, d/2, 2)
    return torch.einsum("npij,...npj->...npi", rot, pairs).reshape(x.shape)


def rope_every_two(x, positions=None, base=10000.0):
    """GPT-J style: x cos + rotate_every_two(x) sin with repeat_interleave'd tables."""
    theta = _theta(x.shape[-2], x.shape[-1], positions, base).repeat_interleave(2, dim=-1).to(x.dtype)
    turned = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * theta.cos() + turned * theta.sin()


def rope_loops(x, positions=None, base=10000.0):
    out = x.clone()
    n, d = x.shape[-2], x.shape[-1]
    pos = list(range(n)) if positions is None else [float(p) for p in positions]
    for k in range(n):
        for i in range(d // 2):
            t = pos[k] * base ** (-2 * i / d)
            a, b = x[..., k, 2 * i], x[..., k, 2 * i + 1]
            out[..., k, 2 * i] = a * math.cos(t) - b * math.sin(t)
            out[..., k, 2 * i + 1] = a * math.sin(t) + b * math.cos(t)
    return out


def rope_llama_float32(x, positions=None, base=10000.0):
    """Meta's Llama code: float32 frequencies, angles and complex rotation, cast back to x's dtype."""
    n, d = x.shape[-2], x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, d, 2)[: d // 2].float() / d))  # (d/2,) float32
    t = torch.arange(n) if positions is None else torch.as_tensor(positions)
    freqs_cis = torch.polar(torch.ones(n, d // 2), torch.outer(t.float(), freqs))  # (n, d/2) complex64
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * freqs_cis).flatten(-2).type_as(x)


def rope_float32_angles(x, positions=None, base=10000.0):
    """Angles from a float32 constant (torch.tensor(base)), the rotation in x's own dtype."""
    n, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(n) if positions is None else torch.as_tensor(positions)
    theta = pos.float()[:, None] * torch.tensor(base) ** (-torch.arange(0, d, 2) / d)  # (n, d/2) float32
    c, s = theta.cos().to(x.dtype), theta.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)


@pytest.mark.parametrize("fn", [ref.rope, rope_complex, rope_matrices, rope_every_two, rope_loops,
                                rope_llama_float32, rope_float32_angles])
def test_rope_check_passes_correct_variants(fn, capsys):
    check_rope(fn)
    check_rope(fn, seed=4, n=9, d=2, verbose=False)
    check_rope(fn, seed=8, n=3, d=16, verbose=False)
    assert "✓" in capsys.readouterr().out


def rope_half_split(x, positions=None, base=10000.0):
    """GPT-NeoX / Hugging Face Llama: dim i pairs with i + d/2."""
    theta = _theta(x.shape[-2], x.shape[-1], positions, base)
    emb = torch.cat([theta, theta], dim=-1).to(x.dtype)
    half = x.shape[-1] // 2
    rotate_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * emb.cos() + rotate_half * emb.sin()


def rope_reversed(x, positions=None, base=10000.0):
    pos = torch.arange(x.shape[-2]) if positions is None else positions
    return ref.rope(x, -pos, base)


def _rope_with(freq=lambda i, d, b: b ** (-2 * i / d), shift=0, use_positions=True, use_base=True):
    def fn(x, positions=None, base=10000.0):
        n, d = x.shape[-2], x.shape[-1]
        pos = torch.arange(n) if positions is None or not use_positions else positions
        b = base if use_base else 10000.0
        theta = (pos.double() + shift)[:, None] * freq(torch.arange(d // 2, dtype=torch.float64), d, b)
        c, s = theta.cos().to(x.dtype), theta.sin().to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)
    return fn


def rope_swapped(x, positions=None, base=10000.0):
    theta = _theta(x.shape[-2], x.shape[-1], positions, base).to(x.dtype)
    c, s = theta.sin(), theta.cos()
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)


def rope_scattered(x, positions=None, base=10000.0):
    theta = _theta(x.shape[-2], x.shape[-1], positions, base).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.cat([even * theta.cos() - odd * theta.sin(), even * theta.sin() + odd * theta.cos()], -1)


def rope_half_tables(x, positions=None, base=10000.0):
    """GPT-J's every-two rotation fed with NeoX's cat((θ, θ)) tables."""
    theta = _theta(x.shape[-2], x.shape[-1], positions, base)
    emb = torch.cat([theta, theta], dim=-1).to(x.dtype)
    turned = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * emb.cos() + turned * emb.sin()


def rope_in_place(x, positions=None, base=10000.0):
    x.copy_(ref.rope(x, positions, base))
    return x


def rope_2d_only(x, positions=None, base=10000.0):
    theta = _theta(x.shape[-2], x.shape[-1], positions, base).to(x.dtype)
    c, s = theta.cos(), theta.sin()
    even, odd = x[:, 0::2], x[:, 1::2]  # right for (n, d) only: on (B, H, n, d) it slices the heads
    return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)


ROPE_MISTAKES = [
    (rope_half_split, "rotate_half"),
    (rope_reversed, "rotated by −θ"),
    (rope_swapped, "cos and sin are swapped"),
    (rope_scattered, "written back as \\[all evens, all odds\\]"),
    (rope_half_tables, "two halves"),
    (_rope_with(freq=lambda i, d, b: b ** (-i / d)), "exponent is i/d"),
    (_rope_with(freq=lambda i, d, b: b ** (-4 * i / d)), "twice too large"),
    (_rope_with(freq=lambda i, d, b: b ** (2 * i / d)), "grow along the pairs"),
    (_rope_with(shift=1), "shifted by one"),
    (_rope_with(use_positions=False), "`positions` argument is ignored"),
    (_rope_with(use_base=False), "`base` argument is ignored"),
    (lambda x, positions=None, base=10000.0: x.clone(), "unrotated"),
    (rope_in_place, "in place"),
    (lambda x, positions=None, base=10000.0: ref.rope(x, positions, base).numpy(), "torch tensor"),
    (lambda x, positions=None, base=10000.0: ref.rope(x, positions, base).reshape(-1, x.shape[-1]), "shape"),
    (lambda x, positions=None, base=10000.0: 2 * ref.rope(x, positions, base), "differs from the reference"),
    (rope_2d_only, r"\(2, 3, 6, 8\)\) raised RuntimeError"),
]


@pytest.mark.parametrize("fn, message", ROPE_MISTAKES)
def test_rope_check_names_the_mistake(fn, message):
    with pytest.raises(CheckFailed, match=message):
        check_rope(fn)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rope_check_names_mistakes_on_other_seeds(seed):
    for fn, message in ROPE_MISTAKES[:11]:
        with pytest.raises(CheckFailed, match=message):
            check_rope(fn, seed=seed, n=5, d=12, verbose=False)


def test_properties_alone_would_not_catch_half_split_or_reversed():
    """Why the check compares with a reference: both wrong layouts keep norms and relativity."""
    x = torch.randn(5, 8, dtype=torch.float64)
    for fn in (rope_half_split, rope_reversed):
        torch.testing.assert_close(fn(x).norm(dim=-1), x.norm(dim=-1))
        q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
        dots = [float(fn(q[None], torch.tensor([p])) @ fn(k[None], torch.tensor([p + 3]))[0])
                for p in range(6)]
        assert np.ptp(dots) < 1e-9
        assert not torch.allclose(fn(x), ref.rope(x))


def test_checks_write_nothing_to_stderr(capsys):
    with pytest.raises(CheckFailed):
        check_rope(rope_half_split)
    with pytest.raises(CheckFailed):
        check_sinusoidal_encoding(_pe(RIGHT, first="cos"))
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- one mistake, one charge

# A learner's notebook: sinusoidal_encoding with sin and cos swapped, and a rope that is right but
# reads its cos/sin tables from that encoding.
NOTEBOOK = """
import torch

def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    omega = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * omega
    return torch.stack([angles.cos(), angles.sin()], dim=-1).flatten(-2).float()

def rope(x, positions=None, base=10000.0):
    positions = torch.arange(x.shape[-2]) if positions is None else torch.as_tensor(positions)
    table = sinusoidal_encoding(int(positions.max()) + 1, x.shape[-1], base)[positions]  # (n, d)
    sin, cos = table[:, 0::2].to(x.dtype), table[:, 1::2].to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
"""


def test_rope_is_checked_with_the_course_sinusoidal_encoding(capsys):
    nb = notebook(NOTEBOOK)
    learners = nb["sinusoidal_encoding"]
    with pytest.raises(CheckFailed, match="sin and cos are swapped"):
        check_sinusoidal_encoding(learners)
    with pytest.raises(CheckFailed, match="cos and sin are swapped"):  # with the learner's: charged twice
        check_rope.__wrapped__(nb["rope"])
    check_rope(nb["rope"])
    out = capsys.readouterr().out
    assert "costs points only in sinusoidal_encoding_tests" in out and "✓ rope matches" in out
    assert nb["sinusoidal_encoding"] is learners


def test_a_wrong_rope_still_fails_with_the_course_sinusoidal_encoding():
    nb = notebook(NOTEBOOK.replace("sin, cos = table", "cos, sin = table"))
    rope = nb["rope"]
    with pytest.raises(CheckFailed, match="cos and sin are swapped"):
        check_rope(rope)
