"""The Python module against the golden data of tests/ and against itself:
every fla-named function in every form, the backward functions, varlen and
GVA, the in-kernel options (each equal to the same step done outside the
kernel, and differentiated correctly), the input conversions and their errors.

Tolerances as in the C tests: float64 forward 1e-12, golden gradients 1e-10,
relative to the max magnitude of the expected array.
"""

import csv
import os

import numpy as np
import pytest

import kdalab
from kdalab.testing import assert_close, errors

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests")


def manifest(folder):
    with open(os.path.join(ROOT, folder, "MANIFEST.tsv")) as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    return [r for r in rows if r[1] in TABLE]  # the DPLR cases: test_dplr.py


def load(folder, name, key):
    path = os.path.join(ROOT, folder, "%s.%s.npy" % (name, key))
    return np.load(path) if os.path.exists(path) else None


# every row of the mechanism table but the DPLR boundary (test_dplr.py), by
# fla's names (the table says which)
TABLE = {m: r for m, r in kdalab._lib.TABLE.items() if not r["ab"]}
FWD = {m: (getattr(kdalab, r["fla_chunk"]), getattr(kdalab, r["fla_recurrent"]))
       for m, r in TABLE.items()}
BWD = {m: (getattr(kdalab, r["fla_chunk"] + "_bwd"), getattr(kdalab, r["fla_recurrent"] + "_bwd"))
       for m, r in TABLE.items()}


def inputs(folder, name, mech):
    """The positional array arguments of fla's function for mech."""
    args = [load(folder, name, "q"), load(folder, name, "k"), load(folder, name, "v")]
    if TABLE[mech]["g"] != kdalab._lib.G_NONE:
        args.append(load(folder, name, "g"))
    if TABLE[mech]["delta"]:
        args.append(load(folder, name, "beta"))
    return args


def extra(mech):
    return {"normalize": False} if mech == "linear_attention" else {}


@pytest.mark.parametrize("row", manifest("golden"), ids=lambda r: r[0])
@pytest.mark.parametrize("form", [0, 1], ids=["chunk", "fused_recurrent"])
def test_golden_forward(row, form):
    name, mech, scale = row[0], row[1], float(row[7])
    h0 = load("golden", name, "h0")
    o, ht = FWD[mech][form](*inputs("golden", name, mech), scale=scale, initial_state=h0,
                            output_final_state=True, **extra(mech))
    assert_close("o", load("golden", name, "o"), o, 1e-12)
    assert_close("ht", load("golden", name, "ht"), ht, 1e-12)


@pytest.mark.parametrize("row", manifest("golden_grad"), ids=lambda r: r[0])
@pytest.mark.parametrize("form", [0, 1], ids=["chunk", "fused_recurrent"])
def test_golden_backward(row, form):
    name, mech, scale = row[0], row[1], float(row[7])
    h0 = load("golden_grad", name, "h0")
    gr = BWD[mech][form](*inputs("golden_grad", name, mech), load("golden_grad", name, "do"),
                         load("golden_grad", name, "dht"), scale=scale, initial_state=h0,
                         **extra(mech))
    for key in ("dq", "dk", "dv", "dg", "dbeta", "dh0"):
        want = load("golden_grad", name, key)
        if want is not None:
            assert_close(key, want, getattr(gr, key), 1e-10)


@pytest.mark.parametrize("row", manifest("golden_grad"), ids=lambda r: r[0])
def test_chunk_backward_impls_agree(row):
    """impl="simd" (the default) and impl="reference" give the same gradients to
    1e-12 relative (the C suite's bound for the SIMD backward), golden inputs
    and a varlen + GVA problem; an unknown impl is a ValueError."""
    name, mech, scale = row[0], row[1], float(row[7])
    args = inputs("golden_grad", name, mech) + [load("golden_grad", name, "do"),
                                                 load("golden_grad", name, "dht")]
    kw = dict(scale=scale, initial_state=load("golden_grad", name, "h0"), **extra(mech))
    simd = BWD[mech][0](*args, **kw)
    ref = BWD[mech][0](*args, impl="reference", **kw)
    for key in ("dq", "dk", "dv", "dg", "dbeta", "dh0"):
        if getattr(ref, key) is not None:
            assert_close(key, getattr(ref, key), getattr(simd, key), 1e-12)
    with pytest.raises(ValueError, match="impl"):
        BWD[mech][0](*args, impl="fast", **kw)


