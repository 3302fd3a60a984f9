"""The seeds' bounds (jaxtrees/experiments/studies/theory.py), each against values computed by hand from the paper."""

import math

import numpy as np
import pytest

from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.table import Table


# ----------------------------------------------------------------------------- AdaBoost: 001's theorem, 004 Eq. 1


def test_adaboost_product_bound_is_prod_2_sqrt_eps_1_minus_eps():
    # 001, "Theorem write eps_t = 1/2 - gamma_t": Error_train <= prod_t 2 sqrt(eps_t (1 - eps_t)).
    # 004's edge gamma = 1 - 2 eps: gamma = 0.6 -> eps = 0.2 -> 2 sqrt(0.16) = 0.8; gamma = 0.2 -> eps = 0.4 ->
    # 2 sqrt(0.24) = 0.979796; after two rounds 0.8 * 0.979796 = 0.783837.
    assert theory.edge_to_error(0.6) == pytest.approx(0.2)
    np.testing.assert_allclose(theory.adaboost_product_bound([0.6, 0.2]), [0.8, 0.7838367], rtol=1e-6)
    # along an axis: rounds on the last one
    np.testing.assert_allclose(theory.adaboost_product_bound([[0.6, 0.2], [0.0, 1.0]]),
                               [[0.8, 0.7838367], [1.0, 0.0]], rtol=1e-6, atol=1e-12)


def test_adaboost_exp_bound_is_exp_minus_half_the_sum_of_squared_edges():
    # 001: prod 2 sqrt(eps (1 - eps)) <= exp(-2 sum gamma'^2), gamma' = 1/2 - eps = gamma / 2, so exp(-sum gamma^2 / 2).
    # gamma = (0.6, 0.2): exp(-0.18) = 0.835270, exp(-0.2) = 0.818731; each >= the product bound (0.8, 0.783837).
    exp = theory.adaboost_exp_bound([0.6, 0.2])
    np.testing.assert_allclose(exp, [math.exp(-0.18), math.exp(-0.2)], rtol=1e-12)
    assert np.all(exp >= theory.adaboost_product_bound([0.6, 0.2]))


def test_adaboost_rounds_and_004s_t_before_eq_1():
    # exp(-T gamma^2 / 2) < 1/m  <=>  T > 2 ln m / gamma^2. m = 100, gamma = 0.2: 2 * 4.605170 / 0.04 = 230.26 -> 231.
    assert theory.adaboost_rounds(100, 0.2) == 231
    # 004 sets T = ceil(ln m / (2 gamma^2)) = ceil(4.605170 / 0.08) = ceil(57.56) = 58 for its generalization bound
    # (Eq. 1), a quarter of the rounds 001's bound needs for training error < 1/m.
    assert theory.adaboost_rounds_as_printed(100, 0.2) == 58
    # at the derived T the exp bound is below 1/m; at the printed T it is not
    assert math.exp(-231 * 0.04 / 2) < 1 / 100 < math.exp(-58 * 0.04 / 2)
    assert np.isinf(theory.adaboost_rounds(100, 0.0))


# ----------------------------------------------------------------------------- 002: Lemma 8, 14, 16; Theorems 10, 11


def test_lemma8_kappa_for_gini():
    # 002 Lemma 8: kappa = max(2 / (alpha delta (1 - delta)), L / 8); Gini alpha = L = 8.
    # delta = 0.25: 2 / (8 * 0.25 * 0.75) = 4/3 > 1; delta = 0.4: 2 / (8 * 0.4 * 0.6) = 1.041667; delta = 0.5: 1.
    np.testing.assert_allclose(theory.lemma8_kappa([0.25, 0.4, 0.5]), [4 / 3, 1.0416667, 1.0], rtol=1e-6)
    # an impurity with L = 16 and large alpha: L / 8 = 2 wins
    assert theory.lemma8_kappa(0.5, alpha=100.0, L=16.0) == 2.0


def test_lemma14_constants_and_gain_bounds():
    # 002 Lemma 14: c0 = ln 5 / delta (delta = 0.25: 6.437752), k0 = ln(2 kappa) / ln(5/4) + 1
    # (kappa = 4/3: ln(8/3) / 0.223144 + 1 = 0.980829 / 0.223144 + 1 = 5.395508).
    assert theory.lemma14_c0(0.25) == pytest.approx(6.437752, rel=1e-6)
    assert theory.lemma14_k0(4 / 3) == pytest.approx(5.395508, rel=1e-6)
    # memory-bit floor 2^(-2k) / (4 kappa): k = 6, kappa = 4/3: 2^-12 / (16/3) = 4.577637e-5
    assert theory.lemma14_memory_floor(6, 4 / 3) == pytest.approx(4.577637e-5, rel=1e-6)
    # addressing ceiling kappa (2/5)^(2k): k = 6: 4/3 * 0.4^12 = 4/3 * 1.6777216e-5 = 2.2369621e-5
    assert theory.lemma14_address_ceiling(6, 4 / 3) == pytest.approx(2.2369621e-5, rel=1e-6)
    # the proof's ordering holds from k > ln(2 kappa) / ln(5/4) on (k = 6 > 5.40); at k = 3 it does not: ceiling
    # 4/3 * 0.4^6 = 5.4613e-3 > floor 2^-6 / (16/3) = 2.9297e-3.
    assert theory.lemma14_address_ceiling(6, 4 / 3) < theory.lemma14_memory_floor(6, 4 / 3)
    assert theory.lemma14_address_ceiling(3, 4 / 3) > theory.lemma14_memory_floor(3, 4 / 3)


def test_lemma16_distance_condition():
    # 002 Lemmas 16-17: distance >= (ln 5 / delta) k. delta = 0.25, k = 4: 6.437752 * 4 = 25.75 -> 26 needed.
    assert theory.lemma16_distance(4, 0.25) == pytest.approx(25.751007, rel=1e-6)
    assert not theory.lemma16_holds(25, 4, 0.25) and theory.lemma16_holds(26, 4, 0.25)
    # a code of length c k = 28 (c = 7) cannot have distance 26 among k = 4 words (Plotkin: d <= n 2^(k-1) / (2^k - 1)
    # = 28 * 8 / 15 = 14.9)
    assert 28 * 8 / 15 < theory.lemma16_distance(4, 0.25)


