"""Lesson 10: common claims, checked — the reason behind each answer, and the small measurements.

Each claim's reason is printed by ``check_claim`` once an answer is given, so that it cannot be
read in the notebook before answering. The reasons are stored below in base64: light
obfuscation for a self-study aid, not security (the graded answers live only in the lesson's
hidden tests). To change a reason, encode the new text and paste the result:

    python -c "from helpers.claims import encode_reason; print(encode_reason('new text'))"

The measurements back the claims that code can check: how the gradient of a plain RNN, an LSTM
and self-attention depends on the distance from the end, a convolution computed by attention
with relative positions, and the memory of causally masked attention.
"""

from __future__ import annotations

import base64
import math
import textwrap

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from .cost import tensor_memory
from .masking import causal_mask, masked_attention
from .quiz import check_choice

# ----------------------------------------------------------------------------- the reasons

_REASONS = {
    "claim_1": (
        "UmlnaHQgZm9yIHBsYWluIFJOTnMsIGFuZCBtZWFzdXJhYmxlOiBhIHdvcmQgayBzdGVwcyBiYWNrIHJlYWNoZXMgdGhlIG91"
        "dHB1dCBvbmx5IHRocm91Z2ggayBtdWx0aXBsaWNhdGlvbnMgYnkgV19oIChhbmQgdGFuaOKAsiksIHNvIGl0cyBncmFkaWVu"
        "dCBzaHJpbmtzIHJvdWdobHkgZ2VvbWV0cmljYWxseSB3aXRoIGs7IHRoZSBjZWxsIGFib3ZlIGZvdW5kIGl0IG1hbnkgb3Jk"
        "ZXJzIG9mIG1hZ25pdHVkZSB3ZWFrZXIgNDAgc3RlcHMgYmFjay4gQnV0IGdhdGVkIFJOTnMga2VlcCBhbiBhZGRpdGl2ZSBj"
        "ZWxsIHBhdGggdGhlIG5ldHdvcmsgY2FuIGxlYXJuIHRvIGhvbGQgb3BlbjogaW4gbGVzc29uIDAxIHRoZSBMU1RNIHJlYWNo"
        "ZWQgOTkuOeKAkzEwMCUgYWNjdXJhY3kgd2hpbGUgdGhlIHBsYWluIFJOTiBzdGF5ZWQgbmVhciBjaGFuY2UuIFdoYXQgYXR0"
        "ZW50aW9uIGFkZHMgZm9yIGdvb2QgaXMgYSBvbmUtc3RlcCBwYXRoIGJldHdlZW4gYW55IHR3byBwb3NpdGlvbnMgYW5kIHRy"
        "YWluaW5nIGFsbCBwb3NpdGlvbnMgaW4gcGFyYWxsZWwu"),
    "claim_2": (
        "RmFsc2UuIFdpdGggdG9rZW5zIGFzIHJvd3MgKFEgPSBYIFdfUSksIHRoZSB3ZWlnaHRzIGFyZSAobl9xLCBuX2spIGFuZCBW"
        "IGlzIChuX2ssIGRfdik6IHRoZSBvdXRwdXQgaXMgd2VpZ2h0cyBAIFYsIGVhY2ggb3V0cHV0IHJvdyBhIGJsZW5kIG9mIHZh"
        "bHVlIHJvd3MuIFbhtYAgZG9lcyBub3QgZXZlbiBmaXQgdW5sZXNzIG5fayA9IGRfdiwgYW5kIHRoZW4gaXQgc2lsZW50bHkg"
        "Y29tcHV0ZXMgc29tZXRoaW5nIGVsc2UuIChXcml0dGVuIHdpdGggdG9rZW5zIGFzIGNvbHVtbnMsIHRoZSBzYW1lIG9wZXJh"
        "dGlvbiByZWFkcyBWIMK3IHNvZnRtYXgo4oCmKeG1gC4p"),
    "claim_3": (
        "U2VsZi1hdHRlbnRpb24gd2l0aG91dCBwb3NpdGlvbnMgaXMgcGVybXV0YXRpb24tZXF1aXZhcmlhbnQsIG5vdCBpbnZhcmlh"
        "bnQ6IHNodWZmbGUgdGhlIGlucHV0IHJvd3MgYW5kIHRoZSBvdXRwdXQgcm93cyBjb21lIG91dCBzaHVmZmxlZCB0aGUgc2Ft"
        "ZSB3YXkgKHRoZSBjZWxsIGFib3ZlKS4gV2hhdCBpcyBpbnZhcmlhbnQgaXMgYSByZWFkb3V0IHRoYXQgZm9yZ2V0cyB3aGlj"
        "aCByb3cgaXMgd2hpY2gsIHN1Y2ggYXMgdGhlIG1lYW4gb3ZlciB0b2tlbnMgb3IgYSBbQ0xTXSB0b2tlbiB3aXRob3V0IHBv"
        "c2l0aW9ucy4gRWl0aGVyIHdheSB0aGUgd29yZCBvcmRlciBpcyBsb3N0IHVudGlsIHBvc2l0aW9ucyBhcmUgYWRkZWQgKGxl"
        "c3NvbiAwNSku"),
    "claim_4": (
        "RmFsc2UuIEFuIGVtYmVkZGluZyBsYXllciBpcyBhIGxlYXJuZWQgbG9va3VwIHRhYmxlOiB0b2tlbiBpZCDihpIgb25lIHJv"
        "dyBvZiBpdHMgd2VpZ2h0IG1hdHJpeC4gVGhlIHJvd3MgaGF2ZSB3aGF0ZXZlciBzaXplcyB0cmFpbmluZyBnaXZlcyB0aGVt"
        "OyBub3RoaW5nIGlzIG5vcm1hbGlzZWQgKHRoZSBjZWxsIGFib3ZlOiBkaWZmZXJlbnQgbm9ybXMsIG1lYW5zIGFuZCBzcHJl"
        "YWRzKS4gSW5zaWRlIGEgVHJhbnNmb3JtZXIsIG5vcm1hbGlzYXRpb24gY29tZXMgZnJvbSBMYXllck5vcm0sIHdoaWNoIGdp"
        "dmVzIGVhY2ggdG9rZW4ncyB2ZWN0b3IgbWVhbiAwIGFuZCB2YXJpYW5jZSAxIG92ZXIgaXRzIGZlYXR1cmVzIGJlZm9yZSBp"
        "dHMgc2NhbGUgYW5kIHNoaWZ0Lg=="),
    "claim_5": (
        "RmFsc2UuIEl0IHdhcyBhIGhvcGU6IFZhc3dhbmkgZXQgYWwuIGNob3NlIHNpbnVzb2lkcyBiZWNhdXNlIHRoZXkgJ21heSBh"
        "bGxvdycgdGhlIG1vZGVsIHRvIGV4dHJhcG9sYXRlIHRvIGxvbmdlciBzZXF1ZW5jZXMuIE1lYXN1cmVkIGxhdGVyLCBtb2Rl"
        "bHMgd2l0aCBzaW51c29pZGFsIGVuY29kaW5ncyBkZWdyYWRlIHF1aWNrbHkgYmV5b25kIHRoZSB0cmFpbmluZyBsZW5ndGgg"
        "KFByZXNzIGV0IGFsLiwgMjAyMik7IHJlbGF0aXZlIHNjaGVtZXMgc3VjaCBhcyBBTGlCaSBhbmQgUm9QRSB3ZXJlIGRldmVs"
        "b3BlZCBwYXJ0bHkgZm9yIHRoaXMuIEJlaW5nIGRlZmluZWQgYXQgZXZlcnkgcG9zaXRpb24gaXMgbm90IHRoZSBzYW1lIGFz"
        "IGJlaW5nIHVzZWZ1bCB0aGVyZS4="),
    "claim_6": (
        "T25seSBsb29zZWx5LiBUaGUgaGVhZHMgYXJlIHRyYWluZWQgam9pbnRseSwgYW5kIHRoZWlyIG91dHB1dHMgYXJlIGNvbmNh"
        "dGVuYXRlZCBhbmQgbWl4ZWQgYnkgdGhlIGxlYXJuZWQgV19POiBlYWNoIGhlYWQgcGFzc2VzIHRocm91Z2ggaXRzIG93biBi"
        "bG9jayBvZiBXX08gYW5kIHRoZSByZXN1bHRzIGFyZSBzdW1tZWQgKHRoZSBjZWxsIGFib3ZlKSDigJQgbm90IGF2ZXJhZ2Vk"
        "IGFzIGluZGVwZW5kZW50IHZvdGVzLiBBbmQgbWFueSBoZWFkcyB0dXJuIG91dCByZWR1bmRhbnQ6IGEgbGFyZ2UgZnJhY3Rp"
        "b24gY2FuIGJlIHBydW5lZCBhZnRlciB0cmFpbmluZyB3aXRoIGxpdHRsZSBsb3NzIChNaWNoZWwgZXQgYWwuLCAyMDE5OyBW"
        "b2l0YSBldCBhbC4sIDIwMTkpLg=="),
    "claim_7": (
        "SGFsZiB0cnVlLiBUaGUgdHdvIG4gw5cgbiBwcm9kdWN0cyBjb3N0IDLCt27CssK3ZCwgbGluZWFyIGluIGQ7IGJ1dCB0aGUg"
        "cHJvamVjdGlvbnMgY29zdCA0wrduwrdkwrIsIHF1YWRyYXRpYyBpbiBkLCBhbmQgdGhlIEZGTiAywrduwrdkwrdkX2ZmLiBG"
        "b3IgVmlULUJhc2UgYXQgMjI0IHB4IChuID0gMTk3LCBkID0gNzY4LCBkX2ZmID0gMzA3MikgdGhlIG4gw5cgbiBwYXJ0IGlz"
        "IGFib3V0IDQlIG9mIHRoZSBsYXllciwgYW5kIGZvciBhIDUwLXdvcmQgc2VudGVuY2Ugd2l0aCBkID0gNTEyIGV2ZW4gbGVz"
        "czsgaXQgcmVhY2hlcyBoYWxmIG9ubHkgYXQgbiA9IDJkICsgZF9mZi4gJ0F0dGVudGlvbiBpcyBxdWFkcmF0aWMnIGRlc2Ny"
        "aWJlcyB0aGUgcGFpcndpc2UgcGFydCwgbm90IHRoZSB3aG9sZSBiaWxsIG9mIGEgc2hvcnQgc2VxdWVuY2Uu"),
    "claim_8": (
        "V2l0aCByZWxhdGl2ZSBwb3NpdGlvbmFsIGVuY29kaW5ncywgeWVzOiBDb3Jkb25uaWVyIGV0IGFsLiAoMjAyMCkgcHJvdmVk"
        "IHRoYXQgYSBtdWx0aS1oZWFkIGF0dGVudGlvbiBsYXllciB3aXRoIGVub3VnaCBoZWFkcyAob25lIHBlciBrZXJuZWwgcG9z"
        "aXRpb24sIGUuZy4gOSBmb3IgYSAzIMOXIDMga2VybmVsKSBjYW4gZXhwcmVzcyBhbnkgY29udm9sdXRpb24sIGFuZCBmb3Vu"
        "ZCB0cmFpbmVkIHZpc2lvbiBhdHRlbnRpb24gbGF5ZXJzIG9mdGVuIGxvb2tpbmcgbG9jYWwuIFRoZSBjZWxsIGFib3ZlIGJ1"
        "aWxkcyB0aGUgMS1EIGNhc2Ugd2l0aCAzIGhlYWRzLiBXaXRob3V0IHBvc2l0aW9uYWwgaW5mb3JtYXRpb24sIGF0dGVudGlv"
        "biBpcyBhIHdlaWdodGVkIGF2ZXJhZ2Ugb3ZlciBhbiB1bm9yZGVyZWQgc2V0IGFuZCBjYW5ub3QgdGVsbCBhIGxlZnQgbmVp"
        "Z2hib3VyIGZyb20gYSByaWdodCBvbmUu"),
    "claim_9": (
        "VHJ1ZS4gQSBjYXVzYWwgbWFzayBzZXRzIGhhbGYgb2YgdGhlIHNjb3JlcyB0byDiiJLiiJ4sIGJ1dCBhbiBpbXBsZW1lbnRh"
        "dGlvbiB0aGF0IG1hdGVyaWFsaXNlcyB0aGUgc2NvcmVzIHN0aWxsIGJ1aWxkcyB0aGUgd2hvbGUgbiDDlyBuIG1hdHJpeCBh"
        "bmQgdGhyb3dzIHRoZSBibG9ja2VkIGhhbGYgYXdheTogdGhlIGNlbGwgYWJvdmUgbWVhc3VyZWQgdGhlIHBlYWsgZ3Jvd2lu"
        "ZyBhYm91dCA0IHRpbWVzIHBlciBkb3VibGluZyBvZiBuLCB3aXRoIGFuZCB3aXRob3V0IHRoZSBtYXNrLiBNZW1vcnkgbGlu"
        "ZWFyIGluIG4gY29tZXMgZnJvbSBjb21wdXRpbmcgaW4gYmxvY2tzIChGbGFzaEF0dGVudGlvbiwgbGVzc29uIDA4KSBvciBm"
        "cm9tIGRlY29kaW5nIHdpdGggYSBrZXkvdmFsdWUgY2FjaGUg4oCUIG5vdCBmcm9tIHRoZSBtYXNrLiBUaGUgbsKyIGNvbXBh"
        "cmlzb25zIHJlbWFpbiBlaXRoZXIgd2F5Lg=="),
    "quick_1": (
        "VGhlIGZpcnN0IHF1ZXJ5J3Mgd2VpZ2h0cyBbMC40MDEsIDAuMTk4LCAwLjQwMV0gYXJlIGl0cyBzb2Z0bWF4IG92ZXIgdGhl"
        "IHRocmVlIGtleXMuIDAuMTk4IGlzIHRoZSB3ZWlnaHQgaXQgZ2l2ZXMgdGhlIG1pZGRsZSB0b2tlbiwgc3Bpa2UsIHNvIHNw"
        "aWtlJ3MgdmFsdWUgWzAsIDEwXSBtYWtlcyB1cCAwLjE5OCBvZiB0aGUgb3V0cHV0IFs2LjAxNywgMy45ODNdLiBJdCBpcyBh"
        "IHdlaWdodCwgbm90IGEgdmVjdG9yLCBhIGxlbmd0aCBvciBhIHdpZHRoLg=="),
    "quick_2": (
        "Rm9yIGluZGVwZW5kZW50IGNvbXBvbmVudHMgb2YgdmFyaWFuY2UgMSwgccK3ayBpcyBhIHN1bSBvZiBkX2sgcHJvZHVjdHMs"
        "IHNvIGl0cyB2YXJpYW5jZSBpcyBkX2sgKHN0YW5kYXJkIGRldmlhdGlvbiA4IGF0IGRfayA9IDY0LCBhcyBtZWFzdXJlZCBh"
        "Ym92ZSkuIFNjb3JlcyB0aGF0IHNwcmVhZCBvdXQgcHVzaCB0aGUgc29mdG1heCB0b3dhcmRzIG9uZS1ob3QsIHdoZXJlIGl0"
        "cyBncmFkaWVudCBuZWFybHkgdmFuaXNoZXM7IGRpdmlkaW5nIGJ5IOKImmRfayBicmluZ3MgdGhlIHNwcmVhZCBiYWNrIG5l"
        "YXIgMS4gSXQgZG9lcyBub3Qgbm9ybWFsaXNlIHZhbHVlcywgY29tcGFyZSBmZXdlciB0b2tlbnMsIG9yIGhhdmUgYW55dGhp"
        "bmcgdG8gZG8gd2l0aCBtYXNrcy4="),
    "quick_3": (
        "V2hlbiB0aGUgZGVwZW5kZW5jaWVzIGFyZSBsb2NhbCBvciBmb2xsb3cgYSBmaXhlZCBwYXR0ZXJuLCBhIHJlY3VycmVudCBu"
        "ZXR3b3JrIChjb25zdGFudCBzdGF0ZSwgc3RyZWFtaW5nKSBvciBhIGxvY2FsIGNvbnZvbHV0aW9uIGNvdmVycyB0aGVtIHdp"
        "dGhvdXQgY29tcGFyaW5nIGV2ZXJ5IHBhaXI7IGxvY2FsIGF0dGVudGlvbiBpcyBhbm90aGVyIG9wdGlvbi4gRnVsbCBhdHRl"
        "bnRpb24gd291bGQgY29tcHV0ZSBhbGwgbsKyIHBhaXJzIGZvciBsaW5rcyB0aGF0IGFyZSBub3QgdGhlcmU7IGEgY2F1c2Fs"
        "IG1hc2sgYWxvbmUga2VlcHMgdGhlIG7CsiBtZW1vcnkgb2YgbWF0ZXJpYWxpc2VkIHNjb3JlczsgYW5kIHRoZSB2YWx1ZXMg"
        "Y2FycnkgdGhlIGluZm9ybWF0aW9uIHRoZSBrZXlzIG9ubHkgc2VsZWN0LCBzbyB0aGV5IGNhbm5vdCBiZSBkcm9wcGVkLg=="),
}

