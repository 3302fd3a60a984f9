"""The ``compare`` study: every registered learner, common random numbers across learners, a
trial equal to the learner fitted directly, and the atlas's headline on a small grid."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import matplotlib.image
import numpy as np
import pytest

from jaxtrees import learners
from jaxtrees.core import sampling
from jaxtrees.experiments import studies
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.run import runner
from jaxtrees.experiments.table import Table
from jaxtrees.experiments.studies import compare, compare_report

PARAMS = {**compare.SHARED, "learner": "id3-entropy", "family": "junta", "k": 2, "n": 6, "c": 0.2, "test_m": 256,
          "m_max": 128}


def test_the_quick_and_full_grids_run_every_registered_learner():
    study = studies.get("compare")
    assert study.quick["learner"] == study.full["learner"] == compare.LEARNERS == learners.names()
    assert set(study.full["family"]) == set(compare.FAMILIES)


def test_every_learner_runs_in_one_of_four_programs_and_a_branch_stays_whole():
    """Issue 56: ``compare.PROGRAMS`` names every registered learner once; the learners of one branch (the
    id3-<impurity> learners and the stumps) share a program; an unnamed learner runs in the last."""
    named = [name for names in compare.PROGRAMS for name in names]
    assert sorted(named) == sorted(learners.names()) and len(compare.PROGRAMS) == 4
    assert len({compare.learner_program(name) for name in compare.GREEDY_BY_IMPURITY}) == 1
    assert compare.learner_program("no-such-learner") == len(compare.PROGRAMS) - 1
    study = studies.get("compare")
    assert len(study.programs(runner.configure(study, quick=True))) == 4


def test_a_cpu_runs_the_full_size_in_small_groups_and_the_quick_size_in_the_default():
    """The full size's float rows (1.6 MiB per trial) overflow the CPU budget at 32 trials a group;
    the quick size's (64 KiB) do not, so its rows stay those of the default group."""
    study, cpu = studies.get("compare"), jax.local_devices(backend="cpu")[0]
    full, quick = (study.working_set_per_trial({"n": size["n"], "m_max": size["m_max"]})
                   for size in (study.full, study.quick))
    assert runner.group_size(cpu, working_set=full) == 2
    assert runner.group_size(cpu, working_set=quick) == runner.GROUP


def test_every_learner_of_a_cell_gets_the_same_trial_keys():
    study = studies.get("compare")
    cells = [{**PARAMS, "learner": name} for name in ("id3-entropy", "km", "sgd")]
    assert len({study.key_hash(c) for c in cells}) == 1
    assert len({runner.cell_hash(c) for c in cells}) == 3
    other = {**PARAMS, "c": 0.0}
    assert study.key_hash(other) != study.key_hash(cells[0])


def test_trial_matches_the_learner_fitted_directly():
    key = jax.random.key(2)
    out = jax.jit(lambda k: compare._trial(k, PARAMS))(key)
    keys = compare.trial_keys(key, "distribution", "target", "sample")
    f = compare.target("junta", keys["target"], 6, 2)
    p = sampling.quantize(compare.distributions.Smoothed(jnp.float32(0.5), jnp.float32(0.2)).marginals(
        keys["distribution"], 6), compare.PRECISION_BITS)
    sample = sampling.draw(keys["sample"], p, f, 128, precision_bits=compare.PRECISION_BITS)
    learner = compare.configured("id3-entropy", 6, 2, PARAMS)
    tree = learner.fit(jax.random.fold_in(keys["sample"], 2), sampling.prefix(sample, 32))  # grid 16, 32, 64, 128
    assert float(out["error"][1]) == pytest.approx(float(tree.exact_error(p, f)))
    assert bool(out["exact"][0]) and np.asarray(out["examples"]).tolist() == [16, 32, 64, 128]


