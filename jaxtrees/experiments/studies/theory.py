"""The seeds' bounds, each a NumPy function of its paper's formula, for the studies' overlays and "Theory" sections.

Conventions are the project's (README, "Conventions"): impurities have G(1/2) = 1 (Gini G(q) = 4 q (1 - q), an
(alpha, L)-impurity of 002 Def. 5 with alpha = L = 8); AdaBoost's edge is 004's gamma_t = 1 - 2 eps_t (the
``*_gamma`` column), 001's is gamma'_t = 1/2 - eps_t = gamma_t / 2. Every function takes arrays and broadcasts.
Where a seed's printed formula disagrees with its own derivation, the function follows the derivation and a
``*_as_printed`` twin gives the printed one (docs/studies.md, "Theory": which, and why).

How a bound is set against the measurements, each line of a report's "Theory" section with its kind (a ``[test]``,
``[form]``, ``[vacuous]``, ``[identity]`` or ``[outside]`` line): :mod:`~jaxtrees.experiments.studies.verdicts`.

>>> float(adaboost_rounds(m=100, gamma=0.2))   # ceil(2 ln 100 / 0.04) = ceil(230.26)
231.0
>>> round(float(lemma14_memory_floor(k=6, kappa=4 / 3)), 10)   # 2^-12 / (16 / 3)
4.57764e-05
"""

from __future__ import annotations

import math

import numpy as np

# ----------------------------------------------------------------------------- AdaBoost (001, 004)


def edge_to_error(gamma):
    """eps_t = (1 - gamma_t) / 2: the weighted error of a round's hypothesis from 004's edge gamma_t = 1 - 2 eps_t."""
    return (1 - np.asarray(gamma, np.float64)) / 2


def adaboost_product_bound(gamma, axis: int = -1):
    """001's AdaBoost theorem: training error after t rounds <= prod_{s <= t} 2 sqrt(eps_s (1 - eps_s)), along
    ``axis`` (the rounds); with eps = (1 - gamma) / 2 each factor is sqrt(1 - gamma^2)."""
    eps = edge_to_error(gamma)
    return np.cumprod(2 * np.sqrt(np.clip(eps * (1 - eps), 0, None)), axis=axis)


def adaboost_exp_bound(gamma, axis: int = -1):
    """001's AdaBoost theorem, its second step, in 004's edge: prod_t 2 sqrt(eps_t (1 - eps_t)) = prod_t sqrt(1 -
    gamma_t^2) <= exp(-sum_{s <= t} gamma_s^2 / 2) (001 writes exp(-2 sum gamma'^2) with gamma' = gamma / 2)."""
    gamma = np.asarray(gamma, np.float64)
    return np.exp(-np.cumsum(gamma**2, axis=axis) / 2)



def adaboost_rounds(m, gamma):
    """Rounds after which 001's bound exp(-T gamma^2 / 2) is < 1/m, so the training error 0, when every edge is >=
    gamma: T = ceil(2 ln m / gamma^2) in 004's edge gamma = 1 - 2 eps (001's ceil(ln m / (2 gamma'^2)) in its own
    gamma' = gamma / 2; inf for gamma = 0)."""
    m, gamma = np.asarray(m, np.float64), np.asarray(gamma, np.float64)
    with np.errstate(divide="ignore"):
        return np.ceil(2 * np.log(m) / gamma**2)


def adaboost_rounds_as_printed(m, gamma):
    """004's T = ceil(ln m / (2 gamma^2)) as printed before its Eq. 1: the rounds at which 004 states its
    generalization bound err(H) <= O~(ln|H| / (m gamma^2) + ln(1/delta)) (not training error < 1/m); in 004's edge a
    quarter of :func:`adaboost_rounds` (rounded up)."""
    m, gamma = np.asarray(m, np.float64), np.asarray(gamma, np.float64)
    with np.errstate(divide="ignore"):
        return np.ceil(np.log(m) / (2 * gamma**2))


# ----------------------------------------------------------------------------- addressing (002)

#: 002 Def. 5 for Gini G(q) = 4 q (1 - q) (G'' = -8): alpha = L = 8.
GINI_ALPHA = GINI_L = 8.0


