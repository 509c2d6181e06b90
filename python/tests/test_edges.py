"""Inputs at the edges of what the module accepts: zero-sized dimensions,
values whose squares overflow, a linear-attention normaliser of zero. Each
is a correct result or one ValueError naming the argument the caller passed.
A library built from other headers than the module's mirrors is refused at
load by an ImportError naming the struct.
"""

import numpy as np
import pytest

import kdalab
from _calls import FUNCS, MECHS, backward, forward, make, recurrence

FORMS = ("chunk", "recurrent")


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize("form", FORMS)
def test_zero_value_heads_is_a_value_error(mech, form):
    """v with HV = 0 value heads (q, k with H >= 1) is refused, forward and
    backward, by a ValueError naming v: not read as HV = H."""
    a = make(mech, np.random.default_rng(3), B=1, T=3, H=2, HV=2, K=4, V=3)
    for n in ("v", "do", "g", "beta", "h0", "dht"):
        if a[n] is not None:
            a[n] = a[n][:, :, :0] if n not in ("h0", "dht") else a[n][:, :0]
    for run in (forward, backward):
        with pytest.raises(ValueError, match=r"v: shape \(1, 3, 0, 3\)"):
            run(mech, form, a)


@pytest.mark.parametrize("mech", MECHS)
def test_zero_sized_dimensions(mech):
    """B, H, K or V = 0: a ValueError naming the array; T = 0: an empty o and
    the initial state carried through (final state h0, dh0 = dht)."""
    shapes = {"B": dict(B=0, T=3, H=1, HV=1, K=2, V=2), "H": dict(B=1, T=3, H=0, HV=0, K=2, V=2),
              "K": dict(B=1, T=3, H=1, HV=1, K=0, V=2), "V": dict(B=1, T=3, H=1, HV=1, K=2, V=0)}
    for dim, shape in shapes.items():
        a = make(mech, np.random.default_rng(4), **shape)
        for form in FORMS:
            for run in (forward, backward):
                with pytest.raises(ValueError, match=r"^(q|v): shape"):
                    run(mech, form, a)
    a = make(mech, np.random.default_rng(5), B=2, T=0, H=1, HV=2, K=3, V=2)
    for form in FORMS:
        o, ht = forward(mech, form, a)
        assert o.shape == (2, 0, 2, 2)
        np.testing.assert_array_equal(ht, a["h0"])
        gr = backward(mech, form, a)
        assert gr.dq.shape == (2, 0, 1, 3) and gr.dv.shape == (2, 0, 2, 2)
        np.testing.assert_array_equal(gr.dh0, a["dht"])


@pytest.mark.parametrize("mech", ("kda", "gated_deltanet", "deltanet"))
def test_l2norm_in_kernel_of_huge_q_and_k(mech):
    """use_qk_l2norm_in_kernel with |q|, |k| far past 1e154 (their squares
    overflow): the same o as at 1e150 (where 1e-6 no longer counts), and
    gradients dq, dk scaled by 1e150 / s; never o = 0."""
    a = make(mech, np.random.default_rng(6), B=1, T=5, H=2, HV=2, K=4, V=3)
    ref = dict(a, q=a["q"] * 1e150, k=a["k"] * 1e150)
    o0, h0 = forward(mech, "chunk", ref, use_qk_l2norm_in_kernel=True)
    g0 = backward(mech, "chunk", ref, use_qk_l2norm_in_kernel=True)
    assert np.abs(o0).max() > 0.1
    for s in (1e160, 1e300, 1.7e308):
        big = dict(a, q=a["q"] * s, k=a["k"] * s)
        for form in FORMS:
            o, ht = forward(mech, form, big, use_qk_l2norm_in_kernel=True)
            np.testing.assert_allclose(o, o0, rtol=0, atol=1e-13 * np.abs(o0).max())
            g = backward(mech, form, big, use_qk_l2norm_in_kernel=True)
            for n in ("dq", "dk"):
                want = getattr(g0, n) * (1e150 / s)
                np.testing.assert_allclose(getattr(g, n), want, rtol=0,
                                           atol=1e-12 * np.abs(want).max())
            np.testing.assert_allclose(g.dv, g0.dv, rtol=0, atol=1e-12 * np.abs(g0.dv).max())