def test_parity_learners_beat_id3_on_uniform_parities(tmp_path):
    names = ["id3-entropy", "parities-k", "population-entropy", "km"]
    overrides = {**{k: v for k, v in PARAMS.items() if k != "learner"}, "learner": names, "family": "parity",
                 "c": 0.0, "n": 8, "m_max": 256}
    config = runner.configure(studies.get("compare"), quick=True, overrides=overrides, seed=0, replicates=12)
    path = runner.run(studies.get("compare"), config, str(tmp_path), progress=False)
    rows = runner.read_results(path)
    at = {name: rows.where(learner=name, m=256)["success"].mean() for name in names}
    assert len(rows.where(learner="km", m=256)) == 12
    assert at["parities-k"] == 1.0 and at["km"] >= 0.9 and at["id3-entropy"] <= 0.5, at
    assert rows.where(learner="km").unique("examples") == [17 * m for m in (16, 32, 64, 128, 256)]
    assert rows.where(learner="population-entropy").unique("examples") == [-1]
    report = studies.get("compare").report(rows)
    assert "learners reaching 0.9 that id3-entropy does not: km" in report and "parities-k (16)" in report


def test_bad_cells_are_refused():
    for change, match in (({"family": "addressing", "k": 2, "n": 7}, "k\\^2 \\+ 2\\^k"), ({"learner": "nope"}, "learner"),
                          ({"family": "rank", "k": 4, "n": 7}, "k must"), ({"depth": 11}, "depth")):
        with pytest.raises(ValueError, match=match):
            compare._check({**PARAMS, **change})


def test_a_rows_learner_names_what_ran_and_the_report_prints_its_settings():
    """Issue 35, case 3: rows labelled find-2 and parities-1 (the registry's FIND(2) and 1-parities)
    once came from FIND(k) and Parities(min(k, 3)). The registry's names say what they run at any
    size, fixed-size names are refused, and the report prints every learner's settings."""
    for old in ("find-2", "findmin-3", "lmn-1", "parities-1", "sparse-1", "adaboost-parities"):
        with pytest.raises(ValueError, match="^learner must be one of"):
            compare._check({**PARAMS, "learner": old})
    params = {**PARAMS, "k": 3, "n": 8}
    assert compare.configured("find-k", 8, 3, params) == learners.find(3, max_calls=params["max_calls"])
    assert compare.configured("parities-k", 8, 3, params) == learners.Parities(degree=3)
    assert compare.configured("adaboost-parities-2", 8, 3, params).weak == learners.Parities(degree=2)
    rows = [{**{name: str(value) for name, value in params.items()}, "learner": name, "m": "16"}
            for name in ("find-k", "km", "sgd")]
    table = compare._settings_table(Table.from_rows(rows))  # as the report sees them
    assert "| find-k | k = 3, n = 8 | `FindMin(max_rank=3, min_rank=3, max_calls=262144)` |" in table
    assert "| km | k = 3, n = 8 | `m = 16: KushilevitzMansour(theta=0.1" in table and "; m = 128: " in table
    assert "| sgd | k = 3, n = 8 | `MLP of width 64, hinge loss, optax.sgd at learning rate 0.05, 400 steps" in table


def test_parities_and_juntas_share_a_program_and_keep_their_rows(tmp_path):
    """Issue 34: families whose targets are juntas (a parity as a junta) are one bucket, so one program
    serves them and another the trees; each family's rows are those of a run of that family alone."""
    study = studies.get("compare")
    base = {**{k: v for k, v in PARAMS.items() if k != "family"}, "learner": "id3-entropy", "n": 6, "m_max": 64}

    def run(families, out):
        config = runner.configure(study, quick=True, overrides={**base, "family": families}, seed=3, replicates=6)
        assert len(study.programs(config)) == len({compare.JUNTAS.count(f) > 0 or f for f in families})
        path = runner.run(study, config, str(tmp_path / out), progress=False)
        return runner.read_results(path)

    together = run(["parity", "junta", "tree"], "together")
    for family in ("parity", "junta", "tree"):
        alone, mine = run([family], family), together.where(family=family)
        assert len(mine) == len(alone) > 0
        np.testing.assert_array_equal(mine["success"], alone["success"])
        np.testing.assert_allclose(mine["error"], alone["error"], atol=1e-6)


