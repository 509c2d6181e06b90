#!/usr/bin/env python3
"""scripts/torch_train_bench.py — the PyTorch peer of bin/bench_train.

Trains kdalab's model in PyTorch eager mode, float64 or float32
(--dtype), and prints its
throughput as one line `tokens_per_s best=<b> median=<m>` (whole steps:
forward, backward, torch.optim.AdamW). The model is scripts/torch_model_check.py's
(the independent implementation the C gradients are checked against, its
sizes set here); its linear mixers run the recurrent form one token at a
time, as fla's naive reference does, and attention runs as batched matrix
products. bin/bench_train calls it with the same sizes and thread count;
run by hand:

    /usr/bin/python3 scripts/torch_train_bench.py --mixer kda --d-model 64 --heads 2 \\
        --seq-len 64 --batch 32 --pairs 8 --steps 10 --repeat 3 --threads 2 --dtype float32
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model_check as model  # noqa: E402  (the model, configured below)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mixer", default="kda")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                    help="the precision of weights and activations (compare like with like)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    torch.set_default_dtype(dtype)  # what the model's own tensors (masks, states) are made in
    # the model module's sizes are module constants: set them for this run
    model.VOCAB, model.D, model.H, model.F = 65, a.d_model, a.heads, 2 * a.d_model
    model.B, model.T = a.batch, a.seq_len
    mixers = [a.mixer, a.mixer]
    rng = np.random.default_rng(1)
    w = {name: torch.tensor(rng.normal(0, 0.02, shape) if init == "matrix" else
                            model.draw_weights(rng, [(name, shape, init)])[name],
                            dtype=dtype, requires_grad=True)
         for name, shape, init in model.layout(mixers, 1)}
    opt = torch.optim.AdamW(w.values(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.1)
    # an MQAR-shaped batch: P pairs, then queries; the content does not change the time
    tokens = rng.integers(1, 65, size=(a.batch, a.seq_len))
    targets = np.full((a.batch, a.seq_len), -1)
    targets[:, 2 * a.pairs:3 * a.pairs] = rng.integers(33, 65, size=(a.batch, a.pairs))
    tokens, targets = torch.tensor(tokens), torch.tensor(targets)

    def step():
        loss, _ = model.model_loss(mixers, 1, w, tokens, targets)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(w.values(), 1.0)
        opt.step()
        return float(loss)

    first = step()  # warm-up; an untrained model's loss is near ln 65 = 4.17
    if not 0.5 * 4.17 < first < 2 * 4.17:
        sys.exit(f"torch_train_bench: first loss {first} is not near ln 65")
    rates = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        rates.append(a.steps * a.batch * a.seq_len / (time.perf_counter() - t0))
    rates.sort()
    print(f"tokens_per_s best={rates[-1]:.1f} median={rates[len(rates) // 2]:.1f}")


if __name__ == "__main__":
    main()