def test_theorem10_floor_and_its_validity():
    # 002 Thm 10's proof: error >= delta / 6; delta = 0.25: 0.0416667.
    assert theory.theorem10_floor(0.25) == pytest.approx(1 / 24)
    # valid where 1 - exp(-2^k delta^2 / 8) >= 2/3, i.e. 2^k delta^2 / 8 >= ln 3 = 1.098612:
    # delta = 0.25: 2^k >= 140.6 -> k >= 8 (k = 7: 128 * 0.0625 / 8 = 1.0 < 1.0986; k = 8: 2.0);
    # delta = 0.4: 2^k >= 54.93 -> k >= 6 (k = 5: 32 * 0.16 / 8 = 0.64; k = 6: 1.28).
    assert list(theory.theorem10_floor_valid(np.arange(5, 10), 0.25)) == [False, False, False, True, True]
    assert list(theory.theorem10_floor_valid(np.arange(5, 8), 0.4)) == [False, True, True]
    assert theory.THEOREM11_FLOOR == 1 / 8


# ----------------------------------------------------------------------------- 000: Lemmas 9, 11; Theorems 7, 10, 12


def test_parity_covariance_is_lemma_9s_exact_signal():
    # 000 Lemma 9's proof: |I(D, j)| = p_j |eps_k' - 1/2| 2^(k'-1) prod |eps_i| = p_j (1 - p_j) prod_{i in J\j} |2 p_i - 1|.
    # p = (0.6, 0.3, 0.5, 0.9), J = {0, 1, 3}: j = 0: 0.24 * 0.4 * 0.8 = 0.0768; j = 1: 0.21 * 0.2 * 0.8 = 0.0336;
    # j = 3: 0.09 * 0.2 * 0.4 = 0.0072; off J: 0.
    p = np.array([0.6, 0.3, 0.5, 0.9])
    support = np.array([1, 1, 0, 1], bool)
    np.testing.assert_allclose(theory.parity_covariance(p, support), [0.0768, 0.0336, 0.0, 0.0072], rtol=1e-12)
    # against a brute-force covariance E[y x_j] - E[y] E[x_j] over {0,1}^4
    x = (np.arange(16)[:, None] >> np.arange(4)) & 1
    w = np.prod(np.where(x == 1, p, 1 - p), axis=1)
    y = x[:, support].sum(1) % 2
    brute = np.abs((w * y) @ x - (w @ y) * p)
    np.testing.assert_allclose(theory.parity_covariance(p, support), brute, atol=1e-12)
    # a factor 2 p_i - 1 = 0 zeroes the other coordinates' signal only
    np.testing.assert_allclose(theory.parity_covariance([0.5, 0.7], [1, 1]), [0.25 * 0.4, 0.0], atol=1e-15)


def test_lemma9_is_an_identity_of_every_alpha_c_parity():
    """000 Lemma 9 holds for every parity whose marginals satisfy its hypotheses: random p_j in (alpha, 1 - alpha) with
    |p_j - 1/2| >= c, every free j, every restriction's own floor (k' <= k free bits)."""
    rng = np.random.default_rng(9)
    for alpha, c, k in ((0.05, 0.1, 4), (0.2, 0.05, 3), (0.01, 0.3, 5)):
        p = 0.5 + rng.choice([-1, 1], (200, k)) * rng.uniform(c, 0.5 - alpha, (200, k))
        signal = theory.parity_covariance(p, np.ones(k, bool))
        assert np.all(signal > theory.lemma9_floor(alpha, c, k))


def test_lemma9_floor():
    # 000 Lemma 9: |I| > alpha^2 (2c)^(k-1); alpha = 0.05, c = 0.1, k = 4: 0.0025 * 0.2^3 = 2e-5.
    assert theory.lemma9_floor(0.05, 0.1, 4) == pytest.approx(2e-5)
    # the exact signal respects it: p_j = 0.5 +- 0.1 (|p - 1/2| = c), alpha = 0.05: 0.24 * 0.2^3 = 1.92e-3 > 2e-5
    exact = theory.parity_covariance(np.full(4, 0.6), np.ones(4, bool))
    assert np.all(exact > theory.lemma9_floor(0.05, 0.1, 4))


def test_lemma11_inverse():
    # 000 Lemma 11: |I| > 2 alpha^2 delta^2 (c/2)^(2k); alpha = 0.4, c = 0.1, k = 2, delta = 0.5:
    # 2 * 0.16 * 0.25 * 0.05^4 = 0.08 * 6.25e-6 = 5e-7. Inverted: P[max |I| <= t] <= (2/c)^k sqrt(t / (2 alpha^2)); at
    # t = 5e-7: 400 * sqrt(5e-7 / 0.32) = 400 * 1.25e-3 = 0.5 = delta.
    assert theory.lemma11_probability(5e-7, 0.4, 0.1, 2) == pytest.approx(0.5)
    assert theory.lemma11_probability(1.0, 0.4, 0.1, 2) == 1.0  # capped
    assert theory.lemma11_probability(1.0, 0.4, 0.1, 2, capped=False) == pytest.approx(400 * math.sqrt(1 / 0.32))


def test_theorem10_of_000_uses_the_derivation_not_the_printed_exponent():
    # Theorem 7: m ~ beta^-2 gamma^2 eps^-4 alpha^-2k k ln(n / delta); with Lemma 9's eps = alpha^2 (2c)^(k-1):
    # eps^-4 = alpha^-8 (2c)^(-4k+4). alpha = 0.1, c = 0.2, k = 2, n = 16, delta = 0.1:
    # (0.4)^-4 * 0.1^-12 * 2 * ln 160 = 39.0625 * 1e12 * 2 * 5.075174 = 3.965e14.
    derived = theory.theorem10_examples(0.1, 0.2, 2, 16, 0.1)
    assert derived == pytest.approx(39.0625e12 * 2 * math.log(160), rel=1e-9)
    # printed: (2c)^(-4k-4) = 0.4^-12 = 59604.64 instead of 0.4^-4: (2c)^-8 = 1525.9 times more
    printed = theory.theorem10_examples_as_printed(0.1, 0.2, 2, 16, 0.1)
    assert printed / derived == pytest.approx(0.4**-8, rel=1e-9)
    assert theory.theorem7_examples(1.0, 1.0, 1, math.e, 1.0) == pytest.approx(1.0)