def test_id3_impurities_share_a_program_and_keep_their_rows(tmp_path):
    """Issue 34: the learners of a program (``compare.PROGRAMS``; issue 56: four, compiled side by side) run in
    it as a ``lax.switch`` on the learner's traced index over their branches (the id3-<impurity> learners and
    the stumps one branch, the impurity and the depth by the traced index: a stump is ID3 at depth 1); each
    learner's rows are those of a run of that learner alone (a stump alone is the Stump learner, a learner
    alone has no switch)."""
    study = studies.get("compare")
    base = {**{k: v for k, v in PARAMS.items() if k != "learner"}, "family": "parity", "n": 6, "m_max": 64}
    names = ["id3-gini", "stump-error", "id3-random-ties", "km", "population-entropy", "findmin", "adaboost-stumps"]

    def run(learners, out):
        config = runner.configure(study, quick=True, overrides={**base, "learner": learners}, seed=3, replicates=6)
        path = runner.run(study, config, str(tmp_path / out), progress=False)
        return study.programs(config), runner.read_results(path)

    programs, together = run(names, "together")
    assert sorted(map(set, (p["learner_choices"] for p in programs)), key=sorted) == [
        {"adaboost-stumps"}, {"findmin"}, {"id3-gini", "id3-random-ties", "population-entropy", "stump-error"}, {"km"}]
    for name in names:
        alone, mine = run([name], name)[1], together.where(learner=name)
        assert mine.names == alone.names and len(mine) == len(alone) > 0, name
        for column in mine.names:
            if column != "cell":  # a row's cell is its index in its grid
                np.testing.assert_array_equal(mine[column], alone[column], err_msg=f"{name}: {column}")


def test_a_parity_as_a_junta_is_the_same_function_with_the_same_exact_oracle():
    from jaxtrees import targets

    key = jax.random.key(4)
    f = targets.random_parity(key, 9, 3)
    g = targets.as_junta(f)
    x = jax.random.bernoulli(key, 0.5, (256, 9))
    assert np.array_equal(np.asarray(f(x)), np.asarray(g(x)))
    p = jax.random.uniform(key, (9,), minval=0.2, maxval=0.8)
    fixed, values = jnp.zeros(9, bool).at[2].set(True), jnp.zeros(9, jnp.int32).at[2].set(1)
    for a, b in zip(f.means(p, fixed, values), g.means(p, fixed, values)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)
    assert targets.as_junta(g) is g
    with pytest.raises(ValueError, match="as_junta takes a Junta or a Parity"):
        targets.as_junta(targets.random_tree(key, 9, 2))


def test_theorem2_is_checked_and_marked_for_find_k_and_findmin(tmp_path):
    """Issue 57: 003 Theorem 2's m(0.1, 0.1) for r = k on the rank-k families: n = 8, k = 2: (1/0.1) ((8e/2)^2 ln 64 +
    ln 10) = 10 (118.23 * 4.1589 + 2.3026) = 4,940 (the quick grid's m_max 1024 lies below it); n = 4, k = 1:
    10 (4e ln 32 + ln 10) = 10 (10.873 * 3.4657 + 2.3026) = 399.9."""
    assert compare_report.theorem2_m("parity", 2, 8) == pytest.approx(4939.6, abs=1)
    assert compare_report.theorem2_m("tree", 1, 4) == pytest.approx(399.86, abs=0.05)
    assert compare_report.theorem2_m("addressing", 2, 8) is None
    m = np.array([256, 512, 256, 512])
    rows = Table({"family": np.full(4, "junta", object), "k": np.full(4, 1), "n": np.full(4, 4), "c": np.zeros(4),
                  "learner": np.array(["findmin", "findmin", "find-k", "find-k"], object), "m": m,
                  "error": np.array([0.3, 0.05, 0.3, 0.2]), "success": np.zeros(4, int)})
    text = compare_report.theorem2_report(rows)
    # past m = 399.9: m = 512 of both learners; findmin's error 0.05 <= 0.1 (share 1), find-k's 0.2 (share 0)
    # in m: findmin reaches 0.9 at 512, one grid step (256, 512] past 399.9: counted at the bound; find-k never does,
    # its rate 0 at m = 512 >= 399.9: it fails
    assert "- [test] 003 Thm 2 (Thm 3 for depth-k trees): P[error <= 0.1] >= 0.9 for find-k and findmin from m >= " \
           "(1/eps) ((e n / r)^r ln(8n) + ln(1/delta)), r = k; the bound's m against the measured m from which the rate " \
           "stays >= 0.9: holds in 1 of 2 (cell, learner) curves; closest bound/measured 0." in text
    assert "1 cell reach 0.9 within one grid step past the bound's m" in text
    panels = {(1, 4, 0.0): {name: tables.rates(rows.where(learner=name), ["m"], "success")
                            for name in ("findmin", "find-k")}}
    compare_report.family_plot(panels, "junta", str(tmp_path / "compare_junta"))
    assert (tmp_path / "compare_junta.png").stat().st_size > 5000


