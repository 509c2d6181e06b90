"""kdalab inside PyTorch: fla's functions, with fla's signatures, as
torch.autograd.Functions whose forward and backward are kdalab's float64
oracle (the NumPy functions of kdalab.ops and kdalab.attention, which call
the C library).

    import kdalab.torch as kt
    o, ht = kt.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    (o * do).sum().backward()          # q.grad, k.grad, ..., h0.grad filled

Tensors of any floating dtype on any device go in; they are copied to the
CPU in float64. Outputs are float64 CPU tensors unless out_dtype= (a torch
dtype) or like= (a tensor whose dtype and device to take) says otherwise;
gradients come back in each input's own dtype and device.

Signatures are fla's (FLA_VERSION at FLA_COMMIT), positional order included.
Arguments that change the mathematics are computed: safe_gate (checked as
fla checks it; the same function — REFERENCE.md), state_v_first (states
[N, HV, V, K]), return_intermediate_states (the state entering each chunk,
written by the SIMD forward in the same call; with impl="reference" the
reference form run chunk by chunk), cu_seqlens_cpu (checked equal to cu_seqlens), chunk_size,
A_log / dt_bias (keywords where fla takes them so). Arguments that only tune
a GPU kernel (disable_recompute, chunk_indices) are accepted and ignored;
cp_context (context parallelism: a slice of a sequence whose state another
device holds) raises NotImplementedError: call the oracle on the whole
sequence. Any other keyword is a TypeError naming fla's arguments;
head_first=True is refused (fla removed it: rearrange to [B, T, H, ...]).

Never a quiet wrong answer: inputs are kept by save_for_backward (an input
edited in place before .backward() is PyTorch's own error); the backward is
once differentiable (differentiating its gradients again raises); every
switch must be a bool; a result or gradient that does not fit its dtype is
a ValueError naming it.
"""

try:
    import torch
except ImportError as e:  # pragma: no cover - exercised without torch only
    raise ImportError("kdalab.torch needs PyTorch (import kdalab works without it): "
                      "pip install torch, or on Debian apt-get install python3-torch") from e

import difflib
import warnings

import numpy as np

from . import _lib, attention, ops

FLA_VERSION = "0.5.2"
FLA_COMMIT = "bc3b101dcb713ddc5bd8924b66754eb68b5ccf89"

_NAMES = ("q", "k", "v", "g", "beta", "initial_state", "A_log", "dt_bias", "a", "b")


def _tensor(x, name, required=False):
    """A tensor as is; a NumPy array as a tensor; None as None (a ValueError
    when required). Anything else is a ValueError naming the argument."""
    if x is None:
        if required:
            raise ValueError("%s is required" % name)
        return None
    if torch.is_tensor(x):
        return x
    return torch.from_numpy(ops.as_f64(x, name))


def _switches(fname, **named):
    """Every switch argument must be a bool: 'False' is not False."""
    for name, x in named.items():
        ops.as_bool("%s: %s" % (fname, name), x)


