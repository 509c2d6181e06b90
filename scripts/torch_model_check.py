#!/usr/bin/env python3
"""scripts/torch_model_check.py — the golden files of tests/golden_torch/.

An independent PyTorch float64 implementation of kdalab's training model
(lib/kdalab_train.h: kdalab_model_config, the layout of kdalab_model_size,
kdalab_mixer_fwd_f64, kdalab_model_loss_f64), written plainly from the
equations (REFERENCE.md's recurrent form, one time step at a time; nothing
of lib/ is called). For a few tiny models it draws every weight tensor of
the layout and a batch of tokens and targets from a fixed numpy seed,
computes the masked mean cross-entropy and accuracy, and the gradient of
the loss with respect to every tensor by autograd, and writes them as .npy
files that tests/test_train_torch.c compares with kdalab_model_loss_f64.

Run from the repository root, with the Debian interpreter that has
python3-torch and python3-numpy:

    /usr/bin/python3 scripts/torch_model_check.py [--out tests/golden_torch]

It rewrites the case directories, MANIFEST.tsv and README.md under --out.
It is only needed to regenerate the golden files: the C test suite reads
the committed files and needs no torch. Before writing, it checks its own
autograd gradient against central differences of its loss along random
directions (printed).

The model, row vectors (y = x W) throughout, N = B T rows, d = D / H:
    x = embed[tokens]
    per block:  x = x + mixer(rmsnorm(x, norm1))
                x = x + (silu(h W1) * (h W3)) W2,   h = rmsnorm(x, norm2)
    logits = rmsnorm(x, norm_f) lm_head;  RMSNorm eps 1e-6
    loss = mean over targets != -1 of logsumexp(logits) - logits[target]
and the mixer of input x [B, T, D]:
    q, k, v = silu(conv(x Wq)), ... (conv: causal depthwise, width 4,
              y[t] = sum_i w[i] a[t - i]; no conv: silu(x Wq))
    attention: o = causal softmax(d^-1/2 q k^T) v per head (no positions)
    linear mixers: q, k <- q / sqrt(|q|^2 + 1e-6) per (t, head);
              beta = sigmoid(x Wb); Gated DeltaNet g = -exp(A_log[h])
              softplus(x Wa + dt_bias); KDA g = -exp(A_log[h])
              softplus((x Wg) Wg2 + dt_bias) per channel; the recurrence
              S = decay(S); S += k (beta (v - S^T k))^T (linear attention:
              S += k v^T); o_t = d^-1/2 S^T q_t; then
              o <- rmsnorm(o, onorm, 1e-5) * sigmoid(x Wog) per (t, head)
    y = o Wo
"""
import argparse
import datetime
import os
import shutil
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)

VOCAB, D, H, F = 11, 8, 2, 12  # the model: vocabulary, width, heads, MLP width
B, T = 3, 6                    # the batch
CONV_W = 4
NORM_EPS, ONORM_EPS, L2_EPS = 1e-6, 1e-5, 1e-6
LINEAR = ("linear_attention", "deltanet", "gated_deltanet", "kda")
WITH_BETA = ("deltanet", "gated_deltanet", "kda")

# Each case: a name (its directory), the blocks' mixers, conv, the numpy seed.
# Together they cover each of the five mixers with conv on and with it off. The seeds are ones
# whose untrained model gets some counted targets right, so the accuracy
# compared is not 0.
CASES = [
    ("hybrid_conv", ["kda", "gated_deltanet", "attention"], 1, 5),
    ("deltanet_linear_noconv", ["deltanet", "linear_attention"], 0, 4),
    ("kda_gdn_attention_noconv", ["gated_deltanet", "kda", "attention"], 0, 7),
    ("linear_deltanet_conv", ["linear_attention", "deltanet"], 1, 2),
]


# ---- the layout --------------------------------------------------------------

