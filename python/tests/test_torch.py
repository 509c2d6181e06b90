"""kdalab.torch: the oracle as torch.autograd.Functions. Every function's
gradients (every input, the in-kernel options, the initial and final state)
pass torch.autograd.gradcheck in float64 at small shapes (finite differences
of the float64 forward: eps 1e-6, atol 1e-5, rtol 1e-3, gradcheck's
defaults); results equal the NumPy functions' bit for bit; dtypes and
devices round-trip.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kdalab  # noqa: E402
import kdalab.torch as kt  # noqa: E402

B, T, H, HV, K, V = 1, 5, 1, 2, 3, 2


def rnd(*shape, lo=-1.0, hi=1.0, seed=[0]):
    seed[0] += 1
    g = torch.Generator().manual_seed(seed[0])
    x = torch.rand(*shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
    return x.requires_grad_()


def tensors(mech="kda", b=B, t=T):
    """q, k, v[, g], beta, h0, in this order (the functions' positional order)."""
    a = {"q": rnd(b, t, H, K), "k": rnd(b, t, H, K), "v": rnd(b, t, HV, V)}
    if mech == "kda":
        a["g"] = rnd(b, t, HV, K, lo=-1.5, hi=-0.05)
    elif mech == "gdn":
        a["g"] = rnd(b, t, HV, lo=-1.5, hi=-0.05)
    a["beta"] = rnd(b, t, HV, lo=0.05, hi=0.95)
    a["h0"] = rnd(b, HV, K, V)
    return a


def both(fn, *args, **kw):
    """o and the final state, as one tuple of tensors (for gradcheck)."""
    o, ht = fn(*args, output_final_state=True, **kw)[:2]
    return o, ht


CU = torch.tensor([0, 2, 5])


def cases():
    """(name, inputs, function of the inputs) for every function of kdalab.torch."""
    c = []
    a = tensors("kda")
    c.append(("chunk_kda", a, lambda q, k, v, g, beta, h0: both(
        kt.chunk_kda, q, k, v, g, beta, initial_state=h0, chunk_size=2)))
    c.append(("fused_recurrent_kda", a, lambda q, k, v, g, beta, h0: both(
        kt.fused_recurrent_kda, q, k, v, g, beta, initial_state=h0)))
    a = dict(tensors("kda"), A_log=rnd(HV, lo=-1, hi=0.5), dt_bias=rnd(HV * K))
    c.append(("chunk_kda_options", a, lambda q, k, v, g, beta, h0, A_log, dt_bias: both(
        kt.chunk_kda, q, k, v, g, beta, initial_state=h0, use_qk_l2norm_in_kernel=True,
        use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True,
        allow_neg_eigval=True, chunk_size=2)))
    c.append(("fused_recurrent_kda_lower_bound", a,
              lambda q, k, v, g, beta, h0, A_log, dt_bias: both(
                  kt.fused_recurrent_kda, q, k, v, g, beta, A_log, dt_bias, initial_state=h0,
                  use_gate_in_kernel=True, lower_bound=-3.0)))
    a = dict(tensors("kda"), dt_bias=rnd(HV * K))
    c.append(("chunk_kda_safe_gate_no_A_log", a, lambda q, k, v, g, beta, h0, dt_bias: both(
        kt.chunk_kda, q, k, v, g, beta, initial_state=h0, use_gate_in_kernel=True,
        safe_gate=True, lower_bound=-5.0, dt_bias=dt_bias, chunk_size=2)))
    a = tensors("gdn")
    c.append(("chunk_gated_delta_rule", a, lambda q, k, v, g, beta, h0: both(
        kt.chunk_gated_delta_rule, q, k, v, g, beta, initial_state=h0, chunk_size=2)))
    c.append(("fused_recurrent_gated_delta_rule", a, lambda q, k, v, g, beta, h0: both(
        kt.fused_recurrent_gated_delta_rule, q, k, v, g, beta=beta, initial_state=h0)))
    a = dict(tensors("gdn"), A_log=rnd(HV, lo=-1, hi=0.5), dt_bias=rnd(HV))
    c.append(("chunk_gated_delta_rule_gate", a,
              lambda q, k, v, g, beta, h0, A_log, dt_bias: both(
                  kt.chunk_gated_delta_rule, q, k, v, g, beta, initial_state=h0,
                  use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
                  use_qk_l2norm_in_kernel=True)))
    a = dict(tensors("gdn"), gk=rnd(B, T, HV, K, lo=-1, hi=0))
    c.append(("fused_recurrent_gated_delta_rule_g_gk", a,
              lambda q, k, v, g, beta, h0, gk: both(
                  kt.fused_recurrent_gated_delta_rule, q, k, v, g, gk, None, beta,
                  initial_state=h0)))
    a = tensors("deltanet")
    c.append(("chunk_delta_rule", a, lambda q, k, v, beta, h0: both(
        kt.chunk_delta_rule, q, k, v, beta, initial_state=h0, chunk_size=2,
        use_qk_l2norm_in_kernel=True)))
    c.append(("fused_recurrent_delta_rule", a, lambda q, k, v, beta, h0: both(
        kt.fused_recurrent_delta_rule, q, k, v, beta, initial_state=h0)))
    a = {n: x for n, x in tensors("linear").items() if n != "beta"}
    c.append(("chunk_linear_attn", a, lambda q, k, v, h0: both(
        kt.chunk_linear_attn, q, k, v, initial_state=h0, normalize=False)))
    c.append(("fused_recurrent_linear_attn", a, lambda q, k, v, h0: both(
        kt.fused_recurrent_linear_attn, q, k, v, initial_state=h0)))
    a = {"q": rnd(B, T, H, K, lo=0.5, hi=1), "k": rnd(B, T, H, K, lo=0.5, hi=1),
         "v": rnd(B, T, HV, V), "h0": rnd(B, HV, K, V), "z0": rnd(B, 1, H, K, lo=0, hi=1)}
    c.append(("chunk_linear_attn_normalize", a, lambda q, k, v, h0, z0: (lambda r: (
        r[0], r[1][0], r[1][1]))(kt.chunk_linear_attn(q, k, v, initial_state=(h0, z0),
                                                      output_final_state=True))))
    c.append(("fused_recurrent_linear_attn_reverse", a, lambda q, k, v, h0, z0: (lambda r: (
        r[0], r[1][0], r[1][1]))(kt.fused_recurrent_linear_attn(
            q, k, v, initial_state=(h0, z0), output_final_state=True, reverse=True,
            normalize=True))))
    a = {"q": rnd(B, T, HV, K), "k": rnd(B, T, H, K), "v": rnd(B, T, H, V)}
    c.append(("parallel_attn", a, lambda q, k, v: kt.parallel_attn(q, k, v)))
    c.append(("parallel_attn_varlen", a, lambda q, k, v: kt.parallel_attn(
        q, k, v, cu_seqlens=CU)))
    a = {n: x for n, x in tensors("kda").items() if n != "beta"}  # GLA: g per key channel
    c.append(("chunk_gla", a, lambda q, k, v, g, h0: both(
        kt.chunk_gla, q, k, v, g, initial_state=h0)))
    c.append(("fused_recurrent_gla_reverse", a, lambda q, k, v, g, h0: both(
        kt.fused_recurrent_gla, q, k, v, g, initial_state=h0, reverse=True)))
    a = {n: x for n, x in tensors("gdn").items() if n != "beta"}  # simple GLA: g per head
    c.append(("chunk_simple_gla", a, lambda q, k, v, g, h0: both(
        kt.chunk_simple_gla, q, k, v, g, initial_state=h0, chunk_size=2)))
    c.append(("fused_recurrent_simple_gla", a, lambda q, k, v, g, h0: both(
        kt.fused_recurrent_simple_gla, q, k, v, g, initial_state=h0)))
    a = {"q": rnd(B, T, H, K), "k": rnd(B, T, H, K), "v": rnd(B, T, HV, V),
         "g_gamma": rnd(HV, lo=-1.5, hi=-0.05), "h0": rnd(2, HV, K, V)}
    c.append(("chunk_simple_gla_g_gamma_varlen", a, lambda q, k, v, gg, h0: both(
        kt.chunk_simple_gla, q, k, v, g_gamma=gg, initial_state=h0, cu_seqlens=CU,
        chunk_size=2)))
    a = tensors("kda")
    a["h0"] = rnd(2, HV, K, V)
    c.append(("chunk_kda_varlen", a, lambda q, k, v, g, beta, h0: both(
        kt.chunk_kda, q, k, v, g, beta, initial_state=h0, cu_seqlens=CU, cu_seqlens_cpu=CU,
        chunk_size=2)))
    return c


CASES = cases()


@pytest.mark.parametrize("name,inputs,fn", CASES, ids=[c[0] for c in CASES])
def test_gradcheck_float64(name, inputs, fn):
    assert torch.autograd.gradcheck(fn, tuple(inputs.values()))


def test_backward_fills_every_grad_as_the_numpy_bwd():
    """.backward() gives the NumPy *_bwd's gradients bit for bit, the in-kernel
    gate's dA_log, ddt_bias and the initial state's included; the forward is
    the NumPy forward bit for bit."""
    a = dict(tensors("kda"), A_log=rnd(HV), dt_bias=rnd(HV * K))
    kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
              use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True)
    o, ht = kt.chunk_kda(a["q"], a["k"], a["v"], a["g"], a["beta"], initial_state=a["h0"],
                         output_final_state=True, A_log=a["A_log"], dt_bias=a["dt_bias"], **kw)
    do, dht = torch.rand_like(o), torch.rand_like(ht)
    ((o * do).sum() + (ht * dht).sum()).backward()
    args = [a[n].detach() for n in ("q", "k", "v", "g", "beta")]
    o_np, ht_np = kdalab.chunk_kda(*args, initial_state=a["h0"], output_final_state=True,
                                   A_log=a["A_log"], dt_bias=a["dt_bias"], **kw)
    assert np.array_equal(o.detach().numpy(), o_np) and np.array_equal(ht.detach().numpy(),
                                                                       ht_np)
    gr = kdalab.chunk_kda_bwd(*args, do, dht, initial_state=a["h0"], A_log=a["A_log"],
                              dt_bias=a["dt_bias"], **kw)
    for n, ref in (("q", gr.dq), ("k", gr.dk), ("v", gr.dv), ("g", gr.dg), ("beta", gr.dbeta),
                   ("h0", gr.dh0), ("A_log", gr.dA_log), ("dt_bias", gr.ddt_bias)):
        assert np.array_equal(a[n].grad.numpy(), ref), n


