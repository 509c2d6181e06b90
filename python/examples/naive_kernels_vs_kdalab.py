"""kdalab.torch as the reference of a kernel's test, the way fla's tests use
their naive recurrence — here the other way round: naive PyTorch recurrences
of KDA and Gated DeltaNet (typed from the equations of fla's
fla/ops/kda/naive.py and fla/ops/gated_delta_rule/naive.py: inputs stored in
the kernel's dtype, arithmetic in float32) play "the kernel under test", in
float32 and bfloat16, forward and .backward(), at shapes like fla's tests
(varlen and gates near -1000 included), against kdalab's float64 oracle.
Both metrics per tensor: fla's relative RMS and kdalab's max error / max
|ref|, and the bf16/fp32 tolerance kdalab.testing.tolerance derives for o.

Last, a deliberately wrong kernel (at the first position of one chunk it
reads the previous position's gate: an off-by-one at a chunk boundary) is
caught, and located by return_intermediate_states: the first chunk whose
outgoing state differs.

Run from the repository after `make lib`:
    PYTHONPATH=python /usr/bin/python3 python/examples/naive_kernels_vs_kdalab.py
"""

import time

import torch
import torch.nn.functional as F

import kdalab.torch as kt
from kdalab.testing import errors, tolerance


# ---- the kernels under test: recurrences re-typed from the equations ------------------

def naive_recurrent(q, k, v, g, beta, scale, h0, cu_seqlens=None, chunk=None, bug_at=None):
    """S_t = Diag(exp(g_t)) S_{t-1} (KDA: g [..., K]; Gated DeltaNet: g [...] per head),
    S_t += beta_t k_t (v_t - S^T k_t)^T, o_t = scale S_t^T q_t; per head, in float32.
    Returns o (q's dtype), the final states [N, H, K, V] and, when chunk is given,
    the state entering each chunk (as return_intermediate_states). bug_at: a
    position whose gate is read from the position before."""
    dtype = q.dtype
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    if cu_seqlens is not None:  # each packed sequence on its own, from its own h0
        bounds = cu_seqlens.tolist()
        parts = [naive_recurrent(*(x[:, s:e] for x in (q, k, v, g, beta)), scale,
                                 None if h0 is None else h0[n:n + 1])
                 for n, (s, e) in enumerate(zip(bounds[:-1], bounds[1:]))]
        return (torch.cat([p[0] for p in parts], 1).to(dtype),
                torch.cat([p[1] for p in parts]))
    B, T, H, K = q.shape
    S = h0.float() if h0 is not None else q.new_zeros(B, H, K, v.shape[3])
    outs, states = [], []
    for t in range(T):
        if chunk is not None and t % chunk == 0:
            states.append(S)
        gt = g[:, t - 1 if t == bug_at else t]
        S = S * (gt.exp()[..., None] if gt.dim() == 3 else gt.exp()[..., None, None])
        kt_ = k[:, t, :, :, None]
        err = v[:, t] - (S * kt_).sum(-2)
        S = S + beta[:, t, :, None, None] * kt_ * err[:, :, None, :]
        outs.append(scale * (S * q[:, t, :, :, None]).sum(-2))
    o = (torch.stack(outs, 1) if outs else v.new_zeros(v.shape)).to(dtype)
    return (o, S) if chunk is None else (o, S, torch.stack(states, 1))


# ---- inputs like fla's tests ---------------------------------------------------------

