"""The gradient-descent studies (gd-parity-uniform, gd-smoothed, gd-vs-id3, gd-scaling) at a tiny size through the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import helpers

from jaxtrees import cli, targets
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.report import summary
from jaxtrees.experiments.results import reading
from jaxtrees.experiments.studies import gd_common, gd_parity, gd_scaling, gd_scaling_fits
from jaxtrees.experiments.table import Table

NET = ["--set", "width=16", "--set", "max_steps=120", "--set", "eval_every=40", "--set", "test_size=64",
       "--chunk", "32", "--no-progress"]
TINY = {
    "gd-parity-uniform": ["--set", "n=6", "--set", "k=1,2", "--set", "replicates=3", *NET],
    "gd-smoothed": ["--set", "n=5,7", "--set", "k=2", "--set", "c=0,0.3", "--set", "replicates=3", *NET],
    "gd-vs-id3": ["--set", "n=6", "--set", "k=2", "--set", "c=0,0.2", "--set", "m_max=128", "--set", "replicates=3",
                  *NET],
}
COLUMNS = {
    "gd-parity-uniform": {"steps", "learned", "final_error", "support_share", "drift"},
    "gd-smoothed": {"steps", "learned", "final_error", "support_share", "drift", "c"},
    "gd-vs-id3": {"tree_examples", "tree_error", "net_steps", "net_examples", "net_error", "net_support_share"},
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_study_runs_plots_and_reports(tmp_path, capsys, unclipped_figures, name):
    assert cli.main(["run", name, "--quick", "--out", str(tmp_path), *TINY[name]]) == 0
    directory = tmp_path / name
    rows = reading.read_results(str(directory))
    cells = 2 if name == "gd-parity-uniform" else 4 if name == "gd-smoothed" else 2
    assert len(rows) == cells * 3
    assert COLUMNS[name] <= set(rows.names)
    s = np.asarray(rows["net_steps" if name == "gd-vs-id3" else "steps"], np.int64)
    assert np.all((s == -1) | ((s % 40 == 0) & (40 <= s) & (s <= 120))), s  # recorded steps or censored
    if name == "gd-vs-id3":
        t, e = np.asarray(rows["tree_examples"], np.int64), np.asarray(rows["net_examples"], np.int64)
        assert np.all((t == -1) | np.isin(t, [16, 32, 64, 128])), t
        np.testing.assert_array_equal(e, np.where(s < 0, -1, 32 * s))
        exact = np.asarray(rows["tree_error"]) <= 1e-6  # exact at m_max, so reached eps somewhere on the m-grid
        assert np.all(t[exact] != -1)
    else:
        assert set(np.unique(rows["learned"]).tolist()) <= {0, 1}
        np.testing.assert_array_equal(rows["learned"] == 1, s >= 0)
    assert (directory / f"{name}.png").stat().st_size > 10_000
    assert (directory / f"{name}.svg").exists()
    report = (directory / "report.md").read_text()
    assert report.startswith(f"# jaxtrees study `{name}`") and "|---|" in report
    assert helpers.assert_valid_markdown_tables(report) >= 1
    columns = json.loads((directory / "metadata.json").read_text())["columns"]
    assert set(rows.names) <= set(columns), "every result column is described in metadata.json"
    if name == "gd-parity-uniform":  # the Barak et al. claim next to the medians; a tiny budget decides nothing
        assert "all within 100,000 steps" in report and "is below Barak et al.'s 100,000" in report
        learned = int((s >= 0).sum())  # issue 57: the Theory section checks the claim over the learned trials
        assert "every k-parity (n <= 30, k <= 4) learned within 100,000 steps: " in report  # issue 65: a kind first
        assert f"over {learned} learned trials: vacuous at this size" in report or f"holds in {learned} of {learned} " \
            "learned trials" in report
        assert f"{len(s) - learned} trials censored" in report
    assert "## Theory" in report  # issue 57: every report says what the seeds bound here, or that they do not
    if name == "gd-smoothed":
        assert "median vs uniform" in report and "Growth in n" in report
    if name == "gd-vs-id3":
        assert "ID3 examples, median [IQR]" in report and "SGD examples, median [IQR]" in report
    capsys.readouterr()
    assert cli.main(["report", str(directory)]) == 0
    assert capsys.readouterr().out.strip() == report.strip()


@pytest.mark.parametrize("name, args, message", [
    ("gd-parity-uniform", ["--set", "k=7", "--set", "n=6"], "k must be in [1, 6]"),
    ("gd-parity-uniform", ["--set", "lr=0"], "lr must be in (0, 100]"),
    ("gd-parity-uniform", ["--set", "eval_every=300", "--set", "max_steps=1000"], "eval_every must divide max_steps"),
    ("gd-parity-uniform", ["--set", "loss=l1"], "loss must be one of"),
    ("gd-smoothed", ["--set", "c=0.5"], "c must be in [0, 0.5)"),
    ("gd-smoothed", ["--set", "width=0"], "width must be in [1, 65536]"),
    ("gd-vs-id3", ["--set", "eps=0.6"], "eps must be in [0, 0.5)"),
    ("gd-vs-id3", ["--set", "m_max=1000"], "powers of two"),
    ("gd-vs-id3", ["--set", "k=13", "--set", "n=20"], "k must be in [1, 12]"),
    ("gd-vs-id3", ["--set", "depth=3"], "unknown parameter 'depth'"),
])
def test_bad_parameters_exit_2(tmp_path, capsys, name, args, message):
    assert cli.main(["run", name, "--quick", "--out", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / name).exists()  # refused before any work


def test_mask_parity_matches_parity_and_subset_is_uniform():
    n, k = 9, 3
    mask = targets.random_subset(jax.random.key(3), n, k)
    assert int(mask.sum()) == k
    x = jax.random.bernoulli(jax.random.key(4), 0.5, (200, n))
    support = np.flatnonzero(np.asarray(mask))
    assert (targets.MaskParity(mask)(x) == targets.parity(support, n)(x)).all()
    counts = jax.vmap(lambda key: targets.random_subset(key, n, k))(jax.random.split(jax.random.key(5), 3000))
    freq = np.asarray(counts.mean(axis=0))
    assert np.allclose(freq, k / n, atol=0.04)  # every coordinate equally likely
    traced = jax.jit(lambda key, kk: targets.random_subset(key, n, kk).sum())(jax.random.key(1), jnp.int32(4))
    assert int(traced) == 4


def test_mask_parity_oracle_equals_the_parity_oracle():
    """MaskParity.means (leave-one-out products over the mask) equals Parity.means on the same J."""
    n, support = 9, [1, 4, 7]
    mask = np.isin(np.arange(n), support)
    p = jnp.asarray(np.random.default_rng(0).uniform(0.05, 0.95, n), jnp.float32)
    fixed = jnp.asarray(np.arange(n) % 3 == 0)
    values = jnp.asarray(np.arange(n) % 2 == 0)
    mu, mu1 = targets.MaskParity(jnp.asarray(mask)).means(p, fixed, values)
    mu_ref, mu1_ref = targets.parity(support, n).means(p, fixed, values)
    np.testing.assert_allclose(mu, mu_ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(mu1, mu1_ref, rtol=0, atol=1e-6)


def test_report_warns_of_diverged_networks():
    """Networks whose weights went non-finite (too large a learning rate) are named in the report."""
    rows = Table({"drift": np.asarray([np.nan, np.inf, 0.5], np.float32), "lr": [50.0, 50.0, 50.0]})
    assert "**diverged: 2 of 3 trials** ended with non-finite weights (learning rate 50.0 " in gd_common.divergence_note(rows)
    assert gd_common.divergence_note(rows.take([2])) == ""


# ----------------------------------------------------------------------------- gd-scaling

SCALING_TINY = ["--set", "family=parity,junta", "--set", "n=6,16", "--set", "k=2", "--set", "c=0,0.3",
                "--set", "init=he,lecun-nobias",
                "--set", "width=16", "--set", "max_steps=256", "--set", "eval_every=8", "--set", "test_size=64",
                "--set", "records_per_doubling=4", "--set", "replicates=4", "--chunk", "32", "--no-progress"]


def test_gd_scaling_runs_plots_and_reports_the_exponent_table(tmp_path, capsys, unclipped_figures, monkeypatch):
    assert cli.main(["run", "gd-scaling", "--quick", "--out", str(tmp_path), *SCALING_TINY]) == 0
    directory = tmp_path / "gd-scaling"
    rows = reading.read_results(str(directory))
    params = {**gd_scaling.GD_SCALING.quick, "n": 6, "k": 2, "width": 16, "max_steps": 256, "eval_every": 8,
              "test_size": 64, "records_per_doubling": 4}
    marks = gd_scaling.checkpoints(params)
    assert marks[-1] == 256 and set(marks) <= set(gd_scaling.scaling_config(params).record_steps)
    assert len(rows) == 2 * 2 * 2 * 2 * 4 * len(marks)  # families x n x c x inits x replicates, along the step axis
    records = gd_scaling.scaling_config(params).record_steps
    trials = rows.take(rows["step"] == 256)
    assert len(trials) == 64
    s, s_eps = np.asarray(trials["steps"], np.int64), np.asarray(trials["steps_eps"], np.int64)
    assert np.all((s == -1) | np.isin(s, records)) and np.all((s_eps == -1) | np.isin(s_eps, records))
    np.testing.assert_array_equal(trials["learned"] == 1, s >= 0)
    np.testing.assert_array_equal(trials["learned_eps"] == 1, s_eps >= 0)
    assert np.all((0 <= s_eps[s >= 0]) & (s_eps[s >= 0] <= s[s >= 0]))  # issue 38: error 0 is <= 0.05: met no later
    sep, sep_first = np.asarray(trials["separated_all"], np.int64), np.asarray(trials["separated_first"], np.int64)
    assert np.all((sep == -1) | (np.isin(sep, records) & (sep_first <= sep)))
    uniform_parity = (trials["family"] == "parity") & (trials["c"] == 0)
    assert uniform_parity.sum() == 16
    assert np.all(np.abs(trials["influence_max"][uniform_parity]) < 1e-6)  # no degree-1 signal for a uniform 2-parity
    assert np.all(trials["influence_min"][trials["c"] > 0] > 0)
    earlier = (s_eps < s) | ((s < 0) & (s_eps >= 0))
    assert earlier.sum() >= 4, "the looser criterion must be met earlier in some trials"
    by_init = tables.split(trials, ["family", "n", "c", "replicate"])  # both inits train on the same p, target and
    assert len(by_init) == 32  # data (init is a shared parameter)
    for pair in by_init.values():
        assert sorted(pair["init"].tolist()) == ["he", "lecun-nobias"]
        assert pair["influence_min"][0] == pair["influence_min"][1]
    assert sum(pair["drift"][0] != pair["drift"][1] for pair in by_init.values()) >= 16
    made = (rows["steps"] < 0) | (rows["step"] <= rows["steps"])  # the norms are NaN exactly at the checkpoints
    np.testing.assert_array_equal(np.isnan(rows["norm_on"]), ~made)  # after the trial stopped (learned)
    np.testing.assert_array_equal(np.isnan(rows["norm_off"]), ~made)
    report = (directory / "report.md").read_text()
    assert "exponent of n [95% CI]" in report and "Exponent of 1/c" in report and "Step J separated" in report
    assert helpers.assert_valid_markdown_tables(report) >= 5
    assert "### Sensitivity: criterion x range of n x fit x initialisation" in report
    assert "| Tobit, all n | Tobit, n >= 16 | medians, all n | medians, n >= 16 |" in report
    for criterion in ("error 0", "error <= 0.05"):
        for init in ("he", "lecun-nobias"):
            assert f"| parity | 2 | 0.3 | {criterion} | {init} |" in report
    assert "Claims, each checked in every one of the 16 variants" in report  # criteria x inits x ranges x fits
    assert "- Smoothing lowers the exponent of n of 2-parities (c = 0.3 below c = 0): " in report
    assert "### Local slopes" in report and "| 6→16 |" in report
    assert "median steps to error <= 0.05 [IQR]" in report
    metadata = json.loads((directory / "metadata.json").read_text())
    assert metadata["config"]["grid"]["init"] == ["he", "lecun-nobias"]
    programs = metadata["runs"][-1]["compile_seconds"]
    assert len(programs) == 2 and all('"init_choices": ["he", "lecun-nobias"]' in p and
                                      '"family_choices": ["parity", "junta"]' in p for p in programs)  # one per n
    assert (directory / "gd-scaling.png").stat().st_size > 10_000
    assert (directory / "gd-scaling_mechanism.png").stat().st_size > 10_000
    columns = json.loads((directory / "metadata.json").read_text())["columns"]
    assert set(rows.names) <= set(columns), "every result column is described in metadata.json"
    capsys.readouterr()
    assert cli.main(["report", str(directory)]) == 0
    assert capsys.readouterr().out.strip() == report.strip()
    adam = rows.with_columns(optimizer=np.full(len(rows), "adam", object))  # issue 35, case 4: the figures and
    # report name Adam
    titles = []
    monkeypatch.setattr(summary, "suptitle", lambda fig, text: titles.append(text))
    gd_scaling.GD_SCALING.plot(adam, str(tmp_path / "adam"))
    text = gd_scaling.GD_SCALING.report(adam)
    assert titles[0].startswith("Adam (width-16 ReLU MLP), online")
    assert "## Adam steps to learn" in text and "Adam learning rate" in text and "SGD" not in text


def test_gd_networks_are_titled_with_the_optimizer_of_their_rows():
    """Issue 35, case 4: gd-scaling with --set optimizer=adam once titled and reported its figures 'SGD'."""
    row = {"width": "16", "lr": "0.01", "batch_size": "32", "loss": "hinge", "max_steps": "256", "optimizer": "adam"}
    one = Table.from_rows([row])
    assert gd_common.network_title(one) == "width-16 ReLU MLP, Adam"
    assert "Adam learning rate 0.01" in gd_common.network_text(one) and "SGD" not in gd_common.network_text(one)
    assert gd_common.network_title(Table.from_rows([row, {**row, "optimizer": "sgd"}])) == "width-16 ReLU MLP, Adam/SGD"
    no_parameter = {k: v for k, v in row.items() if k != "optimizer"}  # gd-smoothed, gd-vs-id3: optax.sgd
    assert gd_common.network_title(Table.from_rows([no_parameter])) == "width-16 ReLU MLP, SGD"
    subset = Table.from_rows([row, {**row, "optimizer": "sgd", "width": "32"}]).take([0])  # only its own rows' values
    assert gd_common.network_title(subset) == "width-16 ReLU MLP, Adam"


def test_gd_scaling_trial_is_the_gd_smoothed_trial_at_n30_k3():
    """Same code path: on the same trial keys, gd-scaling (with records every K steps: r = 4096 puts
    the first 4096 records K apart) trains on the same p, function and data as gd-smoothed and learns
    in the same steps, but for float32 rounding: its parity is a padded junta (one program with the
    juntas), labelling alike, in a program that XLA compiles differently, so a trial's SGD path may
    move by a record or two. (Geometric records change only when the test error is looked at:
    tests/test_gd.py.)"""
    params = {"n": 30, "k": 3, "c": jnp.float32(0.3), "lr": jnp.float32(0.1), **gd_common.BARAK, "test_size": 512,
              "max_steps": 4096, "eval_every": 16}
    keys = jax.random.split(jax.random.key(11), 8)
    smoothed = jax.jit(jax.vmap(lambda key: gd_parity.GD_SMOOTHED.trial(key, params)))(keys)
    scaling = {**params, "family": "parity", "optimizer": "sgd", "records_per_doubling": 4096, "k_max": 3,
               "eps": jnp.float32(0.05), "init": "he"}
    assert gd_scaling.scaling_config(scaling).record_steps.tolist() == list(range(16, 4097, 16))
    out = jax.jit(jax.vmap(lambda key: gd_scaling.GD_SCALING.trial(key, scaling)))(keys)
    want, got = np.asarray(smoothed["steps"]), np.asarray(out["steps"])
    assert (want > 0).sum() >= 6, "most trials must learn for the comparison to say anything"
    assert (got == want).sum() >= 6, (got, want)
    np.testing.assert_allclose(got, want, rtol=0.05)
    np.testing.assert_allclose(np.median(got), np.median(want), rtol=0.05)


def _scaling_params(**changes):
    """One gd-scaling cell's trial parameters as the runner passes them (traced ones as arrays)."""
    params = {"family": "parity", "n": 6, "k": 2, "k_max": 2, "c": jnp.float32(0.3), "lr": jnp.float32(0.3),
              "width": 16, "batch_size": 32, "loss": "hinge", "test_size": 64, "eval_every": 8,
              "records_per_doubling": 4, "optimizer": "sgd", "eps": jnp.float32(0.05), "init": "he", "max_steps": 128}
    return {**params, **changes}