@pytest.mark.parametrize("form", FORMS)
def test_normalizer_zero_is_named(form):
    """Linear attention with normalize=True and a normaliser z that is
    exactly 0 (scale q . cumsum(k) = -1e-10 at [0, 1, 1]): forward and
    backward raise a ValueError naming z[0, 1, 1], not o = -inf as a
    success nor a complaint about the finite do."""
    a = make("linear_attention", np.random.default_rng(7), B=1, T=3, H=2, HV=2, K=2, V=2)
    a["h0"] = a["dht"] = None
    a["k"][0, :2, 1] = [[1.0, 0.0], [1.0, 0.0]]
    a["q"][0, 1, 1] = [-1e-10 / 2.0, 0.7]  # z = 1.0 * (-5e-11 * 2) + 1e-10 = 0
    kw = dict(scale=1.0, normalize=True)
    f, b = FUNCS[("linear_attention", form)]
    with pytest.raises(ValueError, match=r"normaliser z\[0, 1, 1\].* is 0"):
        f(a["q"], a["k"], a["v"], **kw)
    with pytest.raises(ValueError, match=r"normaliser z\[0, 1, 1\].* is 0"):
        b(a["q"], a["k"], a["v"], a["do"], **kw)


def test_normalizer_too_small_is_named():
    """A normaliser that is not 0 but so small that o / z overflows: the
    forward names o and z at their indices; the backward refuses too."""
    a = make("linear_attention", np.random.default_rng(8), B=1, T=2, H=1, HV=1, K=2, V=2)
    a["k"][0, 0, 0] = [1.0, 0.0]
    a["v"][0, 0, 0] = [1e300, 1.0]
    a["q"][0, 0, 0] = [-1e-10 + 1e-25, 0.3]  # z = 1e-25: 1e300 / 1e-25 overflows
    kw = dict(scale=1.0, normalize=True)
    with pytest.raises(ValueError, match=r"o\[0, 0, 0, 0\] / z\[0, 0, 0\] overflows"):
        kdalab.chunk_linear_attn(a["q"], a["k"], a["v"], **kw)
    with pytest.raises(ValueError, match=r"z\[0, 0, 0\]"):
        kdalab.chunk_linear_attn_bwd(a["q"], a["k"], a["v"], a["do"], **kw)


@pytest.mark.parametrize("form", FORMS)
def test_normalizer_overflow_is_named(form):
    """q = k = 1e160 with normalize=True: scale q . cumsum(k) overflows to inf,
    so o / z would be 0 where the answer is v (1e-200 here): both forms,
    forward and backward, raise a ValueError, never o = 0 and gradients 0 as
    a success. The recurrent form's o is finite (1e120), so its error names
    z[0, 0, 0]; the chunkwise form's score q . k overflows first, in the
    library, which says so."""
    q = np.full((1, 3, 1, 1), 1e160)
    v = np.full((1, 3, 1, 1), 1e-200)
    do = np.ones((1, 3, 1, 1))
    f, b = FUNCS[("linear_attention", form)]
    why = r"normaliser z\[0, 0, 0\].* overflows|overflowed"
    with pytest.raises(ValueError, match=why):
        f(q, q, v, scale=1.0, normalize=True)
    with pytest.raises(ValueError, match=why):
        b(q, q, v, do, scale=1.0, normalize=True)


def test_transformed_inputs_are_named_as_passed():
    """Inputs the module transforms before the library sees them are checked
    as the caller passed them: beta = 1.5 with allow_neg_eigval is named as
    1.5 (not the doubled 3), a NaN beta under the sigmoid and an inf q under
    the L2 norm are named at their index (not as the transformed NaN)."""
    r = np.random.default_rng(3)
    q = r.normal(size=(1, 4, 2, 3))
    v = r.normal(size=(1, 4, 2, 3))
    g = -np.abs(r.normal(size=(1, 4, 2, 3)))
    beta = np.full((1, 4, 2), 0.5)
    beta[0, 2, 1] = 1.5
    with pytest.raises(ValueError, match=r"beta\[0, 2, 1\] = 1\.5: must be in \[0, 1\]"):
        kdalab.fused_recurrent_kda(q, q, v, g, beta, allow_neg_eigval=True)
    beta[0, 2, 1] = np.nan
    with pytest.raises(ValueError, match=r"beta\[0, 2, 1\] = nan: must be finite"):
        kdalab.fused_recurrent_kda(q, q, v, g, beta, use_beta_sigmoid_in_kernel=True)
    qi = q.copy()
    qi[0, 1, 0, 2] = np.inf
    with pytest.raises(ValueError, match=r"q\[0, 1, 0, 2\] = inf: must be finite"):
        kdalab.fused_recurrent_kda(qi, q, v, g, np.full((1, 4, 2), 0.5),
                                   use_qk_l2norm_in_kernel=True)


