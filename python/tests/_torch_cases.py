"""One random case of kdalab.torch's property (test_torch_property.py), run
in a child interpreter: `python _torch_cases.py` reads one JSON case a line
and prints `start ID`, then one JSON result a line ("ok", "error" or
"fail" with a message).

A case is a function of kdalab.torch, random shapes (zero-sized dimensions
included), an input dtype (float64/32/16, bfloat16; int32 or bool in one
input, which must be refused), how the inputs are passed (as they are, a
non-contiguous copy, a strided view, a tensor with torch's negation bit), at
most one switch given a value that is not a bool, and an autograd path:
backward, backward twice with retain_graph, create_graph then a gradient
penalty, or an input edited in place between forward and backward.

The property: the call either gives the right answer — the forward equal to
the float64 recurrence of _calls.py on the inputs' values (1e-10 of the
largest |o|), every gradient equal to the NumPy *_bwd function's cast to the
input's dtype — or raises the exception that names what is wrong: a
TypeError naming the non-bool switch, a ValueError naming the integer input
or the empty dimension, PyTorch's in-place error where the saved input
itself was edited, a RuntimeError on differentiating twice. Anything else
(another exception, an answer where an error was due) fails.
"""

import inspect
import json
import re
import sys
import traceback

import numpy as np
import torch

import _calls as C
import kdalab
import kdalab.torch as kt

FUNCS = {(m, form): getattr(kt, C.TABLE[m][key])  # (mechanism, form) -> kdalab.torch's
         for m in C.MECHS for form, key in (("chunk", "fla_chunk"),
                                            ("recurrent", "fla_recurrent"))}


def takes(mech, form, arg):
    """Does kdalab.torch's function for (mech, form) take the keyword arg?"""
    return arg in inspect.signature(FUNCS[(mech, form)]).parameters


def switches(mech, form):
    """The bool arguments of the function that a case may set to a non-bool."""
    return [n for n in ("output_final_state", "state_v_first", "use_qk_l2norm_in_kernel",
                        "normalize", "reverse") if takes(mech, form, n)]
DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "bool": torch.bool}
INPUTS = ("q", "k", "v", "g", "beta", "h0")
ARG = {"h0": "initial_state"}  # the argument's name where it differs


def call(mech, form, x, kw):
    f = FUNCS[(mech, form)]
    if takes(mech, form, "gk") and C.TABLE[mech]["delta"]:  # g, gk, gv, beta: by keyword
        return f(x["q"], x["k"], x["v"], g=x["g"], beta=x["beta"], initial_state=x["h0"], **kw)
    args = [x[n] for n in ("q", "k", "v", "g", "beta") if x[n] is not None]
    return f(*args, initial_state=x["h0"], **kw)


def leaves_and_inputs(case, values):
    """The tensors autograd differentiates (leaves) and what is passed (inputs),
    per name, and where each input's values sit inside its leaf."""
    leaves, inputs, where = {}, {}, {}
    for n, a in values.items():
        if a is None:
            leaves[n] = inputs[n] = None
            continue
        dt = DTYPES[case["bad_dtype"] if n == case["bad_input"] else case["dtype"]]
        t = torch.from_numpy(a).to(dt)
        grad = dt.is_floating_point
        how = case["view"] if grad else "plain"
        if how == "strided":  # a view of every other element of a larger leaf
            big = torch.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=dt)
            big[..., ::2] = t
            leaves[n] = big.requires_grad_()
            inputs[n] = leaves[n][..., ::2]
            where[n] = (Ellipsis, slice(None, None, 2))
            continue
        leaves[n] = t.requires_grad_(grad)
        if how == "noncontig" and t.ndim >= 2:
            inputs[n] = leaves[n].transpose(0, -1).contiguous().transpose(0, -1)
        elif how == "neg":
            inputs[n] = torch._neg_view(-leaves[n])
        else:
            inputs[n] = leaves[n]
        where[n] = Ellipsis
    return leaves, inputs, where


def mentions(msg, name):
    return re.search(r"(^|[^A-Za-z_])%s([^A-Za-z_]|$)" % re.escape(name), msg) is not None


def run(case):
    rng = np.random.default_rng(case["seed"])
    mech, form = case["mech"], case["form"]
    B, T, H, HV, K, V = case["shape"]
    a = C.make(mech, rng, B, T, H, HV, K, V)
    values = {n: a[n] for n in INPUTS}
    leaves, x, where = leaves_and_inputs(case, values)
    kw = {"output_final_state": True}
    if takes(mech, form, "normalize"):
        kw["normalize"] = case["normalize"]
    elif case["l2"] and takes(mech, form, "use_qk_l2norm_in_kernel"):
        kw["use_qk_l2norm_in_kernel"] = True
    if case["switch"]:
        kw[case["switch"][0]] = case["switch"][1]
    # the values the call sees, as float64, before any in-place edit
    seen = {n: (None if t is None else t.detach().resolve_neg().double().numpy().copy())
            for n, t in x.items()}
    due = None
    if case["switch"]:
        due = (TypeError, case["switch"][0], "must be True or False")
    elif case["bad_input"] and seen[case["bad_input"]] is not None:
        due = (ValueError, ARG.get(case["bad_input"], case["bad_input"]), "not floating")
    elif 0 in (B, H, K, V, HV):
        due = (ValueError, None, "")
    try:
        res = call(mech, form, x, kw)
    except (TypeError, ValueError) as e:
        msg = str(e)
        if due is None:
            return "fail", "refused a valid call: %s: %s" % (type(e).__name__, msg[:300])
        if not isinstance(e, due[0]) or (due[1] and not mentions(msg, due[1])) \
                or due[2] not in msg:
            return "fail", "%s %r, expected %s naming %s" % (type(e).__name__, msg[:300],
                                                             due[0].__name__, due[1])
        if due[1] is None and not any(mentions(msg, n) for n in ("q", "k", "v")):
            return "fail", "empty dimension refused without naming the input: " + msg[:300]
        return "error", msg[:120]
    if due is not None:
        return "fail", "accepted; expected %s naming %s" % (due[0].__name__, due[1])
    o = res[0]
    normalize = kw.get("normalize", False)
    ht = res[1][0] if normalize else res[1]
    want_o, want_ht = C.recurrence(mech, seen, normalize=normalize,
                                   l2=kw.get("use_qk_l2norm_in_kernel", False))
    for name, got, want in (("o", o, want_o), ("ht", ht, want_ht)):
        got = got.detach().numpy()
        tol = 1e-10 * max(1.0, np.abs(want).max(initial=0))
        if got.shape != want.shape or np.abs(got - want).max(initial=0) > tol:
            return "fail", "%s differs from the recurrence" % name
    return autograd(case, mech, form, leaves, x, where, seen, o, ht, rng, kw)


