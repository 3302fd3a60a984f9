"""experiments/report/compare_rates.py: Newcombe's hybrid score interval for a difference of rates against his
published examples (Newcombe 1998, Table II, method 10) and an independent closed-form computation; the m for a
level with its bootstrap interval."""

import math

import numpy as np
import pytest

from jaxtrees.experiments.report import compare_rates

Z = 1.959964


def wilson(k, n, z=Z):
    p = k / n
    centre = (2 * k + z * z) / (2 * (n + z * z))
    half = z * math.sqrt(z * z + 4 * k * (1 - p)) / (2 * (n + z * z))
    return centre - half, centre + half


def newcombe(k1, n1, k2, n2):
    """Method 10 written from the paper's formula: delta = sqrt((p1 - l1)^2 + (u2 - p2)^2), epsilon likewise."""
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson(k1, n1), wilson(k2, n2)
    return p1 - p2, p1 - p2 - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), \
        p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


#: Newcombe 1998 Table II, method 10 (the hybrid score interval without continuity correction).
PUBLISHED = [((56, 70, 48, 80), (0.0524, 0.3339)), ((9, 10, 3, 10), (0.1705, 0.8090)),
             ((6, 7, 2, 7), (0.0582, 0.8062)), ((5, 56, 0, 29), (-0.0381, 0.1926)),
             ((0, 10, 0, 20), (-0.1611, 0.2775)), ((0, 10, 0, 10), (-0.2775, 0.2775)),
             ((10, 10, 0, 20), (0.6791, 1.0)), ((10, 10, 0, 10), (0.6075, 1.0))]


@pytest.mark.parametrize("counts, bounds", PUBLISHED)
def test_newcombe_method_10_matches_the_published_examples(counts, bounds):
    d, low, high = compare_rates.difference(*counts)
    assert d == pytest.approx(counts[0] / counts[1] - counts[2] / counts[3])
    assert (low, high) == pytest.approx(bounds, abs=1.1e-4)
    assert (d, low, high) == pytest.approx(newcombe(*counts), abs=2e-5)  # 1.96 against the exact z


def test_no_trials_give_nan():
    assert all(math.isnan(v) for v in compare_rates.difference(1, 0, 1, 2))


def test_threshold_interval_bounds():
    sure = compare_rates.threshold_interval([0, 0, 50, 50], [50] * 4, [8, 16, 32, 64])
    assert sure == (32.0, 32.0, 32.0)
    never = compare_rates.threshold_interval([0, 10, 20], [50] * 3, [8, 16, 32])
    assert never == (np.inf, np.inf, np.inf)
    edge = compare_rates.threshold_interval([10, 45, 45], [50] * 3, [8, 16, 32], replicates=500)
    assert edge.estimate == 16 and edge.low == 16 and edge.high == np.inf  # 45/50 = 0.9 redraws below half the time