def test_gd_scaling_budget_and_init_are_traced_and_change_no_number():
    """Issue 38: a program built for 256 steps and two inits runs a cell with max_steps = 128 and init he
    (both traced) exactly as the program compiled for that cell alone: the same steps, the same
    checkpoints (the runner keeps the cell's first ones); lecun-nobias in the same program trains differently."""
    keys = jax.random.split(jax.random.key(3), 8)
    alone = jax.jit(jax.vmap(lambda key: gd_scaling.GD_SCALING.trial(key, _scaling_params())))(keys)
    shared = jax.jit(jax.vmap(lambda key, budget, init: gd_scaling.GD_SCALING.trial(key, _scaling_params(
        max_steps=budget, max_steps_max=256, init=init, init_choices=tuple(gd_scaling.INITS))), in_axes=(0, None, None)))
    he = shared(keys, jnp.int32(128), jnp.int32(0))
    marks = len(gd_scaling.checkpoints(_scaling_params()))
    assert alone["norm_on"].shape == (8, marks) and he["norm_on"].shape == (8, len(gd_scaling.checkpoints(
        _scaling_params(max_steps=256))))
    for name, want in alone.items():
        got = np.asarray(he[name])[:, :marks] if name.startswith("norm") else np.asarray(he[name])
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6, atol=1e-7, equal_nan=True, err_msg=name)
    assert (np.asarray(alone["steps"]) > 0).sum() >= 3, "trainings must learn within 128 steps for the test to bite"
    other = shared(keys, jnp.int32(128), jnp.int32(1))
    assert not np.allclose(np.asarray(other["drift"]), np.asarray(he["drift"]))
    np.testing.assert_array_equal(np.asarray(other["influence_min"]), np.asarray(he["influence_min"]))
    longer = shared(keys, jnp.int32(256), jnp.int32(0))  # the same program, twice the budget
    s, s_long = np.asarray(he["steps"]), np.asarray(longer["steps"])
    np.testing.assert_array_equal(s_long[s >= 0], s[s >= 0])
    assert shared._cache_size() == 1


