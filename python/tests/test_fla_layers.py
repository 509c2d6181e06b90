"""kdalab's training mixers against fla's layers of the same name, with the
same weights: a PyTorch transcription of fla's GatedDeltaNet and
KimiDeltaAttention layers (fla/layers/gated_deltanet.py, fla/layers/kda.py:
their projections, ShortConvolution with SiLU, the in-kernel gate and
beta, the L2 norm of q and k, FusedRMSNormGated, o_proj; the kernels
replaced by the recurrence of REFERENCE.md), run in float64 on the CPU, and
kdalab_mixer_fwd_f64 (lib/kdalab_mixer.h) through ctypes, given the same
weights mapped into its layout. With the options that make the designs the
same — for Gated DeltaNet the swish output gate (fla's use_gate=True), for
KDA the low-rank sigmoid gate of rank d with a bias — and fla's expand_v = 1,
the outputs agree to float64 rounding; the differences that remain between
the layers as each is configured by default are listed in
experiments/README.md ("The training mixers against fla's layers").
"""

import ctypes

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kdalab import _lib  # noqa: E402

CONV_W = 4
L2_EPS, ONORM_EPS = 1e-6, 1e-5
_D = ctypes.POINTER(ctypes.c_double)


class MixerConfig(ctypes.Structure):
    """kdalab_mixer_config."""
    _fields_ = [("kind", ctypes.c_int), ("D", ctypes.c_size_t), ("H", ctypes.c_size_t),
                ("conv", ctypes.c_int), ("gate", ctypes.c_int), ("gate_rank", ctypes.c_size_t)]


class MixerParams(ctypes.Structure):
    """kdalab_mixer_params."""
    _fields_ = [(n, _D) for n in ("Wq", "Wk", "Wv", "Wo", "cq", "ck", "cv", "Wb", "Wa", "Wg",
                                  "Wg2", "A_log", "dt_bias", "Wog", "onorm", "Wog2", "bog")]


_lib.lib.kdalab_mixer_fwd_f64.restype = ctypes.c_int
_lib.lib.kdalab_mixer_fwd_f64.argtypes = [ctypes.POINTER(MixerConfig),
                                          ctypes.POINTER(MixerParams), ctypes.c_size_t,
                                          ctypes.c_size_t, _D, _D, ctypes.c_void_p]
KIND = {"gated_deltanet": 1 + _lib.MECHANISMS["gated_deltanet"],  # kdalab_mixer_kind
        "kda": 1 + _lib.MECHANISMS["kda"]}
GATE_SIGMOID, GATE_SWISH = 0, 1  # kdalab_output_gate


# ---- fla's layers, transcribed (float64, the recurrence for the kernels) ------

def short_conv(x, w):
    """fla's ShortConvolution(activation='silu'): a causal depthwise Conv1d,
    weight [C, 1, W], out[t] = silu(sum_j w[c, 0, j] x[t - W + 1 + j])."""
    T = x.shape[1]
    xp = torch.nn.functional.pad(x, (0, 0, CONV_W - 1, 0))
    y = sum(w[:, 0, j] * xp[:, j:j + T] for j in range(CONV_W))
    return torch.nn.functional.silu(y)


