"""kdalab.testing: assert_close's two metrics, a tolerance derived from
kdalab's own storage emulation (passes rounding, fails a bug), its
gradients' twin (passes faithful low-precision backwards, fails planted
backward bugs), and the pytest plugin's kdalab_ref fixture."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kdalab
from kdalab.testing import assert_close, errors, grad_tolerance, tolerance

pytest_plugins = ["pytester"]

# the example, imported before pytester's in-process runs (which drop modules
# first imported inside them from sys.modules)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
try:
    import naive_kernels_vs_kdalab as example
except ImportError:  # no torch
    example = None
finally:
    sys.path.pop(0)


def python_in_new_process(code):
    """code run by this Python in a new process that finds the same modules:
    the finished subprocess, its output as text."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_assert_close_checks_either_metric():
    ref = np.ones((4, 4))
    out = ref.copy()
    out[2, 3] = 1.5  # max error 0.5, relative RMS 0.5 / 4 = 0.125
    assert assert_close("x", ref, out, rtol=0.5) == pytest.approx((0.125, 0.5))
    with pytest.raises(AssertionError, match=r"relative RMS = 0.125 > rms 0.1 .*\(i0=2, i1=3\)"):
        assert_close("x", ref, out, rms=0.1)
    with pytest.raises(AssertionError, match=r"max error / max \|ref\| = 0.5 > rtol 0.4"):
        assert_close("x", ref, out, rtol=0.4, rms=0.2)
    with pytest.raises(TypeError, match="rtol"):
        assert_close("x", ref, out)


@pytest.mark.parametrize("size", [1e-170, 1e-305, 1e-310, 1.0, 1e154, 1e300])
def test_metrics_hold_at_every_magnitude(size):
    """Neither metric squares a raw value: at |ref| of 1e-310 as of 1e300, a
    negated, zero or halved candidate fails and a candidate within 1e-12
    relative passes (the RMS once squared 1e-170 to 0 and 1e160 to inf)."""
    ref = size * np.linspace(0.5, 1.0, 16)
    close = ref * (1 + 1e-13 * np.cos(np.arange(16)))
    assert_close("o", ref, close, rtol=1e-12, rms=1e-12)
    for wrong in (-ref, np.zeros_like(ref), ref / 2):
        with pytest.raises(AssertionError, match="relative RMS"):
            assert_close("o", ref, wrong, rms=0.1)
        with pytest.raises(AssertionError, match="max error"):
            assert_close("o", ref, wrong, rtol=0.1)


def test_metrics_of_zeros_and_non_finite_values():
    z = np.zeros(4)
    assert errors(z, z)[:2] == (0.0, 0.0)
    assert errors(z, z + 1e-300)[:2] == (float("inf"), float("inf"))
    assert errors(np.ones(4), np.array([1, 1, np.nan, 1]))[1:] == (float("inf"), (2,))
    with pytest.raises(ValueError, match=r"ref\[1\] = inf"):
        errors(np.array([1, np.inf]), np.ones(2))