def test_theorem12_slope_and_a_bounds_own_exponent():
    # 000 Theorem 12: m ~ c^(-8k): slope 8k of log m in log(1/c); k = 3: 24.
    assert theory.theorem12_slope(3) == 24
    # with alpha = 1/2 - c shrinking as c grows the bound's own exponent over c = 0.05 .. 0.2 is below 8k: k = 3:
    # (24 ln 4 - 14 ln(0.45 / 0.3)) / ln 4 = (33.271 - 5.677) / 1.386 = 19.9 (least squares over three c: 19.8-20)
    c = np.array([0.05, 0.1, 0.2])
    own = theory.exponent(theory.theorem12_examples(0.5 - c, c, 3, 16, 0.05, 0.05), 1 / c)
    assert 19.5 < own < 20.5 and own < theory.theorem12_slope(3)
    # Theorem 10 at a fixed alpha: exactly the derived 4k - 4; the printed (2c)^(-4k-4) says 4k + 4
    assert theory.exponent(theory.theorem10_examples(0.05, c, 4, 16, 0.1), 1 / c) == pytest.approx(12)
    assert theory.exponent(theory.theorem10_examples_as_printed(0.05, c, 4, 16, 0.1), 1 / c) == pytest.approx(20)


# ----------------------------------------------------------------------------- 003: Lemmas 1 and 5


def test_rank_node_bounds():
    # 003 Lemma 1: 2^(r+1) - 1 <= nodes <= 2 sum_{i <= r} C(n, i) - 1. r = 2: 7; n = 10, r = 2: 2 (1 + 10 + 45) - 1 = 111;
    # r = 1: 2 * 11 - 1 = 21 (a decision list on 10 variables: 10 tests, 11 leaves); r = 0: 1 node.
    np.testing.assert_array_equal(theory.rank_nodes_min([0, 1, 2]), [1, 3, 7])
    assert theory.rank_nodes_max(10, 2) == 111
    np.testing.assert_array_equal(theory.rank_nodes_max([10, 10, 10], [0, 1, 2]), [1, 21, 111])
    # n = r: every full tree of depth n: 2^(n+1) - 1 nodes, both bounds meet
    assert theory.rank_nodes_max(3, 3) == theory.rank_nodes_min(3) == 15


# ----------------------------------------------------------------------------- 001: the approximation theorem


def test_fourier_approximation_sizes():
    # 001: s leaves, eps: terms: statement s / eps = 32, proof s^2 / eps = 256 (s = 8, eps = 1/4).
    assert theory.fourier_terms_stated(8, 0.25) == 32
    assert theory.fourier_terms_proof(8, 0.25) == 256


# ----------------------------------------------------------------------------- checks and sections


def test_check_counts_ratio_and_closest_margin():
    c = verdicts.check("001", "train <= bound", bound=[0.5, 0.4, 0.1, np.nan], measured=[0.25, 0.1, 0.2, 0.3],
                     kind="upper", unit="rounds")
    assert (c.respected, c.points) == (2, 3)
    assert c.ratio == pytest.approx(2.0)  # median of 2, 4, 0.5
    assert (c.closest, c.farthest, c.kind) == (0.5, 4.0, "test")  # violated: a [test] whatever the margin
    floor = verdicts.check("002", "error >= 1/8", bound=0.125, measured=[0.25, 0.125, 0.1], kind="lower")
    assert (floor.respected, floor.points) == (2, 3)
    assert floor.closest == pytest.approx(1.25) and floor.farthest == pytest.approx(0.5)  # lower: the largest first
    text = verdicts.section([c, "- [identity] a plain line"])
    assert text.startswith("## Theory\n") and "- [test] 001: train <= bound: holds in 2 of 3 rounds; closest " \
        "bound/measured 0.5." in text
    assert "- [identity] a plain line" in text


def test_empirical_cdf_per_group_with_ties():
    codes = np.array([0, 1, 0, 0, 1, 0])
    values = np.array([0.3, 5.0, 0.1, 0.3, 1.0, 0.2])
    # group 0: 0.1, 0.2, 0.3, 0.3 -> F = 1/4, 2/4, 4/4 (ties), 4/4; group 1: 1.0, 5.0 -> 1/2, 1
    np.testing.assert_allclose(theory.empirical_cdf(codes, values), [1.0, 1.0, 0.25, 1.0, 0.5, 0.5])


def test_lemma11_union_and_theorem7_scale():
    # union over the 3^k restrictions: k = 2: 9 times lemma11_probability; at t = 5e-7, alpha = 0.4, c = 0.1: 9 * 0.5 -> 1
    assert theory.lemma11_union_probability(5e-7, 0.4, 0.1, 2) == 1.0
    # t = 5e-9: 400 * sqrt(5e-9 / 0.32) = 400 * 1.25e-4 = 0.05; times 9: 0.45
    assert theory.lemma11_union_probability(5e-9, 0.4, 0.1, 2) == pytest.approx(0.45)
    # 000 Thm 7: eps^-4 alpha^-2k k ln(n / delta); eps = 0.1, p_min = alpha^k = 0.25 (alpha = 0.5, k = 2), n = 16,
    # delta = 0.1: 1e4 * 16 * 2 * ln 160 = 320000 * 5.075174 = 1624055.7
    assert theory.theorem7_scale(0.1, 0.25, 2, 16) == pytest.approx(1e4 * 16 * 2 * math.log(160))
    assert theory.theorem7_scale(0.1, 0.25, 2, 16) == pytest.approx(theory.theorem7_examples(0.1, 0.5, 2, 16, 0.1))


# ----------------------------------------------------------------------------- 000 around a base p-hat; 002 Remark 15


