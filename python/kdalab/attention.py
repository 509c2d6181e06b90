"""Causal softmax attention (no positional encoding), fla's parallel_attn, by
kdalab_attention_f64 and kdalab_attention_bwd_f64: float64 NumPy in and out.

Shapes are fla's: q [B, T, HQ, K]; k [B, T, H, K]; v [B, T, H, V] with HQ a
multiple of H (grouped-query attention: query head i reads key/value head
i // (HQ / H)); o [B, T, HQ, V]. cu_seqlens (B = 1) packs sequences along T;
each attends only within itself.
"""

import collections

import numpy as np

from . import _lib
from .ops import _as_cu, _check_finite, _expect, _real, as_f64

AttnGrads = collections.namedtuple("AttnGrads", ["dq", "dk", "dv"])


def _check(q, k, v, cu, scale, g, window_size):
    if g is not None:
        raise NotImplementedError("parallel_attn: g (forgetting attention's gate) is not in "
                                  "kdalab: pass g=None")
    if window_size is not None:
        raise NotImplementedError("parallel_attn: window_size (sliding-window attention) is not "
                                  "in kdalab: pass window_size=None")
    B, T, HQ, K = q.shape
    if k.ndim != 4 or k.shape[:2] != (B, T) or k.shape[3] != K or k.shape[2] == 0 \
            or HQ % k.shape[2]:
        raise ValueError("k: shape %s does not fit q's %s (k is [B, T, H, K], q's heads HQ a "
                         "multiple of H)" % (k.shape, q.shape))
    H = k.shape[2]
    if v.ndim != 4 or v.shape[:3] != (B, T, H):
        raise ValueError("v: shape %s does not fit k's %s (v is [B, T, H, V])"
                         % (v.shape, k.shape))
    if cu is not None and B != 1:
        raise ValueError("cu_seqlens: needs B = 1 (sequences packed along T), got B = %d" % B)
    if cu is not None and (cu[0] != 0 or cu[-1] != T or (np.diff(cu) < 0).any()):
        raise ValueError("cu_seqlens: %s must rise from 0 to T = %d" % (cu.tolist(), T))
    scale = _real("scale", scale) if scale is not None else K ** -0.5
    return B, T, HQ, H, K, v.shape[3], HQ // H, scale


def _spans(cu, T):
    bounds = cu if cu is not None else np.array([0, T])
    return [(int(bounds[n]), int(bounds[n + 1])) for n in range(len(bounds) - 1)]


def parallel_attn(q, k, v, g=None, scale=None, window_size=None, cu_seqlens=None):
    """o [B, T, HQ, V] = causal softmax(scale q k^T) v per head (fla's parallel_attn
    without g, window_size, sink_bias: those raise NotImplementedError)."""
    q, k, v = as_f64(q, "q", 4), as_f64(k, "k", 4), as_f64(v, "v", 4)
    cu = _as_cu(cu_seqlens)
    B, T, HQ, H, K, V, G, scale = _check(q, k, v, cu, scale, g, window_size)
    kr, vr = np.repeat(k, G, axis=2), np.repeat(v, G, axis=2)
    o = _lib.empty((B, T, HQ, V))
    for s, e in _spans(cu, T):
        if e == s:
            continue
        part = [np.ascontiguousarray(a[:, s:e]) for a in (q, kr, vr)]
        out = _lib.empty((B, e - s, HQ, V))
        _lib.check(_lib.lib.kdalab_attention_f64(_lib.Dims(B, e - s, HQ, K, V), scale,
                                                 *map(_lib.ptr, part), _lib.ptr(out)),
                   "parallel_attn")
        o[:, s:e] = out
    return o


def parallel_attn_bwd(q, k, v, do, scale=None, cu_seqlens=None):
    """The gradients of sum(o * do) with respect to q, k, v: AttnGrads(dq, dk, dv)."""
    q, k, v = as_f64(q, "q", 4), as_f64(k, "k", 4), as_f64(v, "v", 4)
    cu = _as_cu(cu_seqlens)
    B, T, HQ, H, K, V, G, scale = _check(q, k, v, cu, scale, None, None)
    do = as_f64(do, "do", 4)
    _expect("do", do, (B, T, HQ, V))
    kr, vr = np.repeat(k, G, axis=2), np.repeat(v, G, axis=2)
    dq, dkr, dvr = (_lib.empty(a.shape) for a in (q, kr, vr))
    for s, e in _spans(cu, T):
        if e == s:
            continue
        part = [np.ascontiguousarray(a[:, s:e]) for a in (q, kr, vr, do)]
        outs = [_lib.empty(a.shape) for a in part[:3]]
        _lib.check(_lib.lib.kdalab_attention_bwd_f64(_lib.Dims(B, e - s, HQ, K, V), scale,
                                                     *map(_lib.ptr, part + outs)),
                   "parallel_attn backward")
        for whole, out in zip((dq, dkr, dvr), outs):
            whole[:, s:e] = out
    with np.errstate(over="ignore"):  # an overflow is the error below, not a warning
        dk = dkr.reshape(B, T, H, G, K).sum(3)
        dv = dvr.reshape(B, T, H, G, V).sum(3)
    if G > 1:  # the library checked each query head's part; their sum may overflow
        _check_finite("parallel_attn backward", "dk", dk)
        _check_finite("parallel_attn backward", "dv", dv)
    return AttnGrads(dq, dk, dv)