def test_the_report_labels_learners_scored_on_a_test_sample_as_estimated():
    """lmn-k's success is no mistake on test_m fresh points: the map marks it "(est.)" and says what that means;
    trees, scored exactly, are not marked."""
    from jaxtrees.experiments.table import Table

    rows = Table({"family": np.array(["junta"] * 4, object), "k": np.array([2] * 4), "n": np.array([8] * 4),
                  "c": np.array([0.1] * 4), "learner": np.array(["id3-entropy", "id3-entropy", "lmn-k", "lmn-k"], object),
                  "m": np.array([16, 32, 16, 32]), "success": np.array([1, 1, 1, 1], np.int8),
                  "error": np.zeros(4, np.float32), "exact": np.array([1, 1, 0, 0], np.int8),
                  "test_m": np.array([2048] * 4), "cell": np.zeros(4, np.int64), "replicate": np.arange(4)})
    text = compare_report.report(rows, "")
    assert "| lmn-k (est.) |" in text and "| id3-entropy |" in text
    assert "(est.): lmn-k are scored on test_m = 2,048 fresh examples" in text
    assert compare_report._label("lmn-k", compare_report._estimated(rows)) == "lmn-k (est.)"


def test_a_users_learner_runs_in_the_atlas_beside_the_registry_s(tmp_path):
    """compare.with_learners: a learner registered by the user (here: a stump under another name) runs on the
    atlas' trials beside a built-in one, and on the same samples gives the same rows as the built-in it copies."""
    from jaxtrees.experiments.studies import compare

    learners.register("my-stump", lambda s: learners.Stump(impurity="gini"), about="a copy of stump-gini")
    try:
        study = compare.with_learners(["my-stump", "stump-gini"], name="atlas-mine")
        config = runner.configure(study, quick=True, overrides={"replicates": 2, "m_max": 32, "family": "junta",
                                                                 "c": 0.2})
        rows = runner.read_results(runner.run(study, config, str(tmp_path), progress=False))
    finally:
        learners.unregister("my-stump")
    mine, theirs = (rows.take(np.asarray(rows["learner"]) == name) for name in ("my-stump", "stump-gini"))
    assert len(mine) == len(theirs) > 0
    np.testing.assert_array_equal(np.asarray(mine["error"]), np.asarray(theirs["error"]))
    png = compare_report._overview_plot(mine, str(tmp_path / "one-learner"))[0]
    assert matplotlib.image.imread(png).shape[0] >= 2.5 * 130  # room for its title, panel, axis and legend at 130
    # dpi (before: 1.5 in tall, 221 px, the title over the axes)
    text = compare_report.report(mine, "")  # no id3-entropy: no claims of it, what each learner reaches per cell
    assert "The seeds claim" not in text and "id3-entropy" not in text
    assert "- 2-juntas, n = 8, c = 0.2: " in text or "- 3-juntas, n = 8, c = 0.2: " in text, text
    with pytest.raises(ValueError, match="registered learner names, got \\['nope'\\]"):
        compare.with_learners(["nope"])
