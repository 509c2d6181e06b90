"""fla's functions, by fla's names and arguments, computed by kdalab's float64
oracle: forward `(o, final_state)` and backward (the gradients of
sum(o * do) + sum(final_state * dht) with respect to every array input).

Every array may be a NumPy array (float16/32/64) or a torch tensor on any
device and of any floating dtype, bfloat16 included (moved to the CPU and
upcast); results are float64 NumPy arrays. Shapes are fla's:
q, k [B, T, H, K]; v [B, T, HV, V] (HV = G * H: grouped value heads);
beta [B, T, HV]; g [B, T, HV] (Gated DeltaNet) or [B, T, HV, K] (KDA);
initial_state [N, HV, K, V] with N = B, or the number of sequences when
cu_seqlens (int, [N + 1], B = 1) packs them.

In-kernel options are applied as fla's kernels apply them, before the
mechanism (and differentiated through in the backward):
  use_qk_l2norm_in_kernel    q, k <- x / sqrt(sum x^2 + 1e-6) per (t, head)
                             (computed from x / max|x|: no overflow)
  use_gate_in_kernel         g is the raw gate input: g <- -exp(A_log) *
                             softplus(g + dt_bias)   (kdalab_kda_gate_f64)
  lower_bound                with the in-kernel gate: g <- lower_bound *
                             sigmoid(exp(A_log) * (g + dt_bias))
  use_beta_sigmoid_in_kernel beta <- sigmoid(beta)
  allow_neg_eigval           beta <- 2 * beta (so beta may reach 2)
  normalize (linear attn.)   o <- o / (scale q . cumsum(k) + 1e-10)
"""

import collections

import numpy as np

from . import _lib

Grads = collections.namedtuple(
    "Grads", ["dq", "dk", "dv", "dg", "dbeta", "dh0", "dA_log", "ddt_bias"],
    defaults=[None] * 8)
# the DPLR rows' gradients (dg: of gk, or RWKV-7's w)
DplrGrads = collections.namedtuple("DplrGrads", ["dq", "dk", "dv", "dg", "da", "db", "dh0"])


# ---- inputs -------------------------------------------------------------------

def as_f64(x, name, ndim=None, required=True):
    """x as a C-contiguous float64 NumPy array; ValueError naming the argument."""
    if x is None:
        if required:
            raise ValueError("%s is required" % name)
        return None
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, any device/dtype
        if not x.is_floating_point():
            raise ValueError("%s: dtype %s is not floating point" % (name, x.dtype))
        # a negated or conjugated view (torch's lazy bits) is materialised first
        x = x.detach().resolve_neg().resolve_conj().to("cpu").double().numpy()
    if isinstance(x, (tuple, list)) and any(hasattr(e, "detach") or isinstance(e, np.ndarray)
                                            for e in x):
        raise ValueError("%s: a %s of %d arrays, expected one array" % (
            name, type(x).__name__, len(x)))
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise ValueError("%s: %s %r is not an array (%s)" % (name, type(x).__name__, x, e))
    if a.dtype.kind != "f":
        raise ValueError("%s: dtype %s is not floating point (float16, float32, float64)"
                         % (name, a.dtype))
    a = np.ascontiguousarray(a, dtype=np.float64)
    if ndim is not None and a.ndim != ndim:
        raise ValueError("%s: shape %s has %d dimensions, expected %d"
                         % (name, a.shape, a.ndim, ndim))
    return a


def _as_cu(cu_seqlens):
    if cu_seqlens is None:
        return None
    if hasattr(cu_seqlens, "detach"):
        cu_seqlens = cu_seqlens.detach().to("cpu").numpy()
    a = np.asarray(cu_seqlens)
    if a.dtype.kind not in "iu" or a.ndim != 1 or a.size < 2:
        raise ValueError("cu_seqlens: an integer array [N + 1] is required, got dtype %s "
                         "shape %s" % (a.dtype, a.shape))
    # Python ints: a NumPy comparison of uint64 with an int64 bound goes through
    # float64, where 2**63 + 1 rounds to the bound and passes
    if a.dtype.kind == "u" and int(a.max()) > int(np.iinfo(np.int64).max):
        i = int(np.argmax(a))
        raise ValueError("cu_seqlens[%d] = %d does not fit int64" % (i, int(a[i])))
    return np.ascontiguousarray(a, dtype=np.int64)


def check_cu(cu, T):
    """cu_seqlens [N + 1] (int64, from _as_cu) against T, as the library checks
    it (kdalab_call_check): starts at 0, strictly increases, ends at T; a
    ValueError with the library's words. For the steps done in Python before
    the library sees cu_seqlens (reverse, normalize)."""
    if cu is None:
        return
    if cu[0] != 0:
        raise ValueError("cu_seqlens[0] = %d: the first boundary must be 0" % cu[0])
    for n in range(1, cu.size):
        if cu[n] <= cu[n - 1]:
            raise ValueError("cu_seqlens[%d] = %d is not greater than cu_seqlens[%d] = %d: "
                             "boundaries must strictly increase" % (n, cu[n], n - 1, cu[n - 1]))
    if cu[-1] != T:
        raise ValueError("cu_seqlens[%d] = %d: the last boundary must be T = %d"
                         % (cu.size - 1, cu[-1], T))


def as_bool(name, x):
    """A switch argument as a bool: True, False (or NumPy's bools); anything
    else, a string such as 'False' included, is a TypeError naming it."""
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError("%s must be True or False, not %s %r" % (name, type(x).__name__, x))
    return bool(x)


def _expect(name, a, shape):
    if a is not None and tuple(a.shape) != tuple(shape):
        raise ValueError("%s: shape %s, expected %s" % (name, tuple(a.shape), tuple(shape)))


def _layout_guard(q, others):
    """fla's layout is time first, [B, T, H, ...]. A head-first [B, H, T, ...]
    tensor cannot be told apart in general; but when beta, g or v disagree
    with q about which dimension holds time and which the heads, and agree
    once one of them is read head-first, say so in one line naming both
    readings (ValueError)."""
    if q.ndim != 4:
        return
    B, T, H = q.shape[:3]
    for name, a in others:
        if a is None or a.ndim < 3 or a.shape[0] != B or 0 in a.shape[:3] or 0 in q.shape:
            continue
        t, h = a.shape[1], a.shape[2]
        if t == T and h % H == 0:
            continue  # fits [B, T, H * G, ...]
        q_head_first = t == H and h % T == 0  # q is [B, H, T, K], a is [B, T, HV, ...]
        a_head_first = h == T and t % H == 0  # a is [B, HV, T, ...], q is [B, T, H, K]
        if q_head_first or a_head_first:
            which = " or ".join(n for n, yes in (("q (and k, v)", q_head_first),
                                                 (name, a_head_first)) if yes)
            raise ValueError(
                "layout: q %s read as fla's time-first [B, T, H, K] has T = %d, H = %d, but "
                "%s %s has T = %d and %d heads; they agree if %s is head-first [B, H, T, ...]: "
                "fla removed head_first, so einops.rearrange(x, 'b h t ... -> b t h ...')"
                % (tuple(q.shape), T, H, name, tuple(a.shape), t, h, which))


