"""Inputs at the edges of what the module accepts: zero-sized dimensions,
values whose squares overflow, a linear-attention normaliser of zero. Each
is a correct result or one ValueError naming the argument the caller passed.
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
