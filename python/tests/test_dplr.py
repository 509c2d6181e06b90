"""The boundary row from Python: fla's generalized delta rule and RWKV-7
(kdalab.chunk_dplr_delta_rule, fused_recurrent_dplr_delta_rule, chunk_rwkv7,
fused_recurrent_rwkv7 and their kdalab.torch twins) against fla's float64
golden cases (tests/golden_grad/dplr_*: fla's dplr_recurrence under
autograd; the chunkwise forward on the SIMD path and the reference), torch's
gradcheck, reverse time, and the refusals.

Tolerances as in the C tests: float64 forward 1e-12, gradients 1e-10."""

import os

import numpy as np
import pytest

import kdalab

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                    "golden_grad")
CASES = ("dplr_rwkv7_grad", "dplr_general_grad", "dplr_as_kda_grad", "dplr_rwkv7_k64_grad")


def load(name, key):
    path = os.path.join(ROOT, "%s.%s.npy" % (name, key))
    return np.load(path) if os.path.exists(path) else None


def rel(want, got):
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-300))


@pytest.mark.parametrize("name", CASES)
def test_golden(name):
    q, k, v, a, b, gk = (load(name, x) for x in ("q", "k", "v", "a", "b", "g"))
    h0, do, dht = load(name, "h0"), load(name, "do"), load(name, "dht")
    s = q.shape[-1] ** -0.5
    for f, impl in ((kdalab.chunk_dplr_delta_rule, "simd"),
                    (kdalab.chunk_dplr_delta_rule, "reference"),
                    (kdalab.fused_recurrent_dplr_delta_rule, None)):
        kw = {"impl": impl} if impl else {}
        o, ht = f(q, k, v, a, b, gk, scale=s, initial_state=h0, output_final_state=True, **kw)
        assert rel(load(name, "o"), o) <= 1e-12
        assert rel(load(name, "ht"), ht) <= 1e-12
    for f, impl in ((kdalab.chunk_dplr_delta_rule_bwd, "simd"),
                    (kdalab.chunk_dplr_delta_rule_bwd, "reference"),
                    (kdalab.fused_recurrent_dplr_delta_rule_bwd, None)):
        kw = {"impl": impl} if impl else {}
        gr = f(q, k, v, a, b, gk, do, dht, scale=s, initial_state=h0, **kw)
        for key, got in (("dq", gr.dq), ("dk", gr.dk), ("dv", gr.dv), ("dg", gr.dg),
                         ("da", gr.da), ("db", gr.db), ("dh0", gr.dh0)):
            want = load(name, key)
            if want is not None:
                assert rel(want, got) <= 1e-10, key
    # RWKV-7's names: r = q, w = gk
    o1, _ = kdalab.chunk_rwkv7(q, gk, k, v, a, b, scale=s)
    o2, _ = kdalab.chunk_dplr_delta_rule(q, k, v, a, b, gk, scale=s)
    o3, _ = kdalab.fused_recurrent_rwkv7(q, gk, k, v, a, b, scale=s)
    assert np.array_equal(o1, o2) and rel(o2, o3) <= 1e-12
    g1 = kdalab.chunk_rwkv7_bwd(q, gk, k, v, a, b, do, dht, scale=s, initial_state=h0)
    g2 = kdalab.chunk_dplr_delta_rule_bwd(q, k, v, a, b, gk, do, dht, scale=s,
                                          initial_state=h0)
    g3 = kdalab.fused_recurrent_rwkv7_bwd(q, gk, k, v, a, b, do, dht, scale=s,
                                          initial_state=h0)
    for key in ("dq", "dk", "dv", "dg", "da", "db", "dh0"):
        if getattr(g2, key) is None:  # no initial state: no dh0
            assert getattr(g1, key) is None and getattr(g3, key) is None
            continue
        assert np.array_equal(getattr(g1, key), getattr(g2, key)), key
        assert rel(getattr(g3, key), getattr(g1, key)) <= 1e-12, key


