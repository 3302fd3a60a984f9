"""What users read says which contract its rows were written under: each part records its revision (+1 per run
that overrode a change), report.md names the overrides and reports each revision apart (unless pooled), the figures
are drawn per revision; a study's declared invariants are checked on the rows `jaxtrees report` and `plot` read."""

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from jaxtrees import cli

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
TINY = ["--quick", "--set", "m_max=64", "--no-progress"]


def test_a_study_edited_between_runs_with_allow_changes_reports_two_revisions_apart(tmp_path, capsys):
    study_file = tmp_path / "src" / "own_study.py"
    study_file.parent.mkdir()
    shutil.copy(NOTEBOOKS / "own_study.py", study_file)
    args = ["run", str(study_file), "--out", str(tmp_path), *TINY]
    assert cli.main([*args, "--set", "replicates=2"]) == 0
    directory = tmp_path / "juntas-noise"
    assert "revision" not in (directory / "report.md").read_text()
    study_file.write_text(study_file.read_text().replace("error <= 1e-6", "error <= 1e-5"))
    assert cli.main([*args, "--set", "replicates=3"]) == 2  # refused, naming the edit
    assert cli.main([*args, "--set", "replicates=3", "--allow-changes"]) == 0
    stamps = {json.loads(pq.read_schema(p).metadata[b"jaxtrees"])["revision"] for p in (directory / "rows").iterdir()
              if p.name.startswith("part-")}
    assert stamps == {0, 1}
    metadata = json.loads((directory / "metadata.json").read_text())
    assert [r["revision"] for r in metadata["runs"]] == [0, 1]
    assert metadata["revisions"][0]["changes"] == metadata["runs"][-1]["overrides"]
    assert json.loads((directory / "rows" / "_config.json").read_text())["revisions"] == metadata["revisions"]
    report = (directory / "report.md").read_text()
    assert "**Rows of 2 revisions of the contract**" in report and "--pool-revisions" in report
    assert "revision 0: the contract the directory was started with" in report
    assert "revision 1 (`--allow-changes`" in report and "own code was edited (own_study.py: trial (edited))" in report
    assert "## Revision 0" in report and "## Revision 1" in report
    assert report.index("**Rows of 2 revisions") < report.index("## Revision 0") < report.index("## Revision 1")
    assert not (directory / "juntas-noise.png").exists()
    for r in (0, 1):
        assert (directory / f"juntas-noise-revision-{r}.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert cli.main(["report", str(directory), "--pool-revisions"]) == 0
    pooled = capsys.readouterr().out
    assert "They are pooled below" in pooled and "## Revision" not in pooled
    assert cli.main(["plot", str(directory), "--pool-revisions"]) == 0
    assert (directory / "juntas-noise.png").exists()


STUDY_FILE = '''
import jax.numpy as jnp
import jaxtrees as jt


def trial(key, params):
    """Success where the exact error is 1/2: outputs that contradict each other."""
    return {"exact_error": jnp.float32(0.5) + 0 * params["c"], "success": jnp.bool_(True)}


STUDY = jt.Study(name="contradicts", trial=trial, grid={"c": [0.0, 0.1]}, replicates=2,
                 check=jt.Checks(rows=jt.exact_invariants))
'''


def test_report_and_plot_check_the_declared_invariants_on_the_rows_they_read(tmp_path, capsys):
    study_file = tmp_path / "contradicts.py"
    study_file.write_text(STUDY_FILE)
    assert cli.main(["run", str(study_file), "--quick", "--out", str(tmp_path), "--no-progress"]) == 2
    directory = tmp_path / "contradicts"
    assert (directory / "rows").is_dir() and not (directory / "report.md").exists()
    capsys.readouterr()
    for command in ("report", "plot"):
        assert cli.main([command, str(directory)]) == 2
        err = capsys.readouterr().err
        assert "4 trial(s) break the study's invariant 'success exactly where" in err, err
    assert not (directory / "report.md").exists() and not (directory / "contradicts.png").exists()