def test_argument_types_are_checked():
    """scale and lower_bound are real numbers and the in-kernel switches are
    bools: a string, a bool or an array is a TypeError, never converted (a
    string 'False' would have turned the option on)."""
    r = np.random.default_rng(4)
    q = r.normal(size=(1, 4, 2, 3))
    g = -np.abs(r.normal(size=(1, 4, 2, 3)))
    beta = np.full((1, 4, 2), 0.5)
    for bad in ("0.5", True, np.array([0.5])):
        with pytest.raises(TypeError, match="scale must be a real number"):
            kdalab.fused_recurrent_kda(q, q, q, g, beta, scale=bad)
    with pytest.raises(TypeError, match="use_qk_l2norm_in_kernel must be True or False"):
        kdalab.fused_recurrent_kda(q, q, q, g, beta, use_qk_l2norm_in_kernel="False")
    with pytest.raises(TypeError, match="lower_bound must be a real number"):
        kdalab.fused_recurrent_kda(q, q, q, g, beta, use_gate_in_kernel=True,
                                   A_log=np.zeros(2), lower_bound="-5")
    o, _ = kdalab.fused_recurrent_kda(q, q, q, g, beta, scale=np.float32(0.5))  # a NumPy scalar is fine
    assert np.isfinite(o).all()


def test_named_arrays_match_the_c_structs():
    """The ctypes structs of the one call (kdalab_call, kdalab_tensors_f64) have
    the C structs' fields in the C order: leaving out each required array in
    turn is the library's error naming that array, in both directions and both
    implementations, and a name the struct lacks (`do` for `d_o`) is an
    AttributeError, not a Python attribute that leaves the C field NULL."""
    from kdalab import _lib
    r = np.random.default_rng(5)
    x = r.normal(size=(1, 3, 1, 2))
    fwd = dict(q=x, k=x, v=x, g=-np.abs(x), beta=np.full((1, 3, 1), 0.5), o=np.zeros_like(x))
    bwd = dict(fwd, d_o=x, dq=np.zeros_like(x))
    del bwd["o"]
    calls = ((fwd, lambda c, t: _lib.lib.kdalab_run_f64(c, t, None)),
             (bwd, _lib.lib.kdalab_run_bwd_f64))
    for impl in _lib.IMPLS.values():
        call = _lib.Call(_lib.Dims(1, 3, 1, 2, 2), 1, None, 0, _lib.MECHANISMS["kda"], 0.5,
                         _lib.FORM_CHUNK, impl, None, None)
        for arrays, fn in calls:
            for left_out in arrays:
                if left_out == "dq":  # optional
                    continue
                named = _lib.named(_lib.Tensors,
                                   **{n: a for n, a in arrays.items() if n != left_out})
                with pytest.raises(_lib.KdalabError, match=r"\(%s is NULL" % left_out):
                    _lib.check(fn(call, named), "kda")
    with pytest.raises(AttributeError):
        _lib.named(_lib.Tensors, do=x)
    with pytest.raises(AttributeError):
        _lib.Tensors().h_0 = None


def test_arrays_a_mechanism_does_not_have_are_refused():
    """A g given to a mechanism without a decay, or a beta to one without the
    delta rule, is a ValueError naming it (it was ignored, and its gradient
    came back as whatever memory held)."""
    from kdalab import ops
    r = np.random.default_rng(9)
    q = r.normal(size=(1, 5, 1, 4))
    v = r.normal(size=(1, 5, 1, 3))
    g = -np.abs(r.normal(size=(1, 5, 1, 4)))
    beta = np.full((1, 5, 1), 0.5)
    with pytest.raises(ValueError, match="g: deltanet has no log-decay"):
        ops._backward("deltanet", 1, q, q, v, g, beta, v, None, None, None, None)
    with pytest.raises(ValueError, match="beta: gla has no delta rule"):
        ops._forward("gla", 1, q, q, v, g, beta, None, None, False, None)
    from kdalab.testing import grad_tolerance
    with pytest.raises(ValueError, match="g: linear_attention has no log-decay"):
        grad_tolerance("linear_attention", q, q, v, g=g, do=v)