def test_chunk_backward_impls_agree_varlen_gva():
    p = problem(3, T=23, H=2, HV=4, K=5, V=3)
    cu = np.array([0, 4, 15, 23])
    p["h0"] = np.random.default_rng(1).normal(size=(3, 4, 5, 3))
    p["dht"] = np.random.default_rng(2).normal(size=(3, 4, 5, 3))
    args = (p["q"], p["k"], p["v"], p["g"], p["beta"], p["do"], p["dht"])
    simd = kdalab.chunk_kda_bwd(*args, initial_state=p["h0"], cu_seqlens=cu, chunk_size=4)
    ref = kdalab.chunk_kda_bwd(*args, initial_state=p["h0"], cu_seqlens=cu, chunk_size=4,
                               impl="reference")
    for key in ("dq", "dk", "dv", "dg", "dbeta", "dh0"):
        assert_close(key, getattr(ref, key), getattr(simd, key), 1e-12)


@pytest.mark.parametrize("row", manifest("golden_varlen"), ids=lambda r: r[0])
@pytest.mark.parametrize("form", [0, 1], ids=["chunk", "fused_recurrent"])
def test_golden_varlen_gva(row, form):
    name, mech, scale = row[0], row[1], float(row[8])
    o, ht = FWD[mech][form](*inputs("golden_varlen", name, mech), scale=scale,
                            initial_state=load("golden_varlen", name, "h0"),
                            output_final_state=True,
                            cu_seqlens=load("golden_varlen", name, "cu_seqlens"), **extra(mech))
    assert_close("o", load("golden_varlen", name, "o"), o, 1e-12)
    assert_close("ht", load("golden_varlen", name, "ht"), ht, 1e-12)


# ---- random problems -------------------------------------------------------------

def problem(seed=0, B=1, T=9, H=2, HV=None, K=4, V=3):
    r = np.random.default_rng(seed)
    HV = HV or H
    return dict(q=r.normal(size=(B, T, H, K)), k=r.normal(size=(B, T, H, K)),
                v=r.normal(size=(B, T, HV, V)), g=-r.uniform(0.01, 1, size=(B, T, HV, K)),
                beta=r.uniform(0, 1, size=(B, T, HV)), h0=r.normal(size=(B, HV, K, V)),
                do=r.normal(size=(B, T, HV, V)), dht=r.normal(size=(B, HV, K, V)))


def loss(fn, p, **kw):
    o, ht = fn(p["q"], p["k"], p["v"], p["g"], p["beta"], initial_state=p["h0"],
               output_final_state=True, **kw)
    return float((o * p["do"]).sum() + (ht * p["dht"]).sum())


def fd_check(fn, bwd, p, names, kw, extra_arrays=None, tol=1e-6):
    """Central differences of every element of the named arrays against bwd."""
    gr = bwd(p["q"], p["k"], p["v"], p["g"], p["beta"], p["do"], p["dht"],
             initial_state=p["h0"], **kw)
    arrays = dict(p)
    arrays.update(extra_arrays or {})
    for name, gname in names:
        x = arrays[name]
        grad = getattr(gr, gname)
        num = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            x0 = x[i]
            x[i] = x0 + 1e-6
            lp = loss(fn, p, **kw)
            x[i] = x0 - 1e-6
            lm = loss(fn, p, **kw)
            x[i] = x0
            num[i] = (lp - lm) / 2e-6
        assert_close("d" + name, num, grad, tol)