class _Call:
    """The sizes and layout of one call, checked."""

    def __init__(self, mech, q, k, v, g, beta, h0, cu, a=None, b=None):
        self.mech = mech
        row = _lib.TABLE[mech]
        if g is not None and row["g"] == _lib.G_NONE:
            raise ValueError("g: %s has no log-decay; pass g=None" % mech)
        if beta is not None and not row["delta"]:
            raise ValueError("beta: %s has no delta rule; pass beta=None" % mech)
        for name, x in (("a", a), ("b", b)):
            if x is None and row["ab"]:
                raise ValueError("%s is required: %s has the low-rank term b a^T (a, b "
                                 "[B, T, HV, K])" % (name, mech))
            if x is not None and not row["ab"]:
                raise ValueError("%s: %s has no low-rank term; pass %s=None" % (name, mech, name))
        _layout_guard(q, (("beta", beta), ("g", g), ("v", v)))
        self.B, self.T, self.H, self.K = q.shape
        if self.B == 0 or self.H == 0 or self.K == 0:
            raise ValueError("q: shape %s: B, H and K must be >= 1 (only T may be 0)"
                             % (tuple(q.shape),))
        if tuple(k.shape) != tuple(q.shape):
            raise ValueError("k: shape %s does not match q's %s (q and k are both "
                             "[B, T, H, K])" % (tuple(k.shape), tuple(q.shape)))
        if v.ndim != 4 or v.shape[:2] != q.shape[:2] or v.shape[2] % self.H:
            raise ValueError("v: shape %s does not fit q's %s (v is [B, T, HV, V], HV a "
                             "multiple of H)" % (v.shape, q.shape))
        self.HV, self.V = v.shape[2], v.shape[3]
        if self.HV == 0 or self.V == 0:
            raise ValueError("v: shape %s: HV (value heads, v.shape[2]) and V (v.shape[3]) "
                             "must be >= 1 (only T may be 0)" % (tuple(v.shape),))
        self.cu = cu
        if cu is not None and self.B != 1:
            raise ValueError("cu_seqlens: needs B = 1 (sequences packed along T), got B = %d"
                             % self.B)
        self.N = cu.size - 1 if cu is not None else self.B
        bt = (self.B, self.T, self.HV)
        row = _lib.TABLE[mech]
        if row["g"] == _lib.G_PER_KEY:
            _expect("g", g, bt + (self.K,))
        elif row["g"] == _lib.G_PER_HEAD:
            _expect("g", g, bt)
        if row["delta"]:
            _expect("beta", beta, bt)
        _expect("a", a, bt + (self.K,))
        _expect("b", b, bt + (self.K,))
        _expect("initial_state", h0, (self.N, self.HV, self.K, self.V))
        self.GK = self.K if row["g"] == _lib.G_PER_KEY else 1  # channels of g per value head

    def dims(self):
        return _lib.Dims(self.B, self.T, self.H, self.K, self.V)

    def call(self, form, impl, scale, opts):
        """The library's call (kdalab_call) of this layout: form, implementation
        (_impl's number), scale, chunk options (NULL: the implementation's
        default), and this thread's workspace. Keep the returned opts alive
        with it."""
        c = _lib.Call(self.dims(), self.HV, None, 0, _lib.MECHANISMS[self.mech], scale, form,
                      impl, None, _lib.workspace())
        if self.cu is not None:
            c.cu_seqlens = self.cu.ctypes.data_as(_lib.ctypes.POINTER(_lib.ctypes.c_int64))
            c.n_seqs = self.N
        if opts is not None:
            c.opts = _lib.ctypes.pointer(opts)
        return c

    def state_shape(self):
        return (self.N, self.HV, self.K, self.V)


def _opts(chunk_size):
    """The chunk options of chunk_size, or None (the implementation's default:
    C = 64 for the reference, 16 for the SIMD path)."""
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or not 1 <= chunk_size < 2 ** 63:
        raise ValueError("chunk_size: %r is not a positive integer" % (chunk_size,))
    o = _lib.lib.kdalab_chunk_opts_default()
    o.chunk = int(chunk_size)
    return o


def _h_opts(chunk_size, h_chunk):
    """The chunk options of a SIMD forward that writes h, the state entering
    every h_chunk positions: chunks of chunk_size; for None, the path's
    fastest (kdalab_simd_chunk_opts_default: 16) where it divides h_chunk,
    else h_chunk. The chunk the float64 forward runs changes o by ~1e-15
    relative, and h's states not at all beyond that: fla's h at 64 costs the
    forward at 16, not at 64 (about 1.4x at K = V = 128)."""
    C = _opts(h_chunk).chunk
    if chunk_size is None:
        fast = _lib.lib.kdalab_simd_chunk_opts_default().chunk
        chunk_size = fast if C % fast == 0 else C
    op = _opts(chunk_size)
    op.h_chunk = C
    return op


def _impl(form, impl):
    """The implementation that runs a form: the chunkwise one on the SIMD path
    (impl="simd", the default: every layout in place, the (sequence, head)
    pairs over the threads) or the reference ("reference", the oracle of
    record); both agree to ~1e-15 relative. The recurrent form is the
    reference's."""
    if impl not in _lib.IMPLS:
        raise ValueError("impl: %r is not 'simd' or 'reference'" % (impl,))
    return _lib.IMPLS[impl if form == _lib.FORM_CHUNK else "reference"]


# ---- the in-kernel steps, forward and backward --------------------------------

_L2_EPS = 1e-6


def _l2norm(x):
    """x / sqrt(sum x^2 + 1e-6) per row, without overflow: rows whose largest
    magnitude m exceeds 1 are divided by m first, the rest of the norm being
    sqrt(sum (x/m)^2 + 1e-6/m^2), in [1, sqrt K]; a non-zero row never comes
    out zero. Returns y and (m, r) with y = (x / m) / r for the backward."""
    m = np.abs(x).max(-1, keepdims=True) if x.size else np.ones(x.shape[:-1] + (1,))
    m = np.where(m > 1, m, 1.0)
    xs = x / m
    r = np.sqrt((xs * xs).sum(-1, keepdims=True) + _L2_EPS / m / m)
    return xs / r, (m, r)


def _l2norm_bwd(y, n, dy):
    m, r = n
    return (dy - y * (y * dy).sum(-1, keepdims=True)) / m / r


def _sigmoid(x):
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))


