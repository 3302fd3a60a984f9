"""The gradient-descent studies (gd-parity-uniform, gd-smoothed, gd-vs-id3) at a tiny size through the CLI."""

import csv
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import helpers

from jaxtrees import cli, targets
from jaxtrees.experiments.studies import descent

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
    with open(directory / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    cells = 2 if name == "gd-parity-uniform" else 4 if name == "gd-smoothed" else 2
    assert len(rows) == cells * 3
    assert COLUMNS[name] <= set(rows[0])
    steps_col = "net_steps" if name == "gd-vs-id3" else "steps"
    for r in rows:
        s = int(r[steps_col])
        assert s == -1 or (s % 40 == 0 and 40 <= s <= 120)  # recorded steps or censored
    if name == "gd-vs-id3":
        for r in rows:
            t, e = int(r["tree_examples"]), int(r["net_examples"])
            assert t == -1 or t in (16, 32, 64, 128)
            assert e == (-1 if int(r["net_steps"]) < 0 else 32 * int(r["net_steps"]))
            if float(r["tree_error"]) <= 1e-6:  # exact at m_max, so reached eps somewhere on the m-grid
                assert t != -1
    else:
        for r in rows:
            assert (r["learned"] == "1") == (int(r["steps"]) >= 0)
    assert (directory / f"{name}.png").stat().st_size > 10_000
    assert (directory / f"{name}.svg").exists()
    report = (directory / "report.md").read_text()
    assert report.startswith(f"# jaxtrees study `{name}`") and "|---|" in report
    assert helpers.assert_valid_markdown_tables(report) >= 1
    columns = json.loads((directory / "metadata.json").read_text())["columns"]
    assert set(rows[0]) <= set(columns), "every result column is described in metadata.json"
    if name == "gd-parity-uniform":  # the Barak et al. claim next to the medians; a tiny budget decides nothing
        assert "all within 100,000 steps" in report and "is below Barak et al.'s 100,000" in report
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
    rows = [{"drift": "nan", "lr": "50.0"}, {"drift": "inf", "lr": "50.0"}, {"drift": "0.5", "lr": "50.0"}]
    assert "**diverged: 2 of 3 trials**" in descent._divergence_note(rows)
    assert descent._divergence_note(rows[2:]) == ""