def test_in_kernel_options_equal_the_step_outside():
    p = problem(1)
    qn = p["q"] / np.sqrt((p["q"] ** 2).sum(-1, keepdims=True) + 1e-6)
    kn = p["k"] / np.sqrt((p["k"] ** 2).sum(-1, keepdims=True) + 1e-6)
    o1, _ = kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"],
                             use_qk_l2norm_in_kernel=True)
    o2, _ = kdalab.chunk_kda(qn, kn, p["v"], p["g"], p["beta"])
    assert_close("l2norm", o2, o1, 1e-14)
    # the gate: fla's formula written out in NumPy
    r = np.random.default_rng(2)
    A_log, dt_bias, raw = r.normal(size=2), r.normal(size=(2 * 4)), r.normal(size=p["g"].shape)
    sp = np.logaddexp(0, raw + dt_bias.reshape(2, 4))
    g = -np.exp(A_log)[:, None] * sp
    o1, _ = kdalab.chunk_kda(p["q"], p["k"], p["v"], raw, p["beta"], use_gate_in_kernel=True,
                             A_log=A_log, dt_bias=dt_bias)
    o2, _ = kdalab.chunk_kda(p["q"], p["k"], p["v"], g, p["beta"])
    assert_close("gate", o2, o1, 1e-14)
    g_lb = -5 / (1 + np.exp(-np.exp(A_log)[:, None] * (raw + dt_bias.reshape(2, 4))))
    o1, _ = kdalab.chunk_kda(p["q"], p["k"], p["v"], raw, p["beta"], use_gate_in_kernel=True,
                             A_log=A_log, dt_bias=dt_bias, lower_bound=-5)
    o2, _ = kdalab.chunk_kda(p["q"], p["k"], p["v"], g_lb, p["beta"])
    assert_close("lower bound", o2, o1, 1e-14)
    b = r.normal(size=p["beta"].shape)
    o1, _ = kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], b, use_beta_sigmoid_in_kernel=True,
                             allow_neg_eigval=True)
    o2, _ = kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], 2 / (1 + np.exp(-b)))
    assert_close("beta", o2, o1, 1e-14)
    # linear attention's normalize
    o1, _ = kdalab.chunk_linear_attn(p["q"], p["k"], p["v"][:, :, :2], normalize=True)
    o2, _ = kdalab.chunk_linear_attn(p["q"], p["k"], p["v"][:, :, :2], normalize=False)
    z = 0.5 * (p["q"] * np.cumsum(p["k"], 1)).sum(-1, keepdims=True) + 1e-10
    assert_close("normalize", o2 / z, o1, 1e-13)


def test_in_kernel_options_backward_against_finite_differences():
    p = problem(3, T=5, K=3, V=2)
    fd_check(kdalab.chunk_kda, kdalab.chunk_kda_bwd, p, [("q", "dq"), ("k", "dk")],
             dict(use_qk_l2norm_in_kernel=True, chunk_size=2))
    r = np.random.default_rng(4)
    A_log, dt_bias = r.normal(size=2), r.normal(size=2 * 3)
    p["g"] = r.normal(size=p["g"].shape)  # raw gate input
    kw = dict(use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias)
    fd_check(kdalab.chunk_kda, kdalab.chunk_kda_bwd, p,
             [("g", "dg"), ("A_log", "dA_log"), ("dt_bias", "ddt_bias")], kw,
             dict(A_log=A_log, dt_bias=dt_bias))
    kw["lower_bound"] = -4.0
    fd_check(kdalab.fused_recurrent_kda, kdalab.fused_recurrent_kda_bwd, p,
             [("g", "dg"), ("A_log", "dA_log")], kw, dict(A_log=A_log, dt_bias=dt_bias))
    p["g"] = -np.abs(p["g"]) - 0.01  # a log-decay again
    p["beta"] = r.normal(size=p["beta"].shape)
    fd_check(kdalab.chunk_kda, kdalab.chunk_kda_bwd, p, [("beta", "dbeta")],
             dict(use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True))


def test_normalized_linear_attention_backward():
    p = problem(5, T=6, K=3, V=2)
    p["q"] = np.abs(p["q"]) + 0.5  # a normaliser well away from 0
    p["k"] = np.abs(p["k"]) + 0.5

    def fwd(q, k, v, g, beta, **kw):
        return kdalab.chunk_linear_attn(q, k, v, chunk_size=4, **kw)

    def bwd(q, k, v, g, beta, do, dht, **kw):
        return kdalab.chunk_linear_attn_bwd(q, k, v, do, dht, chunk_size=4, **kw)

    fd_check(fwd, bwd, p, [("q", "dq"), ("k", "dk"), ("v", "dv")], {})