def _fits(name, t, dtype, whose):
    """t (finite float64) converted to dtype, refused when a value that was
    finite does not fit it (float16 above 65504, say): a ValueError naming
    the array (name), where, and whose dtype it is (whose: "out_dtype", ...).
    dtype must be a floating torch dtype."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError("%s: %s %r is not a floating torch dtype (kdalab's results are real: "
                         "an int or bool dtype would round them)" % (name, whose, dtype))
    r = t.to(dtype=dtype)
    if dtype == t.dtype:  # nothing converted: the library's values are finite
        return r
    if r.numel() and not bool(torch.isfinite(r).all()):
        bad = (~torch.isfinite(r)) & torch.isfinite(t.to(r.device))
        if bool(bad.any()):
            idx = tuple(int(i) for i in bad.nonzero()[0])
            raise ValueError("%s%s = %.6g does not fit %s %s (largest finite %g)"
                             % (name, list(idx), float(t[idx]), whose, dtype,
                                torch.finfo(dtype).max))
    return r


def _grad(a, meta, name):
    """A float64 NumPy gradient as a tensor of the input's dtype, device,
    shape; a gradient that does not fit the input's dtype is a ValueError
    naming it (never an inf in .grad)."""
    if a is None or meta is None:
        return None
    dtype, device, shape = meta
    t = torch.from_numpy(np.ascontiguousarray(a)).reshape(shape)
    return _fits("d" + name, t, dtype, "the dtype of %s," % name).to(device=device)


class _NotTwice(torch.autograd.Function):
    """The identity on a backward's gradients, tied to the tensors they depend
    on, whose own backward raises: kdalab's backward is computed outside
    autograd (once differentiable), so differentiating it again — a gradient
    penalty, create_graph=True — must fail, not give constants."""

    @staticmethod
    def forward(ctx, fname, n, *args):
        ctx.fname = fname
        return tuple(a.clone() for a in args[:n])

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("%s: trying to differentiate twice (create_graph=True, a gradient "
                           "penalty): kdalab's backward is once differentiable, its gradients "
                           "are not functions torch can differentiate again" % ctx.fname)


def _once(fname, grads, deps):
    """grads as they are, unless autograd records the backward (create_graph)
    and some of deps (the saved inputs, the incoming gradients) require
    grad: then tied to them through _NotTwice."""
    deps = [d for d in deps if d is not None and d.requires_grad]
    if not torch.is_grad_enabled() or not deps:
        return grads
    at = [i for i, x in enumerate(grads) if x is not None]
    out = list(grads)
    for i, x in zip(at, _NotTwice.apply(fname, len(at), *[grads[i] for i in at], *deps)):
        out[i] = x
    return tuple(out)


def _meta(tensors):
    return [None if t is None else (t.dtype, t.device, t.shape) for t in tensors]


class _Spec:
    """What a call fixes besides its tensors (not differentiated)."""

    def __init__(self, fname, mech, form, scale, cu, chunk_size, opts, impl="simd",
                 states=False):
        self.fname, self.mech, self.form, self.scale, self.cu = fname, mech, form, scale, cu
        self.chunk_size, self.opts, self.impl = chunk_size, opts, impl
        # the forward writes h (the SIMD chunkwise path) at chunk_size, fla's 64 by
        # default (the forward then runs at its own chunk: ops._h_opts)
        self.states = states and impl == "simd" and form == _lib.FORM_CHUNK


class _Mixer(torch.autograd.Function):
    """(q, k, v, g, beta, initial_state, A_log, dt_bias) -> (o, final_state),
    both float64 on the CPU, and with spec.states h, the state entering each
    chunk (not differentiated); forward by ops._forward, backward by
    ops._backward (the NumPy functions' cores). The inputs are kept by
    save_for_backward, so an input edited in place between forward and
    backward is PyTorch's own error, never a gradient of the edited values."""

    @staticmethod
    def forward(ctx, spec, *tensors):
        arr = {n: None if t is None else ops.as_f64(t, n) for n, t in zip(_NAMES, tensors)}
        out = ops._forward(spec.mech, spec.form, arr["q"], arr["k"], arr["v"], arr["g"],
                           arr["beta"], spec.scale, arr["initial_state"], True, spec.cu,
                           spec.chunk_size, False, spec.impl, a=arr["a"], b=arr["b"],
                           A_log=arr["A_log"], dt_bias=arr["dt_bias"], states=spec.states,
                           **spec.opts)
        ctx.spec, ctx.arr, ctx.meta = spec, arr, _meta(tensors)
        ctx.save_for_backward(*tensors)
        res = tuple(torch.from_numpy(x) for x in out)
        if spec.states:
            ctx.mark_non_differentiable(res[2])
        return res

    @staticmethod
    def backward(ctx, do, dht, dh=None):  # dh: h is not differentiated
        saved = ctx.saved_tensors  # raises if an input was modified in place
        with torch.no_grad():
            grads = _Mixer._grads(ctx, do, dht)
        return (None,) + _once(ctx.spec.fname, grads, saved + (do, dht))

    @staticmethod
    def _grads(ctx, do, dht):
        spec, arr = ctx.spec, ctx.arr
        gr = ops._backward(spec.mech, spec.form, arr["q"], arr["k"], arr["v"], arr["g"],
                           arr["beta"], ops.as_f64(do, "do"),
                           None if dht is None else ops.as_f64(dht, "dht"), spec.scale,
                           arr["initial_state"], spec.cu, spec.chunk_size, False,
                           impl=spec.impl, a=arr["a"], b=arr["b"], A_log=arr["A_log"],
                           dt_bias=arr["dt_bias"], **spec.opts)
        grads = tuple(getattr(gr, n, None) for n in ("dq", "dk", "dv", "dg", "dbeta", "dh0",
                                                     "dA_log", "ddt_bias", "da", "db"))
        return tuple(_grad(a, m, n) if need else None for a, m, n, need
                     in zip(grads, ctx.meta, _NAMES, ctx.needs_input_grad[1:]))


class _Attn(torch.autograd.Function):
    """(q, k, v) -> o: causal softmax attention, kdalab.attention."""

    @staticmethod
    def forward(ctx, scale, cu, q, k, v):
        arr = [ops.as_f64(t, n) for t, n in ((q, "q"), (k, "k"), (v, "v"))]
        o = attention.parallel_attn(*arr, scale=scale, cu_seqlens=cu)
        ctx.scale, ctx.cu, ctx.arr, ctx.meta = scale, cu, arr, _meta((q, k, v))
        ctx.save_for_backward(q, k, v)
        return torch.from_numpy(o)

    @staticmethod
    def backward(ctx, do):
        saved = ctx.saved_tensors  # raises if an input was modified in place
        with torch.no_grad():
            gr = attention.parallel_attn_bwd(*ctx.arr, ops.as_f64(do, "do"), scale=ctx.scale,
                                             cu_seqlens=ctx.cu)
            grads = tuple(_grad(a, m, n) if need else None for a, m, n, need
                          in zip(gr, ctx.meta, "qkv", ctx.needs_input_grad[2:]))
        return (None, None) + _once("parallel_attn", grads, saved + (do,))


# ---- fla's arguments ------------------------------------------------------------

def _kwargs(fname, kwargs, allowed, params):
    """fla's **kwargs: the names fla reads from it (allowed), head_first=False;
    anything else is a TypeError naming fla's spelling."""
    kw = dict(kwargs)
    if kw.pop("head_first", False):
        raise ValueError("%s: head_first=True was removed from fla: inputs are time-first "
                         "[B, T, H, ...]; pass einops.rearrange(x, 'b h t ... -> b t h ...') "
                         "for each head-first tensor" % fname)
    for name in kw:
        if name not in allowed:
            # fla names a per-key decay g in chunk_kda but gk in the recurrent
            # forms: suggest the decay's name here before any look-alike
            alias = {"gk": "g", "g": "gk"}.get(name)
            near = [alias] if alias in params else \
                difflib.get_close_matches(name, list(params) + list(allowed), 1)
            raise TypeError("%s() got an unexpected keyword argument %r%s; fla's %s takes %s%s"
                            % (fname, name, " (fla spells it %r)" % near[0] if near else "",
                               fname, ", ".join(params),
                               ", and by keyword " + ", ".join(allowed) if allowed else ""))
    return kw


def _state_v_first(fname, state_v_first, kw):
    if "transpose_state_layout" in kw:
        if state_v_first:
            raise ValueError("Cannot pass both `state_v_first` and the deprecated "
                             "`transpose_state_layout`.")
        warnings.warn("`transpose_state_layout` is deprecated and renamed to `state_v_first`.",
                      DeprecationWarning, stacklevel=3)
        return ops.as_bool("%s: transpose_state_layout" % fname, kw.pop("transpose_state_layout"))
    return state_v_first


def _cu(cu_seqlens, cu_seqlens_cpu=None):
    """cu_seqlens as int64 NumPy; cu_seqlens_cpu, when given, must equal it."""
    cu = ops._as_cu(cu_seqlens)
    if cu_seqlens_cpu is not None:
        cpu = ops._as_cu(cu_seqlens_cpu)
        if cu is None or cpu.shape != cu.shape or (cpu != cu).any():
            raise ValueError("cu_seqlens_cpu %s differs from cu_seqlens %s (fla takes it as a "
                             "CPU copy of cu_seqlens)" % (cpu.tolist(),
                                                           None if cu is None else cu.tolist()))
    return cu


def _neg_eigval(allow_neg_eigval, use_beta_sigmoid_in_kernel):
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError("`allow_neg_eigval=True` requires `use_beta_sigmoid_in_kernel=True`.")


def _out(t, out_dtype, like, name):
    """A float64 CPU result in the dtype/device the caller chose; a value that
    does not fit that dtype is a ValueError naming the output (name)."""
    if t is None:
        return None
    if like is not None and not torch.is_tensor(like):
        raise ValueError("like: a tensor whose dtype and device to take, not %s"
                         % type(like).__name__)
    dtype = out_dtype if out_dtype is not None else (like.dtype if like is not None else None)
    device = like.device if like is not None else None
    if dtype is not None:
        t = _fits(name, t, dtype, "out_dtype" if out_dtype is not None else "like's dtype")
    return t if device is None else t.to(device=device)


def _flip(v_first, t):
    return t.transpose(-1, -2) if v_first and t is not None else t


def _mixer(fname, mech, form, q, k, v, g, beta, scale, initial_state, output_final_state,
           cu, state_v_first, opts, A_log=None, dt_bias=None, chunk_size=None, out_dtype=None,
           like=None, states=False, impl="simd", a=None, b=None):
    """The common body: (o, final_state[, intermediate states]). impl: the
    chunkwise form's implementation, forward and backward, "simd" or
    "reference" (ops._impl)."""
    _switches(fname, output_final_state=output_final_state, state_v_first=state_v_first,
              return_intermediate_states=states)
    ops._impl(form, impl)  # a bad impl fails now, not in the backward
    q, k, v = (_tensor(x, n, required=True) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    g, beta, h0, A_log, dt_bias, a, b = (_tensor(x, n) for x, n in (
        (g, "g"), (beta, "beta"), (initial_state, "initial_state"), (A_log, "A_log"),
        (dt_bias, "dt_bias"), (a, "a"), (b, "b")))
    h0 = _flip(state_v_first, h0)
    spec = _Spec(fname, mech, form, scale, cu, chunk_size, opts, impl, states)
    o, ht, *h = _Mixer.apply(spec, q, k, v, g, beta, h0, A_log, dt_bias, a, b)
    res = (_out(o, out_dtype, like, "o"),
           _out(_flip(state_v_first, ht), out_dtype, like, "final_state")
           if output_final_state else None)
    if states:
        if not h:  # the reference: run chunk by chunk
            h = [torch.from_numpy(ops.chunk_states(mech, q, k, v, g, beta, scale, h0, cu,
                                                   chunk_size, impl=impl, A_log=A_log,
                                                   dt_bias=dt_bias, **opts))]
        res += (_out(_flip(state_v_first, h[0]), out_dtype, like, "h"),)
    return res


def _opts(l2=False, gate=False, lower_bound=None, beta_sigmoid=False, neg=False):
    return dict(use_qk_l2norm_in_kernel=l2, use_gate_in_kernel=gate, lower_bound=lower_bound,
                use_beta_sigmoid_in_kernel=beta_sigmoid, allow_neg_eigval=neg)


# ---- KDA -------------------------------------------------------------------------

_CHUNK_KDA = ("q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state",
              "use_qk_l2norm_in_kernel", "use_gate_in_kernel", "use_beta_sigmoid_in_kernel",
              "allow_neg_eigval", "safe_gate", "lower_bound", "disable_recompute",
              "return_intermediate_states", "state_v_first", "cu_seqlens", "cu_seqlens_cpu",
              "cp_context")


def _no_cp(fname, cp_context):
    if cp_context is not None:
        raise NotImplementedError("%s: cp_context (context parallelism) is not emulated: call "
                                  "the oracle on the whole, gathered sequence" % fname)


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
              use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, safe_gate=False,
              lower_bound=None, disable_recompute=False, return_intermediate_states=False,
              state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, cp_context=None, *,
              out_dtype=None, like=None, impl="simd", **kwargs):
    """fla's chunk_kda: (o, final_state), or (o, final_state, h) with
    return_intermediate_states (h [B, NT, HV, K, V]: the state entering each
    chunk of chunk_size, a keyword, default 64; B = 1 and NT over all
    sequences with cu_seqlens; not differentiated). A_log, dt_bias by keyword
    with use_gate_in_kernel. impl: the implementation of the forward and the
    backward, "simd" (the default: the SIMD path, within ~1e-15 of the
    reference) or "reference" (the oracle of record)."""
    kw = _kwargs("chunk_kda", kwargs, ("A_log", "dt_bias", "chunk_size",
                                       "transpose_state_layout"), _CHUNK_KDA)
    _switches("chunk_kda", safe_gate=safe_gate, disable_recompute=disable_recompute,
              use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
              use_gate_in_kernel=use_gate_in_kernel,
              use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
              allow_neg_eigval=allow_neg_eigval)
    state_v_first = _state_v_first("chunk_kda", state_v_first, kw)
    _no_cp("chunk_kda", cp_context)
    _neg_eigval(allow_neg_eigval, use_beta_sigmoid_in_kernel)
    if lower_bound is not None:
        lower_bound = ops._real("lower_bound", lower_bound)
    if safe_gate and use_gate_in_kernel:
        if lower_bound is None:
            raise ValueError("`lower_bound` must be specified when `safe_gate=True` and "
                             "`use_gate_in_kernel=True`.")
        if not -5 <= lower_bound < 0:
            raise ValueError("`lower_bound` must be in the safe range [-5, 0), got %r."
                             % (lower_bound,))
    return _mixer("chunk_kda", "kda", _lib.FORM_CHUNK, q, k, v, g, beta, scale, initial_state,
                  output_final_state, _cu(cu_seqlens, cu_seqlens_cpu), state_v_first,
                  _opts(use_qk_l2norm_in_kernel, use_gate_in_kernel, lower_bound,
                        use_beta_sigmoid_in_kernel, allow_neg_eigval),
                  kw.get("A_log"), kw.get("dt_bias"), kw.get("chunk_size"), out_dtype,
                  like, states=return_intermediate_states, impl=impl)


_FUSED_KDA = ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "scale", "initial_state",
              "output_final_state", "use_qk_l2norm_in_kernel", "use_gate_in_kernel",
              "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "lower_bound", "state_v_first",
              "cu_seqlens")