CLAIM_IDS = tuple(_REASONS)


def encode_reason(text: str) -> str:
    """The base64 form in which a reason is stored in this module."""
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def reason(claim_id: str) -> str:
    """The explanation behind claim ``claim_id`` (e.g. "claim_3"), as plain text."""
    if claim_id not in _REASONS:
        raise ValueError(f"unknown claim {claim_id!r}; the claims are {', '.join(CLAIM_IDS)}")
    return base64.b64decode(_REASONS[claim_id]).decode("utf-8")


def check_claim(answer, claim_id: str, choices: str = "tf") -> None:
    """Visible check: the answer's format (letters, or "tf" for True/False); then the reason.

    ``None`` counts as not answered yet (``NotImplementedError``) and prints nothing; a badly
    formatted answer fails with a message saying what is expected. Right or wrong is not shown.
    """
    if claim_id not in _REASONS:
        raise ValueError(f"unknown claim {claim_id!r}; the claims are {', '.join(CLAIM_IDS)}")
    check_choice(answer, choices, claim_id)
    print(textwrap.fill(f"Why: {reason(claim_id)}", width=100, subsequent_indent="     "))


# ----------------------------------------------------------------------------- measurements


def gradient_by_distance(kind: str, n_tokens: int = 60, d_in: int = 16, d_hidden: int = 32,
                         seed: int = 0) -> torch.Tensor:
    """‖∂(last output)/∂x_t‖ of a freshly initialised model, relative to the last token: (n_tokens,).

    Entry ``k`` is the token ``k`` positions before the end. ``kind``: "rnn" (tanh), "lstm", or
    "attention" (one self-attention layer, the last position's output).
    """
    if kind not in ("rnn", "lstm", "attention"):
        raise ValueError(f"kind must be 'rnn', 'lstm' or 'attention', got {kind!r}")
    if n_tokens < 2:
        raise ValueError(f"need at least 2 tokens, got {n_tokens}")
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # nn.RNN and nn.LSTM draw their initial weights from the global generator
    x = torch.randn(1, n_tokens, d_in, generator=g, dtype=torch.float64, requires_grad=True)  # (B, T, d)
    if kind == "attention":
        w_q, w_k, w_v = (torch.randn(d_in, d_hidden, generator=g, dtype=torch.float64) / math.sqrt(d_in)
                         for _ in range(3))
        q, k, v = x @ w_q, x @ w_k, x @ w_v  # (B, T, d_hidden)
        out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_hidden), dim=-1) @ v
    else:
        layer = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM}[kind](d_in, d_hidden, batch_first=True)
        out, _ = layer.double()(x)  # (B, T, d_hidden)
    out[0, -1].sum().backward()
    norms = x.grad[0].norm(dim=-1)  # (T,)
    return (norms / norms[-1]).flip(0).detach()  # index = distance from the end


