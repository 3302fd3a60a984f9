"""The README's commands are the ones CI runs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = [line for line in ci.splitlines() if "pytest" in line and not line.startswith("#")]
    assert len(command) == 1, command
    assert command[0] in (ROOT / "README.md").read_text()


def test_readme_main_command_runs_a_quick_study():
    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/jaxtrees run juntas --quick --out results" in readme