def test_gd_scaling_parity_is_the_mask_parity_as_a_padded_junta():
    """Issue 34: gd-scaling's parity, a padded junta (one pytree with the juntas), is
    MaskParity(random_subset(...))'s function and support, with its influences to float32 rounding."""
    def both(key, x, n, k, k_max):
        """Labels, support masks and influences of the two parities on the same key."""
        p = jax.random.uniform(jax.random.fold_in(key, 1), (n,), minval=0.2, maxval=0.8)
        out = []
        for f in (gd_scaling.FAMILIES["parity"](key, n, k, k_max), targets.MaskParity(targets.random_subset(key, n, k))):
            out.append((f(x), f.support_mask(n), targets.label_covariance(f, p)))
        return out

    for n, k, k_max in ((6, 2, 2), (16, 3, 5), (30, 1, 4)):
        x = np.random.default_rng(n).integers(0, 2, (256, n))
        keys = jax.random.split(jax.random.key(n), 8)
        junta, mask_parity = jax.jit(jax.vmap(lambda key, k: both(key, x, n, k, k_max), in_axes=(0, None)))(
            keys, jnp.int32(k))  # k traced
        np.testing.assert_array_equal(junta[0], mask_parity[0])
        np.testing.assert_array_equal(junta[1], mask_parity[1])
        assert (np.asarray(junta[1]).sum(-1) == k).all()
        np.testing.assert_allclose(junta[2], mask_parity[2], atol=3e-7)