def fused_recurrent_kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None,
                        initial_state=None, output_final_state=False,
                        use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                        use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                        lower_bound=None, state_v_first=False, cu_seqlens=None, *,
                        out_dtype=None, like=None, **kwargs):
    """fla's fused_recurrent_kda: (o, final_state), by the recurrence."""
    kw = _kwargs("fused_recurrent_kda", kwargs, ("transpose_state_layout",), _FUSED_KDA)
    state_v_first = _state_v_first("fused_recurrent_kda", state_v_first, kw)
    _switches("fused_recurrent_kda", use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
              use_gate_in_kernel=use_gate_in_kernel,
              use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
              allow_neg_eigval=allow_neg_eigval)
    _neg_eigval(allow_neg_eigval, use_beta_sigmoid_in_kernel)
    return _mixer("fused_recurrent_kda", "kda", _lib.FORM_RECURRENT, q, k, v, g, beta, scale, initial_state,
                  output_final_state, _cu(cu_seqlens), state_v_first,
                  _opts(use_qk_l2norm_in_kernel, use_gate_in_kernel, lower_bound,
                        use_beta_sigmoid_in_kernel, allow_neg_eigval),
                  A_log, dt_bias, None, out_dtype, like)


# ---- Gated DeltaNet -----------------------------------------------------------------