def test_float64_cpu_tensors_are_not_copied():
    """A contiguous float64 CPU tensor reaches C as a view of its memory (no
    copy), also when it requires grad; a float32 or a strided one is copied
    once, as the README says."""
    from kdalab import ops
    x = torch.randn(1, 5, 2, 4, dtype=torch.float64)
    assert np.shares_memory(ops.as_f64(x, "x"), x.numpy())
    xg = x.clone().requires_grad_()
    assert np.shares_memory(ops.as_f64(xg, "x"), xg.detach().numpy())
    assert not np.shares_memory(ops.as_f64(x.float(), "x"), x.numpy())
    xt = x.transpose(1, 2)  # a strided view: copied into a contiguous array
    assert not np.shares_memory(ops.as_f64(xt, "x"), x.numpy())
    o, _ = kt.chunk_kda(*(tensors("kda")[n].detach() for n in ("q", "k", "v", "g", "beta")))
    assert o.dtype == torch.float64 and o.is_contiguous()


def test_dtypes_and_devices_round_trip():
    """float64 CPU out by default; out_dtype= and like= choose; gradients in
    each input's own dtype (bfloat16 here) and device."""
    a = {n: x.detach().to(torch.bfloat16).requires_grad_() for n, x in tensors("kda").items()}
    args = [a[n] for n in ("q", "k", "v", "g", "beta")]
    o, ht = kt.chunk_kda(*args, initial_state=a["h0"], output_final_state=True)
    assert o.dtype == ht.dtype == torch.float64 and o.device.type == "cpu"
    o32, _ = kt.fused_recurrent_kda(*args, out_dtype=torch.float32)
    assert o32.dtype == torch.float32
    ob, htb = kt.chunk_kda(*args, initial_state=a["h0"], output_final_state=True, like=a["q"])
    assert ob.dtype == htb.dtype == torch.bfloat16 and ob.device == a["q"].device
    assert torch.equal(ob, o.to(torch.bfloat16))
    ob.float().sum().backward()
    for n, x in a.items():
        assert x.grad is not None and x.grad.dtype == torch.bfloat16, n
    # NumPy arrays are accepted too (as constants)
    o2, _ = kt.chunk_kda(*(x.detach().double().numpy() for x in args))
    assert o2.dtype == torch.float64
    # softmax attention and linear attention honour out_dtype too
    q = a["q"].detach().double()
    assert kt.parallel_attn(q, q, q, out_dtype=torch.float16).dtype == torch.float16
    assert kt.chunk_linear_attn(q, q, q, like=a["q"])[0].dtype == torch.bfloat16


