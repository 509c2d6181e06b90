"""Comparing a kernel's output with the oracle's."""

import numpy as np


def errors(ref, out):
    """(fla's metric: relative RMS, ours: max |err| / max |ref|, the worst index)."""
    from .ops import as_f64
    ref = as_f64(ref, "ref")
    out = as_f64(out, "out")
    if ref.shape != out.shape:
        raise ValueError("shapes differ: ref %s, out %s" % (ref.shape, out.shape))
    if ref.size == 0:
        return 0.0, 0.0, ()
    err = np.abs(out - ref)
    err = np.where(np.isfinite(out), err, np.inf)
    rms = np.sqrt(np.mean((out - ref) ** 2)) / max(np.sqrt(np.mean(ref ** 2)), 1e-300)
    worst = np.unravel_index(int(np.argmax(err)), ref.shape)
    rel_max = float(err[worst]) / max(float(np.abs(ref).max()), 1e-300)
    return float(rms), rel_max, tuple(int(i) for i in worst)


def assert_close(name, ref, out, rtol):
    """Fail unless max |out - ref| / max |ref| <= rtol; the message gives both
    metrics (fla's relative RMS and ours) and where the worst element is."""
    from .ops import as_f64
    ref = as_f64(ref, "ref")  # torch tensors (bf16, requiring grad) as NumPy float64
    out = as_f64(out, "out")
    rms, rel_max, worst = errors(ref, out)
    if not rel_max <= rtol:
        at = "worst at %s: ref %r, out %r" % (worst, float(ref[worst]), float(out[worst]))
        raise AssertionError("%s: max error / max |ref| = %.3g > rtol %.3g (relative RMS %.3g); "
                             "%s" % (name, rel_max, rtol, rms, at))
    return rms, rel_max