def test_gva_and_varlen_backward_finite_differences():
    p = problem(6, T=7, H=1, HV=2, K=3, V=2)
    fd_check(kdalab.chunk_kda, kdalab.chunk_kda_bwd, p,
             [("q", "dq"), ("k", "dk"), ("g", "dg")], dict(chunk_size=3))
    cu = np.array([0, 3, 7])
    p["h0"] = np.random.default_rng(7).normal(size=(2, 2, 3, 2))
    p["dht"] = np.random.default_rng(8).normal(size=(2, 2, 3, 2))
    fd_check(kdalab.fused_recurrent_kda, kdalab.fused_recurrent_kda_bwd, p,
             [("v", "dv"), ("h0", "dh0")], dict(cu_seqlens=cu))


def test_inputs_half_precision_and_errors():
    p = problem(9)
    o64, _ = kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"])
    o16, _ = kdalab.chunk_kda(*(p[n].astype(np.float16) for n in ("q", "k", "v", "g", "beta")))
    assert o16.dtype == np.float64
    assert errors(o64, o16)[1] < 1e-2  # fp16 inputs: ~1e-3 rounding
    with pytest.raises(ValueError, match="beta"):
        kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"][:, :-1])
    with pytest.raises(ValueError, match="q: dtype int64"):
        kdalab.chunk_kda(p["q"].astype(np.int64), p["k"], p["v"], p["g"], p["beta"])
    with pytest.raises(ValueError, match="initial_state"):
        kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"], initial_state=p["h0"][0])
    g = p["g"].copy()
    g[0, 1, 0, 2] = 0.5
    with pytest.raises(kdalab.KdalabError, match=r"g\[.*\] = 0.5 > 0"):
        kdalab.chunk_kda(p["q"], p["k"], p["v"], g, p["beta"])
    with pytest.raises(kdalab.KdalabError, match="cu_seqlens"):
        kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"], cu_seqlens=[0, 5, 4, 9])
    with pytest.raises(ValueError, match="cu_seqlens"):
        kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"], cu_seqlens=[0.0, 9.0])


def test_torch_tensors_if_torch_is_there():
    torch = pytest.importorskip("torch")
    p = problem(10)
    o64, ht64 = kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"],
                                 initial_state=p["h0"], output_final_state=True)
    t = {n: torch.tensor(p[n]).to(torch.bfloat16) for n in ("q", "k", "v", "g", "beta", "h0")}
    o, ht = kdalab.chunk_kda(t["q"], t["k"], t["v"], t["g"], t["beta"], initial_state=t["h0"],
                             output_final_state=True)
    assert isinstance(o, np.ndarray) and o.dtype == np.float64
    assert errors(o64, o)[1] < 5e-2  # bf16 inputs: 8 significant bits


def test_assert_close_reports_both_metrics_and_the_worst_element():
    ref = np.zeros((2, 3))
    ref[1, 2] = 4.0
    out = ref.copy()
    out[0, 1] = 1.0
    with pytest.raises(AssertionError, match=r"0.25 > rtol.*relative RMS.*\(i0=0, i1=1\)"):
        assert_close("o", ref, out, 1e-3)
    rms, rel = assert_close("o", ref, ref, 0)
    assert rms == 0 and rel == 0


def test_normalized_linear_attention_with_grouped_heads():
    """normalize with GVA: value head j divides by z of q/k head j // G, and the
    backward agrees with finite differences."""
    p = problem(11, T=5, H=1, HV=2, K=3, V=2)
    p["q"] = np.abs(p["q"]) + 0.5
    p["k"] = np.abs(p["k"]) + 0.5
    o, _ = kdalab.chunk_linear_attn(p["q"], p["k"], p["v"], normalize=True)
    o_raw, _ = kdalab.chunk_linear_attn(p["q"], p["k"], p["v"], normalize=False)
    z = 3 ** -0.5 * (p["q"] * np.cumsum(p["k"], 1)).sum(-1, keepdims=True) + 1e-10
    assert_close("o", o_raw / z, o, 1e-13)

    def fwd(q, k, v, g, beta, **kw):
        return kdalab.fused_recurrent_linear_attn(q, k, v, normalize=True, **kw)

    def bwd(q, k, v, g, beta, do, dht, **kw):
        return kdalab.fused_recurrent_linear_attn_bwd(q, k, v, do, dht, normalize=True, **kw)

    fd_check(fwd, bwd, p, [("q", "dq"), ("k", "dk"), ("v", "dv")], {})