def test_gd_scaling_families_share_a_program_and_keep_their_rows():
    """Issue 34: parities and juntas share a program (the family a traced index): each family's rows in
    it equal its program alone, float columns within the determinism contract's tolerance (README: two
    programs may round a float 1 ulp apart; the influences' NaN guard for an out-of-range k fuses differently)."""
    keys = jax.random.split(jax.random.key(5), 8)
    shared = jax.jit(jax.vmap(lambda key, family: gd_scaling.GD_SCALING.trial(key, _scaling_params(
        family=family, family_choices=tuple(gd_scaling.FAMILIES))), in_axes=(0, None)))
    for index, family in enumerate(gd_scaling.FAMILIES):
        alone = jax.jit(jax.vmap(lambda key: gd_scaling.GD_SCALING.trial(key, _scaling_params(family=family))))(keys)
        got = shared(keys, jnp.int32(index))
        for name, want in alone.items():
            got_, want = np.asarray(got[name]), np.asarray(want)
            if np.issubdtype(want.dtype, np.floating):
                np.testing.assert_allclose(got_, want, rtol=1e-6, atol=0, err_msg=f"{family}: {name}")
            else:
                np.testing.assert_array_equal(got_, want, err_msg=f"{family}: {name}")
    assert shared._cache_size() == 1


