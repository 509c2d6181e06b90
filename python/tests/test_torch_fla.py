"""kdalab.torch has fla's signatures: positional order, defaults and **kwargs
as in a copy of fla's (below, read from flash-linear-attention at commit
FLA_COMMIT, version 0.5.2); the arguments that change the mathematics
(safe_gate, state_v_first, return_intermediate_states, cu_seqlens_cpu,
reverse, normalize's z state) against the float64 recurrence; the rest
accepted or refused as documented.
"""

import inspect
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kdalab  # noqa: E402
import kdalab.torch as kt  # noqa: E402
from _calls import make, recurrence  # noqa: E402

FLA_COMMIT = "bc3b101dcb713ddc5bd8924b66754eb68b5ccf89"

# fla's public signatures at FLA_COMMIT (fla/ops/<mech>/<form>.py): the
# positional parameters with their defaults, and whether **kwargs follows.
_R = "<required>"
FLA = {
    "chunk_kda": ([("q", _R), ("k", _R), ("v", _R), ("g", _R), ("beta", _R), ("scale", None),
                   ("initial_state", None), ("output_final_state", False),
                   ("use_qk_l2norm_in_kernel", False), ("use_gate_in_kernel", False),
                   ("use_beta_sigmoid_in_kernel", False), ("allow_neg_eigval", False),
                   ("safe_gate", False), ("lower_bound", None), ("disable_recompute", False),
                   ("return_intermediate_states", False), ("state_v_first", False),
                   ("cu_seqlens", None), ("cu_seqlens_cpu", None), ("cp_context", None)], True),
    "fused_recurrent_kda": ([("q", _R), ("k", _R), ("v", _R), ("g", _R), ("beta", _R),
                             ("A_log", None), ("dt_bias", None), ("scale", None),
                             ("initial_state", None), ("output_final_state", False),
                             ("use_qk_l2norm_in_kernel", False), ("use_gate_in_kernel", False),
                             ("use_beta_sigmoid_in_kernel", False), ("allow_neg_eigval", False),
                             ("lower_bound", None), ("state_v_first", False),
                             ("cu_seqlens", None)], True),
    "chunk_gated_delta_rule": ([("q", _R), ("k", _R), ("v", _R), ("g", _R), ("beta", _R),
                                ("scale", None), ("initial_state", None),
                                ("output_final_state", False),
                                ("use_qk_l2norm_in_kernel", False),
                                ("use_beta_sigmoid_in_kernel", False),
                                ("allow_neg_eigval", False), ("state_v_first", False),
                                ("cu_seqlens", None), ("cu_seqlens_cpu", None),
                                ("chunk_indices", None), ("cp_context", None)], True),
    "fused_recurrent_gated_delta_rule": ([("q", _R), ("k", _R), ("v", _R), ("g", None),
                                          ("gk", None), ("gv", None), ("beta", None),
                                          ("scale", None), ("initial_state", None),
                                          ("output_final_state", False),
                                          ("use_qk_l2norm_in_kernel", False),
                                          ("use_gate_in_kernel", False), ("A_log", None),
                                          ("dt_bias", None),
                                          ("use_beta_sigmoid_in_kernel", False),
                                          ("allow_neg_eigval", False),
                                          ("state_v_first", False), ("cu_seqlens", None)], True),
    "chunk_delta_rule": ([("q", _R), ("k", _R), ("v", _R), ("beta", _R), ("scale", None),
                          ("initial_state", None), ("output_final_state", False),
                          ("use_qk_l2norm_in_kernel", False), ("cu_seqlens", None),
                          ("cu_seqlens_cpu", None)], True),
    "fused_recurrent_delta_rule": ([("q", _R), ("k", _R), ("v", _R), ("beta", None),
                                    ("scale", None), ("initial_state", None),
                                    ("output_final_state", False),
                                    ("use_qk_l2norm_in_kernel", False), ("cu_seqlens", None)],
                                   False),
    "chunk_linear_attn": ([("q", _R), ("k", _R), ("v", _R), ("scale", None),
                           ("initial_state", None), ("output_final_state", False),
                           ("normalize", True), ("cu_seqlens", None)], False),
    "fused_recurrent_linear_attn": ([("q", _R), ("k", _R), ("v", _R), ("scale", None),
                                     ("initial_state", None), ("output_final_state", False),
                                     ("reverse", False), ("normalize", False),
                                     ("cu_seqlens", None)], False),
    "chunk_gla": ([("q", _R), ("k", _R), ("v", _R), ("g", _R), ("scale", None),
                   ("initial_state", None), ("output_final_state", False),
                   ("state_v_first", False), ("cu_seqlens", None), ("cu_seqlens_cpu", None)],
                  False),
    "fused_recurrent_gla": ([("q", _R), ("k", _R), ("v", _R), ("gk", None), ("gv", None),
                             ("scale", None), ("initial_state", None),
                             ("output_final_state", False), ("reverse", False),
                             ("state_v_first", False), ("cu_seqlens", None)], True),
    "chunk_simple_gla": ([("q", _R), ("k", _R), ("v", _R), ("g", None), ("g_gamma", None),
                          ("scale", None), ("initial_state", None),
                          ("output_final_state", False), ("state_v_first", False),
                          ("cu_seqlens", None), ("cu_seqlens_cpu", None)], True),
    "fused_recurrent_simple_gla": ([("q", _R), ("k", _R), ("v", _R), ("g", None),
                                    ("g_gamma", None), ("scale", None), ("initial_state", None),
                                    ("output_final_state", False), ("reverse", False),
                                    ("state_v_first", False), ("cu_seqlens", None)], True),
    "chunk_dplr_delta_rule": ([("q", _R), ("k", _R), ("v", _R), ("a", _R), ("b", _R),
                               ("gk", _R), ("scale", None), ("initial_state", None),
                               ("output_final_state", False), ("cu_seqlens", None),
                               ("cu_seqlens_cpu", None), ("safe_gate", False),
                               ("chunk_size", None), ("disable_recompute", False),
                               ("cp_context", None), ("lower_bound", None)], True),
    "fused_recurrent_dplr_delta_rule": ([("q", _R), ("k", _R), ("v", _R), ("a", _R),
                                         ("b", _R), ("gk", _R), ("scale", None),
                                         ("initial_state", None),
                                         ("output_final_state", False), ("reverse", False),
                                         ("cu_seqlens", None)], False),
    "chunk_rwkv7": ([("r", _R), ("w", _R), ("k", _R), ("v", _R), ("a", _R), ("b", _R),
                     ("scale", 1.0), ("initial_state", None), ("output_final_state", False),
                     ("cu_seqlens", None), ("cu_seqlens_cpu", None), ("safe_gate", False),
                     ("chunk_size", None), ("disable_recompute", False), ("cp_context", None),
                     ("lower_bound", None)], True),
    "fused_recurrent_rwkv7": ([("r", _R), ("w", _R), ("k", _R), ("v", _R), ("a", _R),
                               ("b", _R), ("scale", None), ("initial_state", None),
                               ("output_final_state", True), ("cu_seqlens", None)], True),
    "parallel_attn": ([("q", _R), ("k", _R), ("v", _R), ("g", None), ("scale", None),
                       ("window_size", None), ("cu_seqlens", None), ("chunk_indices", None)],
                      True),
}