def lemma8_kappa(delta, alpha: float = GINI_ALPHA, L: float = GINI_L):
    """002 Lemma 8: kappa = max(2 / (alpha delta (1 - delta)), L / 8) for a delta-balanced product distribution and
    an (alpha, L)-impurity; gain / (mu_0 - mu_1)^2 lies in [1 / kappa, kappa]."""
    delta = np.asarray(delta, np.float64)
    return np.maximum(2 / (alpha * delta * (1 - delta)), L / 8)


def lemma14_c0(delta):
    """002 Lemma 14: c_0 = ln 5 / delta."""
    return math.log(5) / np.asarray(delta, np.float64)


def lemma14_k0(kappa):
    """002 Lemma 14: k_0 = ln(2 kappa) / ln(5/4) + 1."""
    return np.log(2 * np.asarray(kappa, np.float64)) / math.log(5 / 4) + 1


def lemma14_memory_floor(k, kappa):
    """002 Lemma 14's proof: every memory bit outside the restriction has gain >= 2^(-2k) / (4 kappa)."""
    return 2.0 ** (-2 * np.asarray(k, np.float64)) / (4 * np.asarray(kappa, np.float64))


def lemma14_address_ceiling(k, kappa):
    """002 Lemma 14's proof: every addressing bit has gain <= kappa (2/5)^(2k)."""
    return np.asarray(kappa, np.float64) * 0.4 ** (2 * np.asarray(k, np.float64))


def lemma16_distance(k, delta):
    """002 Lemmas 16-17: the code distance f_{c,k,S} needs, (ln 5 / delta) k."""
    return math.log(5) / np.asarray(delta, np.float64) * np.asarray(k, np.float64)


def lemma16_holds(distance, k, delta):
    """Whether a code of this distance meets Lemmas 16-17's condition distance >= (ln 5 / delta) k."""
    return np.asarray(distance, np.float64) >= lemma16_distance(k, delta)


def theorem10_floor(delta):
    """002 Theorem 10 (its proof, Sec. 4): a greedy tree of depth <= 2^k that never queries an addressing bit errs
    with probability >= delta / 6."""
    return np.asarray(delta, np.float64) / 6


def theorem10_floor_valid(k, delta):
    """Where the proof's Hoeffding step gives probability >= 2/3: 1 - exp(-2^k delta^2 / 8) >= 2/3."""
    k, delta = np.asarray(k, np.float64), np.asarray(delta, np.float64)
    return 1 - np.exp(-(2.0**k) * delta**2 / 8) >= 2 / 3


#: 002 Theorem 11's proof (Sec. 6): a leaf that queried no addressing bit has mu in [1/8, 7/8], so error >= 1/8.
THEOREM11_FLOOR = 1 / 8



# ----------------------------------------------------------------------------- juntas and parities (000)


def parity_covariance(p, support):
    """The exact degree-1 signal of the parity chi_J (label y = XOR of x_J) under the product distribution p:
    |I(D, j)| = p_j (1 - p_j) prod_{i in J \\ j} |2 p_i - 1| for j in J, 0 off J (000 Lemma 9's proof).
    ``p``: [..., n], ``support``: bool [..., n]."""
    p, support = np.asarray(p, np.float64), np.asarray(support, bool)
    factor = np.where(support, np.abs(2 * p - 1), 1.0)
    ones = np.ones_like(factor[..., :1])
    before = np.cumprod(np.concatenate([ones, factor[..., :-1]], axis=-1), axis=-1)  # prod_{i < j}
    after = np.flip(np.cumprod(np.concatenate([ones, np.flip(factor, -1)[..., :-1]], axis=-1), axis=-1), -1)
    return np.where(support, p * (1 - p) * before * after, 0.0)


def lemma9_floor(alpha, c, k):
    """000 Lemma 9: a k-parity with every p_j in (alpha, 1 - alpha) and |p_j - 1/2| >= c has |I(D_w, j)| >
    alpha^2 (2c)^(k-1) for every j of the support not fixed by w."""
    return np.asarray(alpha, np.float64) ** 2 * (2 * np.asarray(c, np.float64)) ** (np.asarray(k, np.float64) - 1)