def _kernel_size(x: torch.Tensor, kernel: torch.Tensor) -> int:
    """The kernel width K, or a ValueError unless x is (n, c_in) and kernel (c_out, c_in, K) with K odd."""
    if x.ndim != 2 or kernel.ndim != 3 or kernel.size(-1) % 2 == 0 or kernel.size(1) != x.size(-1):
        raise ValueError(f"need x (n, c_in) and an odd kernel (c_out, c_in, K) with the same c_in, got "
                         f"{tuple(x.shape)} and {tuple(kernel.shape)}")
    return kernel.size(-1)


def circular_conv1d(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """1-D convolution with circular padding. x (n, c_in), kernel (c_out, c_in, K), K odd -> (n, c_out)."""
    size = _kernel_size(x, kernel)
    padded = F.pad(x.T[None], (size // 2, size // 2), mode="circular")  # (1, c_in, n + K − 1)
    return F.conv1d(padded, kernel)[0].T  # (n, c_out)


def attention_as_convolution(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """The same convolution as multi-head attention with relative-position scores: (n, c_out).

    Head h scores key j against query i by their offset alone: 0 if j − i = δ_h (circularly),
    −∞ otherwise (the limit of a sharp relative-position bias), so it copies token i + δ_h.
    W_V is the identity; W_O stacks the kernel's taps, one block per head.
    """
    size = _kernel_size(x, kernel)
    n = x.size(0)
    offset = (torch.arange(n)[None, :] - torch.arange(n)[:, None]) % n  # (n, n): key j − query i, circular
    heads = []
    for delta in range(-(size // 2), size // 2 + 1):  # one head per kernel tap
        scores = torch.full((n, n), -math.inf, dtype=x.dtype).masked_fill(offset == delta % n, 0.0)
        heads.append(torch.softmax(scores, dim=-1) @ x)  # (n, c_in): token i + δ
    w_o = torch.cat([kernel[:, :, tap].T for tap in range(size)], dim=0)  # (K·c_in, c_out)
    return torch.cat(heads, dim=-1) @ w_o


def causal_attention_peak_bytes(n: int, d: int = 64, causal: bool = True, seed: int = 0) -> int:
    """Peak bytes of tensors alive at once while lesson 04's masked_attention runs on (n, d) float32."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(n, d, generator=g) for _ in range(3))
    mask = causal_mask(n) if causal else None  # built before measuring: the mask is an input
    return tensor_memory(masked_attention, q, k, v, mask).peak_bytes


def plot_gradient_by_distance(curves: dict[str, torch.Tensor], ax=None):
    """Relative gradient size against distance from the end, one log-scale line per model."""
    if not curves:
        raise ValueError("need at least one curve, e.g. {'plain RNN': gradient_by_distance('rnn')}")
    ax = ax if ax is not None else plt.subplots(figsize=(6, 3.4), layout="constrained")[1]
    for (name, curve), colour in zip(curves.items(), ["#c44e52", "#dd8452", "#4c72b0", "#55a868"]):
        ax.plot(range(len(curve)), curve.numpy(), "-", color=colour, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("distance of the word from the end (positions)")
    ax.set_ylabel("gradient size, relative to the last word")
    ax.set_title("before training: how much can each word move the output?")
    ax.legend(fontsize=8)
    return ax