def test_smoothed_alpha_and_the_critical_base():
    # 000 before Thm 2: p-hat in (alpha + c, 1 - alpha - c), so alpha = min(p-hat, 1 - p-hat) - c: p-hat = 1/2, c = 0.2:
    # 0.3; p-hat = 2^-1/2 = 0.707107, c = 0.1: 1 - 0.707107 - 0.1 = 0.192893.
    np.testing.assert_allclose(theory.smoothed_alpha([0.5, 2**-0.5], [0.2, 0.1]), [0.3, 0.1928932], rtol=1e-6)
    # AND of k/2 bits is 1 with probability p-hat^(k/2) = 1/2: k = 2: 1/2; k = 4: 2^-1/2 = 0.707107; k = 6: 2^-1/3
    # = 0.793701.
    np.testing.assert_allclose(theory.critical_base([2, 4, 6]), [0.5, 0.7071068, 0.7937005], rtol=1e-6)


def test_and_xor_root_signal_by_hand_and_zero_at_the_critical_base():
    # y = (x0 AND x1) XOR (x2 AND x3), every p = 0.75: I(D, 0) = p0 (1 - p0) p1 (1 - 2 p2 p3) = 0.1875 * 0.75 * (1 -
    # 1.125) = -0.017578125, and the same for every coordinate by symmetry.
    np.testing.assert_allclose(theory.and_xor_root_signal(np.full(4, 0.75), 4), [-0.017578125] * 4, rtol=1e-12)
    # k = 2 (y = x0 XOR x1), p = (0.6, 0.7): I0 = 0.24 (1 - 1.4) = -0.096, I1 = 0.21 (1 - 1.2) = -0.042.
    np.testing.assert_allclose(theory.and_xor_root_signal([0.6, 0.7], 2), [-0.096, -0.042], rtol=1e-12)
    # at p-hat = 2^(-2/k) every root signal vanishes; a further coordinate (n > k) is ignored
    for k in (2, 4, 6):
        p = np.append(np.full(k, theory.critical_base(k)), 0.3)
        np.testing.assert_allclose(theory.and_xor_root_signal(p, k), np.zeros(k), atol=1e-15)


def test_theorem12_examples_by_hand():
    # 000 Thm 12: B^k beta^-2 gamma^2 c^(-8k) delta1^-8 alpha^(-2k-8) k ln(n / delta2). k = 1, c = alpha = delta1 = 1/2,
    # n = e delta2 (ln = 1), B = beta = gamma = 1: 2^8 * 2^8 * 2^10 * 1 * 1 = 2^26 = 67108864.
    assert theory.theorem12_examples(0.5, 0.5, 1, math.e * 0.1, 0.5, 0.1) == pytest.approx(2**26)
    # halving c multiplies by 2^(8k): k = 2: 2^16; B = 2 multiplies by 2^k = 4
    base = theory.theorem12_examples(0.3, 0.2, 2, 16, 0.05, 0.05)
    assert theory.theorem12_examples(0.3, 0.1, 2, 16, 0.05, 0.05) == pytest.approx(base * 2**16)
    assert theory.theorem12_examples(0.3, 0.2, 2, 16, 0.05, 0.05, B=2.0) == pytest.approx(4 * base)


def test_remark15_examples_and_depth_by_hand():
    # 002 Remark 15 made explicit: m = delta^-h (5/2)^(4k). h = 2, k = 1, delta = 1/4: 16 * 2.5^4 = 16 * 39.0625 = 625;
    # h = 0, k = 2, delta = 1/2: 2.5^8 = 1525.87890625.
    assert theory.remark15_examples(2, 1, 0.25) == pytest.approx(625.0)
    assert theory.remark15_examples(0, 2, 0.5) == pytest.approx(1525.87890625)
    # inverted: (log2 m - 4k log2(5/2)) / log2(1 / delta): m = 625, k = 1, delta = 1/4: (9.287712 - 5.287712) / 2 = 2;
    # m = 2^14, k = 3, delta = 1/4: (14 - 15.863137) / 2 = -0.931569 (no depth: the remark is silent there)
    assert theory.remark15_depth(625, 1, 0.25) == pytest.approx(2.0)
    assert theory.remark15_depth(2**14, 3, 0.25) == pytest.approx(-0.9315686, rel=1e-6)
    assert theory.LOG2_FIVE_HALVES == pytest.approx(1.3219281, rel=1e-7)


# ----------------------------------------------------------------------------- kinds (issue 65)


def test_a_bound_within_10x_is_a_test_beyond_it_vacuous():
    """[test] while the closest point is within VACUOUS_FACTOR of the bound (or any point violates it), [vacuous]
    beyond: the ratio range and no count."""
    near = verdicts.check("000", "m <= B", bound=[20.0, 900.0], measured=[2.0, 3.0], kind="upper")
    assert near.kind == "test" and near.closest == 10.0
    far = verdicts.check("000", "m <= B", bound=[21.0, 900.0], measured=[2.0, 3.0], kind="upper", unit="trials")
    assert far.kind == "vacuous"
    assert verdicts.line(far) == "- [vacuous] 000: m <= B: bound / measured 10.5 to 300 over 2 trials: vacuous at " \
        "this size."
    # a lower bound: its margin is measured / bound
    assert verdicts.check("0", "e >= f", bound=[0.1], measured=[0.99], kind="lower").kind == "test"
    assert verdicts.check("0", "e >= f", bound=[0.01], measured=[0.99], kind="lower").kind == "vacuous"
    # a violation far from the bound is still a test, and says so
    broken = verdicts.check("0", "m <= B", bound=[1e6, 1.0], measured=[1.0, 2.0], kind="upper")
    assert broken.kind == "test" and verdicts.line(broken).startswith("- [test] 0: m <= B: holds in 1 of 2 points; "
                                                                     "closest bound/measured 0.5.")
    # a zero measurement under an upper bound holds by an infinite factor; with no point at all: outside
    assert verdicts.check("0", "e <= b", bound=[0.5], measured=[0.0], kind="upper").kind == "vacuous"
    assert verdicts.line(verdicts.check("0", "e <= b", bound=[], measured=[], kind="upper")).startswith("- [outside] ")