def _synthetic_trials(exponents, per_cell=16, budget=2**16, seed=0):
    """gd-scaling results (a Table, one row per trial) whose steps follow n^a for a = exponents[(k, c)];
    the 0.05 criterion is met at 0.7 of the steps; both inits alike."""
    rng = np.random.default_rng(seed)
    cells = [(k, c, a, init, n) for (k, c), a in exponents.items() for init in gd_scaling.INITS
             for n in (8, 16, 32, 64)]
    k, c, a, init, n = (np.repeat(np.asarray(v, dtype=object if i == 3 else None), per_cell)
                        for i, v in enumerate(zip(*cells)))
    size = len(cells) * per_cell
    steps = (20 * n**a * np.exp(0.3 * rng.standard_normal(size))).astype(np.int64)
    steps = np.where(steps <= budget, steps, -1)
    loose = np.where(steps < 0, -1, np.maximum(8, (0.7 * steps).astype(np.int64)))
    full = lambda value: np.full(size, value, dtype=object if isinstance(value, str) else None)  # noqa: E731
    return Table({"study": full("gd-scaling"), "cell": np.repeat(np.arange(len(cells)), per_cell),
                  "replicate": np.tile(np.arange(per_cell), len(cells)), "family": full("parity"), "k": k, "c": c,
                  "n": n, "init": init, "eps": full(0.05), "steps": steps.astype(np.int32),
                  "steps_eps": loose.astype(np.int32), "max_steps": full(budget), "step": full(budget),
                  "records_per_doubling": full(8), "eval_every": full(8), "test_size": full(2048), "width": full(100),
                  "lr": full(0.1), "batch_size": full(32), "loss": full("hinge"), "optimizer": full("sgd"),
                  "separated_all": full(-1).astype(np.int32), "influence_min": np.zeros(size, np.float32),
                  "influence_max": np.zeros(size, np.float32),
                  "drift": np.ones(size, np.float32)})