def lemma11_probability(t, alpha, c, k, capped: bool = True):
    """000 Lemma 11 (|I(D_w, i)| > 2 alpha^2 delta^2 (c/2)^(2k) with probability >= 1 - delta) inverted: P[max_i
    |I(D_w, i)| <= t] <= (2/c)^k sqrt(t / (2 alpha^2)), capped at 1 unless ``capped=False``."""
    t, alpha, c, k = (np.asarray(v, np.float64) for v in (t, alpha, c, k))
    bound = (2 / c) ** k * np.sqrt(np.maximum(t, 0) / (2 * alpha**2))
    return np.minimum(1.0, bound) if capped else bound


#: 000 assumes (Sec. 1.2) a beta-strongly concave, gamma-Lipschitz impurity: of the built-ins only Gini G(q) = 4 q
#: (1 - q) is both (beta = -G'' = 8, gamma = max |G'| = 4, so beta^-2 gamma^2 = 1/4); entropy's and Kearns-Mansour's
#: slopes are unbounded at q = 0 and 1, so they are not Lipschitz and Theorems 7, 10 and 12 say nothing about them.
LIPSCHITZ_IMPURITIES = {"gini": (8.0, 4.0)}


def lipschitz(impurity: str) -> bool:
    """Whether 000's Theorems 7, 10 and 12 apply to ``impurity`` (strongly concave and Lipschitz: Gini)."""
    return impurity in LIPSCHITZ_IMPURITIES


def theorem7_examples(eps, alpha, k, n, delta, beta: float = 1.0, lipschitz: float = 1.0):
    """000 Theorem 7's sample size up to its constant: beta^-2 gamma^2 eps^-4 alpha^-2k k ln(n / delta)
    (gamma: the impurity's Lipschitz constant, ``lipschitz``)."""
    eps, alpha, k, n, delta = (np.asarray(v, np.float64) for v in (eps, alpha, k, n, delta))
    return lipschitz**2 / beta**2 * eps**-4 * alpha ** (-2 * k) * k * np.log(n / delta)


def theorem10_examples(alpha, c, k, n, delta, beta: float = 1.0, lipschitz: float = 1.0):
    """000 Theorem 10 as derived (Theorem 7 with Lemma 9's eps = alpha^2 (2c)^(k-1)): beta^-2 gamma^2 (2c)^(-4k+4)
    alpha^(-2k-8) k ln(n / delta), up to its constant."""
    return theorem7_examples(lemma9_floor(alpha, c, k), alpha, k, n, delta, beta, lipschitz)


def theorem10_examples_as_printed(alpha, c, k, n, delta, beta: float = 1.0, lipschitz: float = 1.0):
    """000 Theorem 10 as printed: (2c)^(-4k-4) where the derivation gives (2c)^(-4k+4), (2c)^-8 times more."""
    alpha, c, k, n, delta = (np.asarray(v, np.float64) for v in (alpha, c, k, n, delta))
    return lipschitz**2 / beta**2 * (2 * c) ** (-4 * k - 4) * alpha ** (-2 * k - 8) * k * np.log(n / delta)


def theorem12_slope(k):
    """000 Theorem 12: m ~ c^(-8k), so log m against log(1/c) has slope 8k (as c -> 0, alpha fixed)."""
    return 8 * np.asarray(k, np.float64)


def exponent(bound, x) -> float:
    """The least-squares slope of log ``bound`` on log ``x`` (a bound's own exponent over the points x; NaN with
    fewer than two distinct x).

    >>> c = np.array([0.05, 0.1, 0.2])
    >>> round(exponent(c ** -theorem12_slope(3), 1 / c), 6)   # m ~ c^(-8k): exponent 8k of 1/c
    24.0
    """
    x, bound = np.asarray(x, np.float64), np.asarray(bound, np.float64)
    if np.unique(x).size < 2:
        return float("nan")
    return float(np.polyfit(np.log(x), np.log(bound), 1)[0])


# ----------------------------------------------------------------------------- rank (003)