def test_defaults_follow_fla():
    """fla's defaults (FLA_COMMIT): scale K^-1/2 for both DPLR forms and for
    fused_recurrent_rwkv7, 1.0 for chunk_rwkv7; fused_recurrent_rwkv7 returns
    the final state unasked."""
    name = CASES[0]
    q, k, v, a, b, gk = (load(name, x) for x in ("q", "k", "v", "a", "b", "g"))
    o_chunk, _ = kdalab.chunk_dplr_delta_rule(q, k, v, a, b, gk)
    o_rec, _ = kdalab.fused_recurrent_dplr_delta_rule(q, k, v, a, b, gk)
    assert rel(o_rec, o_chunk) <= 1e-12
    o_rw, _ = kdalab.chunk_rwkv7(q, gk, k, v, a, b)
    assert rel(o_rw * q.shape[-1] ** -0.5, o_chunk) <= 1e-12
    o_frw, ht = kdalab.fused_recurrent_rwkv7(q, gk, k, v, a, b)
    assert rel(o_frw, o_chunk) <= 1e-12 and ht is not None


def test_refusals():
    name = CASES[1]
    q, k, v, a, b, gk = (load(name, x) for x in ("q", "k", "v", "a", "b", "g"))
    with pytest.raises(ValueError, match="a is required"):
        kdalab.chunk_dplr_delta_rule(q, k, v, None, b, gk)
    with pytest.raises(ValueError, match="b: shape"):
        kdalab.chunk_dplr_delta_rule(q, k, v, a, b[:, :-1], gk)
    bad = b.copy()
    bad[0, 3, 0, 2] = np.nan
    with pytest.raises(kdalab.KdalabError, match=r"b\[0, 3, 0, 2\]"):
        kdalab.fused_recurrent_dplr_delta_rule(q, k, v, a, bad, gk)


torch = pytest.importorskip("torch")
import kdalab.torch as kt  # noqa: E402


def _small(seed, B=1, T=7, H=2, K=3, V=2):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    kk = torch.nn.functional.normalize(r(B, T, H, K), dim=-1)
    alpha = torch.rand(B, T, H, K, generator=g, dtype=torch.float64)
    return dict(q=r(B, T, H, K), k=r(B, T, H, K), v=r(B, T, H, V), a=-kk, b=kk * alpha,
                gk=-torch.rand(B, T, H, K, generator=g, dtype=torch.float64),
                initial_state=r(B, H, K, V))


@pytest.mark.parametrize("fn", [kt.chunk_dplr_delta_rule, kt.fused_recurrent_dplr_delta_rule])
def test_gradcheck(fn):
    x = _small(1)
    names = ("q", "k", "v", "a", "b", "gk", "initial_state")
    ts = [x[n].requires_grad_() for n in names]

    def f(*args):
        o, ht = fn(*args[:6], initial_state=args[6], output_final_state=True)
        return o, ht

    assert torch.autograd.gradcheck(f, ts, eps=1e-6, atol=1e-8)


def test_torch_matches_numpy_and_reverse():
    x = _small(2, T=9)
    o, ht = kt.chunk_dplr_delta_rule(**x, output_final_state=True)
    on, hn = kdalab.chunk_dplr_delta_rule(*(x[n].numpy() for n in ("q", "k", "v", "a", "b", "gk")),
                                          initial_state=x["initial_state"].numpy(),
                                          output_final_state=True)
    assert rel(on, o.numpy()) <= 1e-15 and rel(hn, ht.numpy()) <= 1e-15
    # reverse=True is the recurrence run from the end: the flipped sequence
    ro, _ = kt.fused_recurrent_dplr_delta_rule(**x, reverse=True)
    fl = {n: (x[n].flip(1) if n != "initial_state" else x[n]) for n in x}
    fo, _ = kt.fused_recurrent_dplr_delta_rule(**fl)
    assert rel(fo.flip(1).numpy(), ro.numpy()) <= 1e-15


def test_torch_rwkv7_and_fla_arguments():
    x = _small(3)
    o1, _ = kt.chunk_rwkv7(x["q"], x["gk"], x["k"], x["v"], x["a"], x["b"], scale=0.5,
                           chunk_size=4, safe_gate=True, lower_bound=-5.0)
    o2, _ = kt.fused_recurrent_rwkv7(x["q"], x["gk"], x["k"], x["v"], x["a"], x["b"], scale=0.5)
    assert rel(o2.numpy(), o1.numpy()) <= 1e-12
    with pytest.raises(ValueError, match="lower_bound"):
        kt.chunk_dplr_delta_rule(x["q"], x["k"], x["v"], x["a"], x["b"], x["gk"], lower_bound=1.0)
    with pytest.raises(NotImplementedError, match="cp_context"):
        kt.chunk_dplr_delta_rule(x["q"], x["k"], x["v"], x["a"], x["b"], x["gk"], cp_context=1)
    with pytest.raises(ValueError, match="head_first"):
        kt.chunk_rwkv7(x["q"], x["gk"], x["k"], x["v"], x["a"], x["b"], head_first=True)