def test_gd_scaling_claims_say_whether_they_hold_in_every_variant(monkeypatch):
    """Issue 38: the report's sentences: smoothing lowers the exponent (here in every variant), the
    exponent grows with k (here not at c = 0.3, in every variant), and local slopes between consecutive n."""
    monkeypatch.setattr(gd_scaling_fits, "BOOTSTRAP", 40)  # the intervals are not tested here; the tests compile at -O0
    rows = _synthetic_trials({(2, 0.0): 1.0, (2, 0.3): 0.6, (3, 0.0): 1.6, (3, 0.3): 0.1})
    report = gd_scaling.GD_SCALING.report(rows)
    assert helpers.assert_valid_markdown_tables(report) == 4  # exponents, sensitivity, local slopes, cells
    assert ("- Smoothing lowers the exponent of n of 3-parities (c = 0.3 below c = 0): **holds in every variant** "
            "(16 of 16).") in report
    assert "- The exponent of n grows with k (k = 2, 3) for parities at c = 0: **holds in every variant**" in report
    assert ("- The exponent of n grows with k (k = 2, 3) for parities at c = 0.3: **fails in every variant** (16 of "
            "16).") in report
    assert "| 8→16 | 16→32 | 32→64 |" in report and "- The uniform 3-parities bend upward on log-log axes" in report
    trials = gd_scaling_fits.trials(rows)
    local = gd_scaling_fits.local_slopes(trials, ["family", "k", "c"])
    slopes = [s for _, _, s in local[(("parity", 3, 0.0), "error 0", "he")]]
    assert len(slopes) == 3 and all(abs(v - 1.6) < 0.6 for v in slopes)  # sd ~0.2 each: 16 trials per median
    fits = gd_scaling_fits.sensitivity(trials, ["family", "k", "c"])
    for (key, variant), (slope, _) in fits.items():  # every variant recovers the exponent it was given
        want = {(2, 0.0): 1.0, (2, 0.3): 0.6, (3, 0.0): 1.6, (3, 0.3): 0.1}[key[1:]]
        assert abs(slope - want) < 0.3, (key, variant, slope)