@pytest.mark.parametrize("side, low, high, verdict", [
    ("upper", 4.5, 6.0, "CONTRADICTED"), ("upper", 3.0, 6.0, "consistent"),
    ("lower", 1.0, 3.9, "CONTRADICTED"), ("lower", 1.0, 4.1, "consistent"),
    ("equal", 4.1, 5.0, "CONTRADICTED"), ("equal", 3.0, 3.5, "CONTRADICTED"), ("equal", 3.0, 4.5, "consistent"),
    ("positive", -1.0, 0.0, "CONTRADICTED"), ("positive", -1.0, 0.5, "consistent"),
    ("upper", np.nan, np.nan, "no interval"),
])
def test_a_form_is_contradicted_only_by_an_interval_wholly_beyond_its_claim(side, low, high, verdict):
    claim = 0.0 if side == "positive" else 4.0
    assert verdicts.Slope("x", (low + high) / 2, low, high, claim, side).verdict == verdict


def test_form_line_and_the_kinds_a_report_parses():
    form = verdicts.Form("000 Thm 7", "m ~ eps^-4 suffices", "exponent of 1/eps* in m90",
                       (verdicts.Slope("6 cells", 2.17, 1.47, 2.94, 4.0, "upper", 990, 1000),))
    lines = [form, verdicts.identity("000 Lemma 9", "a floor"), verdicts.outside("000 Thm 12", "entropy", "not Lipschitz")]
    text = verdicts.section(lines, "Intro.")
    assert "- [form] 000 Thm 7: m ~ eps^-4 suffices; exponent of 1/eps* in m90 (bootstrap 95%): 6 cells: 2.17 [1.47, " \
           "2.94], from 990 of 1,000 resamples against <= 4: consistent." in text
    report = "# r\n\n" + text + "\n### Cost\n\n- not a theory bullet\n"
    assert len(verdicts.theory_bullets(report)) == 3 and verdicts.unkinded(report) == []
    bad = report.replace("- [identity] ", "- ").replace("### Cost", "- [test] x: y: holds in 1 of 1; closest "
                                                                     "bound/measured 12.\n\n### Cost")
    assert [b[:15] for b in verdicts.unkinded(bad)] == ["- 000 Lemma 9: ", "- [test] x: y: "]


def test_only_gini_meets_000s_lipschitz_hypothesis():
    """000 Sec. 1.2: strongly concave and Lipschitz. Gini 4 q (1 - q): beta = 8, gamma = 4, beta^-2 gamma^2 = 1/4;
    entropy's and Kearns-Mansour's slopes are unbounded at q -> 0."""
    assert theory.lipschitz("gini") and not theory.lipschitz("entropy") and not theory.lipschitz("kearns_mansour")
    beta, gamma = theory.LIPSCHITZ_IMPURITIES["gini"]
    assert gamma**2 / beta**2 == 0.25
    q = np.array([1e-3, 1e-6])
    assert np.all(np.abs(np.log2((1 - q) / q)) > 9) and np.all((1 - 2 * q) / np.sqrt(q * (1 - q)) > 30)  # G'
    assert np.all(np.abs(4 * (1 - 2 * q)) <= 4)


# ----------------------------------------------------------------------------- every [test] and [form] can fail


def _threshold_rows(cells, replicates=8, ms=(16, 64, 256, 1024, 4096)):
    """Hand-made rows of the sample-complexity studies: per cell (a dict of its parameters with ``m90`` and ``eps``),
    every trial exact from m = m90 on, its eps* = eps and p_min = 0.25."""
    columns = {}
    for i, cell in enumerate(cells):
        for r in range(replicates):
            for m in ms:
                params = {name: value for name, value in cell.items() if name not in ("m90", "eps")}
                for name, value in {"cell": i, "replicate": r, **params, "m": m, "success": int(m >= cell["m90"]),
                                    "exact_error": 0.0, "eps_star": cell["eps"], "p_min": 0.25,
                                    "support_recovered": int(m >= cell["m90"])}.items():
                    columns.setdefault(name, []).append(value)
    return Table({name: np.asarray(v, dtype=object if isinstance(v[0], str) else None) for name, v in columns.items()})


def _junta(c, m90, eps, n=16, k=1):
    return {"n": n, "k": k, "impurity": "gini", "c": c, "m90": m90, "eps": eps}


def _bullet(report, start):
    return next(b for b in verdicts.theory_bullets(report) if b.startswith(start))


def test_theorems_7_and_12_forms_fail_where_m90_grows_faster_than_they_allow():
    """m90 = 16 at (c, eps*) = (0.2, 0.02), 1024 at (0.1, 0.01): an exponent 6 of both 1/c and 1/eps*, above Theorem 7's
    4 and Theorem 12's own 3.85 at k = 1 (c^-8 alpha^-10: 8 - 10 log2(0.4 / 0.3)) in every resample."""
    from jaxtrees.experiments.studies import learning

    report = learning.JUNTAS.report(_threshold_rows([_junta(0.1, 1024, 0.01), _junta(0.2, 16, 0.02)]))
    # Theorem 7 with its alpha^-2k divided out: alpha = 0.4, 0.3 adds 2 log2(0.4 / 0.3) = 0.83 to the exponent
    assert _bullet(report, "- [form] 000 Thm 7:").endswith("2 of 2 Gini cells reaching 90%: 6.83 [6.83, 6.83] against <= "
                                                           "4 (the grid can show -7.17 to 8.83): CONTRADICTED.")
    assert _bullet(report, "- [form] 000 Thm 12:").endswith(
        "2 of 2 cells at n = 16, k = 1 (8k = 8): 6 [6, 6] against <= 3.85 (the grid can show -8 to 8): CONTRADICTED.")
    fine = learning.JUNTAS.report(_threshold_rows([_junta(0.1, 64, 0.01), _junta(0.2, 16, 0.02)]))
    assert _bullet(fine, "- [form] 000 Thm 7:").endswith("2.83 [2.83, 2.83] against <= 4 (the grid can show -7.17 to "
                                                         "8.83): consistent.")