def rank_nodes_min(r):
    """003 Lemma 1 (and Lemma 5): a reduced tree of rank r has >= 2^(r+1) - 1 nodes."""
    return 2.0 ** (np.asarray(r, np.float64) + 1) - 1


def rank_nodes_max(n, r):
    """003 Lemma 1: a reduced tree of rank r over n variables has <= 2 sum_{i <= r} C(n, i) - 1 nodes."""
    n, r = np.broadcast_arrays(np.asarray(n, np.int64), np.asarray(r, np.int64))
    out = np.zeros(n.shape, np.float64)
    for a, b in set(zip(n.ravel().tolist(), r.ravel().tolist())):  # over the distinct (n, r), not rows
        out[(n == a) & (r == b)] = 2 * sum(math.comb(a, i) for i in range(max(b, -1) + 1)) - 1
    return out[()] if out.ndim == 0 else out



# ----------------------------------------------------------------------------- Fourier (001)



def fourier_terms_proof(s, eps):
    """001's approximation theorem, Step 3's proof: at most L1^2 / eps <= s^2 / eps coefficients of |f^(S)| >=
    eps / L1 (the statement says s / eps)."""
    return np.asarray(s, np.float64) ** 2 / np.asarray(eps, np.float64)


def fourier_terms_stated(s, eps):
    """001's approximation theorem as stated: sparsity s / eps."""
    return np.asarray(s, np.float64) / np.asarray(eps, np.float64)


# ----------------------------------------------------------------------------- the exact signal's distribution (000)


def empirical_cdf(codes, values):
    """Per element, the share of its group (``codes``) whose value is <= its own: the empirical CDF of each
    group at each of its points, ties included (one sort, no per-row Python)."""
    codes, values = np.asarray(codes, np.int64), np.asarray(values, np.float64)
    order = np.lexsort((values, codes))
    c, v = codes[order], values[order]
    count = np.bincount(codes)
    starts = np.cumsum(count) - count
    change = np.r_[True, (c[1:] != c[:-1]) | (v[1:] != v[:-1])] if c.size else np.zeros(0, bool)
    run_last = np.r_[np.flatnonzero(change)[1:], c.size] - 1  # the last index of each run of equal (code, value)
    last = run_last[np.cumsum(change) - 1]
    out = np.empty(codes.size, np.float64)
    out[order] = (last - starts[c] + 1) / count[c]
    return out


def lemma11_union_probability(t, alpha, c, k, capped: bool = True):
    """000 Lemma 11 with a union bound over the 3^k restrictions w of a k-junta's support: P[eps* <= t] <= 3^k (2/c)^k
    sqrt(t / (2 alpha^2)), capped at 1 unless ``capped=False``, for eps* = min_w max_i |I(D_w, i)| (over w with f_w
    not constant)."""
    k = np.asarray(k, np.float64)
    bound = 3.0**k * lemma11_probability(t, alpha, c, k, capped=False)
    return np.minimum(1.0, bound) if capped else bound


def theorem7_scale(eps_star, p_min, k, n, delta: float = 0.1):
    """000 Theorem 7's examples for a trial, up to its constant and the impurity's beta^-2 gamma^2: eps*^-4 p_min^-2 k
    ln(n / delta), with p_min = alpha^k the smallest restriction's mass (Theorem 7's alpha^-2k)."""
    eps_star, p_min, k, n = (np.asarray(v, np.float64) for v in (eps_star, p_min, k, n))
    with np.errstate(divide="ignore"):
        return eps_star**-4 * p_min**-2 * k * np.log(n / delta)


# ----------------------------------------------------------------------------- 000 around a base p-hat != 1/2


def smoothed_alpha(p_hat, c):
    """000's smoothened (alpha, c)-distribution (before Theorem 2) takes p_i = p-hat_i + U[-c, c] with p-hat_i in
    (alpha + c, 1 - alpha - c): the largest such alpha, min(p-hat, 1 - p-hat) - c (every p_i in [alpha, 1 - alpha])."""
    p_hat = np.asarray(p_hat, np.float64)
    return np.minimum(p_hat, 1 - p_hat) - np.asarray(c, np.float64)