def test_separation_steps_of_a_constructed_trace():
    steps = np.array([10, 20, 30, 40, 50])
    mask = jnp.array([True, True, False, False])
    norms = jnp.array([[1.0, 1.0, 2.0, 1.5],   # J below the others
                       [3.0, 1.0, 2.0, 1.5],   # j = 0 above (and stays)
                       [3.0, 1.8, 2.0, 1.5],
                       [3.0, 2.5, 2.0, 1.5],   # j = 1 above from here on
                       [np.nan] * 4])          # stopped: records not made do not count
    first, every = gd_scaling._separation(norms, mask, steps)
    assert (int(first), int(every)) == (20, 40)
    dips = norms.at[2, 0].set(1.0)  # j = 0 drops back below at step 30: it separates only from 40
    assert tuple(map(int, gd_scaling._separation(dips, mask, steps))) == (40, 40)
    never = norms.at[3, 1].set(1.0)  # j = 1 ends below: J never fully separates
    assert tuple(map(int, gd_scaling._separation(never, mask, steps))) == (20, -1)


@pytest.mark.parametrize("target", ["junta", "tree", "parity"])
def test_label_covariance_equals_enumeration(target):
    n = 6
    key = jax.random.key(5)
    f = {"junta": lambda: targets.random_junta(key, n, 3), "tree": lambda: targets.random_tree(key, n, 3),
         "parity": lambda: targets.parity([1, 3, 4], n)}[target]()
    p = jnp.asarray(np.random.default_rng(2).uniform(0.1, 0.9, n), jnp.float32)
    X = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    w = np.prod(np.where(X == 1, np.asarray(p), 1 - np.asarray(p)), axis=1)
    y = np.asarray(f(jnp.asarray(X)))
    want = (w * y) @ X - (w @ y) * (w @ X)  # E[f x_i] - E[f] E[x_i]
    np.testing.assert_allclose(np.asarray(targets.label_covariance(f, p)), want, rtol=1e-4, atol=1e-6)


def test_parity_covariance_obeys_lemma_9():
    """000 Lemma 9: |I(D, j)| > alpha^2 (2c)^(k-1) on J for p_j in (alpha, 1 - alpha), |p_j - 1/2| >= c."""
    rng = np.random.default_rng(4)
    n, k, c, alpha = 10, 4, 0.1, 0.2
    for _ in range(20):
        J = rng.choice(n, k, replace=False)
        p = 0.5 + rng.choice([-1, 1], n) * rng.uniform(c, 0.5 - alpha, n)
        cov = np.asarray(targets.label_covariance(targets.parity(J, n), jnp.asarray(p, jnp.float32)))
        assert np.all(np.abs(cov[J]) > alpha**2 * (2 * c) ** (k - 1))
        assert np.allclose(np.delete(cov, J), 0, atol=1e-7)