def test_more_bad_arguments():
    p = problem(12)
    with pytest.raises(ValueError, match="chunk_size"):
        kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"], chunk_size=-1)
    with pytest.raises(ValueError, match="chunk_size"):
        kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"], chunk_size=2.7)
    with pytest.raises(ValueError, match="dt_bias"):
        kdalab.chunk_kda(p["q"], p["k"], p["v"], p["g"], p["beta"], use_gate_in_kernel=True,
                         A_log=np.zeros(2), dt_bias=np.zeros((4, 2)))
    with pytest.raises(ValueError, match="B, H and K"):
        kdalab.chunk_kda(p["q"][:, :, :0], p["k"][:, :, :0], p["v"], p["g"], p["beta"])
    with pytest.raises(ValueError, match="k: shape"):
        kdalab.chunk_kda(p["q"], p["k"][..., :3], p["v"], p["g"], p["beta"])
    ref = np.ones((2, 2))
    with pytest.raises(AssertionError, match="worst at"):
        assert_close("x", ref, ref * 2, 1e-3)


def test_messages_name_the_callers_argument_and_index():
    r = np.random.default_rng(5)
    B, T, H, K, V = 1, 20, 3, 6, 4
    q, k = r.normal(size=(B, T, H, K)), r.normal(size=(B, T, H, K))
    v, beta = r.normal(size=(B, T, H, V)), r.uniform(0, 1, size=(B, T, H))
    g = -np.abs(r.normal(size=(B, T, H, K)))
    bad = g.copy()
    bad[0, 17, 2, 5] = 0.5  # the index in the caller's shape, not flat
    with pytest.raises(ValueError, match=r"g\[0, 17, 2, 5\] = 0\.5 > 0"):
        kdalab.chunk_kda(q, k, v, bad, beta)
    bad = q.copy()
    bad[0, 3, 1, 2] = np.inf
    with pytest.raises(ValueError, match=r"q\[0, 3, 1, 2\] is inf"):
        kdalab.fused_recurrent_kda(bad, k, v, g, beta)
    # exp(A_log) overflows: A_log is named, never the module's internal array
    A_log = np.array([0.0, 800.0, 0.0])
    for lb in (None, -5.0):
        with pytest.raises(ValueError, match=r"A_log\[1\] = 800") as e:
            kdalab.chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True, A_log=A_log,
                             lower_bound=lb)
        assert "x[" not in str(e.value) and "state" not in str(e.value)
    # g + dt_bias huge with the lower bound: named by the caller's arguments
    dt = np.zeros(H * K)
    dt[2 * K + 1] = 1e308
    with pytest.raises(ValueError, match=r"g\[0, 0, 2, 1\] \+ dt_bias\[2, 1\]") as e:
        kdalab.chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True, A_log=np.full(H, 1.0),
                         dt_bias=dt, lower_bound=-5.0)
    assert "x[" not in str(e.value)
    # a uint64 boundary of 2**63 + 1 does not fit int64 (compared exactly) and
    # is shown unsigned
    with pytest.raises(ValueError, match=r"cu_seqlens\[1\] = 9223372036854775809 does not fit"):
        kdalab.chunk_kda(q, k, v, g, beta,
                         cu_seqlens=np.array([0, 2**63 + 1], dtype=np.uint64))