def critical_base(k):
    """The base p-hat = 2^(-2/k) at which f = AND(x_B1) XOR AND(x_B2) (two blocks of k/2 bits, k even) has no
    degree-1 signal at the root: each AND is 1 with probability p-hat^(k/2) = 1/2, so every I(D, i) vanishes
    (:func:`and_xor_root_signal`). k = 2: 1/2 (the 2-parity); k = 4: 2^(-1/2); k = 6: 2^(-1/3)."""
    return 2.0 ** (-2 / np.asarray(k, np.float64))


def and_xor_root_signal(p, k: int):
    """I(D, i) = E[y x_i] - E[y] E[x_i] at the root (w = *) of y = AND(x_0..x_{h-1}) XOR AND(x_h..x_{k-1}), h = k/2,
    under the product distribution with marginals p[..., :k]: p_i (1 - p_i) prod_{j in i's block, j != i} p_j (1 - 2
    prod_{j in the other block} p_j), signed, shape [..., k] (000 Lemma 11's proof: p_i (1 - p_i) times the derivative
    of f's multilinear extension)."""
    p = np.asarray(p, np.float64)[..., :k]
    h = k // 2
    blocks = (p[..., :h], p[..., h:])
    out = []
    for own, other in (blocks, blocks[::-1]):
        rest = np.prod(own, axis=-1, keepdims=True) / own  # prod over i's block without i (p > 0)
        out.append(own * (1 - own) * rest * (1 - 2 * np.prod(other, axis=-1, keepdims=True)))
    return np.concatenate(out, axis=-1)


def theorem12_examples(alpha, c, k, n, delta1, delta2, B: float = 1.0, beta: float = 1.0, lipschitz: float = 1.0):
    """000 Theorem 12's sample size, B^k beta^-2 gamma^2 c^(-8k) delta1^-8 alpha^(-2k-8) k ln(n / delta2), for success
    with probability >= 1 - delta1 - delta2 (B: its unnamed universal constant, 1 here; gamma: ``lipschitz``). Its
    proof (Lemma 11 over the smoothing Delta) holds for any base p-hat in (alpha + c, 1 - alpha - c)."""
    alpha, c, k, n, delta1, delta2 = (np.asarray(v, np.float64) for v in (alpha, c, k, n, delta1, delta2))
    return (B**k * lipschitz**2 / beta**2 * c ** (-8 * k) * delta1**-8 * alpha ** (-2 * k - 8) * k
            * np.log(n / delta2))


# ----------------------------------------------------------------------------- 002 Remark 15 (finite samples)

#: log2(5/2): Remark 15 asks each gain estimate to be accurate to (2/5)^(2k), so (5/2)^(4k) = 2^(4k log2(5/2))
#: examples at a node (Hoeffding, constant 1).
LOG2_FIVE_HALVES = math.log2(5 / 2)


def remark15_examples(h, k, delta):
    """002 Remark 15 with its constants made explicit (constant 1, no log factor): estimating every gain to the
    additive (2/5)^(2k) it asks for takes ((2/5)^(2k))^-2 = (5/2)^(4k) examples at a node, and a restriction of h
    memory bits under a delta-balanced distribution keeps a share >= delta^h of the sample, so m = delta^-h (5/2)^(4k)
    examples make every node at depth <= h (its restriction of size <= h < 2^k, Lemma 14's) query a memory bit:
    2^(O(h + k)), as the remark says."""
    h, k, delta = (np.asarray(v, np.float64) for v in (h, k, delta))
    return delta**-h * 2.0 ** (4 * k * LOG2_FIVE_HALVES)


def remark15_depth(m, k, delta):
    """:func:`remark15_examples` inverted: the depth h = (log2 m - 4k log2(5/2)) / log2(1 / delta) down to which m
    examples keep the greedy tree's nodes on memory bits (negative: none; the remark's claim stops below 2^k)."""
    m, k, delta = (np.asarray(v, np.float64) for v in (m, k, delta))
    return (np.log2(m) - 4 * k * LOG2_FIVE_HALVES) / np.log2(1 / delta)