_CHUNK_GDR = ("q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state",
              "use_qk_l2norm_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval",
              "state_v_first", "cu_seqlens", "cu_seqlens_cpu", "chunk_indices", "cp_context")


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                           output_final_state=False, use_qk_l2norm_in_kernel=False,
                           use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                           state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                           chunk_indices=None, cp_context=None, *, out_dtype=None, like=None,
                           impl="simd", **kwargs):
    """fla's chunk_gated_delta_rule (g [B, T, HV]): (o, final_state); impl as
    chunk_kda's.
    use_gate_in_kernel, A_log [HV], dt_bias [HV] by keyword: g is then the
    raw input of -exp(A_log) * softplus(g + dt_bias)."""
    kw = _kwargs("chunk_gated_delta_rule", kwargs,
                 ("use_gate_in_kernel", "A_log", "dt_bias", "chunk_size",
                  "transpose_state_layout"), _CHUNK_GDR)
    state_v_first = _state_v_first("chunk_gated_delta_rule", state_v_first, kw)
    _no_cp("chunk_gated_delta_rule", cp_context)
    gate = kw.get("use_gate_in_kernel", False)
    _switches("chunk_gated_delta_rule", use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
              use_gate_in_kernel=gate, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
              allow_neg_eigval=allow_neg_eigval)
    _neg_eigval(allow_neg_eigval, use_beta_sigmoid_in_kernel)
    return _mixer("chunk_gated_delta_rule", "gated_deltanet", _lib.FORM_CHUNK, q, k, v, g, beta, scale, initial_state,
                  output_final_state, _cu(cu_seqlens, cu_seqlens_cpu), state_v_first,
                  _opts(use_qk_l2norm_in_kernel, gate, None, use_beta_sigmoid_in_kernel,
                        allow_neg_eigval),
                  kw.get("A_log") if gate else None, kw.get("dt_bias") if gate else None,
                  kw.get("chunk_size"), out_dtype, like, impl=impl)


_FUSED_GDR = ("q", "k", "v", "g", "gk", "gv", "beta", "scale", "initial_state",
              "output_final_state", "use_qk_l2norm_in_kernel", "use_gate_in_kernel", "A_log",
              "dt_bias", "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "state_v_first",
              "cu_seqlens")


def fused_recurrent_gated_delta_rule(q, k, v, g=None, gk=None, gv=None, beta=None, scale=None,
                                     initial_state=None, output_final_state=False,
                                     use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                                     A_log=None, dt_bias=None, use_beta_sigmoid_in_kernel=False,
                                     allow_neg_eigval=False, state_v_first=False,
                                     cu_seqlens=None, *, out_dtype=None, like=None, **kwargs):
    """fla's fused_recurrent_gated_delta_rule: g [B, T, HV] a per-head decay,
    gk [B, T, HV, K] a per-key one (KDA's), both summed in log space when both
    are given; no gate: DeltaNet; beta None: ones. gv (a per-value decay) is
    not in kdalab: NotImplementedError."""
    kw = _kwargs("fused_recurrent_gated_delta_rule", kwargs, ("transpose_state_layout",),
                 _FUSED_GDR)
    state_v_first = _state_v_first("fused_recurrent_gated_delta_rule", state_v_first, kw)
    _switches("fused_recurrent_gated_delta_rule", use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
              use_gate_in_kernel=use_gate_in_kernel,
              use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
              allow_neg_eigval=allow_neg_eigval)
    _neg_eigval(allow_neg_eigval, use_beta_sigmoid_in_kernel)
    if gv is not None:
        raise NotImplementedError("fused_recurrent_gated_delta_rule: gv (a decay per value "
                                  "column) is not a kdalab mechanism: pass gv=None")
    if use_gate_in_kernel:
        if A_log is None:
            raise ValueError("`A_log` must be provided when `use_gate_in_kernel=True`.")
        if g is None:
            raise ValueError("`g` (raw pre-activation) must be provided when "
                             "`use_gate_in_kernel=True`.")
        if gk is not None:
            raise NotImplementedError("fused_recurrent_gated_delta_rule: gk together with "
                                      "use_gate_in_kernel is not emulated")
    v = _tensor(v, "v", required=True)
    g, gk, beta = (_tensor(x, n) for x, n in ((g, "g"), (gk, "gk"), (beta, "beta")))
    if beta is None:
        beta = torch.ones(v.shape[:3], dtype=torch.float64)
    opts = _opts(use_qk_l2norm_in_kernel, use_gate_in_kernel, None, use_beta_sigmoid_in_kernel,
                 allow_neg_eigval)
    if gk is not None and g is not None and tuple(g.shape) != tuple(v.shape[:3]):
        raise ValueError("fused_recurrent_gated_delta_rule: g: shape %s, expected %s ([B, T, "
                         "HV]: a log-decay per head, added to gk's per channel); g is never "
                         "broadcast" % (tuple(g.shape), tuple(v.shape[:3])))
    if gk is not None:
        mech, gate = "kda", gk if g is None else gk.double().cpu() + g.double().cpu()[..., None]
    elif g is not None:
        mech, gate = "gated_deltanet", g
    else:
        mech, gate = "deltanet", None
    return _mixer("fused_recurrent_gated_delta_rule", mech, _lib.FORM_RECURRENT, q, k, v,
                  gate, beta, scale, initial_state,
                  output_final_state, _cu(cu_seqlens), state_v_first, opts,
                  A_log if use_gate_in_kernel else None,
                  dt_bias if use_gate_in_kernel else None, None, out_dtype, like)