def _gate_fwd(g, A_log, dt_bias, lower_bound, HV, K):
    """The in-kernel gate: g [B, T, HV, K] (KDA; K = 1 for Gated DeltaNet's
    g [B, T, HV]) raw -> the log-decay. With lower_bound, A_log may be None
    (fla: lower_bound * sigmoid(g + dt_bias), i.e. A_log = 0)."""
    no_A = A_log is None and lower_bound is not None
    A_log = np.zeros(HV) if no_A else as_f64(A_log, "A_log")
    _expect("A_log", A_log, (HV,))
    if dt_bias is not None:
        dt_bias = as_f64(dt_bias, "dt_bias")
        if dt_bias.shape not in ((HV * K,), (HV, K)):
            raise ValueError("dt_bias: shape %s, expected (%d,) or (%d, %d) (fla's (H*K,))"
                             % (dt_bias.shape, HV * K, HV, K))
        dt_bias = dt_bias.reshape(-1)
    rows = g.size // (HV * K)
    out = np.empty_like(g)
    with np.errstate(over="ignore"):
        big = ~np.isfinite(np.exp(A_log))
    if np.isfinite(A_log).all() and big.any():  # (a NaN is the C check's to name)
        h = int(np.argmax(big))
        raise _lib.KdalabError(_lib.ERANGE, "use_gate_in_kernel: A_log[%d] = %.17g: exp(A_log) "
                               "overflows, so the gate -exp(A_log) * ... does" % (h, A_log[h]))
    if lower_bound is None:
        _lib.check(_lib.lib.kdalab_kda_gate_f64(rows, HV, K, _lib.ptr(g), _lib.ptr(A_log),
                                                _lib.ptr(dt_bias), _lib.ptr(out)),
                   "use_gate_in_kernel")
        return out, (A_log, dt_bias, None, no_A)
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.exp(A_log)[:, None] * (g.reshape(rows, HV, K) +
                                     (dt_bias.reshape(HV, K) if dt_bias is not None else 0))
    x = np.ascontiguousarray(x.reshape(g.shape))
    if not np.isfinite(x).all():  # name the caller's arguments, not the internal x
        at = np.unravel_index(int(np.argmin(np.isfinite(x))), g.shape)
        h, c = at[-2], at[-1]
        raise _lib.KdalabError(_lib.ERANGE, "lower_bound gate: exp(A_log[%d]) * (g[%s]%s) = "
                               "%g overflows: A_log[%d] = %.17g, g[%s] = %.17g%s" % (
                                   h, ", ".join(map(str, at)),
                                   " + dt_bias[%d, %d]" % (h, c) if dt_bias is not None else "",
                                   x[at], h, A_log[h], ", ".join(map(str, at)), g[at],
                                   ", dt_bias[%d, %d] = %.17g" % (h, c, dt_bias[h * K + c])
                                   if dt_bias is not None else ""))
    _lib.check(_lib.lib.kdalab_lower_bound_gate_f64(x.size, float(lower_bound), _lib.ptr(x),
                                                    _lib.ptr(out)), "lower_bound gate")
    return out, (A_log, dt_bias, x, no_A)


def _gate_bwd(g, saved, lower_bound, HV, K, dg):
    A_log, dt_bias, x, no_A = saved
    rows = g.size // (HV * K)
    dx = np.empty_like(g)
    dA = np.empty(HV)
    db = np.empty(HV * K)
    if lower_bound is None:
        _lib.check(_lib.lib.kdalab_kda_gate_bwd_f64(rows, HV, K, _lib.ptr(g), _lib.ptr(A_log),
                                                    _lib.ptr(dt_bias), _lib.ptr(dg),
                                                    _lib.ptr(dx), _lib.ptr(dA), _lib.ptr(db)),
                   "use_gate_in_kernel backward")
        return dx, dA, (db if dt_bias is not None else None)
    dxx = np.empty_like(g)
    _lib.check(_lib.lib.kdalab_lower_bound_gate_bwd_f64(x.size, float(lower_bound),
                                                        _lib.ptr(x), _lib.ptr(dg),
                                                        _lib.ptr(dxx)),
               "lower_bound gate backward")
    a = np.exp(A_log)[:, None]
    d_raw = (dxx.reshape(rows, HV, K) * a).reshape(g.shape)
    dA = (dxx * x).reshape(rows, HV, K).sum(axis=(0, 2))
    db = d_raw.reshape(rows, HV * K).sum(0)
    return d_raw, (None if no_A else dA), (db if dt_bias is not None else None)