def test_the_decay_is_named_as_the_caller_names_it():
    name = CASES[1]
    q, k, v, a, b, gk = (load(name, x) for x in ("q", "k", "v", "a", "b", "g"))
    with pytest.raises(ValueError, match=r"gk: shape"):
        kdalab.chunk_dplr_delta_rule(q, k, v, a, b, gk[..., :1])
    with pytest.raises(ValueError, match="gk is required"):
        kdalab.fused_recurrent_dplr_delta_rule(q, k, v, a, b, None)
    bad = -gk
    bad[0, 0, 0, 0] = 0.5
    with pytest.raises(ValueError, match=r"w\[0, 0, 0, 0\] = 0.5 > 0"):
        kdalab.chunk_rwkv7(q, bad, k, v, a, b)
    with pytest.raises(ValueError, match=r"w\[0, 0, 0, 0\] = 0.5 > 0"):
        kt.chunk_rwkv7(*(torch.tensor(x) for x in (q, bad, k, v, a, b)))
    with pytest.raises(ValueError, match="a is required"):
        kdalab.testing.tolerance("dplr", q, k, v, g=gk)


def _bf16(x):
    """x rounded to bfloat16 (nearest even), as a kernel storing it."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def test_tolerances():
    """kdalab.testing's bounds for the DPLR row (RWKV-7's a, b), forward and
    every gradient: they admit a kernel that only stores q, k, v, a, b (and
    do) in bf16 and computes exactly, and refuse one that drops the low-rank
    term's write b (u^T) for one head, in o, and one whose da is one
    position late, in da."""
    t = kdalab.testing
    name = CASES[0]
    q, k, v, a, b, gk, h0, do = (load(name, x) for x in ("q", "k", "v", "a", "b", "g", "h0",
                                                           "do"))
    tol = t.tolerance("dplr", q, k, v, g=gk, initial_state=h0, a=a, b=b, precision="bf16")
    t32 = t.tolerance("dplr", q, k, v, g=gk, initial_state=h0, a=a, b=b, precision="fp32")
    assert t32.rtol["o"] < 1e-5 < tol.rtol["o"] < 0.1
    ref, _ = kdalab.chunk_dplr_delta_rule(q, k, v, a, b, gk, initial_state=h0)
    rounded, _ = kdalab.chunk_dplr_delta_rule(*(_bf16(x) for x in (q, k, v, a, b)), gk,
                                              initial_state=h0)
    t.assert_close("o", ref, rounded, rtol=tol.rtol["o"], rms=tol.rms["o"])
    b0 = b.copy()
    b0[:, :, 1] = 0
    wrong, _ = kdalab.chunk_dplr_delta_rule(q, k, v, a, b0, gk, initial_state=h0)
    with pytest.raises(AssertionError, match="o"):
        t.assert_close("o", ref, wrong, rtol=tol.rtol["o"], rms=tol.rms["o"])
    gt = t.grad_tolerance("dplr", q, k, v, g=gk, do=do, initial_state=h0, a=a, b=b,
                          precision="bf16")
    assert set(gt.rtol) == {"dq", "dk", "dv", "dg", "da", "db", "dh0"}
    want = kdalab.chunk_dplr_delta_rule_bwd(q, k, v, a, b, gk, do, initial_state=h0)
    got = kdalab.chunk_dplr_delta_rule_bwd(*(_bf16(x) for x in (q, k, v, a, b)), gk,
                                           _bf16(do), initial_state=h0)
    for n in gt.rtol:
        t.assert_close(n, getattr(want, n), getattr(got, n), rtol=gt.rtol[n], rms=gt.rms[n])
    late = np.roll(got.da, 1, axis=1)
    with pytest.raises(AssertionError, match="da"):
        t.assert_close("da", want.da, late, rtol=gt.rtol["da"], rms=gt.rms["da"])