# ---- DeltaNet --------------------------------------------------------------------

_CHUNK_DR = ("q", "k", "v", "beta", "scale", "initial_state", "output_final_state",
             "use_qk_l2norm_in_kernel", "cu_seqlens", "cu_seqlens_cpu")


def chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                     use_qk_l2norm_in_kernel=False, cu_seqlens=None, cu_seqlens_cpu=None, *,
                     out_dtype=None, like=None, impl="simd", **kwargs):
    """fla's chunk_delta_rule: (o, final_state); impl as chunk_kda's."""
    kw = _kwargs("chunk_delta_rule", kwargs, ("chunk_size",), _CHUNK_DR)
    _switches("chunk_delta_rule", use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    return _mixer("chunk_delta_rule", "deltanet", _lib.FORM_CHUNK, q, k, v, None, beta, scale, initial_state,
                  output_final_state, _cu(cu_seqlens, cu_seqlens_cpu), False,
                  _opts(use_qk_l2norm_in_kernel), None, None, kw.get("chunk_size"),
                  out_dtype, like, impl=impl)


def fused_recurrent_delta_rule(q, k, v, beta=None, scale=None, initial_state=None,
                               output_final_state=False, use_qk_l2norm_in_kernel=False,
                               cu_seqlens=None, *, out_dtype=None, like=None):
    """fla's fused_recurrent_delta_rule: (o, final_state); beta None: ones."""
    _switches("fused_recurrent_delta_rule", use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    v = _tensor(v, "v", required=True)
    if beta is None:
        beta = torch.ones(v.shape[:3], dtype=torch.float64)
    if scale is not None and not ops._real("scale", scale) > 0:
        raise ValueError("scale must be positive")
    return _mixer("fused_recurrent_delta_rule", "deltanet", _lib.FORM_RECURRENT, q, k, v, None, beta, scale, initial_state,
                  output_final_state, _cu(cu_seqlens), False, _opts(use_qk_l2norm_in_kernel),
                  None, None, None, out_dtype, like)


# ---- linear attention ---------------------------------------------------------------

def _segments(cu, T):
    bounds = cu if cu is not None else np.array([0, T])
    return [(int(bounds[n]), int(bounds[n + 1])) for n in range(len(bounds) - 1)]


def _normalize(o, q, k, scale, z_init, cu):
    """fla's normalize_with_z_state in float64 by torch's autograd: o / (scale
    q . (z_init + cumsum k) + 1e-10) per sequence, and the final cumulative
    key z_state ([B, 1, H, K], or [N, 1, H, K] with cu_seqlens)."""
    q, k = (x.to(device="cpu", dtype=torch.float64) for x in (q, k))
    z0 = None if z_init is None else z_init.to(device="cpu", dtype=torch.float64)
    parts, ends = [], []
    for n, (s, e) in enumerate(_segments(cu, k.shape[1])):
        kc = torch.cumsum(k[:, s:e], dim=1)
        if z0 is not None:
            kc = kc + (z0[n:n + 1] if cu is not None else z0)
        parts.append(kc)
        ends.append(kc[:, -1:] if e > s else (z0[n:n + 1] if cu is not None else z0)
                    if z0 is not None else torch.zeros_like(k[:, :1]))
    kc = torch.cat(parts, dim=1)
    z = (q * scale * kc).sum(-1, keepdim=True) + 1e-10
    G = o.shape[2] // q.shape[2]
    o = o / z.repeat_interleave(G, dim=2)
    if not torch.isfinite(o).all():
        raise ValueError("normalize: o / (scale q . cumsum(k) + 1e-10) is not finite (a "
                         "normaliser of 0 or one that overflows)")
    return o, torch.cat(ends, dim=0) if cu is not None else ends[0]


def _reversal(cu, T):
    """The time indices that reverse each sequence in place (cu_seqlens None:
    the one sequence of length T): run the recurrence on x[:, idx] and read
    its output at [:, idx] for fla's reverse=True."""
    return torch.cat([torch.arange(e - 1, s - 1, -1) for s, e in _segments(cu, T)]
                     or [torch.zeros(0, dtype=torch.long)])


def _time_reversed(cu, named, g_name=None):
    """fla's reverse=True: each sequence run from its end. named: (name, x)
    pairs, q first, x None where absent; cu_seqlens already checked. Each x
    is checked before it is flipped (finite; g_name's, a log-decay, <= 0) so
    that a bad value is named by the caller's argument and index, not the
    flipped copy's. Returns (idx, the flipped tensors); the output read at
    [:, idx] is in the caller's time order again."""
    for n, x in named:
        if x is None:
            continue
        ops._check_input(n, ops.as_f64(x, n))
        if n == g_name and bool((x > 0).any()):
            i = tuple(int(j) for j in (x > 0).nonzero()[0])
            raise ValueError("%s%s = %r > 0: a log-decay must be <= 0" % (n, list(i), float(x[i])))
    idx = _reversal(cu, named[0][1].shape[1])
    return idx, [None if x is None else x.index_select(1, idx.to(x.device)) for _, x in named]


def _z_init(fname, initial_state, normalize, q, cu):
    """(kv_init, z_init) from initial_state: a (kv_init, z_init) pair only
    with normalize; z_init [N, 1, H, K] (N = B, or the number of sequences
    with cu_seqlens), finite, never broadcast."""
    if not isinstance(initial_state, (tuple, list)):
        return initial_state, None
    if not normalize or len(initial_state) != 2:
        raise ValueError("%s: initial_state: a %s of %d, expected one state [N, H, K, V]%s"
                         % (fname, type(initial_state).__name__, len(initial_state),
                            " or the pair (kv_init, z_init)" if normalize else
                            " (the pair (kv_init, z_init) is for normalize=True)"))
    kv_init, z_init = initial_state
    z_init = _tensor(z_init, "z_init")
    if z_init is not None:
        N = q.shape[0] if cu is None else cu.size - 1
        want = (N, 1, q.shape[2], q.shape[3])
        if tuple(z_init.shape) != want:
            raise ValueError("%s: z_init: shape %s, expected %s ([N, 1, H, K]: the cumulative "
                             "key entering each sequence)" % (fname, tuple(z_init.shape), want))
        ops._check_input("z_init", ops.as_f64(z_init, "z_init"))
    return kv_init, z_init


def _linear(fname, form, q, k, v, scale, initial_state, output_final_state, normalize, cu,
            out_dtype, like, reverse=False, impl="simd"):
    _switches(fname, normalize=normalize, reverse=reverse,
              output_final_state=output_final_state)
    q, k, v = (_tensor(x, n, required=True) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    kv_init, z_init = _z_init(fname, initial_state, normalize, q, cu)
    if cu is not None and q.ndim == 4:
        ops.check_cu(cu, q.shape[1])  # before reverse and normalize index by it
    if reverse:  # the recurrence from each sequence's end: flip time, run, flip back
        idx, (q, k, v) = _time_reversed(cu, (("q", q), ("k", k), ("v", v)))
    o, ht = _mixer(fname, "linear_attention", form, q, k, v, None, None, scale, kv_init, True,
                   cu, False, {}, chunk_size=None, impl=impl)
    if normalize:
        s = ops._real("scale", scale) if scale is not None else q.shape[-1] ** -0.5
        o, z_state = _normalize(o, q, k, s, z_init, cu)
    if reverse:
        o = o.index_select(1, idx.to(o.device))
    o = _out(o, out_dtype, like, "o")
    ht = _out(ht, out_dtype, like, "final_state") if output_final_state else None
    return (o, (ht, _out(z_state, out_dtype, like, "z_state"))) if normalize else (o, ht)


def chunk_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False,
                      normalize=True, cu_seqlens=None, *, out_dtype=None, like=None,
                      impl="simd"):
    """fla's chunk_linear_attn: (o, final_state), or with normalize (fla's
    default) (o, (final_state, z_state)); initial_state may be the tuple
    (kv_init, z_init) with normalize; impl as chunk_kda's."""
    return _linear("chunk_linear_attn", _lib.FORM_CHUNK, q, k, v, scale, initial_state, output_final_state,
                   normalize, _cu(cu_seqlens), out_dtype, like, impl=impl)


def fused_recurrent_linear_attn(q, k, v, scale=None, initial_state=None,
                                output_final_state=False, reverse=False, normalize=False,
                                cu_seqlens=None, *, out_dtype=None, like=None):
    """fla's fused_recurrent_linear_attn (reverse: each sequence from its end)."""
    return _linear("fused_recurrent_linear_attn", _lib.FORM_RECURRENT, q, k, v, scale, initial_state, output_final_state,
                   normalize, _cu(cu_seqlens), out_dtype, like, reverse)


# ---- GLA and simple GLA: a decay without the delta rule ----------------------------

def _gated_linear(fname, mech, form, q, k, v, g, scale, initial_state, output_final_state,
                  reverse, state_v_first, cu, chunk_size, out_dtype, like, g_name="g"):
    """The body of the four GLA functions: (o, final_state); reverse runs each
    sequence from its end (_time_reversed: time flipped in, the output flipped
    back). With reverse the output is converted to out_dtype after it is
    flipped back, so that an overflow is named at the caller's index."""
    _switches(fname, reverse=reverse)
    q, k, v = (_tensor(x, n, required=True) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    g = _tensor(g, g_name)
    if reverse:
        if cu is not None and q.ndim == 4:
            ops.check_cu(cu, q.shape[1])
        idx, (q, k, v, g) = _time_reversed(cu, (("q", q), ("k", k), ("v", v), (g_name, g)),
                                           g_name)
    o, ht = _mixer(fname, mech if g is not None else "linear_attention", form, q, k, v, g,
                   None, scale, initial_state, output_final_state, cu, state_v_first, {},
                   chunk_size=chunk_size, out_dtype=None if reverse else out_dtype,
                   like=None if reverse else like)
    if reverse:
        o = _out(o.index_select(1, idx.to(o.device)), out_dtype, like, "o")
        ht = _out(ht, out_dtype, like, "final_state")
    return o, ht


def chunk_gla(q, k, v, g, scale=None, initial_state=None, output_final_state=False,
              state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, *, out_dtype=None,
              like=None):
    """fla's chunk_gla: GLA, g [B, T, HV, K] a log-decay per key channel, no
    delta rule: (o, final_state), in chunks of 64 (fla's)."""
    _tensor(g, "g", required=True)
    return _gated_linear("chunk_gla", "gla", _lib.FORM_CHUNK, q, k, v, g, scale,
                         initial_state, output_final_state, False, state_v_first,
                         _cu(cu_seqlens, cu_seqlens_cpu), 64, out_dtype, like)


_FUSED_GLA = ("q", "k", "v", "gk", "gv", "scale", "initial_state", "output_final_state",
              "reverse", "state_v_first", "cu_seqlens")


def fused_recurrent_gla(q, k, v, gk=None, gv=None, scale=None, initial_state=None,
                        output_final_state=False, reverse=False, state_v_first=False,
                        cu_seqlens=None, *, out_dtype=None, like=None, **kwargs):
    """fla's fused_recurrent_gla: gk [B, T, HV, K] the per-channel decay (None:
    no decay, linear attention); gv (a per-value decay) is not in kdalab:
    NotImplementedError. reverse: each sequence from its end."""
    kw = _kwargs("fused_recurrent_gla", kwargs, ("transpose_state_layout",), _FUSED_GLA)
    state_v_first = _state_v_first("fused_recurrent_gla", state_v_first, kw)
    if gv is not None:
        raise NotImplementedError("fused_recurrent_gla: gv (a decay per value column) is not a "
                                  "kdalab mechanism: pass gv=None")
    return _gated_linear("fused_recurrent_gla", "gla", _lib.FORM_RECURRENT, q, k, v, gk, scale,
                         initial_state, output_final_state, reverse, state_v_first,
                         _cu(cu_seqlens), None, out_dtype, like, g_name="gk")


def _g_gamma(fname, g, g_gamma, v):
    """simple GLA's g: as given, or g_gamma [HV] expanded over (b, t) inside
    autograd (so g_gamma's gradient is the sum over them); one of the two."""
    if g is not None and g_gamma is not None:
        raise ValueError("%s: give g or g_gamma, not both (fla: only one of g or g_gamma "
                         "should be provided)" % fname)
    if g_gamma is None:
        return g
    g_gamma, v = _tensor(g_gamma, "g_gamma"), _tensor(v, "v", required=True)
    ops._check_g_gamma(ops.as_f64(g_gamma, "g_gamma"), v.shape[2] if v.ndim == 4 else "HV",
                       fname + ": ")
    return g_gamma.expand(tuple(v.shape[:3]))


_CHUNK_SIMPLE_GLA = ("q", "k", "v", "g", "g_gamma", "scale", "initial_state",
                     "output_final_state", "state_v_first", "cu_seqlens", "cu_seqlens_cpu")


def chunk_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None,
                     output_final_state=False, state_v_first=False, cu_seqlens=None,
                     cu_seqlens_cpu=None, *, out_dtype=None, like=None, **kwargs):
    """fla's chunk_simple_gla: g [B, T, HV] one log-decay per head, or g_gamma
    [HV] a constant one (differentiated as such), no delta rule; neither:
    linear attention. (o, final_state). chunk_size by keyword (default 64)."""
    kw = _kwargs("chunk_simple_gla", kwargs, ("chunk_size",), _CHUNK_SIMPLE_GLA)
    return _gated_linear("chunk_simple_gla", "simple_gla", _lib.FORM_CHUNK, q, k, v,
                         _g_gamma("chunk_simple_gla", _tensor(g, "g"), g_gamma, v), scale,
                         initial_state, output_final_state, False, state_v_first,
                         _cu(cu_seqlens, cu_seqlens_cpu), kw.get("chunk_size"), out_dtype,
                         like)


_FUSED_SIMPLE_GLA = ("q", "k", "v", "g", "g_gamma", "scale", "initial_state",
                     "output_final_state", "reverse", "state_v_first", "cu_seqlens")


def fused_recurrent_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None,
                               output_final_state=False, reverse=False, state_v_first=False,
                               cu_seqlens=None, *, out_dtype=None, like=None, **kwargs):
    """fla's fused_recurrent_simple_gla: as chunk_simple_gla, token by token;
    reverse: each sequence from its end."""
    kw = _kwargs("fused_recurrent_simple_gla", kwargs, ("transpose_state_layout",),
                 _FUSED_SIMPLE_GLA)
    state_v_first = _state_v_first("fused_recurrent_simple_gla", state_v_first, kw)
    return _gated_linear("fused_recurrent_simple_gla", "simple_gla", _lib.FORM_RECURRENT, q,
                         k, v, _g_gamma("fused_recurrent_simple_gla", _tensor(g, "g"), g_gamma,
                                        v), scale, initial_state, output_final_state, reverse,
                         state_v_first, _cu(cu_seqlens), None, out_dtype, like)


# ---- softmax attention ---------------------------------------------------------------

# ---- the boundary: the general diagonal-plus-low-rank transition ----------------

def _dplr(fname, form, q, k, v, a, b, gk, scale, initial_state, output_final_state, reverse,
          cu, out_dtype, like, g_name="gk", chunk_size=None):
    """The body of the DPLR and RWKV-7 functions (the chunkwise form on the
    SIMD path, forward and backward; reverse runs each sequence from its
    end, as _gated_linear)."""
    _switches(fname, reverse=reverse)
    q, k, v = (_tensor(x, n, required=True) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    a, b, gk = (_tensor(x, n, required=True) for x, n in ((a, "a"), (b, "b"), (gk, g_name)))
    ops.log_decay_arg(g_name, gk, q, v)  # named as the caller named it, before it becomes g
    if reverse:
        if cu is not None and q.ndim == 4:
            ops.check_cu(cu, q.shape[1])
        idx, (q, k, v, a, b, gk) = _time_reversed(
            cu, (("q", q), ("k", k), ("v", v), ("a", a), ("b", b), (g_name, gk)), g_name)
    o, ht = _mixer(fname, "dplr", form, q, k, v, gk, None, scale, initial_state,
                   output_final_state, cu, False, {}, chunk_size=chunk_size,
                   out_dtype=None if reverse else out_dtype,
                   like=None if reverse else like, impl="simd", a=a, b=b)
    if reverse:
        o = _out(o.index_select(1, idx.to(o.device)), out_dtype, like, "o")
        ht = _out(ht, out_dtype, like, "final_state")
    return o, ht


_CHUNK_DPLR = ("q", "k", "v", "a", "b", "gk", "scale", "initial_state", "output_final_state",
               "cu_seqlens", "cu_seqlens_cpu", "safe_gate", "chunk_size", "disable_recompute",
               "cp_context", "lower_bound")


def _dplr_chunk_args(fname, kwargs, safe_gate, disable_recompute, cp_context, lower_bound,
                     params):
    """fla's chunkwise DPLR arguments that only tune its GPU kernel: checked
    as fla checks them (bools, a negative lower_bound, no cp_context), then
    unused — the oracle computes the exact function whatever gk is."""
    _kwargs(fname, kwargs, (), params)
    _switches(fname, safe_gate=safe_gate, disable_recompute=disable_recompute)
    _no_cp(fname, cp_context)
    if lower_bound is not None and not ops._real("lower_bound", lower_bound) < 0:
        raise ValueError("`lower_bound` must be negative (gk is a log-decay < 0), got %r"
                         % (lower_bound,))


def chunk_dplr_delta_rule(q, k, v, a, b, gk, scale=None, initial_state=None,
                          output_final_state=False, cu_seqlens=None, cu_seqlens_cpu=None,
                          safe_gate=False, chunk_size=None, disable_recompute=False,
                          cp_context=None, lower_bound=None, *, out_dtype=None, like=None,
                          **kwargs):
    """fla's chunk_dplr_delta_rule: S_t = (Diag(exp gk_t) + b_t a_t^T) S_{t-1}
    + k_t v_t^T, o_t = scale S_t^T q_t; a, b, gk [B, T, HV, K]; scale None:
    K^-1/2. The reference's chunkwise form and backward (chunk_size C,
    default 64)."""
    _dplr_chunk_args("chunk_dplr_delta_rule", kwargs, safe_gate, disable_recompute, cp_context,
                     lower_bound, _CHUNK_DPLR)
    return _dplr("chunk_dplr_delta_rule", _lib.FORM_CHUNK, q, k, v, a, b, gk, scale,
                 initial_state, output_final_state, False, _cu(cu_seqlens, cu_seqlens_cpu),
                 out_dtype, like, chunk_size=chunk_size)


def fused_recurrent_dplr_delta_rule(q, k, v, a, b, gk, scale=None, initial_state=None,
                                    output_final_state=False, reverse=False, cu_seqlens=None, *,
                                    out_dtype=None, like=None):
    """fla's fused_recurrent_dplr_delta_rule (fla's own kernel has no
    backward; this one does). reverse: each sequence from its end."""
    return _dplr("fused_recurrent_dplr_delta_rule", _lib.FORM_RECURRENT, q, k, v, a, b, gk,
                 scale, initial_state, output_final_state, reverse, _cu(cu_seqlens), out_dtype,
                 like)


_CHUNK_RWKV7 = ("r", "w", "k", "v", "a", "b", "scale", "initial_state", "output_final_state",
                "cu_seqlens", "cu_seqlens_cpu", "safe_gate", "chunk_size", "disable_recompute",
                "cp_context", "lower_bound")


def chunk_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=None, output_final_state=False,
                cu_seqlens=None, cu_seqlens_cpu=None, safe_gate=False, chunk_size=None,
                disable_recompute=False, cp_context=None, lower_bound=None, *, out_dtype=None,
                like=None, **kwargs):
    """fla's chunk_rwkv7: chunk_dplr_delta_rule with q = r and gk = w (w the
    log-decay), scale 1.0 by default."""
    _dplr_chunk_args("chunk_rwkv7", kwargs, safe_gate, disable_recompute, cp_context,
                     lower_bound, _CHUNK_RWKV7)
    return _dplr("chunk_rwkv7", _lib.FORM_CHUNK, r, k, v, a, b, w, scale, initial_state,
                 output_final_state, False, _cu(cu_seqlens, cu_seqlens_cpu), out_dtype, like,
                 g_name="w", chunk_size=chunk_size)


_FUSED_RWKV7 = ("r", "w", "k", "v", "a", "b", "scale", "initial_state", "output_final_state",
                "cu_seqlens")


def fused_recurrent_rwkv7(r, w, k, v, a, b, scale=None, initial_state=None,
                          output_final_state=True, cu_seqlens=None, *, out_dtype=None,
                          like=None, **kwargs):
    """fla's fused_recurrent_rwkv7, token by token (scale None: K^-1/2; the
    final state returned by default, as fla's)."""
    _kwargs("fused_recurrent_rwkv7", kwargs, (), _FUSED_RWKV7)
    return _dplr("fused_recurrent_rwkv7", _lib.FORM_RECURRENT, r, k, v, a, b, w, scale,
                 initial_state, output_final_state, False, _cu(cu_seqlens), out_dtype, like,
                 g_name="w")


_PARALLEL_ATTN = ("q", "k", "v", "g", "scale", "window_size", "cu_seqlens", "chunk_indices")


def parallel_attn(q, k, v, g=None, scale=None, window_size=None, cu_seqlens=None,
                  chunk_indices=None, *, sink_bias=None, out_dtype=None, like=None, **kwargs):
    """fla's parallel_attn: causal softmax attention, o [B, T, HQ, V] (query
    heads HQ a multiple of k's and v's H). g, window_size and sink_bias are
    not in kdalab (NotImplementedError unless None)."""
    _kwargs("parallel_attn", kwargs, (), _PARALLEL_ATTN + ("sink_bias",))
    if sink_bias is not None:
        raise NotImplementedError("parallel_attn: sink_bias is not in kdalab: pass None")
    for name, x in (("g", g), ("window_size", window_size)):
        if x is not None:
            raise NotImplementedError("parallel_attn: %s is not in kdalab (causal softmax "
                                      "attention only): pass %s=None" % (name, name))
    o = _Attn.apply(scale, _cu(cu_seqlens), *(_tensor(x, n, required=True)
                                              for x, n in ((q, "q"), (k, "k"), (v, "v"))))
    return _out(o, out_dtype, like, "o")
