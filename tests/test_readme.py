"""The README's commands are the ones CI runs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    """The first test command of .ci/run is the README's set-up-and-test line; any further one (the
    notebooks) is in the README too."""
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line for line in ci.splitlines() if "pytest" in line and not line.startswith("#")]
    readme = (ROOT / "README.md").read_text()
    assert commands and "pip install" in commands[0], commands
    assert all(command in readme for command in commands), commands


def test_readme_main_command_runs_a_quick_study():
    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/jaxtrees run juntas --quick --out results" in readme


def test_readme_states_every_studys_measured_quick_time_with_its_date():
    """Issue 35 case 12: one paragraph gives each study's cold quick-size time from one dated run."""
    import re

    from jaxtrees.experiments import studies

    text = (ROOT / "README.md").read_text()
    start = text.index("Quick sizes, cold (")
    paragraph = text[start:text.index("\n\n", start)]
    assert re.search(r"20\d\d-\d\d-\d\d", paragraph) and "compile share" in paragraph
    for name in studies.STUDIES:
        assert re.search(rf"\b{re.escape(name)} \d+ s\b", paragraph), name