def test_tolerance_refuses_arguments_that_void_it():
    """trials < 1 (a bound of 0 from no run), margins below 1, infinite or
    NaN (an infinite bound passes a NaN candidate), and inputs outside the
    storage format's range (named, never the emulation's own inf) are errors."""
    p = problem(4, T=20)
    args = (p["q"], p["k"], p["v"], p["g"], p["beta"])
    for trials in (0, -1, True, 2.5, "8"):
        with pytest.raises(ValueError, match="trials"):
            tolerance("kda", *args, trials=trials)
    for margin in (-1.0, 0.5, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="margin"):
            tolerance("kda", *args, margin=margin)
    with pytest.raises(TypeError, match="margin"):
        tolerance("kda", *args, margin="2")
    g = p["g"].copy()
    g[0, 3, 1, 2] = -1e300
    with pytest.raises(ValueError, match=r"g\[0, 3, 1, 2\] = -1e\+300 does not fit fp32"):
        tolerance("kda", p["q"], p["k"], p["v"], g, p["beta"], precision="bf16")
    # the log-decay stays in float32 in an fp16 kernel: a hard reset beyond 65504 is fine
    g[0, 3, 1, 2] = -1e5
    assert tolerance("kda", p["q"], p["k"], p["v"], g, p["beta"], precision="fp16",
                     trials=1).rtol["o"] >= 0
    v = np.full((1, 1, 1, 1), float.fromhex("0x1.fcp127"))  # o rounds beyond bf16's range
    with pytest.raises(ValueError, match="o reaches beyond bf16's range"):
        tolerance("linear_attention", v * 0 + 1, v * 0 + 1, v, scale=1 + 2 ** -7,
                  precision="bf16", trials=1)
    # an input out of the format's range that would also overflow the float64
    # oracle: the range error, naming it, comes first
    ones = np.ones((1, 8, 1, 4))
    with pytest.raises(ValueError, match=r"v\[0, 0, 0, 0\] = 1.7e\+308 does not fit bf16"):
        tolerance("linear_attention", ones, ones, ones * 1.7e308, precision="bf16", trials=1)
    v = p["v"] * 0
    v[0, 5, 0, 0] = 7e4
    with pytest.raises(ValueError, match=r"v\[0, 5, 0, 0\] = 70000 does not fit fp16"):
        tolerance("kda", p["q"], p["k"], v, p["g"], p["beta"], precision="fp16")
    assert tolerance("kda", p["q"], p["k"], v, p["g"], p["beta"], precision="bf16",
                     trials=1).rtol["o"] >= 0


def test_range_check_from_the_copies_peaks():
    """An input fits when the emulation stores it finite: as it is for one
    trial, times 1 + 2^-8 (a trial's largest perturbation) for more; the
    check takes the largest magnitude _store found while copying them,
    exact at the format's edge: fp16 rounds 65519 to 65504 and 65520 (a
    tie, to even) to inf."""
    from kdalab.testing import _check_range, _store
    cases = [("fp16", 65500.0, True, False), ("fp16", 65519.0, True, False),
             ("fp16", 65520.0, False, False), ("fp16", -65520.0, False, False),
             ("bf16", 3.38e38, True, True), ("bf16", 3.4e38, False, False),
             ("fp32", 3.4e38, True, False), ("fp32", 3.41e38, False, False),
             ("fp16", 65500 / (1 + 2 ** -8), True, True), ("fp16", 65000.0, True, True)]
    r = np.random.default_rng(5)
    for precision, value, fits_as_is, fits_jittered in cases:
        a = r.normal(size=(3, 4))
        a[1, 2] = value
        peak = _store(a, "fp32")[1]
        assert peak == abs(value)
        for jitter, fits in ((False, fits_as_is), (True, fits_jittered)):
            if fits:
                _check_range([("q", a)], precision, [peak], jitter=jitter)
            else:
                with pytest.raises(ValueError, match=r"q\[1, 2\] = .* does not fit %s"
                                   % precision):
                    _check_range([("q", a)], precision, [peak], jitter=jitter)
    copy, peak = _store(np.array([np.nan, -3.0, 1e39]), "bf16")
    assert peak == 1e39 and np.isnan(copy[0]) and copy[1] == -3 and np.isinf(copy[2])
    # one trial stores the inputs as they are: a value just under fp16's edge fits
    p = problem(4, T=20)
    v = p["v"] * 0
    v[0, 3, 1, 2] = 65500.0
    tolerance("kda", p["q"], p["k"], v, p["g"], p["beta"], precision="fp16", trials=1)
    with pytest.raises(ValueError, match=r"v\[0, 3, 1, 2\] = 65500 does not fit fp16 .*"
                                         r"times 1 \+ 2\^-8"):
        tolerance("kda", p["q"], p["k"], v, p["g"], p["beta"], precision="fp16", trials=2)
    with pytest.raises(ValueError, match=r"^grad_tolerance: v\[0, 3, 1, 2\] = 65500"):
        grad_tolerance("kda", p["q"], p["k"], v, p["g"], p["beta"], do=p["v"],
                       precision="fp16")


