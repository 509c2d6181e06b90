"""The chapter's boundary in a few lines of NumPy: the general
diagonal-plus-low-rank (DPLR) transition, fla's generalized delta rule,

    S_t = (Diag(exp gk_t) + b_t a_t^T) S_{t-1} + k_t v_t^T,   o_t = s S_t^T q_t,

run token by token and in the chunkwise form of REFERENCE.md ("The
boundary: the general diagonal-plus-low-rank transition"): four C x C
products of rescaled rows and one unit lower-triangular solve per chunk.
Then KDA as an instance (a = -exp(g) * k, b = beta k, the write beta k v^T),
and what the transition does when it is not a contraction.

Plain NumPy (no kdalab needed); float64. Run:
    python3 python/examples/dplr_chunkwise.py
"""

import numpy as np


def recurrent(q, k, v, a, b, gk, S0, s):
    """The recurrence: o [T, V], the final state [K, V]."""
    S, out = S0.copy(), []
    for t in range(len(q)):
        S = np.exp(gk[t])[:, None] * S + np.outer(b[t], a[t] @ S) + np.outer(k[t], v[t])
        out.append(s * S.T @ q[t])
    return np.array(out), S


def chunkwise(q, k, v, a, b, gk, S0, s, C):
    """REFERENCE.md's steps 1-5, the rescaled way (exp(+-Gamma) relative to
    the chunk start: fine here, where |sum gk| over a chunk is small; the safe
    sub-chunk mode forms the same entries with exponents <= 0)."""
    S, out = S0.copy(), []
    for t0 in range(0, len(q), C):
        c = slice(t0, min(t0 + C, len(q)))
        n = c.stop - c.start
        G = np.cumsum(gk[c], 0)                               # Gamma_r, inclusive
        Gp = np.vstack([np.zeros(G.shape[1]), G[:-1]])        # Gamma_{r-1}
        ah, qh = a[c] * np.exp(Gp), q[c] * np.exp(G)          # 1. a^, q^
        bt, kt = b[c] * np.exp(-G), k[c] * np.exp(-G)         #    b~, k~
        Aab, Aak = np.tril(ah @ bt.T, -1), np.tril(ah @ kt.T, -1)   # 2. j < i
        Aqb, Aqk = np.tril(qh @ bt.T), np.tril(qh @ kt.T)           #    j <= i
        U = np.linalg.solve(np.eye(n) - Aab, ah @ S + Aak @ v[c])   # 3. one solve
        out.append(s * (qh @ S + Aqb @ U + Aqk @ v[c]))             # 4.
        to_end = np.exp(G[-1] - G)
        S = np.exp(G[-1])[:, None] * S + (to_end * b[c]).T @ U + (to_end * k[c]).T @ v[c]  # 5.
    return np.vstack(out), S


def main():
    r = np.random.default_rng(0)
    T, K, V, C, s = 50, 8, 6, 16, 8 ** -0.5
    q, v = r.normal(size=(T, K)), r.normal(size=(T, V))
    k = r.normal(size=(T, K)) * 0.5
    a, b = r.normal(size=(T, K)) * 0.3, r.normal(size=(T, K)) * 0.3
    gk = -np.abs(r.normal(size=(T, K))) * 0.3
    S0 = r.normal(size=(K, V))
    o, S = recurrent(q, k, v, a, b, gk, S0, s)
    oc, Sc = chunkwise(q, k, v, a, b, gk, S0, s, C)
    print("chunkwise vs recurrent, C = %d: o %.1e, final state %.1e (relative to the max)"
          % (C, abs(oc - o).max() / abs(o).max(), abs(Sc - S).max() / abs(S).max()))

    # KDA as an instance: decay first, then the delta rule on the decayed state
    beta = r.uniform(0, 1, T)
    kn = k / np.linalg.norm(k, axis=1, keepdims=True)
    S = S0.copy()
    for t in range(T):
        Sd = np.exp(gk[t])[:, None] * S
        S = Sd + beta[t] * np.outer(kn[t], v[t] - Sd.T @ kn[t])
    _, Sd = recurrent(q, beta[:, None] * kn, v, -np.exp(gk) * kn, beta[:, None] * kn, gk, S0, s)
    print("KDA written as DPLR (a = -exp(g) k, b = beta k, write beta k v^T): state %.1e"
          % (abs(Sd - S).max() / abs(S).max()))

    # not a contraction: with gk = 0 the transition I + b a^T has the
    # eigenvalue 1 + a.b; a.b > 0 makes the state grow geometrically
    a1 = np.tile(r.normal(size=K) * 0.5, (T, 1))
    b1 = a1.copy()  # a.b = |a|^2 > 0
    _, S = recurrent(q, k * 0, v * 0, a1, b1, gk * 0, S0, s)
    print("a = b (a.b = %.2f): |S_T| / |S_0| = %.3g after %d steps (eigenvalue %.2f per step)"
          % (a1[0] @ b1[0], np.abs(S).max() / np.abs(S0).max(), T, 1 + a1[0] @ b1[0]))
    # RWKV-7's parametrisation: a = -kappa, b = kappa * alpha, alpha in [0, 1], |kappa| = 1
    kap = r.normal(size=(T, K))
    kap /= np.linalg.norm(kap, axis=1, keepdims=True)
    alpha = r.uniform(0, 1, (T, K))
    _, S = recurrent(q, k * 0, v * 0, -kap, kap * alpha, gk * 0, S0, s)
    print("RWKV-7's a = -kappa, b = kappa * alpha: |S_T| / |S_0| = %.3g (1 + a.b in [0, 1])"
          % (np.abs(S).max() / np.abs(S0).max()))


if __name__ == "__main__":
    main()