@pytest.mark.parametrize("mech", ["gla", "simple_gla"])
def test_grid_cells_without_the_delta_rule_varlen_gva(mech):
    """GLA and simple GLA with packed sequences and grouped value heads: each
    sequence equals the float64 recurrence run on it alone from its own
    initial state (1e-12), and the chunkwise backward's SIMD path equals the
    reference's (1e-12)."""
    import _calls as C
    p = problem(11, T=23, H=2, HV=4, K=5, V=3)
    g = p["g"] if mech == "gla" else p["g"][..., 0]
    cu = np.array([0, 4, 15, 23])
    h0 = np.random.default_rng(12).normal(size=(3, 4, 5, 3))
    fwd, bwd = FWD[mech][0], BWD[mech][0]
    o, ht = fwd(p["q"], p["k"], p["v"], g, initial_state=h0, output_final_state=True,
                cu_seqlens=cu, chunk_size=4)
    for n in range(3):
        s, e = cu[n], cu[n + 1]
        a = {"q": p["q"][:, s:e], "k": p["k"][:, s:e], "v": p["v"][:, s:e],
             "g": g[:, s:e], "beta": None, "h0": h0[n:n + 1]}
        o_ref, ht_ref = C.recurrence(mech, a)
        assert_close("o", o_ref, o[:, s:e], 1e-12)
        assert_close("ht", ht_ref, ht[n:n + 1], 1e-12)
    dht = np.random.default_rng(13).normal(size=h0.shape)
    args = (p["q"], p["k"], p["v"], g, p["do"], dht)
    simd = bwd(*args, initial_state=h0, cu_seqlens=cu, chunk_size=4)
    ref = bwd(*args, initial_state=h0, cu_seqlens=cu, chunk_size=4, impl="reference")
    for key in ("dq", "dk", "dv", "dg", "dh0"):
        assert_close(key, getattr(ref, key), getattr(simd, key), 1e-12)
    assert simd.dbeta is None


def test_threads_are_kdalabs_own():
    """kdalab runs on every CPU the process may use, whatever OpenMP's count
    another library set (PyTorch's import sets it to its own count), unless
    OMP_NUM_THREADS chooses; set_num_threads changes it for later calls (the
    same bits) and refuses a negative count."""
    try:
        import torch  # noqa: F401 (its import sets OpenMP's count)
    except ImportError:
        pass
    if "OMP_NUM_THREADS" not in os.environ:
        assert kdalab.get_num_threads() == len(os.sched_getaffinity(0))
    r = np.random.default_rng(3)
    q, k, v = (r.normal(size=(1, 40, 3, 8)) * 0.3 for _ in range(3))
    g, beta = -r.uniform(0, 1, (1, 40, 3, 8)), r.uniform(0, 1, (1, 40, 3))
    was = kdalab.get_num_threads()
    try:
        outs = []
        for n in (1, np.int64(3)):
            kdalab.set_num_threads(n)
            assert kdalab.get_num_threads() == n
            outs.append(kdalab.chunk_kda(q, k, v, g, beta)[0])
        assert np.array_equal(outs[0], outs[1])
        for bad in (-1, 1.5, True, 10 ** 6, 2 ** 40):
            with pytest.raises(ValueError, match="set_num_threads"):
                kdalab.set_num_threads(bad)
        assert kdalab.get_num_threads() == 3
    finally:
        kdalab.set_num_threads(was)


def test_release_workspace_frees_this_threads_scratch():
    """release_workspace() frees the calling thread's SIMD scratch (the
    backward's kept chunk states among it) and returns its bytes, 0 when
    there is none; the next call allocates it again and gives the same
    bits; another thread's scratch is its own."""
    import threading
    p = problem(4, T=200, H=2, K=8, V=8)
    args = (p["q"], p["k"], p["v"], p["g"], p["beta"], p["v"])
    before = kdalab.chunk_kda_bwd(*args)
    freed = kdalab.release_workspace()
    assert freed >= 2 * (200 // 16) * 8 * 8 * 8  # at least one head's chunk states
    assert kdalab.release_workspace() == 0
    after = kdalab.chunk_kda_bwd(*args)
    for x, y in zip(before, after):
        assert (x is None and y is None) or np.array_equal(x, y)
    other = []
    t = threading.Thread(target=lambda: other.append(kdalab.release_workspace()))
    t.start()
    t.join()
    assert other == [0] and kdalab.release_workspace() > 0