def mixer_tensors(kind, conv):
    """The mixer's tensors in kdalab_mixer_params' order: (leaf, shape, init)."""
    d = D // H
    out = [(w, (D, D), "matrix") for w in ("Wq", "Wk", "Wv", "Wo")]
    if conv:
        out += [(c, (CONV_W, D), "conv") for c in ("cq", "ck", "cv")]
    if kind in WITH_BETA:
        out.append(("Wb", (D, H), "matrix"))
    if kind == "gated_deltanet":
        out.append(("Wa", (D, H), "matrix"))
    if kind == "kda":
        out += [("Wg", (D, d), "matrix"), ("Wg2", (d, D), "matrix")]
    if kind in ("gated_deltanet", "kda"):
        out.append(("A_log", (H,), "A_log"))
        out.append(("dt_bias", (H,) if kind == "gated_deltanet" else (D,), "dt_bias"))
    if kind in LINEAR:
        out += [("Wog", (D, D), "matrix"), ("onorm", (d,), "norm")]
    return out


def layout(mixers, conv):
    """Every tensor of the model in kdalab_model_size's order: (name, shape, init).
    Vectors have shape (n,), matrices (rows, cols)."""
    out = [("embed", (VOCAB, D), "matrix")]
    for l, kind in enumerate(mixers):
        out.append((f"blocks.{l}.norm1", (D,), "norm"))
        out += [(f"blocks.{l}.mixer.{leaf}", shape, init)
                for leaf, shape, init in mixer_tensors(kind, conv)]
        out += [(f"blocks.{l}.norm2", (D,), "norm"), (f"blocks.{l}.mlp.W1", (D, F), "matrix"),
                (f"blocks.{l}.mlp.W3", (D, F), "matrix"), (f"blocks.{l}.mlp.W2", (F, D), "matrix")]
    out += [("norm_f", (D,), "norm"), ("lm_head", (D, VOCAB), "matrix")]
    return out


def draw_weights(rng, lay):
    """Every tensor drawn as tests/test_train_model.c's problem_make scales them:
    matrices U(-0.2, 0.2), convolutions U(-0.5, 0.5), A_log = log U(1, 16),
    dt_bias = softplus^-1(dt) with dt = exp(U(ln 1e-3, ln 1e-1)); gains
    (norm1, norm2, norm_f, onorm) 1 + U(-0.2, 0.2) rather than exactly 1, so a
    gain applied to the wrong channel changes the loss."""
    w = {}
    for name, shape, init in lay:
        if init == "matrix":
            a = rng.uniform(-0.2, 0.2, shape)
        elif init == "conv":
            a = rng.uniform(-0.5, 0.5, shape)
        elif init == "norm":
            a = 1 + rng.uniform(-0.2, 0.2, shape)
        elif init == "A_log":
            a = np.log(rng.uniform(1, 16, shape))
        else:  # dt_bias
            dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), shape))
            a = dt + np.log(-np.expm1(-dt))
        w[name] = np.ascontiguousarray(a, dtype=np.float64)
    return w


# ---- the model ------------------------------------------------------------------

def rmsnorm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def l2norm(x):
    """x / sqrt(|x|^2 + 1e-6) over the last axis (fla's l2norm)."""
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def silu(x):
    return x * torch.sigmoid(x)


def softplus(z):
    """log(1 + exp(z)), exact for every z (no switch to the identity)."""
    return torch.logaddexp(z, torch.zeros_like(z))


def short_conv(a, w):
    """Causal depthwise convolution: y[b][t][c] = sum_i w[i][c] a[b][t-i][c],
    a zero before t = 0. a [B, T, C], w [CONV_W, C]."""
    ap = torch.nn.functional.pad(a, (0, 0, CONV_W - 1, 0))  # CONV_W - 1 zero rows in front
    return sum(w[i] * ap[:, CONV_W - 1 - i:CONV_W - 1 - i + a.shape[1]] for i in range(CONV_W))


