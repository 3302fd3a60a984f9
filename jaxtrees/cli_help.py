"""``jaxtrees run STUDY --help``'s account of a study: :func:`study_help` lists its parameters (meaning, quick and
full values, static or traced) and its sizes (cells, trials, compiled programs)."""

from __future__ import annotations


def study_help(study) -> str:
    """A study's parameters (meaning, quick and full values, static or traced) and its sizes."""
    lines = [*_wrapped(f"study {study.name}: {study.description}", 2, first=0), "",
             "parameters (--set NAME=VALUE, or NAME=V1,V2,... for a grid; or a JSON --config):"]
    width = max(map(len, [*study.full, "replicates"])) + 4
    for name in study.full:
        meaning = study.meaning(name)
        lines += _wrapped(f"{name:{width - 2}s}{_compiled_as(study, name)}", width)
        lines += _wrapped(meaning, width, first=width) if meaning else []
        lines += _quick_full(_values(study.quick[name]), _values(study.full[name]), width)
    lines += _wrapped(f"{'replicates':{width - 2}s}trials per cell", width)
    lines += _quick_full(study.replicates[0], study.replicates[1], width)
    lines += ["", "size (cells x replicates; one compiled program per combination of the static parameters):"]
    lines += [f"  {label}: {_size(study, quick)}" for label, quick in (("--quick", True), ("full", False))]
    return "\n".join(lines)


def _compiled_as(study, name) -> str:
    """Whether parameter ``name`` is static (a program per value) or traced, and how."""
    if name in study.branches:
        return "static: each value is a branch of one program (a lax.switch), compiled with the others"
    if name in study.static:
        return "static: each value compiles its own program"
    choices = study.choices.get(name)
    allowed = f"; one of {', '.join(choices)}" if choices else ""
    if name in study.bounds:
        return f"traced{allowed}: one program serves every value up to the largest"
    if name in study.buckets:
        groups: dict = {}
        for value in choices:
            groups.setdefault(study.buckets[name](value), []).append(value)
        return f"traced{allowed}: one program per group of {' | '.join(', '.join(g) for g in groups.values())}"
    return f"traced{allowed}"


def _quick_full(quick, full, indent: int) -> list:
    """A parameter's quick and full values: on one line where they fit, else a line (or more) each."""
    line = f"quick: {quick}    full: {full}"
    if indent + len(line) <= 100:
        return [" " * indent + line]
    return _wrapped(f"quick: {quick}", indent + 7, first=indent) + _wrapped(f"full:  {full}", indent + 7, first=indent)


def _values(value) -> str:
    """A grid's values, comma-separated (``--set NAME=`` takes them without the spaces)."""
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _wrapped(text: str, indent: int, first: int = 2) -> list:
    """``text`` in lines of at most 100 characters: the first indented by ``first``, the rest by ``indent``."""
    import textwrap

    return textwrap.wrap(text, width=100, initial_indent=" " * first, subsequent_indent=" " * indent,
                         break_on_hyphens=False, break_long_words=False)


def _size(study, quick: bool) -> str:
    """Cells, replicates, trials and compiled programs of a study's quick or full size."""
    from jaxtrees.experiments.study import configure

    try:
        config = configure(study, quick=quick)
        programs = len(study.programs(config))
    except ValueError as e:
        return f"cannot be resolved ({e})"
    cells = len(config.cells())
    return (f"{cells:,} cell{'s' * (cells != 1)} x {config.replicates:,} = {config.trials:,} trials, "
            f"{programs:,} compiled program{'s' * (programs != 1)}")