def test_library_of_other_headers_is_refused():
    """check_layouts, which the module runs when it loads the library: its own
    mirrors pass; a mirror of another size (a struct that grew), or a library
    without kdalab_struct_size (built before it), is an ImportError naming the
    struct, both sizes and the library."""
    import ctypes
    from kdalab import _lib
    mirrors = (("kdalab_chunk_opts", _lib.ChunkOpts), ("kdalab_call", _lib.Call),
               ("kdalab_tensors_f64", _lib.Tensors), ("kdalab_mechanism_info", _lib.MechanismRow))
    _lib.check_layouts(_lib.lib, _lib.LIBRARY_PATH, mirrors)

    class Grown(ctypes.Structure):
        _fields_ = _lib.ChunkOpts._fields_ + [("new_field", ctypes.c_size_t)]
    n = ctypes.sizeof(_lib.ChunkOpts)
    import re
    with pytest.raises(ImportError, match=re.escape(_lib.LIBRARY_PATH) + r" was built with a "
                       r"kdalab_chunk_opts of %d bytes, this module lays it out in %d" % (n, n + 8)):
        _lib.check_layouts(_lib.lib, _lib.LIBRARY_PATH, (("kdalab_chunk_opts", Grown),))

    class Older:  # a library from before kdalab_struct_size
        pass
    with pytest.raises(ImportError, match="has no kdalab_struct_size"):
        _lib.check_layouts(Older(), "/old/libkdalab.so", mirrors)


# every way a form runs (the recurrent form has one), for the overflow tests
FORM_IMPLS = (("chunk", "simd"), ("chunk", "reference"), ("recurrent", None))


def unnormalised(mech, impl):
    """The keyword arguments of a call through impl (None: the form's only
    one), linear attention without its normaliser (whose errors are its own:
    test_normalizer_overflow_is_named)."""
    kw = dict(impl=impl) if impl else {}
    if mech == "linear_attention":
        kw["normalize"] = False
    return kw


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize("form_impl", FORM_IMPLS)
def test_overflow_is_the_library_error(mech, form_impl):
    """Finite inputs whose results overflow (every v = 1e308, positive q and
    k, q a hundred times larger; then every do = 1e308): the library refuses
    the outputs of every form, forward and backward (KDALAB_ERANGE, a
    KdalabError saying non-finite). The module does not scan the library's
    outputs again, so this is their only guard."""
    form, impl = form_impl
    a = make(mech, np.random.default_rng(9), B=1, T=70, H=2, HV=2, K=4, V=3)
    a["q"], a["k"] = 100 * np.abs(a["q"]), np.abs(a["k"])
    a["v"] = np.full_like(a["v"], 1e308)
    kw = unnormalised(mech, impl)
    with pytest.raises(kdalab.KdalabError, match="non-finite"):
        forward(mech, form, a, **kw)
    a["do"] = np.full_like(a["do"], 1e308)
    with pytest.raises(kdalab.KdalabError, match="non-finite"):
        backward(mech, form, a, **kw)


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize("form_impl", FORM_IMPLS)
def test_grouped_heads_sum_overflow_is_an_error(mech, form_impl):
    """Two value heads read one q/k head, and each head's dq, dk is finite
    (1e308 at most) while their sum is not: the backward raises, naming dq
    or dk, in every form; it never returns inf as a gradient."""
    form, impl = form_impl
    a = make(mech, np.random.default_rng(10), B=1, T=1, H=1, HV=2, K=1, V=1)
    a["q"] = a["k"] = np.ones((1, 1, 1, 1))
    a["v"] = np.ones((1, 1, 2, 1))
    a["do"] = np.full((1, 1, 2, 1), 1e308)
    a["h0"] = a["dht"] = None
    for n in ("g", "beta"):
        if a[n] is not None:
            a[n] = np.zeros_like(a[n]) if n == "g" else np.ones_like(a[n])
    kw = unnormalised(mech, impl)
    with pytest.raises(ValueError, match=r"non-finite values in d[qk]|d[qk]\[.*overflowed"):
        backward(mech, form, a, scale=1.0, **kw)


def test_attention_grouped_heads_sum_overflow_is_an_error():
    """parallel_attn with two query heads per key/value head: each head's dv
    is finite, their sum (made in NumPy) is not; a ValueError naming dv."""
    q, k, v = np.ones((1, 1, 2, 1)), np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1))
    do = np.full((1, 1, 2, 1), 1e308)
    with pytest.raises(ValueError, match=r"dv\[0, 0, 0, 0\] = inf overflowed"):
        kdalab.parallel_attn_bwd(q, k, v, do)
