"""``jaxtrees run STUDY --help`` lists the study's parameters (meaning, quick and full values,
static or traced) and its sizes; ``jaxtrees list`` and an unknown parameter point to it (issue 35, case 10)."""

import dataclasses
import re

import pytest

from jaxtrees import cli
from jaxtrees.experiments import studies
from jaxtrees.experiments.study import configure


def _help(capsys, *args):
    """``jaxtrees run ARGS --help``: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", *args, "--help"])
    out = capsys.readouterr()
    return exit_.value.code or 0, out.out, out.err


def _block(out, name):
    """The lines that describe parameter ``name`` (its line and the indented ones below it)."""
    lines = out[out.index("\nparameters ("):].splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"  {name}\s", line))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("    "))
    return "\n".join(lines[start:end])


def test_run_juntas_help_lists_each_parameter_with_its_quick_and_full_values(capsys):
    code, out, _ = _help(capsys, "juntas")
    assert code == 0
    assert "--set NAME=VALUE" in out and "--quick" in out and "--group" in out  # argparse's options, as before
    assert "study juntas: 000 Thm 2" in out
    blocks = {name: _block(out, name) for name in ("n", "k", "c", "impurity", "m_min", "m_max", "replicates")}
    assert "quick: 16    full: 16, 32, 64" in blocks["n"] and "static: each value compiles" in blocks["n"]
    assert "the number of input bits" in blocks["n"]
    assert "quick: 3, 4    full: 3, 4, 5, 6" in blocks["k"] and "traced: one program serves every value" in blocks["k"]
    assert "quick: 0.0, 0.05, 0.1, 0.2    full: 0.0, 0.05, 0.1, 0.2" in blocks["c"] and "traced" in blocks["c"]
    assert "quick: entropy, gini    full: entropy, gini" in blocks["impurity"]
    assert "traced; one of entropy, gini, kearns_mansour, error" in blocks["impurity"]
    assert "quick: 200    full: 1000" in blocks["replicates"]
    study = studies.get("juntas")
    for label, quick in (("--quick", True), ("full", False)):
        config = configure(study, quick=quick)
        programs = len(study.programs(config))
        assert (f"  {label}: {len(config.cells())} cells x {config.replicates:,} = {config.trials:,} trials, "
                f"{programs} compiled program") in out


@pytest.mark.parametrize("name", sorted(studies.STUDIES))
def test_every_studys_help_names_every_parameter_and_resolves_both_sizes(capsys, name):
    code, out, _ = _help(capsys, name)
    study = studies.get(name)
    assert code == 0 and "cannot be resolved" not in out
    for parameter in study.full:
        block = _block(out, parameter)
        assert ("static" in block) == (parameter in study.static) and "quick: " in block and "full: " in block
    assert max(map(len, out[out.index("\nparameters ("):].splitlines())) <= 100


def test_a_studys_own_meaning_wins_and_other_names_mean_columns(capsys):
    juntas = studies.get("juntas")
    own = dataclasses.replace(juntas, meanings={**juntas.meanings, "k": "the size of the junta's support", "n": "bits"})
    assert own.meaning("k") == "the size of the junta's support" and own.meaning("n") == "bits"
    assert juntas.meaning("k") is None and own.meaning("m_min") == juntas.meaning("m_min")
    assert "the size of the junta's support" in _block(cli.study_help(own), "k")
    assert own.columns == juntas.columns and own.parameters == {"k": "the size of the junta's support", "n": "bits"}
    depth = dataclasses.replace(juntas, meanings={"depth": "not a parameter of juntas: a column's meaning"})
    assert depth.parameters == {} and depth.columns == {"depth": "not a parameter of juntas: a column's meaning"}
    with pytest.raises(ValueError, match="meanings must map names to strings"):
        dataclasses.replace(juntas, meanings={"k": 3})


def test_help_without_a_study_says_how_to_list_one_and_an_unknown_study_exits_2(capsys):
    code, out, _ = _help(capsys)
    assert code == 0 and "`jaxtrees run STUDY --help` lists STUDY's parameters" in " ".join(out.split())
    code, _, err = _help(capsys, "nope")
    assert code == 2 and "unknown study 'nope'" in err


def test_list_and_an_unknown_parameter_point_to_run_study_help(capsys, tmp_path):
    assert cli.main(["list"]) == 0
    assert cli.STUDY_HELP in capsys.readouterr().out
    assert cli.main(["run", "juntas", "--set", "depth=3", "--out", str(tmp_path)]) == 2
    assert "`jaxtrees run juntas --help` describes each" in capsys.readouterr().err


def test_a_bucketed_parameter_says_which_values_share_a_program(capsys):
    code, out, _ = _help(capsys, "compare")
    block = " ".join(_block(out, "family").split())
    assert code == 0 and "one program per group of parity, junta | tree | rank | addressing" in block