def _normalizer(q, k, scale, cu, T):
    """z_t = scale q_t . cumsum_{u <= t} k_u per sequence, [B, T, H, 1], and the
    cumulative keys (value head j divides by z of q/k head j // G: _per_value_head)."""
    kc = np.zeros_like(k)
    bounds = cu if cu is not None else np.array([0, T])
    for n in range(len(bounds) - 1):
        s, e = int(bounds[n]), int(bounds[n + 1])
        kc[:, s:e] = np.cumsum(k[:, s:e], axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        z = scale * (q * kc).sum(-1, keepdims=True) + 1e-10
    return z, kc


def _first_index(bad):
    """The index (a tuple of ints) of the first True of a boolean array, in
    row-major order: where an error message points in the caller's shape."""
    return tuple(int(i) for i in np.argwhere(bad)[0])


def _check_normalizer(z, o, G, what):
    """Refuse a normaliser z [B, T, H, 1] that is 0 or not finite, or whose
    quotient o / z (o [B, T, HV, V], value head j over z of head j // G)
    overflows: a ValueError naming z and its index [b, t, h] in the caller's
    shape."""
    z0 = z[..., 0]
    for bad, value in ((~np.isfinite(z0), lambda v: "%g: it overflows float64 (q and k too "
                                                    "large for normalize=True)" % v),
                       (z0 == 0, lambda v: "0, so o / z is undefined (pass normalize=False, "
                                           "or q, k whose z is non-zero)")):
        if bad.any():
            b, t, h = _first_index(bad)
            raise ValueError("normalize: the normaliser z[%d, %d, %d] = scale * q[%d, %d, %d] . "
                             "cumsum(k)[%d, %d, %d] + 1e-10 is %s"
                             % (b, t, h, b, t, h, b, t, h, value(z0[b, t, h])))
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.abs(o) / np.abs(_per_value_head(z, G))
    bad = ~np.isfinite(q)
    if bad.any():
        b, t, j, c = _first_index(bad)
        raise ValueError("normalize: %s: o[%d, %d, %d, %d] / z[%d, %d, %d] overflows float64 "
                         "(the normaliser z = %.3g is too small for o = %.3g)"
                         % (what, b, t, j, c, b, t, j // G, z[b, t, j // G, 0], o[b, t, j, c]))


def _check_finite(what, name, a):
    """A result that is not finite is an error, never returned: ValueError
    naming the output and its index."""
    if a is not None and not np.isfinite(a).all():
        idx = _first_index(~np.isfinite(a))
        raise ValueError("%s: %s%s = %r overflowed float64 (the inputs are too large for "
                         "this result)" % (what, name, list(idx), a[idx]))


def _check_input(name, a, lo=None, hi=None, why=""):
    """An input the module transforms before the library sees it (normalised,
    passed through a sigmoid, doubled) is checked as the caller passed it:
    ValueError naming the argument, its index and the rule."""
    if a is None:
        return
    bad = ~np.isfinite(a)
    rule = "must be finite"
    if lo is not None:
        with np.errstate(invalid="ignore"):
            bad |= (a < lo) | (a > hi)
        rule = "must be in [%g, %g]%s" % (lo, hi, why)
    if bad.any():
        idx = _first_index(bad)
        raise ValueError("%s%s = %r: %s" % (name, list(idx), a[idx], rule))


def _real(name, x):
    """A real number argument (scale, lower_bound) as float: a str, a bool or
    an array is a TypeError, not converted."""
    if not isinstance(x, (str, bytes, bool, np.bool_)) and np.ndim(x) == 0:
        try:
            return float(x)
        except (TypeError, ValueError):
            pass
    raise TypeError("%s must be a real number, not %s %r" % (name, type(x).__name__, x))


def _flags(opt):
    """The in-kernel options that are switches must be bools (a string such as
    'False' is not False)."""
    for name in ("use_qk_l2norm_in_kernel", "use_gate_in_kernel", "use_beta_sigmoid_in_kernel",
                 "allow_neg_eigval"):
        if name in opt:
            as_bool(name, opt[name])


def _per_value_head(z, G):
    """[B, T, H, 1] -> [B, T, H * G, 1]: value head j takes q/k head j // G."""
    return np.repeat(z, G, axis=2)


# ---- the two cores ------------------------------------------------------------

def _prepare(mech, q, k, v, g, beta, scale, initial_state, cu_seqlens, opt, a=None, b=None):
    q = as_f64(q, "q", 4)
    k = as_f64(k, "k", 4)
    v = as_f64(v, "v", 4)
    row = _lib.TABLE[mech]
    if g is None and row["g"] != _lib.G_NONE:
        raise ValueError("g is required: %s has a log-decay (g %s)" % (
            mech, "[B, T, HV, K]" if row["g"] == _lib.G_PER_KEY else "[B, T, HV]"))
    if beta is None and row["delta"]:
        raise ValueError("beta is required: %s has the delta rule (beta [B, T, HV])" % mech)
    g = as_f64(g, "g", required=False)
    beta = as_f64(beta, "beta", required=False)
    h0 = as_f64(initial_state, "initial_state", 4, required=False)
    cu = _as_cu(cu_seqlens)
    call = _Call(mech, q, k, v, g, beta, h0, cu, a, b)
    _flags(opt)
    scale = _real("scale", scale) if scale is not None else call.K ** -0.5
    if opt.get("lower_bound") is not None:
        opt = dict(opt, lower_bound=_real("lower_bound", opt["lower_bound"]))
    st = {"q_raw": q, "k_raw": k, "g_raw": g, "beta_raw": beta}
    if opt.get("use_qk_l2norm_in_kernel"):
        _check_input("q", q)
        _check_input("k", k)
        q, st["qn"] = _l2norm(q)
        k, st["kn"] = _l2norm(k)
    if opt.get("use_gate_in_kernel"):
        g, st["gate"] = _gate_fwd(g, opt.get("A_log"), opt.get("dt_bias"),
                                  opt.get("lower_bound"), call.HV, call.GK)
    if opt.get("use_beta_sigmoid_in_kernel"):
        _check_input("beta", beta)
        beta = _sigmoid(beta)
    elif opt.get("allow_neg_eigval"):
        _check_input("beta", beta, 0.0, 1.0, " (allow_neg_eigval doubles it, and the kernel's "
                     "beta must be in [0, 2])")
    if opt.get("allow_neg_eigval"):
        beta = 2 * beta
    return call, scale, q, k, v, g, beta, h0, st


def _fresh(name, shape):
    """An output the library writes, `name`, as a fresh array: the default
    alloc of _forward and _backward."""
    return _lib.output(shape)


def _forward(mech, form, q, k, v, g, beta, scale, initial_state, output_final_state,
             cu_seqlens, chunk_size=None, normalize=False, impl="simd", a=None, b=None,
             states=False, h_chunk=None, alloc=None, **opt):
    """(o, ht or None), and with states=True h, the state entering each chunk
    ([B, NT, HV, K, V]: the SIMD chunkwise forward's h, in kdalab_tensors_f64),
    as a third item: chunks of h_chunk positions; h_chunk None: of
    chunk_size, or with chunk_size None too of fla's 64 (_h_opts says which
    chunk the forward then runs). alloc: None (fresh arrays), or
    alloc(name, shape) giving the float64 array the library writes for o, ht
    and h (kdalab.testing's kept buffers)."""
    output_final_state = as_bool("output_final_state", output_final_state)
    impl = _impl(form, impl)
    normalize = as_bool("normalize", normalize)
    a = as_f64(a, "a", 4, required=False)
    b = as_f64(b, "b", 4, required=False)
    call, scale, q, k, v, g, beta, h0, st = _prepare(mech, q, k, v, g, beta, scale,
                                                     initial_state, cu_seqlens, opt, a, b)
    new = alloc or _fresh
    o = new("o", (call.B, call.T, call.HV, call.V))
    ht = new("ht", call.state_shape())
    if states and h_chunk is None and chunk_size is None:
        h_chunk = 64  # fla's h, the forward at its own chunk
    op = _h_opts(chunk_size, h_chunk) if states and h_chunk is not None else _opts(chunk_size)
    c = call.call(form, impl, scale, op)
    h = new("h", (call.B, _lib.lib.kdalab_call_n_chunks(c)) + call.state_shape()[1:]) \
        if states else None
    arrays = _lib.named(_lib.Tensors, q=q, k=k, v=v, g=g, beta=beta, h0=h0, o=o, ht=ht, a=a,
                        b=b, h=h)
    _lib.check(_lib.lib.kdalab_run_f64(c, arrays, None), mech)
    if normalize:
        z, _ = _normalizer(q, k, scale, call.cu, call.T)
        _check_normalizer(z, o, call.HV // call.H, mech)
        o = o / _per_value_head(z, call.HV // call.H)
        _check_finite(mech, "o", o)  # o / z is made here; the library checks its own o
    return (o, (ht if output_final_state else None)) + ((h,) if states else ())


def _backward(mech, form, q, k, v, g, beta, do, dht, scale, initial_state, cu_seqlens,
              chunk_size=None, normalize=False, impl="simd", a=None, b=None, alloc=None,
              **opt):
    """The gradients (Grads, or DplrGrads with a, b) of the float64 backward;
    alloc: as _forward's, for dq, dk, dv, dh0, dg, dbeta, da, db."""
    normalize = as_bool("normalize", normalize)
    impl_id = _impl(form, impl)
    a = as_f64(a, "a", 4, required=False)
    b = as_f64(b, "b", 4, required=False)
    call, scale, qe, ke, v, ge, be, h0, st = _prepare(mech, q, k, v, g, beta, scale,
                                                      initial_state, cu_seqlens, opt, a, b)
    do = as_f64(do, "do", 4)
    _expect("do", do, (call.B, call.T, call.HV, call.V))
    dht = as_f64(dht, "dht", 4, required=False)
    _expect("dht", dht, call.state_shape())
    dq_extra = dk_extra = 0
    if normalize:  # o_n = o / z: do -> do / z, and z's own gradient into q, k
        o, _ = _forward(mech, form, q, k, v, g, beta, scale, initial_state, False, cu_seqlens,
                        chunk_size, False, impl, **opt)
        G = call.HV // call.H
        z, kc = _normalizer(qe, ke, scale, call.cu, call.T)
        _check_normalizer(z, o, G, mech + " backward")
        zv = _per_value_head(z, G)
        with np.errstate(over="ignore", invalid="ignore"):
            dzv = -(do * o).sum(-1, keepdims=True) / zv ** 2  # per value head
            do = do / zv
        _check_finite(mech + " backward", "do / z (the normalised output's gradient)", do)
        _check_finite(mech + " backward", "the normaliser's gradient d z", dzv)
        dz = dzv.reshape(call.B, call.T, call.H, G, 1).sum(3)  # summed over each group
        do = np.ascontiguousarray(do)
        dq_extra = scale * dz * kc
        dkc = scale * dz * qe
        dk_extra = np.zeros_like(ke)
        bounds = call.cu if call.cu is not None else np.array([0, call.T])
        for n in range(len(bounds) - 1):
            s, e = int(bounds[n]), int(bounds[n + 1])
            dk_extra[:, s:e] = np.flip(np.cumsum(np.flip(dkc[:, s:e], 1), 1), 1)
    shapes = {"dq": qe.shape, "dk": ke.shape, "dv": v.shape, "dh0": call.state_shape()}
    new = alloc or _fresh
    out = {n: new(n, s) for n, s in shapes.items()}
    out["dg"] = new("dg", ge.shape) if ge is not None else None
    out["dbeta"] = new("dbeta", be.shape) if be is not None else None
    out["da"] = new("da", a.shape) if a is not None else None
    out["db"] = new("db", b.shape) if b is not None else None
    op = _opts(chunk_size)
    arrays = _lib.named(_lib.Tensors, q=qe, k=ke, v=v, g=ge, beta=be, h0=h0, d_o=do, dht=dht,
                        a=a, b=b, **out)
    _lib.check(_lib.lib.kdalab_run_bwd_f64(call.call(form, impl_id, scale, op), arrays),
               mech + " backward")
    dq, dk = out["dq"], out["dk"]
    if normalize:  # the normaliser's share (no copy of dq, dk without it)
        dq, dk = dq + dq_extra, dk + dk_extra
    if opt.get("use_qk_l2norm_in_kernel"):
        dq = _l2norm_bwd(qe, st["qn"], dq)
        dk = _l2norm_bwd(ke, st["kn"], dk)
    dbeta, dg, dA, ddt = out["dbeta"], out["dg"], None, None
    if dbeta is not None:
        if opt.get("allow_neg_eigval"):
            dbeta = 2 * dbeta
        if opt.get("use_beta_sigmoid_in_kernel"):
            s = _sigmoid(st["beta_raw"])
            dbeta = dbeta * s * (1 - s)
    if opt.get("use_gate_in_kernel"):
        dg, dA, ddt = _gate_bwd(st["g_raw"], st["gate"], opt.get("lower_bound"), call.HV,
                                call.GK, np.ascontiguousarray(dg))
    dh0 = out["dh0"] if initial_state is not None else None
    grads = DplrGrads(dq, dk, out["dv"], dg, out["da"], out["db"], dh0) if a is not None \
        else Grads(dq, dk, out["dv"], dg, dbeta, dh0, dA, ddt)
    # The library refuses gradients it wrote non-finite, grouped heads' sums included
    # (KDALAB_ERANGE, raised above); only those computed here in NumPy, any array that
    # is not one of the library's own outputs, are scanned (a serial pass over each).
    for name, a in zip(grads._fields, grads):
        if a is not None and not any(a is x for x in out.values()):
            _check_finite(mech + " backward", name, a)
    return grads


def chunk_states(mech, q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None,
                 chunk_size=64, impl="simd", **opt):
    """The state entering every chunk of chunk_size positions (None: 64, fla's),
    as fla's
    return_intermediate_states gives it: [B, NT, HV, K, V] with NT = ceil(T /
    chunk_size) (chunk 0's is the initial state, zero without one), or with
    cu_seqlens [1, NT, HV, K, V], NT counting every sequence's chunks in order.
    impl="simd": one call of the SIMD chunkwise forward, which writes them
    (kdalab_tensors_f64's h), run at its fastest chunk where that divides
    chunk_size (_h_opts); "reference": the reference chunkwise form run
    chunk by chunk, each chunk from the previous one's final state. In-kernel
    options, opt, as for the forward (pointwise in time)."""
    C = _opts(64 if chunk_size is None else chunk_size).chunk
    if impl == "simd":
        return _forward(mech, _lib.FORM_CHUNK, q, k, v, g, beta, scale, initial_state, False,
                        cu_seqlens, None, states=True, h_chunk=C, **opt)[2]
    _impl(_lib.FORM_CHUNK, impl)
    call, _, _, _, _, _, _, h0, _ = _prepare(mech, q, k, v, g, beta, scale, initial_state,
                                             cu_seqlens, opt)
    arrays = [as_f64(x, n, required=False) for x, n in ((q, "q"), (k, "k"), (v, "v"),
                                                          (g, "g"), (beta, "beta"))]
    bounds = call.cu if call.cu is not None else np.array([0, call.T])
    per_seq = call.cu is not None
    states = []
    for n in range(len(bounds) - 1):
        s, e = int(bounds[n]), int(bounds[n + 1])
        S = (h0[n:n + 1] if per_seq else h0) if h0 is not None else \
            _lib.empty((1 if per_seq else call.B,) + call.state_shape()[1:])
        for c in range(s, e, C):
            states.append(S)
            part = [None if a is None else a[:, c:min(c + C, e)] for a in arrays]
            _, S = _forward(mech, _lib.FORM_CHUNK, *part, scale, S, True, None, C,
                            impl=impl, **opt)
    if not states:
        return _lib.empty((call.B, 0) + call.state_shape()[1:])
    return np.stack(states, axis=1) if not per_seq else np.concatenate(states)[None]


# ---- fla's names ---------------------------------------------------------------

_KDA_OPTS = ("use_qk_l2norm_in_kernel", "use_gate_in_kernel", "A_log", "dt_bias",
             "lower_bound", "use_beta_sigmoid_in_kernel", "allow_neg_eigval")


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, A_log=None,
              dt_bias=None, lower_bound=None, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, cu_seqlens=None, chunk_size=None, impl="simd",
              return_intermediate_states=False):
    """KDA, chunkwise (safe sub-chunks; chunk_size None: the implementation's
    default, 16 for impl="simd", 64 for "reference"). impl="simd" (the default)
    runs the SIMD path, "reference" the reference chunkwise form: they agree to
    ~1e-15 relative; the reference (with fused_recurrent_kda, the recurrence)
    is the oracle of record. Returns (o [B, T, HV, V], final_state
    [N, HV, K, V] or None); with return_intermediate_states, as fla's, also h
    [B, NT, HV, K, V], the state entering each chunk of chunk_size positions
    (None: fla's 64, written by the same call on the SIMD path, which still
    runs at its own chunk; chunk_size set: the call runs at it; with
    "reference", chunk_states)."""
    kw = _kda_kwargs(locals())
    if as_bool("return_intermediate_states", return_intermediate_states):
        if impl == "simd":  # the forward writes h: one call
            return _forward("kda", _lib.FORM_CHUNK, q, k, v, g, beta, scale, initial_state,
                            output_final_state, cu_seqlens, chunk_size, impl=impl, states=True,
                            **kw)
        o, ht = _forward("kda", _lib.FORM_CHUNK, q, k, v, g, beta, scale, initial_state,
                         output_final_state, cu_seqlens, chunk_size, impl=impl, **kw)
        return o, ht, chunk_states("kda", q, k, v, g, beta, scale, initial_state, cu_seqlens,
                                   chunk_size, impl, **kw)
    return _forward("kda", _lib.FORM_CHUNK, q, k, v, g, beta, scale, initial_state,
                    output_final_state, cu_seqlens, chunk_size, impl=impl, **kw)


def fused_recurrent_kda(q, k, v, g, beta, scale=None, initial_state=None,
                        output_final_state=False, use_qk_l2norm_in_kernel=False,
                        use_gate_in_kernel=False, A_log=None, dt_bias=None, lower_bound=None,
                        use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                        cu_seqlens=None):
    """KDA, token by token (the recurrence)."""
    return _forward("kda", _lib.FORM_RECURRENT, q, k, v, g, beta, scale, initial_state,
                    output_final_state, cu_seqlens, **_kda_kwargs(locals()))


def chunk_kda_bwd(q, k, v, g, beta, do, dht=None, scale=None, initial_state=None,
                  use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, A_log=None,
                  dt_bias=None, lower_bound=None, use_beta_sigmoid_in_kernel=False,
                  allow_neg_eigval=False, cu_seqlens=None, chunk_size=None, impl="simd"):
    """The gradients of sum(o * do) + sum(final_state * dht) (dht None: zero): a Grads
    of dq, dk, dv, dg, dbeta, dh0 (None without initial_state), and dA_log, ddt_bias
    with use_gate_in_kernel. The chunkwise backward: impl="simd" (the default) the
    SIMD path's, as exact as the reference's and several times faster;
    impl="reference" the reference's (kdalab_chunk_bwd_f64)."""
    return _backward("kda", _lib.FORM_CHUNK, q, k, v, g, beta, do, dht, scale, initial_state,
                     cu_seqlens, chunk_size, impl=impl, **_kda_kwargs(locals()))


def fused_recurrent_kda_bwd(q, k, v, g, beta, do, dht=None, scale=None, initial_state=None,
                            use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                            A_log=None, dt_bias=None, lower_bound=None,
                            use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                            cu_seqlens=None):
    """As chunk_kda_bwd, by the recurrent backward."""
    return _backward("kda", _lib.FORM_RECURRENT, q, k, v, g, beta, do, dht, scale,
                     initial_state, cu_seqlens, **_kda_kwargs(locals()))


def _kda_kwargs(local):
    return {n: local[n] for n in _KDA_OPTS}


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                           output_final_state=False, cu_seqlens=None,
                           use_qk_l2norm_in_kernel=False, chunk_size=None, impl="simd"):
    """Gated DeltaNet (g [B, T, HV]: one log-decay per head), chunkwise."""
    return _forward("gated_deltanet", _lib.FORM_CHUNK, q, k, v, g, beta, scale, initial_state,
                    output_final_state, cu_seqlens, chunk_size, impl=impl,
                    use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def fused_recurrent_gated_delta_rule(q, k, v, g=None, beta=None, scale=None,
                                     initial_state=None, output_final_state=False,
                                     cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    """Gated DeltaNet, token by token."""
    return _forward("gated_deltanet", _lib.FORM_RECURRENT, q, k, v, g, beta, scale,
                    initial_state, output_final_state, cu_seqlens,
                    use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def chunk_gated_delta_rule_bwd(q, k, v, g, beta, do, dht=None, scale=None,
                               initial_state=None, cu_seqlens=None,
                               use_qk_l2norm_in_kernel=False, chunk_size=None, impl="simd"):
    """As chunk_kda_bwd (impl likewise), for Gated DeltaNet."""
    return _backward("gated_deltanet", _lib.FORM_CHUNK, q, k, v, g, beta, do, dht, scale,
                     initial_state, cu_seqlens, chunk_size, impl=impl,
                     use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def fused_recurrent_gated_delta_rule_bwd(q, k, v, g, beta, do, dht=None, scale=None,
                                         initial_state=None, cu_seqlens=None,
                                         use_qk_l2norm_in_kernel=False):
    return _backward("gated_deltanet", _lib.FORM_RECURRENT, q, k, v, g, beta, do, dht, scale,
                     initial_state, cu_seqlens,
                     use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                     cu_seqlens=None, use_qk_l2norm_in_kernel=False, chunk_size=None,
                     impl="simd"):
    """DeltaNet, chunkwise."""
    return _forward("deltanet", _lib.FORM_CHUNK, q, k, v, None, beta, scale, initial_state,
                    output_final_state, cu_seqlens, chunk_size, impl=impl,
                    use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def fused_recurrent_delta_rule(q, k, v, beta=None, scale=None, initial_state=None,
                               output_final_state=False, cu_seqlens=None,
                               use_qk_l2norm_in_kernel=False):
    """DeltaNet, token by token."""
    return _forward("deltanet", _lib.FORM_RECURRENT, q, k, v, None, beta, scale,
                    initial_state, output_final_state, cu_seqlens,
                    use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def chunk_delta_rule_bwd(q, k, v, beta, do, dht=None, scale=None, initial_state=None,
                         cu_seqlens=None, use_qk_l2norm_in_kernel=False, chunk_size=None,
                         impl="simd"):
    """As chunk_kda_bwd (impl likewise), for DeltaNet."""
    return _backward("deltanet", _lib.FORM_CHUNK, q, k, v, None, beta, do, dht, scale,
                     initial_state, cu_seqlens, chunk_size, impl=impl,
                     use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def fused_recurrent_delta_rule_bwd(q, k, v, beta, do, dht=None, scale=None,
                                   initial_state=None, cu_seqlens=None,
                                   use_qk_l2norm_in_kernel=False):
    return _backward("deltanet", _lib.FORM_RECURRENT, q, k, v, None, beta, do, dht, scale,
                     initial_state, cu_seqlens,
                     use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


def chunk_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False,
                      normalize=True, cu_seqlens=None, chunk_size=None, impl="simd"):
    """Linear attention, chunkwise. normalize defaults to True, as in fla (the golden
    cases are unnormalised: pass normalize=False)."""
    return _forward("linear_attention", _lib.FORM_CHUNK, q, k, v, None, None, scale,
                    initial_state, output_final_state, cu_seqlens, chunk_size, normalize, impl)


def fused_recurrent_linear_attn(q, k, v, scale=None, initial_state=None,
                                output_final_state=False, normalize=False, cu_seqlens=None):
    """Linear attention, token by token (fla's default here: normalize=False)."""
    return _forward("linear_attention", _lib.FORM_RECURRENT, q, k, v, None, None, scale,
                    initial_state, output_final_state, cu_seqlens, None, normalize)


def chunk_linear_attn_bwd(q, k, v, do, dht=None, scale=None, initial_state=None,
                          normalize=True, cu_seqlens=None, chunk_size=None, impl="simd"):
    """As chunk_kda_bwd (impl likewise), for linear attention."""
    return _backward("linear_attention", _lib.FORM_CHUNK, q, k, v, None, None, do, dht, scale,
                     initial_state, cu_seqlens, chunk_size, normalize, impl=impl)


def fused_recurrent_linear_attn_bwd(q, k, v, do, dht=None, scale=None, initial_state=None,
                                    normalize=False, cu_seqlens=None):
    return _backward("linear_attention", _lib.FORM_RECURRENT, q, k, v, None, None, do, dht,
                     scale, initial_state, cu_seqlens, None, normalize)


def _simple_gla_g(g, g_gamma, v):
    """simple GLA's decay as (mechanism, g [B, T, HV]): g as given, or fla's
    g_gamma [HV] (a constant per head, data-independent) broadcast over
    (b, t); neither: no decay, which is linear attention. Both: ValueError
    (fla: only one of g or g_gamma should be provided)."""
    if g is not None and g_gamma is not None:
        raise ValueError("g and g_gamma: give one of them (fla: only one of g or g_gamma "
                         "should be provided)")
    if g_gamma is None:
        return ("simple_gla", g) if g is not None else ("linear_attention", None)
    g_gamma = as_f64(g_gamma, "g_gamma", 1)
    v = as_f64(v, "v", 4)
    _check_g_gamma(g_gamma, v.shape[2])
    return "simple_gla", np.ascontiguousarray(np.broadcast_to(g_gamma, v.shape[:3]))


def _check_g_gamma(g_gamma, HV, who=""):
    """fla's g_gamma (float64, as the caller passed it, before it is broadcast
    over (b, t)): shape (HV,), finite, <= 0. ValueError naming g_gamma's own
    index, not the broadcast g's; who prefixes the message (a function name)."""
    if g_gamma.shape != (HV,):
        raise ValueError("%sg_gamma: shape %s, expected (%s,) (one log-decay per value head)"
                         % (who, g_gamma.shape, HV))
    _check_input(who + "g_gamma", g_gamma)
    if (g_gamma > 0).any():
        h = int(np.argmax(g_gamma > 0))
        raise ValueError("%sg_gamma[%d] = %r > 0: a log-decay must be <= 0"
                         % (who, h, float(g_gamma[h])))


def chunk_gla(q, k, v, g, scale=None, initial_state=None, output_final_state=False,
              cu_seqlens=None, chunk_size=None, impl="simd"):
    """GLA (g [B, T, HV, K]: a log-decay per key channel, no delta rule),
    chunkwise: S_t = Diag(exp g_t) S_{t-1} + k_t v_t^T, o_t = scale S_t^T q_t."""
    return _forward("gla", _lib.FORM_CHUNK, q, k, v, g, None, scale, initial_state,
                    output_final_state, cu_seqlens, chunk_size, impl=impl)


def fused_recurrent_gla(q, k, v, gk, scale=None, initial_state=None, output_final_state=False,
                        cu_seqlens=None):
    """GLA, token by token (fla names the per-channel decay gk here)."""
    return _forward("gla", _lib.FORM_RECURRENT, q, k, v, gk, None, scale, initial_state,
                    output_final_state, cu_seqlens)


def chunk_gla_bwd(q, k, v, g, do, dht=None, scale=None, initial_state=None, cu_seqlens=None,
                  chunk_size=None, impl="simd"):
    """As chunk_kda_bwd (impl likewise), for GLA: dq, dk, dv, dg, dh0."""
    return _backward("gla", _lib.FORM_CHUNK, q, k, v, g, None, do, dht, scale, initial_state,
                     cu_seqlens, chunk_size, impl=impl)


def fused_recurrent_gla_bwd(q, k, v, gk, do, dht=None, scale=None, initial_state=None,
                            cu_seqlens=None):
    return _backward("gla", _lib.FORM_RECURRENT, q, k, v, gk, None, do, dht, scale,
                     initial_state, cu_seqlens)


def chunk_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None,
                     output_final_state=False, cu_seqlens=None, chunk_size=None, impl="simd"):
    """simple GLA (g [B, T, HV]: one log-decay per head, no delta rule; or
    g_gamma [HV], fla's constant per-head decay), chunkwise."""
    mech, g = _simple_gla_g(g, g_gamma, v)
    return _forward(mech, _lib.FORM_CHUNK, q, k, v, g, None, scale, initial_state,
                    output_final_state, cu_seqlens, chunk_size, impl=impl)


def fused_recurrent_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None,
                               output_final_state=False, cu_seqlens=None):
    """simple GLA, token by token."""
    mech, g = _simple_gla_g(g, g_gamma, v)
    return _forward(mech, _lib.FORM_RECURRENT, q, k, v, g, None, scale, initial_state,
                    output_final_state, cu_seqlens)


def _simple_gla_bwd(form, q, k, v, g, g_gamma, do, dht, scale, initial_state, cu_seqlens,
                    chunk_size=None, impl="simd"):
    mech, gg = _simple_gla_g(g, g_gamma, v)
    gr = _backward(mech, form, q, k, v, gg, None, do, dht, scale, initial_state, cu_seqlens,
                   chunk_size, impl=impl)
    if g_gamma is not None:  # g = g_gamma broadcast over (b, t): its gradient sums them
        gr = gr._replace(dg=gr.dg.sum(axis=(0, 1)))
    return gr


def chunk_simple_gla_bwd(q, k, v, g, do, dht=None, scale=None, initial_state=None,
                         cu_seqlens=None, chunk_size=None, impl="simd", g_gamma=None):
    """As chunk_kda_bwd (impl likewise), for simple GLA: dq, dk, dv, dg (the
    gradient of g, or, with g None and g_gamma given, of g_gamma [HV]), dh0."""
    return _simple_gla_bwd(_lib.FORM_CHUNK, q, k, v, g, g_gamma, do, dht, scale,
                           initial_state, cu_seqlens, chunk_size, impl)


def fused_recurrent_simple_gla_bwd(q, k, v, g, do, dht=None, scale=None, initial_state=None,
                                   cu_seqlens=None, g_gamma=None):
    return _simple_gla_bwd(_lib.FORM_RECURRENT, q, k, v, g, g_gamma, do, dht, scale,
                           initial_state, cu_seqlens)


# ---- the boundary: the general diagonal-plus-low-rank transition ----------------

def log_decay_arg(name, gk, q, v):
    """The DPLR functions' log-decay, checked under the caller's name for it
    (fla's gk, RWKV-7's w) before the library sees it as g: present,
    [B, T, HV, K] (v's B, T, HV and q's K), finite, <= 0; a ValueError
    naming it and its index otherwise."""
    gk = as_f64(gk, name)
    shape_v, shape_q = tuple(np.shape(v)), tuple(np.shape(q))
    if len(shape_v) == 4 and len(shape_q) == 4:
        _expect(name, gk, shape_v[:3] + shape_q[3:])
    _check_input(name, gk)
    if (gk > 0).any():
        idx = _first_index(gk > 0)
        raise ValueError("%s%s = %r > 0: a log-decay must be <= 0" % (name, list(idx), gk[idx]))
    return gk


def _dplr(g_name, form, q, k, v, a, b, gk, scale, initial_state, output_final_state,
          cu_seqlens, chunk_size=None, impl="simd"):
    """The four DPLR forwards' one body: the decay checked once under the
    caller's name for it (gk, or RWKV-7's w), then the call."""
    gk = log_decay_arg(g_name, gk, q, v)
    return _forward("dplr", form, q, k, v, gk, None, scale, initial_state, output_final_state,
                    cu_seqlens, chunk_size, impl=impl, a=a, b=b)


def chunk_dplr_delta_rule(q, k, v, a, b, gk, scale=None, initial_state=None,
                          output_final_state=False, cu_seqlens=None, chunk_size=None,
                          impl="simd"):
    """fla's generalized delta rule, chunkwise (REFERENCE.md "The boundary"):
    S_t = (Diag(exp gk_t) + b_t a_t^T) S_{t-1} + k_t v_t^T, o_t = scale S_t^T q_t,
    a, b, gk [B, T, HV, K] (gk <= 0), scale None: K^-1/2 (fla's default).
    impl as chunk_kda's: "simd" (the default) or "reference", which agree to
    ~1e-15 relative. Returns (o, final_state or None)."""
    return _dplr("gk", _lib.FORM_CHUNK, q, k, v, a, b, gk, scale, initial_state,
                 output_final_state, cu_seqlens, chunk_size, impl)


def fused_recurrent_dplr_delta_rule(q, k, v, a, b, gk, scale=None, initial_state=None,
                                    output_final_state=False, cu_seqlens=None):
    """The same, token by token."""
    return _dplr("gk", _lib.FORM_RECURRENT, q, k, v, a, b, gk, scale, initial_state,
                 output_final_state, cu_seqlens)


def chunk_dplr_delta_rule_bwd(q, k, v, a, b, gk, do, dht=None, scale=None, initial_state=None,
                              cu_seqlens=None, chunk_size=None, impl="simd"):
    """The gradients of sum(o * do) + sum(final_state * dht): DplrGrads (dq,
    dk, dv, dg (of gk), da, db, dh0), by the chunkwise backward: impl as
    chunk_kda_bwd's ("simd", the default, or "reference")."""
    gk = log_decay_arg("gk", gk, q, v)
    return _backward("dplr", _lib.FORM_CHUNK, q, k, v, gk, None, do, dht, scale,
                     initial_state, cu_seqlens, chunk_size, impl=impl, a=a, b=b)


def fused_recurrent_dplr_delta_rule_bwd(q, k, v, a, b, gk, do, dht=None, scale=None,
                                        initial_state=None, cu_seqlens=None):
    """The same by the recurrent backward (the oracle of record)."""
    gk = log_decay_arg("gk", gk, q, v)
    return _backward("dplr", _lib.FORM_RECURRENT, q, k, v, gk, None, do, dht, scale,
                     initial_state, cu_seqlens, a=a, b=b)


def chunk_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=None, output_final_state=False,
                cu_seqlens=None):
    """RWKV-7's time mixing as fla's chunk_rwkv7 runs it: the DPLR transition
    with q = r and gk = w (w the log-decay, <= 0), scale 1.0 by default. In
    RWKV-7's own parametrisation a = -kk, b = kk * a_rwkv (kk unit rows,
    a_rwkv in [0, 1]), which keeps the transition's eigenvalues in [0, 1].
    Runs on the SIMD path (chunk_dplr_delta_rule's default)."""
    return _dplr("w", _lib.FORM_CHUNK, r, k, v, a, b, w, scale, initial_state,
                 output_final_state, cu_seqlens)


def fused_recurrent_rwkv7(r, w, k, v, a, b, scale=None, initial_state=None,
                          output_final_state=True, cu_seqlens=None):
    """chunk_rwkv7, token by token, with fla's defaults for it: scale None
    (K^-1/2, where chunk_rwkv7's is 1.0) and the final state returned."""
    return _dplr("w", _lib.FORM_RECURRENT, r, k, v, a, b, w, scale, initial_state,
                 output_final_state, cu_seqlens)


def chunk_rwkv7_bwd(r, w, k, v, a, b, do, dht=None, scale=1.0, initial_state=None,
                    cu_seqlens=None, chunk_size=None, impl="simd"):
    """The gradients of chunk_rwkv7's sum(o * do) + sum(final_state * dht):
    DplrGrads in the DPLR names (dq is dL/dr, dg is dL/dw), by the chunkwise
    backward (impl as chunk_kda_bwd's); scale 1.0 by default, as chunk_rwkv7."""
    w = log_decay_arg("w", w, r, v)
    return _backward("dplr", _lib.FORM_CHUNK, r, k, v, w, None, do, dht, scale,
                     initial_state, cu_seqlens, chunk_size, impl=impl, a=a, b=b)


def fused_recurrent_rwkv7_bwd(r, w, k, v, a, b, do, dht=None, scale=None, initial_state=None,
                              cu_seqlens=None):
    """The same for fused_recurrent_rwkv7 (scale None: K^-1/2), by the
    recurrent backward (the oracle of record)."""
    w = log_decay_arg("w", w, r, v)
    return _backward("dplr", _lib.FORM_RECURRENT, r, k, v, w, None, do, dht, scale,
                     initial_state, cu_seqlens, a=a, b=b)