def test_trials_follow_the_smaller_output():
    """trials=None: ceil(2^20 / the smaller of o's size and the states'
    sampled, those entering every chunk but the first and the final ones,
    or the final ones alone where h would exceed 4x o) within [1, 8]; a bad
    chunk_size is refused before anything runs."""
    p = problem(5, T=20)
    args = (p["q"], p["k"], p["v"], p["g"], p["beta"])
    assert len(tolerance("kda", *args).trials) == 8
    # K = V = 64, H = 128: at T = 64, o has 2^19 elements and one chunk's
    # final states 2^19: 2 trials; at T = 128, o has 2^20 and the states
    # entering chunk 1 and the final ones 2^20: 1 trial
    for T, n in ((64, 2), (128, 1)):
        p = problem(6, T=T, H=128, K=64, V=64)
        tol = tolerance("kda", p["q"], p["k"], p["v"], p["g"], p["beta"])
        assert len(tol.trials) == n, T
    # chunk_size = 8 at K = 64: h would have 8x o's elements, so the final
    # states alone are sampled (2^19 elements): 2 trials
    tol = tolerance("kda", p["q"], p["k"], p["v"], p["g"], p["beta"], chunk_size=8)
    assert len(tol.trials) == 2
    for bad in (-1, 0, 2.5, 2 ** 64 - 1):
        with pytest.raises(ValueError, match="chunk_size"):
            tolerance("kda", *args, chunk_size=bad)


def test_repeated_calls_take_no_fresh_pages():
    """A repeated tolerance / grad_tolerance call on a thread writes into the
    buffers the first one left (_buffer), so it maps no fresh pages: in a
    fresh process at B = 2, T = 2048, H = 4, K = V = 128 (the oracle's h
    alone 32 MB, beyond glibc's largest reuse of freed memory), the second
    call's minor page faults are under a twentieth of the first's (measured
    on a Zen 3: 5188 then 32 for tolerance, 11320 then 78 for
    grad_tolerance; with a fresh array per call, as before the buffers were
    kept, 1017 and 3611 on every repeat)."""
    code = (
        "import resource, numpy as np, kdalab.testing as kt\n"
        "rng = np.random.default_rng(0); s = (2, 2048, 4, 128)\n"
        "unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)\n"
        "q, k, v, do = unit(rng.normal(size=s)), unit(rng.normal(size=s)), "
        "rng.normal(size=s), rng.normal(size=s)\n"
        "g, beta = -np.exp(rng.normal(size=s) - 3), rng.uniform(0, 1, s[:3])\n"
        "def faults(f):\n"
        "    a = resource.getrusage(resource.RUSAGE_SELF).ru_minflt; f()\n"
        "    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - a\n"
        "tol = lambda: kt.tolerance('kda', q, k, v, g, beta)\n"
        "grad = lambda: kt.grad_tolerance('kda', q, k, v, g, beta, do=do, trials=1)\n"
        "print(faults(tol), faults(tol), faults(grad), faults(grad))\n")
    run = python_in_new_process(code)
    assert run.returncode == 0, run.stderr
    t1, t2, g1, g2 = (int(x) for x in run.stdout.split())
    assert t2 * 20 < t1 and g2 * 20 < g1, run.stdout


