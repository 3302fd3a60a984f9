"""Your own question as a jaxtrees study: does ID3 still learn c-smoothed 3-juntas when labels are noisy?

    jaxtrees run notebooks/own_study.py --quick --out results     # rows, figure, report.md (generic ones)
    jaxtrees run notebooks/own_study.py --help                    # its parameters
"""

import jaxtrees as jt

N, K = 16, 3  # input bits, the junta's size


def trial(key, params):
    """ID3 on c-smoothed 3-juntas (n = 16) under label noise eta: P[exact error 0] and support recovery vs m."""
    keys = jt.trial_keys(key, "distribution", "target", "sample")
    p = jt.quantize(jt.distributions.Smoothed(0.5, params["c"]).marginals(keys["distribution"], N), 16)
    f = jt.random_junta(keys["target"], n=N, k=K)
    error, used = jt.learn_on_prefixes(keys["sample"], p, f, N, K, params, noise=params["eta"])
    return {"success": error <= 1e-6, "support_recovered": (used == jt.support_mask(f, N)).all(-1),
            "exact_error": error}


STUDY = jt.Study(
    name="juntas-noise", trial=trial, replicates=(100, 1000), axis=("m", jt.sample_sizes),
    grid=({"c": 0.1, "eta": [0.0, 0.05, 0.1], "m_min": 16, "m_max": 1024},
          {"c": [0.05, 0.1, 0.2], "eta": [0.0, 0.02, 0.05, 0.1, 0.2], "m_min": 16, "m_max": 8192}),
    static=("m_min", "m_max"),
    meanings={"eta": "label noise: each training label is flipped with probability eta",
              "c": "smoothing: p_i ~ U[1/2 - c, 1/2 + c]"},
)
