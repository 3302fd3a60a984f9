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


def _table(text, heading_cell):
    """The rows of the README table whose header row starts with ``| heading_cell |``, as lists of cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {heading_cell} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def test_readme_states_every_studys_measured_quick_time_with_its_date():
    """Issues 34 and 35 (case 12): the studies table gives each study's cold quick-size time in seconds, and the line
    below it names the date of that run and where it is recorded."""
    import re

    from jaxtrees.experiments import studies

    text = (ROOT / "README.md").read_text()
    rows = _table(text, "study")
    seconds = {row[0].strip("`"): row[-1] for row in rows}
    assert set(seconds) == set(studies.STUDIES), set(seconds) ^ set(studies.STUDIES)
    for name, value in seconds.items():
        assert re.fullmatch(r"\d+", value), (name, value)
    lines = text.splitlines()
    end = lines.index("| study | question | quick, cold s |") + 2 + len(rows)
    note = next(line for line in lines[end:] if line.strip())
    assert re.search(r"20\d\d-\d\d-\d\d", note) and "docs/benchmarks.md" in note, note


def test_readme_learner_table_matches_the_registry():
    """Every registered learner has a row in the README's learner table, and every name there is registered."""
    import re

    from jaxtrees import learners

    rows = _table((ROOT / "README.md").read_text(), "registry name")
    listed = [name for row in rows for name in re.findall(r"`([^`]+)`", row[0])]
    assert len(listed) == len(set(listed)), listed
    assert set(listed) == set(learners.names()), set(listed) ^ set(learners.names())


def test_readme_is_a_short_guide():
    """Issue 36: at most 150 lines, none wider than 160 characters; the measurements live in docs/."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    assert max(map(len, lines)) <= 160, max(lines, key=len)
    for doc in ("docs/benchmarks.md", "docs/studies.md", "docs/api.md"):
        assert (ROOT / doc).is_file() and doc in "\n".join(lines), doc