def attention(q, k, v, scale):
    """Causal softmax attention per head, no positions. q, k, v [B, T, H, d]."""
    s = scale * torch.einsum("bthc,bshc->bhts", q, k)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    p = torch.softmax(s.masked_fill(future, float("-inf")), dim=-1)
    return torch.einsum("bhts,bshc->bthc", p, v)


def recurrence(kind, q, k, v, beta, g, scale):
    """REFERENCE.md's recurrent form, one step at a time, every (b, h) at once:
    S' = decay(S); S = S' + k u^T with u = beta (v - S'^T k) (u = v for linear
    attention); o_t = scale S^T q. q, k, v [B, T, H, d]; beta [B, T, H];
    g [B, T, H] (Gated DeltaNet) or [B, T, H, d] (KDA) log-decays."""
    d = q.shape[-1]
    S = torch.zeros(B, H, d, d)  # [b, h, key channel, value channel]
    out = []
    for t in range(T):
        if kind == "gated_deltanet":
            S = S * torch.exp(g[:, t])[:, :, None, None]
        elif kind == "kda":
            S = S * torch.exp(g[:, t])[:, :, :, None]  # row c decays by a[c]
        if kind == "linear_attention":
            u = v[:, t]
        else:
            pred = torch.einsum("bhcj,bhc->bhj", S, k[:, t])
            u = beta[:, t][:, :, None] * (v[:, t] - pred)
        S = S + k[:, t][:, :, :, None] * u[:, :, None, :]
        out.append(scale * torch.einsum("bhcj,bhc->bhj", S, q[:, t]))
    return torch.stack(out, dim=1)


def mixer(kind, conv, p, x):
    """One mixer sub-layer (kdalab_mixer_fwd_f64): x [B, T, D] -> [B, T, D].
    p maps the mixer's tensor leaf names to tensors."""
    d = D // H
    qkv = []
    for W, c in (("Wq", "cq"), ("Wk", "ck"), ("Wv", "cv")):
        a = x @ p[W]
        qkv.append(silu(short_conv(a, p[c]) if conv else a).reshape(B, T, H, d))
    q, k, v = qkv
    scale = d ** -0.5
    if kind == "attention":
        return attention(q, k, v, scale).reshape(B, T, D) @ p["Wo"]
    q, k = l2norm(q), l2norm(k)
    beta = torch.sigmoid(x @ p["Wb"]) if kind in WITH_BETA else None  # [B, T, H]
    g = None
    if kind == "gated_deltanet":
        g = -torch.exp(p["A_log"]) * softplus(x @ p["Wa"] + p["dt_bias"])  # [B, T, H]
    elif kind == "kda":
        z = ((x @ p["Wg"]) @ p["Wg2"]).reshape(B, T, H, d)
        g = -torch.exp(p["A_log"])[:, None] * softplus(z + p["dt_bias"].reshape(H, d))
    o = recurrence(kind, q, k, v, beta, g, scale)
    o = rmsnorm(o, p["onorm"], ONORM_EPS) * torch.sigmoid(x @ p["Wog"]).reshape(B, T, H, d)
    return o.reshape(B, T, D) @ p["Wo"]


def model_loss(mixers, conv, w, tokens, targets):
    """The masked mean cross-entropy and the accuracy (argmax, first on ties) of
    the model with weights w (name -> tensor) on tokens, targets [B, T]."""
    x = w["embed"][tokens]
    for l, kind in enumerate(mixers):
        pre = f"blocks.{l}."
        p = {name[len(pre) + 6:]: t for name, t in w.items() if name.startswith(pre + "mixer.")}
        x = x + mixer(kind, conv, p, rmsnorm(x, w[pre + "norm1"], NORM_EPS))
        h = rmsnorm(x, w[pre + "norm2"], NORM_EPS)
        x = x + (silu(h @ w[pre + "mlp.W1"]) * (h @ w[pre + "mlp.W3"])) @ w[pre + "mlp.W2"]
    logits = (rmsnorm(x, w["norm_f"], NORM_EPS) @ w["lm_head"]).reshape(B * T, VOCAB)
    tgt = targets.reshape(-1)
    counted = tgt != -1
    picked = logits[counted].gather(1, tgt[counted][:, None])[:, 0]
    loss = (torch.logsumexp(logits[counted], dim=1) - picked).mean()
    pred = np.argmax(logits.detach().numpy(), axis=1)  # numpy: the first on ties
    acc = float(np.mean(pred[counted.numpy()] == tgt[counted].numpy()))
    return loss, acc