def test_theorem7s_ln_n_form_fails_where_m90_grows_faster_than_ln_n():
    """n = 16, 256 at k = 1, c = 0.1: ln(n / 0.1) = 5.075, 7.848; m90 = 16, 1024: exponent ln 64 / ln 1.546 = 9.54."""
    from jaxtrees.experiments.studies import learning

    report = learning.JUNTAS.report(_threshold_rows([_junta(0.1, 16, 0.01), _junta(0.1, 1024, 0.01, n=256)]))
    assert _bullet(report, "- [form] 000 Thms 7, 12 (ln n):").endswith(
        "cells at k = 1, c = 0.1: 9.54 [9.54, 9.54] against <= 1 (the grid can show -12.7 to 12.7): CONTRADICTED.")


def test_theorem10s_form_fails_where_m90_grows_faster_than_4k_minus_4():
    """Parities at n = 4 (k = 2): Theorem 10 as derived allows an exponent 4k - 4 = 4 of 1/c; m90 = 16 at c = 0.2 and
    1024 at c = 0.1 is 6."""
    from jaxtrees.experiments.studies import learning

    cells = [{"log2_n": 2, "impurity": "gini", "alpha": 0.05, "c": c, "m90": m90, "eps": 0.01}
             for c, m90 in ((0.1, 1024), (0.2, 16))]
    report = learning.PARITY.report(_threshold_rows(cells))
    assert _bullet(report, "- [form] 000 Thm 10:").endswith(
        "2 of 2 cells at n = 4, alpha = 0.05 (as printed: 12): 6 [6, 6] against <= 4 (the grid can show -8 to 8): "
        "CONTRADICTED.")


def test_lemma11_fails_where_the_signal_is_small_too_often():
    """k = 1, 3 (2/c) sqrt(t / (2 alpha^2)) at t = 1e-10, below P[eps* <= t] = 1: c = 0.1, alpha = 0.4: 1.06e-3; c =
    0.2, alpha = 0.3: 7.07e-4 (the closest)."""
    from jaxtrees.experiments.studies import learning

    report = learning.JUNTAS.report(_threshold_rows([_junta(0.1, 64, 1e-10), _junta(0.2, 16, 1e-10)]))
    assert _bullet(report, "- [test] 000 Lemma 11").endswith("holds in 0 of 16 smoothed trials; closest bound/measured "
                                                             "0.000707. Measured: the empirical P[eps* <= t] of the "
                                                             "trial's cell at its own t = eps* (0 trials with eps* = 0 "
                                                             "count in it).")


def test_gd_scalings_lemma11_fails_where_the_signal_is_small_too_often():
    from jaxtrees.experiments.studies import gd_scaling_report

    rows = Table({"family": np.full(4, "parity", object), "k": np.full(4, 2), "c": np.full(4, 0.1),
                  "influence_max": np.full(4, 1e-8)})
    check = gd_scaling_report.lemma11_check(rows)  # 400 sqrt(1e-8 / 0.32) = 0.0707 < P = 1
    assert (check.respected, check.points, check.kind) == (0, 4, "test")
    assert check.closest == pytest.approx(0.0707, 1e-3)


def _depth_rows(depth_of, k=5, impurity="gini", ms=2 ** np.arange(6, 14), replicates=4, s=0.1):
    """Hand-made addressing-samples rows: every trial's first addressing depth ``depth_of(log2 m)``."""
    r, m = (np.asarray(v) for v in zip(*[(r, m) for r in range(replicates) for m in ms]))
    depth = np.asarray([depth_of(v) for v in np.log2(m)], np.int64)
    size = len(m)
    return Table({"cell": np.zeros(size, int), "replicate": r, "k": np.full(size, k), "c": np.full(size, 5),
                  "s": np.full(size, s), "impurity": np.full(size, impurity, object), "m_min": np.full(size, 64),
                  "m_max": np.full(size, int(ms.max())), "m": m, "first_address_depth": depth,
                  "path_address_depth": depth, "tree_depth": np.full(size, 8)})


def test_remark15s_form_fails_where_the_depth_falls_as_m_grows():
    from jaxtrees.experiments.studies import finite_addressing as fa

    report = fa.ADDRESSING_SAMPLES.report(_depth_rows(lambda log2_m: 20 - log2_m))
    assert "per unit of h (1 cell where Lemmas 12 and 14 hold, k = 5): -1 [-1, -1] against > 0: CONTRADICTED; per unit " \
        "of k (needs three or more k): no fit" in _bullet(report, "- [form] 002 Remark 15:")
    # the project's heuristic: at s = 0 (delta = 1/2, c0 = 3.2, k0 = 4.1) a depth growing by 1 / log2(1 / delta) = 1
    # per doubling is consistent with it, the same depth at s = 0.1 (0.756 per doubling) is not
    assert _bullet(report, "- [form] 002 Remark 15's O(h), the project's heuristic").endswith("CONTRADICTED.")
    grows = fa.ADDRESSING_SAMPLES.report(_depth_rows(lambda log2_m: log2_m - 6, s=0.0))
    assert _bullet(grows, "- [form] 002 Remark 15's O(h), the project's heuristic").endswith(
        "k = 5, c = 5, s = 0, gini: 1 [1, 1] against = 1: consistent.")


def _k_rows(depth_of, ks=(5, 6, 7)):
    """Addressing-samples rows over several k (one cell each): first addressing depth ``depth_of(log2 m, k)``."""
    parts = [_depth_rows(lambda log2_m, k=k: depth_of(log2_m, k), k=k) for k in ks]
    columns = {name: np.concatenate([np.asarray(p[name]) for p in parts]) for name in parts[0].names}
    columns["cell"] = np.concatenate([np.full(len(p), i) for i, p in enumerate(parts)])
    return Table(columns)