@pytest.mark.parametrize("name", sorted(FLA))
def test_signature_is_flas(name):
    """Positional parameters (names, order, defaults) and **kwargs as fla's;
    kdalab's own additions (out_dtype, like, sink_bias, impl) keyword-only."""
    sig = inspect.signature(getattr(kt, name)).parameters.values()
    pos = [(p.name, _R if p.default is p.empty else p.default) for p in sig
           if p.kind == p.POSITIONAL_OR_KEYWORD]
    fla_pos, fla_kwargs = FLA[name]
    assert pos == fla_pos
    assert any(p.kind == p.VAR_KEYWORD for p in sig) == fla_kwargs
    assert {p.name for p in sig if p.kind == p.KEYWORD_ONLY} <= {"out_dtype", "like",
                                                                  "sink_bias", "impl"}
    assert kt.FLA_COMMIT == FLA_COMMIT


def arrays(mech, seed, B=1, T=7, H=1, HV=2, K=3, V=2):
    a = make(mech, np.random.default_rng(seed), B, T, H, HV, K, V)
    return a, {n: None if x is None else torch.tensor(x) for n, x in a.items()}


def test_positional_call_in_flas_order():
    """A call that passes everything positionally, fla's order, means what fla means."""
    a, t = arrays("kda", 1)
    o, ht = kt.chunk_kda(t["q"], t["k"], t["v"], t["g"], t["beta"], 0.4, t["h0"], True,
                         False, False, False, False, False, None, True, False, False, None,
                         None, None)
    ro, rht = recurrence("kda", a, scale=0.4)
    assert np.abs(o.numpy() - ro).max() < 1e-12 and np.abs(ht.numpy() - rht).max() < 1e-12
    o2, _ = kt.fused_recurrent_kda(t["q"], t["k"], t["v"], t["g"], t["beta"], None, None, 0.4,
                                   t["h0"])
    assert np.abs(o2.numpy() - ro).max() < 1e-12