def autograd(case, mech, form, leaves, x, where, seen, o, ht, rng, kw):
    """The autograd path of the case, after a correct forward."""
    wanted = [n for n in INPUTS if leaves[n] is not None and leaves[n].requires_grad]
    if not wanted or o.numel() + ht.numel() == 0:
        return "ok", "forward (nothing to differentiate)"
    do = torch.from_numpy(rng.uniform(-1, 1, o.shape))
    dht = torch.from_numpy(rng.uniform(-1, 1, ht.shape))
    loss = (o * do).sum() + (ht * dht).sum()
    path = case["path"]
    if path == "inplace":
        victim = wanted[int(rng.integers(len(wanted)))]
        with torch.no_grad():
            leaves[victim].mul_(2)
        # the saved input is the leaf or a view of it (a copy is another tensor)
        edited_saved = (x[victim] if x[victim]._base is None else x[victim]._base) \
            is leaves[victim]
        try:
            loss.backward()
        except RuntimeError as e:
            if edited_saved and "inplace" in str(e):
                return "error", "in-place edit of %s refused" % victim
            return "fail", "RuntimeError %r after editing %s" % (str(e)[:300], victim)
        if edited_saved:
            return "fail", "the backward ran after %s, a saved input, was edited" % victim
        got = {n: leaves[n].grad for n in wanted}
    elif path == "create_graph":
        grads = torch.autograd.grad(loss, [leaves[n] for n in wanted], create_graph=True)
        got = dict(zip(wanted, grads))
        penalty = sum((gr.double() ** 2).sum() for gr in grads)
        try:
            penalty.backward()
        except RuntimeError as e:
            if "differentiate twice" not in str(e):
                return "fail", "double backward: RuntimeError %r" % str(e)[:300]
        else:
            return "fail", "a gradient penalty was differentiated without an error"
    else:
        loss.backward(retain_graph=path == "retain")
        if path == "retain":
            first = {n: leaves[n].grad.clone() for n in wanted}
            loss.backward()
            if any(not torch.equal(leaves[n].grad, 2 * first[n]) for n in wanted):
                return "fail", "a second backward (retain_graph) did not add the same grads"
        got = {n: leaves[n].grad for n in wanted}
    return compare_grads(case, mech, form, leaves, where, seen, got, do, dht, kw)


def compare_grads(case, mech, form, leaves, where, seen, got, do, dht, kw):
    normalize = kw.get("normalize", False)
    opts = {n: kw[n] for n in ("normalize", "use_qk_l2norm_in_kernel") if n in kw}
    ref = C.backward(mech, form, dict(seen, do=do.numpy(), dht=dht.numpy()), **opts)
    fields = {"q": ref.dq, "k": ref.dk, "v": ref.dv, "g": ref.dg, "beta": ref.dbeta,
              "h0": ref.dh0}
    scale = 2 if case["path"] == "retain" else 1
    for n, gr in got.items():
        want = torch.zeros_like(leaves[n])
        want[where[n]] = torch.from_numpy(fields[n]).to(want.dtype) * scale
        if gr is None:
            return "fail", "no d%s" % n
        if normalize:
            # the normaliser's backward is torch's autograd here, NumPy's own in
            # kdalab.ops: the same derivative, other roundings (1e-12 of the
            # scale), then one rounding to the input's dtype
            err = (gr.detach().double() - want.double()).abs().max().item() if want.numel() else 0
            tol = max(1e-12, torch.finfo(want.dtype).eps) * \
                max(1.0, want.double().abs().max().item() if want.numel() else 1.0)
            ok = err <= tol
        else:  # the same float64 core: bit for bit
            ok = torch.equal(gr.detach(), want)
        if not ok:
            return "fail", "d%s differs from the NumPy backward's (cast to %s)" % (n, want.dtype)
    return "ok", "%s matches" % case["path"]


if __name__ == "__main__":
    for line in sys.stdin:
        case = json.loads(line)
        print("start %d" % case["id"], flush=True)
        try:
            status, msg = run(case)
        except Exception as e:  # any other exception is a failure of the property
            status, msg = "fail", "%s: %s" % (type(e).__name__, traceback.format_exc()[-800:])
        print(json.dumps({"id": case["id"], "status": status, "msg": msg}), flush=True)
    assert kdalab  # imported for the library it loads