def test_remark15s_k_dependence_and_the_1_over_m_gain_form_fail_where_k_costs_too_much():
    """log2 m = h + k - 3 (h = log2 m - k + 3, inside (0, 2^k) at k = 5, 6, 7): coefficients 1 of h and 1 of k, both
    positive (Remark 15) and within the 1/m-gain form's <= 2 (reach 7 x 1 / 2 = 3.5 over k = 5..7, m = 2^6..2^13);
    log2 m = h + 3k - 12 costs 3 doublings per k: the 1/m-gain form fails."""
    from jaxtrees.experiments.studies import finite_addressing as fa

    report = fa.ADDRESSING_SAMPLES.report(_k_rows(lambda log2_m, k: log2_m - k + 3))
    assert _bullet(report, "- [form] 002 Remark 15:").endswith(
        "per unit of h (3 cells where Lemmas 12 and 14 hold, k = 5, 6, 7): 1 [1, 1] against > 0: consistent; per unit "
        "of k: 1 [1, 1] against > 0 (the grid can show -3.5 to 3.5): consistent.")
    assert _bullet(report, "- [form] 002 Remark 15's O(k)").endswith(
        "c = 5, s = 0.1, gini, k = 5, 6, 7: 1 [1, 1] against <= 2 (the grid can show -3.5 to 3.5): consistent.")
    costly = fa.ADDRESSING_SAMPLES.report(_k_rows(lambda log2_m, k: log2_m - 3 * k + 18))
    assert _bullet(costly, "- [form] 002 Remark 15's O(k)").endswith("3 [3, 3] against <= 2 (the grid can show -3.5 "
                                                                     "to 3.5): CONTRADICTED.")


def test_remark15s_project_constants_fail_past_their_sample_size():
    """k = 5, h = 0: delta^-h (5/2)^20 = 9.09e7 examples; a first addressing depth 0 at m = 2^27 and 2^28 contradicts
    it (9.09e7 / 2^28 = 0.339)."""
    from jaxtrees.experiments.studies import finite_addressing as fa

    report = fa.ADDRESSING_SAMPLES.report(_depth_rows(lambda log2_m: 0, ms=np.array([2**27, 2**28])))
    assert "holds in 0 of 8 (trial, m) points; closest bound/measured 0.339. The line's largest depth over these " \
        "cells' m: 1.18." in _bullet(report, "- [test] 002 Remark 15, the (5/2)^(4k) sufficient condition")


def test_rank_theorem2_fails_where_findmin_misses_past_its_m():
    import test_rank_study

    from jaxtrees.experiments.studies import rank

    rows = test_rank_study._rows()
    rows = rows.with_columns(findmin_error=np.array([0.3, 0.2, 0.3]))  # m = 2048 >= 1,214: error 0.3 > eps
    # error 0.3 > eps at m = 2048 >= 1,214: the rate lies below 0.9 past the bound's m, never reaching it
    assert "holds in 0 of 1 cells; closest bound/measured 0. Measured: the m from which the rate stays >= 0.9, never " \
        "within the grid in 1 cell" in rank.RANK.report(rows)


def test_the_gd_baselines_budget_fails_where_a_trial_needs_more():
    from jaxtrees.experiments.studies import gd_parity

    rows = Table({"steps": np.array([50_000, 200_000, -1]), "max_steps": np.full(3, 400_000)})
    part = gd_parity._uniform_theory(rows)
    assert "holds in 1 of 2 learned trials; closest bound/measured 0.5. 1 trials censored" in part


def test_threshold_slope_follows_summarys_threshold_and_its_interval_covers_the_truth():
    from jaxtrees.experiments.report import summary, thresholds

    rng = np.random.default_rng(3)
    m = 2.0 ** np.arange(4, 16)
    rates = rng.uniform(0.7, 1.0, (50, m.size))
    index = thresholds.thresholds(rates)
    for row, i in zip(rates, index):
        want = summary.threshold(list(zip(m, row)))
        assert (i < 0 and want is None) or m[i] == want
    # noisy trials: each exact from 2^(4 + 2 log2 x + N(0, 0.5)) on (exponent 2 of x)
    xs = [1.0, 2.0, 4.0, 8.0]
    success = [m[None] >= 2.0 ** (4 + 2 * np.log2(x) + rng.normal(0, 0.5, (200, 1))) for x in xs]
    out = thresholds.threshold_slope(success, [np.full(200, x) for x in xs], m, replicates=200)
    assert out.low <= 2.0 <= out.high and out.high - out.low < 1.5 and out.replicates == 200


# ----------------------------------------------------------------------------- every report's Theory bullets


def _report_rows(name, monkeypatch):
    """Small hand-made rows for a built-in study's report (the builders of its own test module)."""
    import test_addressing_samples_study
    import test_boosting
    import test_counterexamples_study as ce_rows
    import test_descent_studies
    import test_fourier_study
    import test_learning_study
    import test_rank_study
    import test_smoothed_base_study

    juntas = test_learning_study._junta_rows()
    gini = juntas.with_columns(impurity=np.full(len(juntas), "gini", object), cell=np.asarray(juntas["cell"]) + 2)
    both = Table({n: np.concatenate([np.asarray(juntas[n]), np.asarray(gini[n])]) for n in juntas.names})
    if name == "gd-scaling":
        from jaxtrees.experiments.studies import gd_scaling_fits

        monkeypatch.setattr(gd_scaling_fits, "BOOTSTRAP", 20)
        trials = test_descent_studies._synthetic_trials({(2, 0.0): 1.0, (2, 0.3): 0.6, (3, 0.0): 1.6, (3, 0.3): 0.1},
                                                        per_cell=8)
        return test_descent_studies._with_signal(trials)
    parity = Table({**{n: both[n] for n in ("cell", "replicate", "c", "m", "success", "exact_error", "p_min",
                                            "eps_star", "impurity")},
                    "log2_n": np.full(len(both), 4), "alpha": np.full(len(both), 0.05)})
    sb = test_smoothed_base_study._rows()
    return {"juntas": both, "parity": parity,
            "smoothed-base": sb.with_columns(impurity=np.where(np.asarray(sb["replicate"]) % 2, "gini", "entropy")
                                             .astype(object)),
            "addressing-samples": test_addressing_samples_study._rows(), "boosting": test_boosting._boosting_rows(),
            "rank": test_rank_study._rows(), "fourier": test_fourier_study._rows(),
            "addressing": ce_rows._rows([ce_rows._cell(k=8), ce_rows._cell(k=6), ce_rows._cell(code="coded", k=4)]),
            "agnostic": ce_rows._agnostic_rows()}[name]