def test_kept_buffers_are_per_thread_bounded_and_released(monkeypatch):
    """Two threads' tolerance calls, run at once, give the bounds each gives
    alone (each thread its own buffers); a thread keeps at most _KEEP_BYTES
    (beyond it a call's arrays are its own, with the same bounds), and an
    earlier call's buffers make room for a later one's; release_buffers()
    frees what the thread kept and a later call is the same again."""
    import threading
    import kdalab.testing as kt
    probs = [problem(7, T=90), problem(8, T=40, H=3)]
    args = lambda p: (p["q"], p["k"], p["v"], p["g"], p["beta"])  # noqa: E731
    alone = [tolerance("kda", *args(p), trials=2) for p in probs]
    both = [None, None]

    def run(i):
        for _ in range(3):
            both[i] = tolerance("kda", *args(probs[i]), trials=2)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(alone, both):
        assert a.rtol == b.rtol and a.rms == b.rms
    assert kt.release_buffers() > 0 and kt.release_buffers() == 0
    kept = lambda: {r: id(e[0]) for r, e in kt._kept.pool.items()}  # noqa: E731
    tolerance("kda", *args(probs[0]), trials=2)
    roles = set(kept())  # all of a call's buffers (216 KB)
    monkeypatch.setattr(kt, "_KEEP_BYTES", 100_000)
    kt.release_buffers()
    for _ in range(2):
        again = tolerance("kda", *args(probs[0]), trials=2)
        assert again.rtol == alone[0].rtol and again.rms == alone[0].rms
        assert 0 < sum(e[0].size for e in kt._kept.pool.values()) <= 100_000
    # an earlier, larger call's buffers make room for a later call's: the
    # repeated call takes every buffer it needs from the pool (its first
    # time among the larger call's buffers, some fresh; its second time
    # those it takes exact)
    monkeypatch.setattr(kt, "_KEEP_BYTES", 300_000)
    big = problem(9, T=300)
    grad_tolerance("kda", *args(big), do=big["v"], trials=2)
    for _ in range(2):
        tolerance("kda", *args(probs[0]), trials=2)
    second = kept()
    tolerance("kda", *args(probs[0]), trials=2)
    assert roles <= set(second) and kept() == second
    assert sum(e[0].size for e in kt._kept.pool.values()) <= 300_000


def test_fixture_exists_whatever_was_imported_first(tmp_path):
    """kdalab.testing imported before pytest (a script that calls
    pytest.main) still gives the kdalab_ref fixture."""
    (tmp_path / "test_x.py").write_text("def test_x(kdalab_ref):\n"
                                        "    assert kdalab_ref.assert_close\n")
    code = ("import sys, kdalab, kdalab.testing\nimport pytest\n"
            "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'kdalab.testing', "
            "%r]))" % str(tmp_path / "test_x.py"))
    run = python_in_new_process(code)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-2000:]