def inputs(mech, B, T, H, D, dtype, gate_normalizer=1.0, hard_reset=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    q = F.normalize(r(B, T, H, D), dim=-1)
    k = F.normalize(r(B, T, H, D), dim=-1)
    v = r(B, T, H, D)
    g = F.logsigmoid(r(B, T, H, D) if mech == "kda" else r(B, T, H)) / gate_normalizer
    if hard_reset:  # gates near -1000 at a few places: a decay factor of exactly 0
        g[:, ::37] = -1000.0
    beta = torch.rand(B, T, H, generator=gen)
    h0 = r(B, H, D, D) * 0.5
    do, dht = r(B, T, H, D), r(B, H, D, D)
    x = dict(q=q, k=k, v=v, g=g, beta=beta, h0=h0)
    return {n: t.to(dtype).requires_grad_() for n, t in x.items()}, do, dht


NAMES = ("q", "k", "v", "g", "beta", "h0")


def run_case(label, mech, B, T, H, D, dtype, cu=None, **kw):
    x, do, dht = inputs(mech, B, T, H, D, dtype, **kw)
    if cu is not None:
        x["h0"] = x["h0"][:1].detach().repeat(len(cu) - 1, 1, 1, 1).requires_grad_()
        dht = dht[:1].repeat(len(cu) - 1, 1, 1, 1)
    scale = D ** -0.5
    # the kernel under test
    o, ht = naive_recurrent(*(x[n] for n in NAMES[:5]), scale, x["h0"], cu)
    ((o.float() * do).sum() + (ht * dht).sum()).backward()
    # the reference: kdalab in float64 on the same (rounded) values
    ref = {n: t.detach().double().requires_grad_() for n, t in x.items()}
    fn = kt.chunk_kda if mech == "kda" else kt.chunk_gated_delta_rule
    o_ref, ht_ref = fn(*(ref[n] for n in NAMES[:5]), scale=scale, initial_state=ref["h0"],
                       output_final_state=True, cu_seqlens=cu)
    ((o_ref * do.double()).sum() + (ht_ref * dht.double()).sum()).backward()
    prec = "bf16" if dtype == torch.bfloat16 else "fp32"
    tol = tolerance(mech, *(ref[n].detach() for n in NAMES[:5]), initial_state=ref["h0"],
                    scale=scale, precision=prec, trials=4) if cu is None else None
    rows = [("o", o_ref, o), ("ht", ht_ref, ht)] + \
        [("d" + n, ref[n].grad, x[n].grad) for n in NAMES]
    for name, r, out in rows:
        rms, rel, _ = errors(r, out)
        t = "%9.2e" % tol.rtol[name] if tol is not None and name in tol.rtol else "        -"
        print("%-30s %-8s %-6s %9.2e %9.2e %s" % (label, str(dtype)[6:], name, rms, rel, t))


def wrong_kernel():
    """A chunk-boundary off-by-one, caught and located."""
    B, T, H, D, C, bug = 1, 256, 2, 32, 32, 160  # 160: the first position of chunk 5
    x, _, _ = inputs("kda", B, T, H, D, torch.float32, gate_normalizer=16, seed=7)
    x = {n: t.detach() for n, t in x.items()}
    args = [x[n] for n in NAMES[:5]]
    o_ok, _, h_ok = naive_recurrent(*args, D ** -0.5, x["h0"], chunk=C)
    o_bad, _, h_bad = naive_recurrent(*args, D ** -0.5, x["h0"], chunk=C, bug_at=bug)
    o_ref, _, h_ref = kt.chunk_kda(*args, initial_state=x["h0"], return_intermediate_states=True,
                                   chunk_size=C)
    print("\nwrong kernel (reads g[t-1] at t = %d, the first position of chunk %d):"
          % (bug, bug // C))
    for label, o, h in (("correct kernel", o_ok, h_ok), ("wrong kernel", o_bad, h_bad)):
        rms, rel, worst = errors(o_ref, o)
        per_chunk = [errors(h_ref[:, c], h[:, c])[1] for c in range(h.shape[1])]
        first = next((c for c, e in enumerate(per_chunk) if e > 1e-4), None)
        print("  %-15s o: rel RMS %.2e, max rel %.2e at [b, t, h, v] = %s" % (label, rms, rel,
                                                                           list(worst)))
        print("  %-15s state entering chunk 0..%d, max rel: %s" % (
            "", h.shape[1] - 1, " ".join("%.0e" % e for e in per_chunk)))
        if first is not None:
            print("  %-15s -> first wrong state enters chunk %d: the bug is in chunk %d, "
                  "positions %d..%d" % ("", first, first - 1, (first - 1) * C, first * C - 1))


def main():
    torch.set_num_threads(2)
    t0 = time.time()
    print("%-30s %-8s %-6s %9s %9s %9s" % ("case (B, T, H, D)", "dtype", "tensor", "rel RMS",
                                           "max rel", "tol o/ht"))
    for dtype in (torch.float32, torch.bfloat16):
        run_case("KDA (2, 128, 3, 64)", "kda", 2, 128, 3, 64, dtype)
        run_case("KDA (1, 100, 2, 60), g -1000", "kda", 1, 100, 2, 60, dtype, hard_reset=True)
        run_case("KDA varlen [0, 15, 100, 200]", "kda", 1, 200, 2, 64, dtype,
                 cu=torch.tensor([0, 15, 100, 200]))
        run_case("GDN (2, 128, 3, 64), g / 16", "gated_deltanet", 2, 128, 3, 64, dtype,
                 gate_normalizer=16)
        run_case("GDN varlen [0, 15, 100, 200]", "gated_deltanet", 1, 200, 2, 64, dtype,
                 cu=torch.tensor([0, 15, 100, 200]))
    wrong_kernel()
    print("\n%.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