def test_state_v_first_against_the_recurrence():
    """state_v_first: initial and final state [N, HV, V, K]."""
    for mech, fn in (("kda", kt.chunk_kda), ("kda", kt.fused_recurrent_kda),
                     ("gated_deltanet", kt.chunk_gated_delta_rule),
                     ("gated_deltanet", kt.fused_recurrent_gated_delta_rule)):
        a, t = arrays(mech, 2)
        ro, rht = recurrence(mech, a)
        h0_vk = t["h0"].transpose(-1, -2).contiguous()
        o, ht = fn(t["q"], t["k"], t["v"], t["g"], beta=t["beta"], initial_state=h0_vk,
                   output_final_state=True, state_v_first=True)
        assert ht.shape == h0_vk.shape
        assert np.abs(o.numpy() - ro).max() < 1e-12
        assert np.abs(ht.numpy() - rht.transpose(0, 1, 3, 2)).max() < 1e-12
    with pytest.warns(DeprecationWarning):
        o2, ht2 = kt.chunk_kda(t["q"], t["k"], t["v"], t["g"].unsqueeze(-1).expand(-1, -1, -1, 3),
                               t["beta"], initial_state=h0_vk, output_final_state=True,
                               transpose_state_layout=True)
    assert ht2.shape == h0_vk.shape


def gate(g, A_log, dt_bias, lower_bound):
    x = np.exp(A_log)[:, None] * (g + dt_bias.reshape(g.shape[-2:]))
    return lower_bound / (1 + np.exp(-x))


def test_safe_gate_is_the_lower_bound_gate():
    """fla's safe_gate is a kernel path for a gate bounded below (lower_bound
    in [-5, 0)): the function is the lower-bound gate's, equal to the
    recurrence with g = lower_bound * sigmoid(exp(A_log) * (g + dt_bias))."""
    a, t = arrays("kda", 3)
    rng = np.random.default_rng(4)
    raw = rng.normal(size=a["g"].shape) * 3
    A_log, dt_bias = rng.normal(size=2), rng.normal(size=6)
    b = dict(a, g=gate(raw, A_log, dt_bias, -5.0))
    ro, rht = recurrence("kda", b)
    args = (t["q"], t["k"], t["v"], torch.tensor(raw), t["beta"])
    for safe in (True, False):
        o, ht = kt.chunk_kda(*args, initial_state=t["h0"], output_final_state=True,
                             use_gate_in_kernel=True, safe_gate=safe, lower_bound=-5.0,
                             A_log=torch.tensor(A_log), dt_bias=torch.tensor(dt_bias))
        assert np.abs(o.numpy() - ro).max() < 1e-12 and np.abs(ht.numpy() - rht).max() < 1e-12
    for lb, msg in ((None, "must be specified"), (-6.0, r"safe range \[-5, 0\)")):
        with pytest.raises(ValueError, match=msg):
            kt.chunk_kda(*args, use_gate_in_kernel=True, safe_gate=True, lower_bound=lb,
                         A_log=torch.tensor(A_log))