@pytest.mark.parametrize("args, message", [
    (["--set", "n=6", "--set", "k=6"], "k must be in [1, 5]"),
    (["--set", "c=0.5"], "c must be in [0, 0.5)"),
    (["--set", "max_steps=8", "--set", "eval_every=8"], "max_steps must be at least 2 eval_every = 16"),
    (["--set", "width=0"], "width must be in [1, 65536]"),
    (["--set", "family=tree"], "family must be one of"),
    (["--set", "optimizer=lbfgs"], "optimizer must be one of"),
    (["--set", "records_per_doubling=0"], "records_per_doubling must be in [1, 1024]"),
    (["--set", "eps=0.5"], "eps must be in [0, 0.5)"),
    (["--set", "init=xavier"], "init must be one of"),
    (["--set", "max_steps=1001"], "eval_every must divide max_steps = 1001"),
])
def test_gd_scaling_bad_parameters_exit_2(tmp_path, capsys, args, message):
    assert cli.main(["run", "gd-scaling", "--quick", "--out", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "gd-scaling").exists()


def _with_signal(rows, seed=1):
    """Synthetic trials with each trial's exact k-parity signal max_J |I(D, j)| (000 Lemma 9's proof's formula) for
    p_i = 1/2 + U[-c, c]; the trials of both inits share it (as the study's do)."""
    from jaxtrees.experiments.studies import theory

    rng = np.random.default_rng(seed)
    k, c = np.asarray(rows["k"], np.int64), np.asarray(rows["c"], np.float64)
    trial = np.asarray(rows["cell"]) // 4 * 10_000 + np.asarray(rows["replicate"])  # inits: neighbouring cells
    _, first_row = np.unique(trial, return_index=True)
    p = 0.5 + rng.uniform(-1, 1, (len(rows), 3)) * c[:, None]
    p = p[first_row[np.searchsorted(np.unique(trial), trial)]]
    support = np.arange(3) < k[:, None]
    return rows.with_columns(influence_max=theory.parity_covariance(p, support).max(axis=1).astype(np.float32))


def test_gd_scaling_cites_and_draws_lemma_11_not_lemma_9(monkeypatch):
    """Issue 57: p_i = 1/2 + U[-c, c] reverses 000 Lemma 9's hypothesis |p_j - 1/2| >= c; Lemma 11 applies. The
    report quotes Lemma 11 and checks it on every smoothed trial (a Theory section); the mechanism figure draws it."""
    from matplotlib.figure import Figure

    from jaxtrees.experiments.studies import gd_scaling_report

    monkeypatch.setattr(gd_scaling_fits, "BOOTSTRAP", 20)
    rows = _with_signal(_synthetic_trials({(2, 0.0): 1.0, (2, 0.3): 0.6, (3, 0.0): 1.6, (3, 0.3): 0.1}, per_cell=8))
    report = gd_scaling.GD_SCALING.report(rows)
    assert "000 Lemma 9: |I| > alpha^2 (2c)^(k-1)" not in report
    assert "(000 Lemma 11: for p_i = 1/2 + U[-c, c], P[max_J |I| <= t] <= (2/c)^k sqrt(t / (2 alpha^2))" in report
    assert "## Theory" in report
    smoothed = 2 * 4 * 8  # k x n x replicates at c = 0.3, one init
    lemma11 = next(line for line in report.splitlines() if line.startswith("- [") and "000 Lemma 11:" in line)
    assert lemma11.split(" 000 Lemma 11:")[0] in ("- [test]", "- [vacuous]")  # issue 65: uncapped, its kind first
    assert f"P[max_J |I(D, j)| <= t] <= (2/c)^k sqrt(t / (2 alpha^2)), alpha = 1/2 - c, for p_i = 1/2 + U[-c, c], " \
           "uncapped: " in lemma11 and f"{smoothed} smoothed trials" in lemma11
    assert "- [outside] 000 Lemma 9: |I(D_w, j)| > alpha^2 (2c)^(k-1): it needs |p_j - 1/2| >= c" in report
    sel, measured, bound, codes, keys = gd_scaling_report.lemma11_points(gd_scaling_fits.exact_trials(
        gd_scaling_fits.trials(rows)))
    assert len(sel) == smoothed and keys == [("parity", 2, 0.3), ("parity", 3, 0.3)]
    assert np.all(measured <= bound)
    ax = Figure().subplots()
    gd_scaling_report._lemma11_panel(ax, gd_scaling_fits.exact_trials(gd_scaling_fits.trials(rows)))
    assert len(ax.get_lines()) == 5 and "Lemma 11" in ax.get_title()  # a step curve and its bound per cell, a key
    assert any("Lemma 11" in line.get_label() for line in ax.get_lines())