def l2norm(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def gated_rmsnorm(o, weight, z, act):
    """fla's FusedRMSNormGated: rmsnorm(o) * weight * act(z), per head."""
    o = o * torch.rsqrt((o * o).mean(-1, keepdim=True) + ONORM_EPS) * weight
    return o * (torch.sigmoid(z) if act == "sigmoid" else torch.nn.functional.silu(z))


def delta_recurrence(q, k, v, g, beta):
    """o_t = d^-1/2 S_t^T q_t with S = exp(g) * S, S += k (beta (v - S^T k))^T;
    g [B, T, H] or [B, T, H, d]."""
    B, T, H, d = q.shape
    S = torch.zeros(B, H, d, d)
    out = []
    for t in range(T):
        a = torch.exp(g[:, t])
        S = (a[..., None, None] if a.dim() == 2 else a[..., None]) * S
        e = v[:, t] - torch.einsum("bhkv,bhk->bhv", S, k[:, t])
        S = S + beta[:, t, :, None, None] * k[:, t, ..., None] * e[..., None, :]
        out.append(d ** -0.5 * torch.einsum("bhkv,bhk->bhv", S, q[:, t]))
    return torch.stack(out, 1)


def fla_gated_deltanet(w, x, H):
    """fla's GatedDeltaNet.forward with use_gate=True, use_short_conv=True,
    expand_v=1, num_v_heads = num_heads = H, head_dim = D / H."""
    B, T, D = x.shape
    heads = lambda y: y.reshape(B, T, H, D // H)  # noqa: E731
    q = heads(short_conv(x @ w["q_proj"].T, w["q_conv1d"]))
    k = heads(short_conv(x @ w["k_proj"].T, w["k_conv1d"]))
    v = heads(short_conv(x @ w["v_proj"].T, w["v_conv1d"]))
    beta = torch.sigmoid(x @ w["b_proj"].T)
    g = -torch.exp(w["A_log"]) * torch.nn.functional.softplus(x @ w["a_proj"].T + w["dt_bias"])
    o = delta_recurrence(l2norm(q), l2norm(k), v, g, beta)
    o = gated_rmsnorm(o, w["o_norm"], heads(x @ w["g_proj"].T), "swish")
    return o.reshape(B, T, D) @ w["o_proj"].T


def fla_kda(w, x, H):
    """fla's KimiDeltaAttention.forward with use_short_conv=True, expand_v=1,
    num_v_heads = num_heads = H, head_dim = D / H."""
    B, T, D = x.shape
    d = D // H
    heads = lambda y: y.reshape(B, T, H, d)  # noqa: E731
    q = heads(short_conv(x @ w["q_proj"].T, w["q_conv1d"]))
    k = heads(short_conv(x @ w["k_proj"].T, w["k_conv1d"]))
    v = heads(short_conv(x @ w["v_proj"].T, w["v_conv1d"]))
    f = heads(x @ w["f_proj.0"].T @ w["f_proj.1"].T)
    beta = torch.sigmoid(x @ w["b_proj"].T)
    g = -torch.exp(w["A_log"])[:, None] * torch.nn.functional.softplus(
        f + w["dt_bias"].reshape(H, d))  # fused_kda_gate
    o = delta_recurrence(l2norm(q), l2norm(k), v, g, beta)
    z = heads(x @ w["g_proj.0"].T @ w["g_proj.1"].T + w["g_proj.1.bias"])
    o = gated_rmsnorm(o, w["o_norm"], z, "sigmoid")
    return o.reshape(B, T, D) @ w["o_proj"].T


def fla_weights(rng, mech, D, H):
    """fla's parameters by name, PyTorch layouts (nn.Linear [out, in]; Conv1d
    [C, 1, W]), drawn at scales that keep every path alive."""
    d = D // H
    n = lambda *s: torch.tensor(rng.normal(size=s) / np.sqrt(s[-1]))  # noqa: E731
    w = {p: n(D, D) for p in ("q_proj", "k_proj", "v_proj", "o_proj")}
    w.update({c: torch.tensor(rng.uniform(-0.5, 0.5, (D, 1, CONV_W)))
              for c in ("q_conv1d", "k_conv1d", "v_conv1d")})
    w["b_proj"] = n(H, D)
    w["o_norm"] = torch.tensor(rng.uniform(0.5, 1.5, d))
    w["A_log"] = torch.tensor(np.log(rng.uniform(1, 16, H)))
    if mech == "gated_deltanet":
        w["a_proj"] = n(H, D)
        w["dt_bias"] = torch.tensor(rng.normal(size=H))
        w["g_proj"] = n(D, D)
    else:
        w["f_proj.0"], w["f_proj.1"] = n(d, D), n(D, d)
        w["dt_bias"] = torch.tensor(rng.normal(size=D))
        w["g_proj.0"], w["g_proj.1"] = n(d, D), n(D, d)
        w["g_proj.1.bias"] = torch.tensor(rng.normal(size=D) * 0.5)
    return w


def kdalab_mixer(mech, w, x, D, H):
    """kdalab_mixer_fwd_f64 with fla's weights mapped into kdalab's layout
    (row vectors: W = weight^T; the convolution's taps reversed: kdalab's
    y[t] = sum_i c[i] a[t - i])."""
    d = D // H
    arr = lambda t: np.ascontiguousarray(t.detach().numpy())  # noqa: E731
    conv = lambda t: arr(torch.flip(t[:, 0, :], [1]).T)  # noqa: E731
    p = {"Wq": arr(w["q_proj"].T), "Wk": arr(w["k_proj"].T), "Wv": arr(w["v_proj"].T),
         "Wo": arr(w["o_proj"].T), "cq": conv(w["q_conv1d"]), "ck": conv(w["k_conv1d"]),
         "cv": conv(w["v_conv1d"]), "Wb": arr(w["b_proj"].T), "A_log": arr(w["A_log"]),
         "dt_bias": arr(w["dt_bias"]), "onorm": arr(w["o_norm"])}
    if mech == "gated_deltanet":
        p.update(Wa=arr(w["a_proj"].T), Wog=arr(w["g_proj"].T))
        cfg = MixerConfig(KIND[mech], D, H, 1, GATE_SWISH, 0)
    else:
        p.update(Wg=arr(w["f_proj.0"].T), Wg2=arr(w["f_proj.1"].T), Wog=arr(w["g_proj.0"].T),
                 Wog2=arr(w["g_proj.1"].T), bog=arr(w["g_proj.1.bias"]))
        cfg = MixerConfig(KIND[mech], D, H, 1, GATE_SIGMOID, d)
    params = MixerParams(**{n: a.ctypes.data_as(_D) for n, a in p.items()})
    xa = arr(x)
    y = np.empty_like(xa)
    B, T = xa.shape[:2]
    _lib.check(_lib.lib.kdalab_mixer_fwd_f64(ctypes.byref(cfg), ctypes.byref(params), B, T,
                                             xa.ctypes.data_as(_D), y.ctypes.data_as(_D), None),
               "kdalab_mixer_fwd_f64")
    return y


@pytest.mark.parametrize("mech", ["gated_deltanet", "kda"])
def test_mixer_equals_fla_layer_with_the_same_weights(mech):
    """Same weights, same input: kdalab's mixer and the transcription of
    fla's layer agree to float64 rounding (1e-12 of the output's max; the
    SIMD chunkwise form against the recurrence, through every projection). A
    swapped convolution tap or a transposed projection fails it (checked)."""
    rng = np.random.default_rng(3)
    B, T, D, H = 2, 37, 16, 2
    w = fla_weights(rng, mech, D, H)
    x = torch.tensor(rng.normal(size=(B, T, D)))
    fla = (fla_gated_deltanet if mech == "gated_deltanet" else fla_kda)(w, x, H).numpy()
    ours = kdalab_mixer(mech, w, x, D, H)
    err = np.abs(ours - fla).max() / np.abs(fla).max()
    assert err < 1e-12, err
    # the test can fail: the convolution's taps in fla's order instead of reversed
    wrong = dict(w, q_conv1d=torch.flip(w["q_conv1d"], [2]))
    bad = kdalab_mixer(mech, wrong, x, D, H)
    assert np.abs(bad - fla).max() / np.abs(fla).max() > 1e-3