@pytest.mark.parametrize("name", ["juntas", "parity", "smoothed-base", "addressing-samples", "boosting", "rank",
                                  "fourier", "gd-scaling", "addressing", "agnostic"])
def test_every_theory_bullet_of_a_report_begins_with_its_kind(name, monkeypatch):
    """Issue 65: each bullet of a report's Theory section begins with [test], [form], [vacuous], [identity] or
    [outside], and a [test] prints its closest bound/measured R <= 10 (or counts a violation)."""
    from jaxtrees.experiments import studies

    report = studies.get(name).report(_report_rows(name, monkeypatch))
    bullets = verdicts.theory_bullets(report)
    assert bullets and verdicts.unkinded(report) == []
    if name in ("juntas", "parity", "smoothed-base"):  # 000's Lipschitz theorems: forms on Gini, the rest outside
        lines = [b for b in bullets if " Thm" in b.split(":")[0]]
        assert {b.split("]")[0][3:] for b in lines} >= {"form", "outside"}
        assert all("Gini" in b for b in lines if b.startswith(("- [test]", "- [vacuous]", "- [form]")))


# ----------------------------------------------------------------------------- the kind, decided from the quantities


def test_decide_gives_each_kind_from_its_quantities():
    """One function decides every kind: a failed hypothesis, a statement true by construction, a claim no grid value
    could contradict, a bound held by more than 10x, and otherwise the measurement's own kind."""
    assert verdicts.decide("test", hypotheses=False, by_construction=True) == "outside"
    assert verdicts.decide("test", by_construction=True) == "identity"
    assert verdicts.decide("form", can_fail=False) == "vacuous"
    assert verdicts.decide("test", margin=10.5) == "vacuous"
    assert verdicts.decide("test", margin=9.5) == verdicts.decide("test", margin=0.2) == "test"
    assert verdicts.decide("form", margin=1e9) == "form"  # a form's margin is its slope's, not a ratio


def test_a_form_beyond_its_grids_reach_is_vacuous_and_inside_it_can_fail():
    """Exponent of 1/c over c = 0.1, 0.2 on m = 16..8192: at most log 512 / log 2 = 9; a claim <= 12 is beyond it
    (vacuous), <= 4 inside it, and a slope of 6 contradicts that."""
    reach = verdicts.slope_reach(np.log([10.0, 5.0]), math.log(16), math.log(8192))
    assert reach == pytest.approx((-9.0, 9.0))
    assert verdicts.slope_reach(np.log([10.0]), 0.0, 1.0) != verdicts.slope_reach(np.log([10.0]), 0.0, 1.0)  # NaN
    beyond = verdicts.Slope("c", 6.0, 6.0, 6.0, 12.0, "upper", reach=reach)
    inside = verdicts.Slope("c", 6.0, 6.0, 6.0, 4.0, "upper", reach=reach)
    assert (beyond.can_fail, inside.can_fail, inside.verdict) == (False, True, "CONTRADICTED")
    assert verdicts.Form("s", "x", "y", (beyond,)).kind == "vacuous"
    assert verdicts.Form("s", "x", "y", (inside,)).kind == "form"
    both = verdicts.line(verdicts.Form("000 Thm 12", "x", "y", (inside, beyond))).split("\n")
    assert [b[:10] for b in both] == ["- [form] 0", "- [vacuous"] and "no measurement here could contradict" in both[1]
    # a lower claim is beyond the reach below its smallest slope; a two-sided one can always fail
    assert not verdicts.Slope("k", 1.0, 0.5, 1.5, -10.0, "lower", reach=reach).can_fail
    assert verdicts.Slope("k", 1.0, 0.5, 1.5, 30.0, "equal", reach=reach).can_fail
    # per-cell offsets shift each cell's range: two x, spans [0, 1] and [-1, 0]: slopes -2 to 0 per unit of x
    assert verdicts.slope_reach([0.0, 1.0], [0.0, -1.0], [1.0, 0.0]) == pytest.approx((-2.0, 0.0))


def _curve(rates, grid, trials=20):
    return [{"m": m, "successes": round(r * trials), "trials": trials} for m, r in zip(grid, rates)]


def test_a_sample_size_bound_is_tested_in_m_and_can_fail():
    """003 Thm 2's shape: m from which the rate stays >= 0.9 against the bound's m. Reached at 32 under a bound of
    1,214: R = 37.9, vacuous; a bound of 100 (R 3.1): a test; the rate below 0.9 at m = 256 >= a bound of 100: violated;
    a grid step (32, 64] holding a bound of 50: counted at it; never reached under a bound past the grid: left out."""
    grid = [16, 32, 64, 128, 256]
    good = _curve([0.5, 1, 1, 1, 1], grid)
    far = verdicts.sample_size_check("003 Thm 2", "f", [(1214.0, good)], 0.9, "cells")
    assert (far.kind, far.respected, far.points) == ("vacuous", 1, 1) and far.closest == pytest.approx(1214 / 32)
    near = verdicts.sample_size_check("003 Thm 2", "f", [(100.0, good)], 0.9, "cells")
    assert near.kind == "test" and near.closest == pytest.approx(100 / 32)
    late = verdicts.sample_size_check("003 Thm 2", "f", [(100.0, _curve([1, 1, 1, 1, 0.5], grid))], 0.9, "cells")
    assert (late.respected, late.points, late.closest) == (0, 1, 0.0)
    step = verdicts.sample_size_check("003 Thm 2", "f", [(50.0, _curve([0, 0, 1, 1, 1], grid))], 0.9, "cells")
    assert (step.respected, step.closest) == (1, 1.0) and "counted at the bound" in step.note
    out = verdicts.sample_size_check("003 Thm 2", "f", [(1e4, _curve([0] * 5, grid)), (1214.0, good)], 0.9, "cells")
    assert out.points == 1 and "1 cell reach 0.9 nowhere" in out.note
    assert verdicts.line(far).startswith("- [vacuous] 003 Thm 2: f: bound / measured 37.9 over 1 cells")