def test_failures_name_axes_first_position_and_sequence():
    """A planted gate bug from t = 0 on is reported first at t = 0 (the
    worst element is later), by fla's axis letters; with cu_seqlens the
    first error past a sequence boundary is placed in its sequence, and a
    chunk of h in its sequence."""
    p = problem(5, T=40)
    ref, _ = kdalab.chunk_kda(**p)
    g = p["g"].copy()
    g[..., 0, :] *= 1.5  # head 0's decay wrong at every t
    bad, _ = kdalab.chunk_kda(**dict(p, g=g))
    with pytest.raises(AssertionError, match=r"first over rtol at \(b=0, t=[0-9], h=0, v=\d+\): "
                                             r"ref .*; worst at \(b=0, t=\d+, h=0"):
        assert_close("o", ref, bad, rtol=1e-3)
    cu = np.array([0, 15, 40])
    ref, _ = kdalab.chunk_kda(**p, cu_seqlens=cu)
    leaky, _ = kdalab.chunk_kda(**p)  # carries the state across t = 15
    with pytest.raises(AssertionError, match=r"first over rtol at \(b=0, t=15, h=\d, v=\d+\); "
                                             r"sequence 1, position 0 \(it starts at t = 15\)"):
        assert_close("o", ref, leaky, rtol=1e-6, cu_seqlens=cu)
    with pytest.raises(AssertionError, match=r"\(n=0, h=\d, k=\d+, v=\d+\)"):
        assert_close("ht", np.ones((1, 2, 3, 3)), np.zeros((1, 2, 3, 3)), rtol=0.1)
    # h under cu_seqlens: packed chunk 3 is sequence 1's chunk 1 (chunks of 8:
    # sequence 0 has 2, sequence 1 has 4)
    h = np.ones((1, 6, 2, 3, 3))
    wrong = h.copy()
    wrong[0, 3] = 0
    with pytest.raises(AssertionError, match=r"first over rtol at \(b=0, c=3, h=0, k=0, v=0\); "
                                             r"sequence 1, its chunk 1 of 8 positions "
                                             r"\(its chunks start at c = 2\): the state "
                                             r"entering t = 23, left by positions t = 15..22"):
        assert_close("h", h, wrong, rtol=0.1, cu_seqlens=np.array([0, 15, 40]), chunk_size=8)
    wrong[0, 3], wrong[0, 2] = 1, 0  # sequence 1's chunk 0: its initial state
    with pytest.raises(AssertionError, match=r"c=2, .*\(its chunks start at c = 2\): the "
                                             r"initial state \(t = 15\)"):
        assert_close("h", h, wrong, rtol=0.1, cu_seqlens=np.array([0, 15, 40]), chunk_size=8)
    with pytest.raises(AssertionError, match=r"\(b=0, c=2, h=0, k=0, v=0\); the state entering "
                                             r"t = 128, left by positions t = 64..127"):
        assert_close("h", h, wrong, rtol=0.1)  # plain: chunks of fla's 64, and it says so
    with pytest.raises(AssertionError, match=r"take h's chunks as fla's 64 \(pass chunk_size="):
        assert_close("h", h, wrong, rtol=0.1)
    with pytest.raises(AssertionError) as given:  # given and agreeing: no note
        assert_close("h", h, wrong, rtol=0.1, cu_seqlens=np.array([0, 15, 40]), chunk_size=8)
    assert "fla's 64" not in str(given.value) and "h has" not in str(given.value)
    wrong = h.copy()
    wrong[0, 5] = 0  # cu_seqlens [0, 15, 32] makes 2 + 3 chunks of 8: c = 5 is past them
    with pytest.raises(AssertionError, match=r"c=5.*; past the 5 chunks of 8 positions.*; h has "
                                             r"6 chunks where cu_seqlens makes 5 of "
                                             r"chunk_size = 8: pass h's chunk_size"):
        assert_close("h", h, wrong, rtol=0.1, cu_seqlens=[0, 15, 32], chunk_size=8)
    with pytest.raises(ValueError, match="chunk_size"):
        assert_close("h", h, h, rtol=0.1, chunk_size=0)
    # a cu_seqlens the library would refuse is refused here too, never read as given
    for cu, words in (([0, 100, 50, 294], "strictly increase"), ([5, 100, 294], "must be 0")):
        with pytest.raises(ValueError, match=words):
            assert_close("h", h, wrong, rtol=0.1, cu_seqlens=cu)
    with pytest.raises(ValueError, match="the last boundary must be T = 40"):
        assert_close("o", np.ones((1, 40, 2, 3)), np.zeros((1, 40, 2, 3)), rtol=0.1,
                     cu_seqlens=[0, 15, 30])
    with pytest.raises(AssertionError, match=r"\(b=1, h=0, k=0, v=0\)"):  # one chunk's states
        assert_close("h[:, 3]", h[:, 3].repeat(2, 0), np.r_[h[:, 3], 0 * h[:, 3]], rtol=0.1)
    assert assert_close.__code__.co_varnames[0] == "name"  # the signature kept
    src = open(kdalab.testing.__file__).read()
    assert "__tracebackhide__ = True" in src


def problem(seed, B=1, T=100, H=2, K=16, V=16):
    r = np.random.default_rng(seed)
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    return dict(q=unit(r.normal(size=(B, T, H, K))), k=unit(r.normal(size=(B, T, H, K))),
                v=r.normal(size=(B, T, H, V)), g=-np.exp(r.normal(size=(B, T, H, K))) / 2,
                beta=r.uniform(0, 1, (B, T, H)))