def test_parallel_attn_against_torch_softmax():
    """kdalab's softmax attention, grouped query heads and packed sequences,
    against torch's own float64 softmax, forward and backward."""
    a = {"q": rnd(1, 6, 4, 3), "k": rnd(1, 6, 2, 3), "v": rnd(1, 6, 2, 2)}
    cu = torch.tensor([0, 4, 6])

    def ref(q, k, v):
        out = []
        for s, e in ((0, 4), (4, 6)):
            kk = k[:, s:e].repeat_interleave(2, dim=2)
            vv = v[:, s:e].repeat_interleave(2, dim=2)
            sc = torch.einsum("bthk,bshk->bhts", q[:, s:e], kk) * 3 ** -0.5
            mask = torch.ones(e - s, e - s, dtype=torch.bool).tril()
            p = sc.masked_fill(~mask, float("-inf")).softmax(-1)
            out.append(torch.einsum("bhts,bshv->bthv", p, vv))
        return torch.cat(out, 1)

    o = kt.parallel_attn(a["q"], a["k"], a["v"], cu_seqlens=cu)
    r = ref(a["q"], a["k"], a["v"])
    assert torch.allclose(o, r, rtol=0, atol=1e-14)
    do = torch.rand_like(o)
    g1 = torch.autograd.grad((o * do).sum(), list(a.values()))
    g2 = torch.autograd.grad((r * do).sum(), list(a.values()))
    for x, y in zip(g1, g2):
        assert torch.allclose(x, y, rtol=0, atol=1e-13)