@pytest.mark.parametrize("impl", ["simd", "reference"])
@pytest.mark.parametrize("varlen", [False, True], ids=["batch", "varlen"])
def test_intermediate_states_are_the_recurrence_at_chunk_boundaries(varlen, impl):
    """h[:, c] of return_intermediate_states is the state entering chunk c:
    the recurrence run over the positions before it (per sequence with
    cu_seqlens, NT counting every sequence's chunks), from the SIMD path's
    one call and from the reference run chunk by chunk."""
    C = 3
    a, t = arrays("kda", 5, B=1 if varlen else 2, T=8)
    cu = [0, 5, 8] if varlen else None
    h0 = np.concatenate([a["h0"], a["h0"] * 0.5]) if varlen else a["h0"]
    o, ht, h = kt.chunk_kda(t["q"], t["k"], t["v"], t["g"], t["beta"],
                            initial_state=torch.tensor(h0), output_final_state=True,
                            return_intermediate_states=True, chunk_size=C, impl=impl,
                            cu_seqlens=None if cu is None else torch.tensor(cu))
    spans = [(0, 5), (5, 8)] if varlen else [(0, 8)]
    expect = []
    for n, (s, e) in enumerate(spans):
        for c in range(s, e, C):
            b = {k: None if x is None else x[:, s:c] for k, x in a.items()
                 if k not in ("h0", "dht")}
            b["h0"] = h0[n:n + 1] if varlen else h0
            expect.append(recurrence("kda", b)[1])
    expect = np.concatenate(expect)[None] if varlen else np.stack(expect, 1)
    assert h.shape == expect.shape == ((1, 3) if varlen else (2, 3)) + (2, 3, 2)
    assert np.abs(h.numpy() - expect).max() < 1e-12
    _, _, hv = kt.chunk_kda(t["q"], t["k"], t["v"], t["g"], t["beta"],
                            initial_state=torch.tensor(h0).transpose(-1, -2),
                            return_intermediate_states=True, chunk_size=C, state_v_first=True,
                            impl=impl, cu_seqlens=None if cu is None else torch.tensor(cu))
    assert torch.equal(hv, h.transpose(-1, -2))
    # the NumPy door's chunk_kda takes the same keyword
    _, _, hn = kdalab.chunk_kda(a["q"], a["k"], a["v"], a["g"], a["beta"], initial_state=h0,
                                return_intermediate_states=True, chunk_size=C, impl=impl,
                                cu_seqlens=None if cu is None else np.array(cu))
    assert np.array_equal(hn, h.numpy())


def test_linear_attention_normalize_and_reverse():
    """normalize (fla's default for chunk_linear_attn) returns (o, (final_state,
    z_state)) and equals the NumPy normalize; reverse runs each sequence from its end."""
    a, t = arrays("linear_attention", 6)
    a["q"], a["k"] = np.abs(a["q"]) + 0.1, np.abs(a["k"]) + 0.1
    t["q"], t["k"] = torch.tensor(a["q"]), torch.tensor(a["k"])
    o, (ht, z) = kt.chunk_linear_attn(t["q"], t["k"], t["v"], initial_state=t["h0"],
                                      output_final_state=True)
    ro, rht = recurrence("linear_attention", a, normalize=True)
    assert np.abs(o.numpy() - ro).max() < 1e-12 and np.abs(ht.numpy() - rht).max() < 1e-12
    assert np.abs(z.numpy() - a["k"].sum(1, keepdims=True)).max() < 1e-12
    flip = {n: x[:, ::-1].copy() if x is not None and x.ndim == 4 and n not in ("h0", "dht")
            else x for n, x in a.items()}
    ro, rht = recurrence("linear_attention", flip)
    o, ht = kt.fused_recurrent_linear_attn(t["q"], t["k"], t["v"], initial_state=t["h0"],
                                           output_final_state=True, reverse=True)
    assert np.abs(o.numpy() - ro[:, ::-1]).max() < 1e-12
    assert np.abs(ht.numpy() - rht).max() < 1e-12