def bf16(x):
    """Round float64 to bfloat16 (nearest even), as a kernel storing inputs in bf16."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def test_tolerance_passes_rounding_and_fails_a_bug():
    """At these inputs the bf16 tolerance admits a kernel that only rounds its
    inputs to bf16 (and computes exactly), and refuses one that doubles the
    gate of one key channel of one head, and points at that head."""
    p = problem(1)
    tol = tolerance("kda", p["q"], p["k"], p["v"], p["g"], p["beta"], precision="bf16")
    tf = tolerance("kda", p["q"], p["k"], p["v"], p["g"], p["beta"], precision="fp16")
    t32 = tolerance("kda", p["q"], p["k"], p["v"], p["g"], p["beta"], precision="fp32")
    assert t32.rtol["o"] < 1e-5 < tf.rtol["o"] < tol.rtol["o"] < 0.1
    assert len(tol.trials) == 8
    ref, _ = kdalab.chunk_kda(**p)
    rounded, _ = kdalab.chunk_kda(**{n: bf16(x) for n, x in p.items()})
    assert_close("o", ref, rounded, rtol=tol.rtol["o"], rms=tol.rms["o"])
    g = p["g"].copy()
    g[..., 1, 5] *= 2
    wrong, _ = kdalab.chunk_kda(**dict(p, g=g))
    rms, rel, worst = errors(ref, wrong)
    assert rel > tol.rtol["o"] and worst[2] == 1
    with pytest.raises(ValueError, match="precision"):
        tolerance("kda", p["q"], p["k"], p["v"], p["g"], p["beta"], precision="int8")


def test_tolerance_with_cu_seqlens():
    """Packed sequences: the bound admits a kernel that rounds its inputs to
    bf16 and keeps the sequences apart, and refuses one that carries the state
    across the boundary (if tolerance emulated the packed input as one
    sequence, its own bound would admit that kernel); a bad cu_seqlens is an
    error."""
    p = problem(2, T=100)
    cu = np.array([0, 37, 100])
    h0 = np.random.default_rng(3).normal(size=(2, 2, 16, 16)) * 0.1
    tol = tolerance("kda", p["q"], p["k"], p["v"], p["g"], p["beta"], initial_state=h0,
                    precision="bf16", cu_seqlens=cu)
    ref, _ = kdalab.chunk_kda(**p, initial_state=h0, cu_seqlens=cu)
    rounded, _ = kdalab.chunk_kda(**{n: bf16(x) for n, x in p.items()},
                                  initial_state=bf16(h0), cu_seqlens=cu)
    assert_close("o", ref, rounded, rtol=tol.rtol["o"], rms=tol.rms["o"])
    leaky, _ = kdalab.chunk_kda(**p, initial_state=h0[:1])
    assert errors(ref, leaky)[1] > tol.rtol["o"]
    with pytest.raises(Exception, match="cu_seqlens"):
        tolerance("kda", p["q"], p["k"], p["v"], p["g"], p["beta"], initial_state=h0,
                  cu_seqlens=np.array([0, 37, 99]))


def test_state_bound_covers_every_chunk_start():
    """The states' bound is the worst over the sets of states entering each
    chunk and the final ones, each set measured against its own largest
    value: an error planted in the states entering one chunk is found there
    and nowhere else, and the block-wise metrics equal errors()."""
    from kdalab.testing import _fast_errors, _state_errors
    r = np.random.default_rng(4)
    ref_h, ref_ht = r.normal(size=(2, 5, 3, 40, 300)), r.normal(size=(2, 3, 40, 300))
    ref_h[:, 3] *= 1e-3  # a set of small states: its error is relative to its own scale
    got_h, got_ht = ref_h.astype(np.float32), ref_ht.astype(np.float32)
    base = _state_errors(ref_h, got_h, ref_ht, got_ht)
    assert 0 < base[1] < 1e-7  # float32 rounding alone
    got_h[1, 3, 2, 7, 11] += np.float32(2e-5 * np.abs(ref_h[:, 3]).max())
    rms, rel = _state_errors(ref_h, got_h, ref_ht, got_ht)
    assert 2e-5 * 0.99 < rel < 2e-5 * 1.01
    assert rms == pytest.approx(errors(ref_h[:, 3], got_h[:, 3])[0], rel=1e-9)
    for ref, got in ((ref_h, got_h), (ref_ht, got_ht), (ref_h[0, 0], got_h[0, 0] * 0)):
        fast = _fast_errors(ref, got)
        assert fast == pytest.approx(errors(ref, got)[:2], rel=1e-12)


def test_one_trial_admits_a_bf16_kernel_on_bf16_inputs():
    """Inputs already in bf16 (as fla's tests make them) leave the storage
    of the inputs nothing to round, so a single trial's bound comes from
    the arithmetic and from storing the outputs: the exact answer returned
    in bf16 passes the o bound, and the oracle's h stored in bf16 the h
    bound, at a size where the default is one trial (2^20 elements of o and
    of the states)."""
    p = {n: bf16(x) for n, x in problem(8, T=1024, H=16, K=64, V=64).items()}
    args = (p["q"], p["k"], p["v"], p["g"], p["beta"])
    tol = tolerance("kda", *args, precision="bf16")
    assert len(tol.trials) == 1
    o, _ = kdalab.chunk_kda(**p)
    assert_close("o", o, bf16(o), rtol=tol.rtol["o"], rms=tol.rms["o"])
    h = kdalab.ops.chunk_states("kda", *args)
    assert_close("h", h, bf16(h), rtol=tol.rtol["h"], rms=tol.rms["h"])
    assert tol.rtol["ht"] < tol.rtol["h"] < tol.rtol["ht"] + 2 * 2.0 ** -8


def test_tolerance_bounds_the_states_at_chunk_starts():
    """The ht bound holds for the states entering every chunk, so it checks a
    kernel's return_intermediate_states too: h rounded to bf16 passes; h from
    a gate doubled in one key channel from chunk 2 on fails, and the failure
    names chunk 3, the first state it changes, as its first position."""
    p = problem(7, T=320, K=32, V=32)
    args = (p["q"], p["k"], p["v"], p["g"], p["beta"])
    tol = tolerance("kda", *args, precision="bf16")
    assert len(tol.trials) == 8  # o has 2^14 elements
    h = kdalab.ops.chunk_states("kda", *args)
    assert_close("h", h, bf16(h), rtol=tol.rtol["ht"], rms=tol.rms["ht"])
    g = p["g"].copy()
    g[:, 128:, 0, 3] *= 2
    wrong = kdalab.ops.chunk_states("kda", p["q"], p["k"], p["v"], g, p["beta"])
    with pytest.raises(AssertionError, match=r"first over rtol at \(b=0, c=3, h=0, k=3, "):
        assert_close("h", h, wrong, rtol=tol.rtol["ht"], rms=tol.rms["ht"])


GRADS = ("dq", "dk", "dv", "dg", "dbeta")


def _naive_kda_bwd_f32(p, do, scale):
    """A faithful low-precision backward written from REFERENCE.md's update
    table: the KDA recurrence in torch float32 on bf16-stored inputs,
    differentiated by autograd: the gradients by name, float64."""
    torch = pytest.importorskip("torch")
    t = {n: torch.tensor(bf16(x), dtype=torch.float32, requires_grad=True)
         for n, x in p.items()}
    B, T, H, K = p["q"].shape
    V = p["v"].shape[3]
    out = []
    for b in range(B):
        for h in range(H):
            S = torch.zeros(K, V)
            for i in range(T):
                S = torch.exp(t["g"][b, i, h])[:, None] * S
                k_i = t["k"][b, i, h]
                e = t["v"][b, i, h] - S.T @ k_i
                S = S + t["beta"][b, i, h] * torch.outer(k_i, e)
                out.append((b, i, h, scale * (S.T @ t["q"][b, i, h])))
    o = torch.zeros(B, T, H, V)
    o = o.index_put((torch.tensor([x[0] for x in out]), torch.tensor([x[1] for x in out]),
                     torch.tensor([x[2] for x in out])), torch.stack([x[3] for x in out]))
    (o * torch.tensor(bf16(do), dtype=torch.float32)).sum().backward()
    return {"d" + n: t[n].grad.double().numpy() for n in ("q", "k", "v", "g", "beta")}


def test_grad_tolerance_passes_faithful_backwards_and_fails_planted_bugs():
    """At these inputs the bf16 gradient bounds admit two faithful
    low-precision backwards — the exact backward of bf16-rounded inputs, and
    a naive float32 torch recurrence on bf16 inputs differentiated by
    autograd — and refuse four planted bugs of a backward, each in the
    gradient it plants: dk one position late, one key channel of dg with
    its sign flipped, dbeta dropped after the first chunk, dq 10 % large in
    one head. fp32 < fp16 < bf16, and do is required."""
    p = problem(4)
    r = np.random.default_rng(5)
    do = r.normal(size=p["v"].shape)
    scale = 16 ** -0.5
    tol = grad_tolerance("kda", **p, do=do, precision="bf16")
    tf = grad_tolerance("kda", **p, do=do, precision="fp16")
    t32 = grad_tolerance("kda", **p, do=do, precision="fp32")
    for n in GRADS + ("dh0",):
        assert t32.rtol[n] < 1e-5 < tf.rtol[n] < tol.rtol[n] < 0.1, n
    assert len(tol.trials) == 8 and set(tol.trials[0]) == set(GRADS) | {"dh0"}
    ref = kdalab.chunk_kda_bwd(**p, do=do)._asdict()
    exact_rounded = kdalab.chunk_kda_bwd(**{n: bf16(x) for n, x in p.items()},
                                         do=bf16(do))._asdict()
    naive = _naive_kda_bwd_f32(p, do, scale)
    for got in (exact_rounded, naive):
        for n in GRADS:
            assert_close(n, ref[n], got[n], rtol=tol.rtol[n], rms=tol.rms[n])
    planted = {n: a.copy() for n, a in naive.items()}
    planted["dk"] = np.roll(planted["dk"], 1, axis=1)
    planted["dg"][..., 3] *= -1
    planted["dbeta"][:, 64:] = 0
    planted["dq"][:, :, 1] *= 1.1
    for n in ("dk", "dg", "dbeta", "dq"):
        with pytest.raises(AssertionError, match=n):
            assert_close(n, ref[n], planted[n], rtol=tol.rtol[n], rms=tol.rms[n])
    with pytest.raises(ValueError, match="do is required"):
        grad_tolerance("kda", **p)


def test_pytest_plugin_gives_kdalab_ref(pytester):
    """pytest -p kdalab.testing: a kernel's test asks for kdalab_ref (run in
    process, so torch is not imported twice)."""
    pytest.importorskip("torch")
    pytester.makepyfile(test_kernel="""
        import torch

        def test_kernel(kdalab_ref):
            q = torch.rand(1, 6, 2, 4, dtype=torch.float64, requires_grad=True)
            g = -torch.rand(1, 6, 2, 4, dtype=torch.float64)
            beta = torch.rand(1, 6, 2, dtype=torch.float64)
            o, _ = kdalab_ref.chunk_kda(q, q, q, g, beta)
            o.sum().backward()
            assert q.grad is not None
            kdalab_ref.assert_close("o", o, o.float(), rtol=1e-6)
            kdalab_ref.tolerance("kda", q.detach(), q.detach(), q.detach(), g, beta)
            assert kdalab_ref.release_buffers() > 0
    """)
    pytester.runpytest_inprocess("-p", "kdalab.testing").assert_outcomes(passed=1)
    pytester.runpytest_inprocess().assert_outcomes(errors=1)  # no plugin, no fixture


def test_kdalab_without_torch():
    """import kdalab needs neither torch nor pytest (nor imports pytest), and
    kdalab.testing works without pytest; import kdalab.torch without torch
    says what to install."""
    code = ("import sys; sys.modules['torch'] = None; import kdalab\n"
            "assert 'pytest' not in sys.modules\n"
            "sys.modules['pytest'] = None; import kdalab.testing\n"
            "assert kdalab.testing.errors([1.0], [1.0])[0] == 0\n"
            "try:\n    import kdalab.torch\nexcept ImportError as e:\n    print(e)\n")
    run = python_in_new_process(code)
    assert run.returncode == 0, run.stderr
    assert "kdalab.torch needs PyTorch" in run.stdout and "pip install torch" in run.stdout


def test_example_locates_the_wrong_chunk(capsys):
    """The example's wrong kernel (an off-by-one at a chunk boundary) is
    located by return_intermediate_states in the chunk that holds it."""
    if example is None:
        pytest.skip("torch is not installed")
    example.wrong_kernel()
    out = capsys.readouterr().out
    assert "first wrong state enters chunk 6: the bug is in chunk 5, positions 160..191" in out
