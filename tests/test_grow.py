"""Studies that grow: more replicates or grid values in an existing directory run only the new trials; removed
values leave their rows outside the grid (counted, not read); the resume contract names what changed."""

import json
import types

import numpy as np
import pytest

from jaxtrees.experiments import contract, studies
from jaxtrees.experiments.results import reading
from jaxtrees.experiments.run import job, memory, runner

BASE = {"n": 8, "k": 2, "c": "0,0.2", "impurity": "entropy", "m_min": 16, "m_max": 64}


def _run(out, replicates=2, **changes):
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides={**BASE, **changes, "replicates": replicates})
    return runner.run(study, config, str(out), progress=False)


def _by_trial(directory) -> dict:
    """Rows keyed by (c, replicate, m): every output column."""
    rows = reading.read_results(str(directory))
    keys = zip(np.asarray(rows["c"]).tolist(), np.asarray(rows["replicate"]).tolist(), np.asarray(rows["m"]).tolist())
    outputs = [n for n in rows.names if n not in ("study", "seed", "cell")]
    values = zip(*(np.asarray(rows[n]).tolist() for n in outputs))
    return dict(zip(keys, values))


def test_more_replicates_and_a_new_value_run_only_the_new_trials(tmp_path, capsys):
    grown = _run(tmp_path / "grown")
    before = _by_trial(grown)
    parts = {p.name: p.read_bytes() for p in (tmp_path / "grown" / "juntas" / "rows").glob("part-*")}
    _run(tmp_path / "grown", replicates=4)
    after = _by_trial(grown)
    assert {k: v for k, v in after.items() if k[1] < 2} == before  # the first replicates' rows unchanged
    assert len(after) == 2 * len(before)
    for name, data in parts.items():  # no part rewritten
        assert (tmp_path / "grown" / "juntas" / "rows" / name).read_bytes() == data
    _run(tmp_path / "grown", replicates=4, c="0,0.2,0.1")
    fresh = _run(tmp_path / "fresh", replicates=4, c="0,0.1,0.2")
    assert _by_trial(grown) == _by_trial(fresh)  # a row depends only on the seed and its cell
    metadata = json.loads((tmp_path / "grown" / "juntas" / "metadata.json").read_text())
    assert metadata["config"]["grid"]["c"] == [0.0, 0.2, 0.1] and metadata["config"]["replicates"] == 4
    assert [r["trials"] for r in metadata["runs"]] == [4, 4, 4]  # 2 cells x 2, then 2 x 2 more, then 1 new cell x 4


def test_the_progress_line_says_how_many_trials_are_new(tmp_path, capsys):
    _run(tmp_path)
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides={**BASE, "replicates": 3})
    capsys.readouterr()
    runner.run(study, config, str(tmp_path), progress=True)
    assert "2 new trials (4 of 6 in" in capsys.readouterr().err


def test_removed_values_leave_their_rows_outside_the_grid(tmp_path):
    directory = _run(tmp_path, replicates=3)
    _run(tmp_path, replicates=2, c="0.2")
    rows = reading.read_results(directory)
    assert set(np.asarray(rows["c"]).tolist()) == {0.2} and set(np.asarray(rows["replicate"]).tolist()) == {0, 1}
    assert rows.outside == (3 + 1) * 3  # c = 0's 3 trials and c = 0.2's third lie outside, 3 rows (m = 16, 32, 64) each


def test_a_directory_of_another_seed_or_other_parameters_is_refused(tmp_path):
    _run(tmp_path)
    study = studies.get("juntas")
    with pytest.raises(ValueError, match="another configuration .seed 0, not 1"):
        runner.run(study, runner.configure(study, quick=True, overrides=BASE, seed=1), str(tmp_path), progress=False)


def test_the_contract_names_a_changed_declaration_and_code():
    recorded = {"declaration": {"shared": [], "static": ["n"]}, "study_code": {"own.py": "a"}, "x64": False}
    now = {"declaration": {"shared": ["eta"], "static": ["n"]}, "study_code": {"own.py": "b"}, "x64": False,
           "cpu_features": "avx2"}
    said = contract.differences(recorded, now)
    assert any("the study's shared: recorded [], now ['eta']" in s for s in said)
    assert any("own code was edited (own.py)" in s for s in said)
    assert any("not recorded by the run that started" in s for s in said)
    assert len(said) == 3


def test_a_study_file_s_digest_ignores_comments_docstrings_and_formatting(tmp_path):
    """The study code term: per definition, comments, docstrings and layout left out; a change names the definition."""
    path = tmp_path / "own.py"
    path.write_text('"""A study."""\nimport jax\n\nCAP = 3\n\n\ndef trial(key, params):\n    """Its docs."""\n'
                    '    return {"x": jax.random.uniform(key) < CAP}  # a comment\n')
    before = contract._file_digest(str(path))
    path.write_text('"""Another docstring."""\nimport jax\n# a new comment\nCAP = (3)\n\n\ndef trial(key, params):\n'
                    '    """Other docs."""\n    return {"x": jax.random.uniform(key)   <   CAP}\n')
    assert contract._file_digest(str(path)) == before
    path.write_text('import jax\n\nCAP = 4\n\n\ndef trial(key, params):\n    return {"x": jax.random.uniform(key) < CAP}\n'
                    '\n\ndef helper():\n    pass\n')
    after = contract._file_digest(str(path))
    assert sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)) == ["CAP", "helper"]
    said = contract.differences({"study_code": {"own.py": before}}, {"study_code": {"own.py": after}})
    assert said == ["the study's own code was edited (own.py: CAP (edited), helper (added))"]


def test_the_contract_records_the_seed_offset_and_the_source():
    import jax

    study = studies.get("juntas")
    terms = job.contract(study, jax.devices()[0])
    assert terms["random_seed_offset"] == 0 and len(terms["source"]) == 16
    assert terms["numpy"] == np.__version__ and terms["declaration"]["static"] == ["m_max", "m_min", "n"]
    assert terms["study_code"] is None  # a built-in study's code is in the package's source digest


def test_a_run_too_large_for_the_machine_is_refused_before_compiling(tmp_path, monkeypatch, capsys):
    """Issue 64's case: smoothed-base at n = 4096, m_max = 2^19 grew to 22.6 GB and was OOM-killed; now refused
    with the estimate and a --group that fits, before any program compiles."""
    from jaxtrees import cli

    monkeypatch.setattr(memory, "available_memory", lambda device: 20 * 2**30)
    monkeypatch.setattr(runner.compiling, "compile_program", lambda *a, **k: pytest.fail("compiled"))
    args = ["run", "smoothed-base", "--quick", "--set", "n=4096", "--set", "m_max=524288", "--set", "replicates=1000",
            "--out", str(tmp_path), "--no-progress"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "GB at its peak (0.5 GB per trial x 32 trials vmapped x" in err, err
    assert "more than 80% of the 20.0 GB" in err and "rerun with --group" in err and "Traceback" not in err
    cpu = [types.SimpleNamespace(platform="cpu")] * 2
    memory.fits("s", "p", 2**29, 8, cpu)  # 8 GB of 20: fits
    with pytest.raises(ValueError, match="one trial alone needs 40.0 GB"):
        memory.fits("s", "p", 20 * 2**30, 1, cpu)