def test_arguments_fla_has_and_kdalab_does_not_emulate():
    a, t = arrays("kda", 7)
    args = (t["q"], t["k"], t["v"], t["g"], t["beta"])
    # a misspelt keyword: TypeError naming fla's spelling
    with pytest.raises(TypeError, match="use_qk_l2norm.*fla spells it 'use_qk_l2norm_in_kernel'"):
        kt.chunk_kda(*args, use_qk_l2norm=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'gate'"):
        kt.chunk_gated_delta_rule(t["q"], t["k"], t["v"], t["g"][..., 0], t["beta"], gate=1)
    with pytest.raises(TypeError):
        kt.fused_recurrent_delta_rule(t["q"], t["k"], t["v"], chunk_size=4)
    # tuning arguments: accepted, same result
    o1, _ = kt.chunk_kda(*args)
    o2, _ = kt.chunk_kda(*args, disable_recompute=True, head_first=False)
    assert torch.equal(o1, o2)
    with pytest.raises(NotImplementedError, match="cp_context"):
        kt.chunk_kda(*args, cp_context=object())
    with pytest.raises(ValueError, match="requires `use_beta_sigmoid_in_kernel=True`"):
        kt.chunk_kda(*args, allow_neg_eigval=True)
    with pytest.raises(NotImplementedError, match="gv"):
        kt.fused_recurrent_gated_delta_rule(t["q"], t["k"], t["v"], gv=t["g"][..., 0])
    with pytest.raises(NotImplementedError, match="window_size"):
        kt.parallel_attn(t["q"], t["k"], t["k"], window_size=4)
    # cu_seqlens_cpu: checked equal to cu_seqlens
    q1 = [x[:1] for x in args]
    kt.chunk_kda(*q1, cu_seqlens=torch.tensor([0, 3, 7]), cu_seqlens_cpu=torch.tensor([0, 3, 7]))
    with pytest.raises(ValueError, match="cu_seqlens_cpu"):
        kt.chunk_kda(*q1, cu_seqlens=torch.tensor([0, 3, 7]),
                     cu_seqlens_cpu=torch.tensor([0, 4, 7]))


def test_fused_recurrent_gated_delta_rule_gates():
    """g alone: Gated DeltaNet; gk alone: KDA; both: their sum in log space;
    neither: DeltaNet; beta None: ones."""
    a, t = arrays("kda", 8)
    gk = a["g"]
    g = np.random.default_rng(9).uniform(-1, 0, gk.shape[:3])
    for gg, gkk, eff in ((g, None, g[..., None] + 0 * gk), (None, gk, gk),
                         (g, gk, gk + g[..., None]), (None, None, 0 * gk)):
        ro, _ = recurrence("kda", dict(a, g=eff, beta=np.ones_like(a["beta"])))
        o, _ = kt.fused_recurrent_gated_delta_rule(
            t["q"], t["k"], t["v"], None if gg is None else torch.tensor(gg),
            None if gkk is None else torch.tensor(gkk), initial_state=t["h0"])
        assert np.abs(o.numpy() - ro).max() < 1e-12


def test_layout_guard_names_both_readings():
    """q, k, v head-first [B, H, T, K] with beta and g time-first (or beta
    head-first beside time-first q): one ValueError naming both readings,
    from the NumPy functions and kdalab.torch alike; head_first=True refused."""
    a, t = arrays("kda", 10, B=2, T=6, H=2, HV=2)
    hf = {n: t[n].transpose(1, 2).contiguous() for n in ("q", "k", "v")}
    with pytest.raises(ValueError, match=r"q \(2, 2, 6, 3\) read as fla's time-first .* "
                                         r"T = 2, H = 6, but beta \(2, 6, 2\) has T = 6 and 2 "
                                         r"heads; they agree if q \(and k, v\) or beta is head-first"):
        kt.chunk_kda(hf["q"], hf["k"], hf["v"], t["g"], t["beta"])
    a, _ = arrays("deltanet", 11, B=2, T=6, H=1, HV=2)  # grouped values: beta has 2 heads
    with pytest.raises(ValueError, match=r"beta \(2, 2, 6\) has T = 2 and 6 heads; they agree "
                                         r"if beta is head-first"):
        kdalab.fused_recurrent_delta_rule(a["q"], a["k"], a["v"], a["beta"].transpose(0, 2, 1))
    with pytest.raises(ValueError, match=r"head_first=True .*einops.rearrange"):
        kt.chunk_gated_delta_rule(t["q"], t["k"], t["v"], t["g"][..., 0], t["beta"],
                                  head_first=True)
