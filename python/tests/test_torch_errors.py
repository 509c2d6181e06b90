"""kdalab.torch never answers wrongly without an error: inputs edited in place
between forward and backward, double backward, strings passed as switches,
cu_seqlens that do not cover T, shapes that would broadcast, results that do
not fit the dtype asked for, and inputs of the wrong kind each raise an
exception that names the argument (or PyTorch's own error where PyTorch has
one for the case).
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kdalab.torch as kt  # noqa: E402

B, T, H, HV, K, V = 1, 6, 1, 2, 3, 2


def rnd(*shape, lo=-1.0, hi=1.0, seed=[100]):
    seed[0] += 1
    g = torch.Generator().manual_seed(seed[0])
    return (torch.rand(*shape, generator=g, dtype=torch.float64) * (hi - lo) + lo) \
        .requires_grad_()


def kda_inputs():
    return (rnd(B, T, H, K), rnd(B, T, H, K), rnd(B, T, HV, V),
            rnd(B, T, HV, K, lo=-1, hi=-0.1), rnd(B, T, HV, lo=0.1, hi=0.9))


# ---- autograd ------------------------------------------------------------------

@pytest.mark.parametrize("which", ["q", "k", "g", "beta", "h0"])
def test_input_edited_in_place_before_backward_is_an_error(which):
    """PyTorch's own error for a saved input modified in place, as its ops
    raise: the backward never runs on the edited values."""
    q, k, v, g, beta = kda_inputs()
    h0 = rnd(B, HV, K, V)
    o, ht = kt.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    with torch.no_grad():
        {"q": q, "k": k, "g": g, "beta": beta, "h0": h0}[which].mul_(0.5)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (o.sum() + ht.sum()).backward()


def test_attention_input_edited_in_place_is_an_error():
    q, k, v = rnd(B, T, H, K), rnd(B, T, H, K), rnd(B, T, H, V)
    o = kt.parallel_attn(q, k, v)
    with torch.no_grad():
        k.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        o.sum().backward()


def test_retain_graph_backward_twice_gives_the_same_gradients():
    q, k, v, g, beta = kda_inputs()
    o, _ = kt.chunk_kda(q, k, v, g, beta)
    o.pow(2).sum().backward(retain_graph=True)
    first = k.grad.clone()
    o.pow(2).sum().backward()
    assert torch.equal(k.grad, 2 * first)


@pytest.mark.parametrize("fn", ["chunk_kda", "parallel_attn"])
def test_double_backward_raises_instead_of_returning_constants(fn):
    """A gradient penalty differentiates the backward: kdalab's backward is
    once differentiable, so that is an error, never a zero second term."""
    q, k, v, g, beta = kda_inputs()
    if fn == "chunk_kda":
        o, _ = kt.chunk_kda(q, k, v, g, beta)
    else:
        o = kt.parallel_attn(q, k, v[:, :, :1])
    loss = (o * torch.rand_like(o)).sum()  # a constant incoming gradient
    dk, = torch.autograd.grad(loss, k, create_graph=True)
    penalty = loss + (dk ** 2).sum()
    with pytest.raises(RuntimeError, match="differentiate twice"):
        penalty.backward()


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_create_graph_without_differentiating_the_gradient_still_works():
    """create_graph=True alone is no error: only differentiating the
    gradients again is."""
    q, k, v, g, beta = kda_inputs()
    o, _ = kt.chunk_kda(q, k, v, g, beta)
    (o.sum()).backward(create_graph=True)
    ref = torch.autograd.grad(kt.chunk_kda(q, k, v, g, beta)[0].sum(), k)[0]
    assert torch.equal(k.grad.detach(), ref)


# ---- switches ------------------------------------------------------------------

SWITCHES = [
    ("chunk_kda", "state_v_first"), ("chunk_kda", "output_final_state"),
    ("chunk_kda", "return_intermediate_states"), ("chunk_kda", "safe_gate"),
    ("chunk_kda", "use_qk_l2norm_in_kernel"), ("fused_recurrent_kda", "state_v_first"),
    ("chunk_gated_delta_rule", "use_gate_in_kernel"),
    ("fused_recurrent_gated_delta_rule", "use_gate_in_kernel"),
    ("fused_recurrent_gated_delta_rule", "output_final_state"),
    ("chunk_delta_rule", "output_final_state"),
    ("fused_recurrent_delta_rule", "use_qk_l2norm_in_kernel"),
    ("chunk_linear_attn", "normalize"), ("chunk_linear_attn", "output_final_state"),
    ("fused_recurrent_linear_attn", "reverse"), ("fused_recurrent_linear_attn", "normalize"),
]


def call(fn, **kw):
    q, k, v, g, beta = kda_inputs()
    f = getattr(kt, fn)
    if fn.endswith("kda"):
        return f(q, k, v, g, beta, **kw)
    if "gated" in fn:
        return f(q, k, v, g[..., 0], beta=beta, **kw) if "fused" in fn else \
            f(q, k, v, g[..., 0], beta, **kw)
    if "delta" in fn:
        return f(q, k, v, beta, **kw)
    return f(q, k, v, **kw)


@pytest.mark.parametrize("fn,name", SWITCHES, ids=["%s-%s" % s for s in SWITCHES])
@pytest.mark.parametrize("value", ["False", "no", 0, None])
def test_a_switch_is_a_bool(fn, name, value):
    with pytest.raises(TypeError, match="%s must be True or False" % name):
        call(fn, **{name: value})


def test_transpose_state_layout_is_a_bool():
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="transpose_state_"):
        call("chunk_kda", transpose_state_layout="False")


# ---- shapes and cu_seqlens -----------------------------------------------------------

@pytest.mark.parametrize("cu,why", [([0, 3, 5], "last boundary must be T = 6"),
                                    ([0, 3, 7], "last boundary must be T = 6"),
                                    ([0, 4, 3, 6], "boundaries must strictly increase"),
                                    ([1, 6], "first boundary must be 0")])
@pytest.mark.parametrize("reverse", [True, False])
def test_linear_attn_cu_seqlens_must_cover_t(cu, why, reverse):
    q, k, v = rnd(1, T, H, K), rnd(1, T, H, K), rnd(1, T, H, V)
    with pytest.raises(ValueError, match="cu_seqlens.*" + why):
        kt.fused_recurrent_linear_attn(q, k, v, reverse=reverse, normalize=True,
                                       cu_seqlens=torch.tensor(cu))


@pytest.mark.parametrize("fn", ["fused_recurrent_linear_attn", "fused_recurrent_gla"])
def test_reverse_names_the_callers_index_not_the_flipped_copys(fn):
    q, k, v = rnd(1, T, H, K), rnd(1, T, H, K), rnd(1, T, H, V)
    extra = {"gk": rnd(1, T, H, K, lo=-1, hi=-0.1)} if fn == "fused_recurrent_gla" else {}
    with torch.no_grad():
        q[0, 1, 0, 2] = float("nan")
    with pytest.raises(ValueError, match=r"q\[0, 1, 0, 2\] = nan"):
        getattr(kt, fn)(q, k, v, reverse=True, **extra)


@pytest.mark.parametrize("z_shape", [(2, 1, H, K), (1, H, K), (1, 1, H, K + 1)])
def test_z_init_is_shape_checked_never_broadcast(z_shape):
    q, k, v = rnd(1, T, H, K, lo=0.5), rnd(1, T, H, K, lo=0.5), rnd(1, T, H, V)
    with pytest.raises(ValueError, match="z_init: shape"):
        kt.chunk_linear_attn(q, k, v, initial_state=(rnd(1, H, K, V), torch.zeros(z_shape)),
                             output_final_state=True)


@pytest.mark.parametrize("g_shape", [(B, T, 1), (B, T), ()])
def test_g_beside_gk_is_never_broadcast(g_shape):
    q, k, v, gk, beta = kda_inputs()
    g = torch.full(g_shape, -0.1, dtype=torch.float64)
    with pytest.raises(ValueError, match="g: shape"):
        kt.fused_recurrent_gated_delta_rule(q, k, v, g=g, gk=gk, beta=beta)


# ---- dtypes ---------------------------------------------------------------------

def test_a_result_that_overflows_out_dtype_is_an_error():
    q, k, v, g, beta = kda_inputs()
    with pytest.raises(ValueError, match=r"o\[0, 0, 0, 0\] = .* does not fit out_dtype "
                                         r"torch.float16"):
        kt.chunk_kda(q * 1e4, k * 1e4, v, g, beta, out_dtype=torch.float16)
    with pytest.raises(ValueError, match="final_state.*does not fit like's dtype"):
        kt.chunk_kda(q * 1e-6, k, v * 1e6, g, beta, output_final_state=True,
                     like=torch.zeros(1, dtype=torch.float16))


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.complex128, "float16"])
def test_out_dtype_must_be_a_real_floating_dtype(dtype):
    q, k, v, g, beta = kda_inputs()
    with pytest.raises(ValueError, match="out_dtype .* is not a floating torch dtype"):
        kt.chunk_kda(q, k, v, g, beta, out_dtype=dtype)


def test_a_gradient_that_overflows_the_input_dtype_is_an_error():
    """An fp16 input whose gradient exceeds 65504: an error naming the
    gradient, never inf in .grad."""
    q, k, v, g, beta = (x.detach().to(torch.float16).requires_grad_() for x in kda_inputs())
    o, _ = kt.chunk_kda(q, k, v, g, beta)
    with pytest.raises(ValueError, match=r"d(q|k|v|g|beta)\[.* does not fit the dtype of "
                                         r"(q|k|v|g|beta), torch.float16"):
        (o * 1e6).sum().backward()


# ---- inputs of the wrong kind, named ------------------------------------------------

def test_wrong_inputs_name_the_argument():
    q, k, v, g, beta = kda_inputs()
    h0 = rnd(B, HV, K, V)
    cases = [
        (lambda: kt.fused_recurrent_delta_rule(q, k, None), ValueError, "v is required"),
        (lambda: kt.fused_recurrent_gated_delta_rule(q, k, None, g[..., 0]), ValueError,
         "v is required"),
        (lambda: kt.chunk_kda(q, None, v, g, beta), ValueError, "k is required"),
        (lambda: kt.chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True, safe_gate=True,
                              lower_bound="x"), TypeError, "lower_bound must be a real"),
        (lambda: kt.chunk_kda(q, k, v, g, beta, initial_state=(h0,)), ValueError,
         "initial_state: a tuple"),
        (lambda: kt.chunk_kda(q, k, v, g, beta, initial_state=(h0, h0)), ValueError,
         "initial_state: a tuple"),
        (lambda: kt.chunk_linear_attn(q, k, v, initial_state=(h0, h0, h0)), ValueError,
         "initial_state: a tuple of 3"),
        (lambda: kt.chunk_linear_attn(q, k, v, initial_state=(h0, h0), normalize=False),
         ValueError, "initial_state: a tuple"),
        (lambda: kt.chunk_linear_attn(q, k, v, initial_state=(
            rnd(1, HV, K, V), torch.full((1, 1, H, K), float("nan")))), ValueError,
         r"z_init\[0, 0, 0, 0\] = nan"),
        (lambda: kt.chunk_kda(q, k, v, g, "beta"), ValueError, "beta"),
        (lambda: kt.parallel_attn(q, None, v), ValueError, "k is required"),
        (lambda: kt.chunk_kda(q, k, v, g, beta, like="x"), ValueError, "like"),
    ]
    for i, (f, exc, text) in enumerate(cases):
        with pytest.raises(exc, match=text):
            f()


def test_negated_view_is_read_as_its_values():
    """A tensor with torch's lazy negation bit is an ordinary input."""
    q, k, v, g, beta = kda_inputs()
    neg = torch._neg_view(q.detach())
    o1, _ = kt.chunk_kda(neg, k, v, g, beta)
    o2, _ = kt.chunk_kda(-q.detach(), k, v, g, beta)
    assert torch.equal(o1, o2)


def test_numpy_inputs_stay_accepted():
    q, k, v, g, beta = (x.detach().numpy() for x in kda_inputs())
    o, _ = kt.chunk_kda(q, k, v, g, np.asarray(beta, dtype=np.float32))
    assert o.shape == (B, T, HV, V)