# ---- one case --------------------------------------------------------------------

def fd_directions(mixers, conv, w, tokens, targets, grads, rng, n=3, h=1e-5):
    """The worst relative disagreement of autograd with central differences of
    the loss along n random unit directions (every tensor at once), step h."""
    worst = 0.0
    for _ in range(n):
        u = {k: torch.from_numpy(rng.standard_normal(t.shape)) for k, t in w.items()}
        norm = float(sum((t * t).sum() for t in u.values())) ** 0.5
        u = {k: t / norm for k, t in u.items()}  # a unit step in the whole parameter space
        with torch.no_grad():
            lp = model_loss(mixers, conv, {k: w[k] + h * u[k] for k in w}, tokens, targets)[0]
            lm = model_loss(mixers, conv, {k: w[k] - h * u[k] for k in w}, tokens, targets)[0]
        fd = float((lp - lm) / (2 * h))
        an = float(sum((grads[k] * u[k]).sum() for k in w))
        worst = max(worst, abs(fd - an) / abs(an))
    return worst


def run_case(name, mixers, conv, seed, out):
    """Draw, compute and write one case; returns its MANIFEST line's fields."""
    rng = np.random.default_rng(seed)
    lay = layout(mixers, conv)
    wn = draw_weights(rng, lay)
    tokens = rng.integers(0, VOCAB, size=(B, T)).astype(np.int32)
    targets = np.where(rng.random((B, T)) < 0.5, -1,
                       rng.integers(0, VOCAB, size=(B, T))).astype(np.int32)
    targets[0, 0] = 3  # at least one counted
    w = {k: torch.tensor(a, requires_grad=True) for k, a in wn.items()}
    tok, tgt = torch.from_numpy(tokens.astype(np.int64)), torch.from_numpy(targets.astype(np.int64))
    loss, acc = model_loss(mixers, conv, w, tok, tgt)
    names = [n for n, _, _ in lay]
    grads = dict(zip(names, torch.autograd.grad(loss, [w[n] for n in names])))
    wd = {k: t.detach() for k, t in w.items()}
    gd = {k: t.detach() for k, t in grads.items()}
    fd = fd_directions(mixers, conv, wd, tok, tgt, gd, np.random.default_rng(seed + 1000))
    for n in names:
        if not float(gd[n].abs().max()) > 0:
            sys.exit(f"{name}: the gradient of {n} is zero: the case would not test it")
    if not fd < 1e-7:
        sys.exit(f"{name}: autograd disagrees with central differences ({fd:.2g})")

    d = os.path.join(out, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for n in names:
        np.save(os.path.join(d, n + ".npy"), wn[n])
        np.save(os.path.join(d, "grad." + n + ".npy"), gd[n].numpy())
    np.save(os.path.join(d, "tokens.npy"), tokens)
    np.save(os.path.join(d, "targets.npy"), targets)
    np.save(os.path.join(d, "loss.npy"), np.array([float(loss), acc]))
    n_params = sum(int(np.prod(s)) for _, s, _ in lay)
    with open(os.path.join(d, "config.txt"), "w") as f:
        f.write(f"vocab={VOCAB}\nD={D}\nH={H}\nL={len(mixers)}\nF={F}\nconv={conv}\n"
                f"mixer={','.join(mixers)}\nB={B}\nT={T}\ntensors={len(lay)}\n"
                f"params={n_params}\nseed={seed}\n")
    counted = int((targets != -1).sum())
    print(f"{name}: {','.join(mixers)}, conv {conv}: loss {float(loss):.15g}, accuracy "
          f"{acc:.4g} ({counted} counted), {len(lay)} tensors, {n_params} parameters; "
          f"autograd vs central differences along 3 directions: {fd:.1g}")
    return [name, ",".join(mixers), str(conv), str(len(lay)), str(n_params),
            repr(float(loss)), repr(acc)]


README = """# Golden model gradients from PyTorch

The loss and gradient of kdalab's training model (lib/kdalab_train.h,
kdalab_model_loss_f64) as an independent PyTorch float64 implementation
computes them: `scripts/torch_model_check.py`, written from the equations
(REFERENCE.md's recurrent form one step at a time, the layers as
kdalab_train.h describes them) with autograd for the gradient and no code
of lib/. `tests/test_train_torch.c` compares kdalab_model_loss_f64 with
these files, so the C test suite needs no torch.

- generated by: `{command}` (from the repository root)
- torch {torch}, numpy {numpy}, Python {python}
- date: {date}

Each case is a tiny model (vocab {vocab}, D = {D}, H = {H}, F = {F}) on a
batch of B = {B} sequences of T = {T} tokens, every weight drawn by numpy
(`default_rng(seed)`): matrices U(-0.2, 0.2), gains (norm1, norm2, norm_f,
onorm) 1 + U(-0.2, 0.2), convolutions U(-0.5, 0.5), A_log = log U(1, 16),
dt_bias = softplus^-1(exp(U(ln 1e-3, ln 1e-1))); about half the targets
-1 (not counted). The script checks its own autograd against central
differences along random directions before writing.

Files:
- `MANIFEST.tsv`: one case a line: name, mixers (kdalab names, one per
  block), conv, number of tensors, number of parameters, loss, accuracy.
- `CASE/config.txt`: key=value lines: vocab, D, H, L, F, conv, mixer (one
  name a block, comma-separated: attention, linear_attention, deltanet,
  gated_deltanet, kda), B, T, tensors, params, seed.
- `CASE/tokens.npy`, `CASE/targets.npy`: int32 `[B, T]`; targets -1 where
  not counted.
- `CASE/TENSOR.npy`: each parameter tensor of the layout (kdalab_model_size's
  names, e.g. `embed`, `blocks.0.mixer.Wq`, `lm_head`), float64, C order;
  vectors `[n]`, matrices `[rows, cols]`, as `kdalab train --out` saves them.
- `CASE/grad.TENSOR.npy`: d loss / d TENSOR, same shape.
- `CASE/loss.npy`: float64 `[2]`: the loss (mean cross-entropy over the
  counted positions) and the accuracy (argmax, first on ties).

Regenerate with the command above; the C test reads them relative to the
repository root, or from `$KDALAB_GOLDEN_TORCH`.
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/golden_torch",
                    help="where to write (default %(default)s)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = [run_case(name, mixers, conv, seed, args.out) for name, mixers, conv, seed in CASES]
    with open(os.path.join(args.out, "MANIFEST.tsv"), "w") as f:
        f.write("# name\tmixers\tconv\tn_tensors\tn_params\tloss\taccuracy\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    command = "/usr/bin/python3 scripts/torch_model_check.py"
    if args.out != "tests/golden_torch":
        command += f" --out {args.out}"
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(README.format(command=command, torch=torch.__version__, numpy=np.__version__,
                              python=sys.version.split()[0], date=datetime.date.today().isoformat(),
                              vocab=VOCAB, D=D, H=H, F=F, B=B, T=T))
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(args.out) for f in fs)
    print(f"wrote {len(rows)} cases to {args.out} ({total / 1024:.0f} KB)")


if __name__ == "__main__":
    main()
