"""A study in a few lines: :class:`~jaxtrees.experiments.study.Study` needs a name, a trial, a grid and
replicates; the rest (static, shared, axis, meanings, check, figures, report, :class:`Compile`) is optional,
every bad declaration is refused naming its field, and the old attributes read on."""

import dataclasses
import re

import jax
import jax.numpy as jnp
import pytest

from jaxtrees.experiments import studies
from jaxtrees.experiments.report.figure_spec import figure
from jaxtrees.experiments.run import runner
from jaxtrees.experiments.study import Compile, Study, configure


def _coin(key, params):
    """Coin flips of bias p: heads
    or tails.

    Not the description."""
    flip = jax.random.bernoulli(key, params["p"])
    return {"heads": flip if params["coin"] == "fair" else ~flip}


def _minimal(**changes) -> Study:
    declared = dict(name="coin", trial=_coin, grid={"p": [0.25, 0.5], "coin": ["fair", "biased"], "n": 3},
                    replicates=4)
    return Study(**{**declared, **changes})


def test_a_minimal_declaration_runs_its_string_parameter_as_a_python_value(tmp_path):
    study = _minimal()
    directory = runner.run(study, configure(study, quick=True, overrides={"p": 0.5}), str(tmp_path), progress=False)
    rows = runner.read_results(directory)
    assert len(rows) == 2 * 4 and sorted(set(rows["coin"])) == ["biased", "fair"]


def test_a_minimal_declaration_configures_and_infers_its_string_parameter_static():
    study = _minimal()
    assert study.static == ("coin",) and study.grid == (study.quick, study.full) and study.quick is study.full
    assert study.replicates == (4, 4) and study.check is study.plot is study.report is None
    config = configure(study, quick=True)
    assert config.trials == 2 * 2 * 4 and config.replicates == 4
    assert [p["coin"] for p in study.programs(config)] == ["fair", "biased"]  # a program per static value
    assert configure(study, overrides={"coin": "fair"}).grid["coin"] == ["fair"]
    assert _minimal(compile=Compile(uniform=("coin",), choices={"coin": ("fair", "biased")})).static == ()
    sized = _minimal(grid=({"p": 0.5, "coin": "fair", "n": 3}, {"p": [0.5, 0.75], "coin": "fair", "n": 3}),
                     replicates=(2, 8))
    assert configure(sized, quick=True).trials == 2 and configure(sized).trials == 16


@pytest.mark.parametrize("changes, field", [
    (dict(trial="not a function"), "trial"),
    (dict(grid=[{"p": 0.5}]), "grid"),
    (dict(grid=({"p": 0.5}, {"q": 0.5})), "grid"),
    (dict(grid={1: 0.5}), "grid"),
    (dict(replicates=0), "replicates"),
    (dict(replicates=(4, 0)), "replicates"),
    (dict(replicates=(1, 2, 3)), "replicates"),
    (dict(replicates=2.5), "replicates"),
    (dict(replicates=True), "replicates"),
    (dict(static=("q",)), "static"),
    (dict(static="coin"), "static"),
    (dict(shared=["p", 3]), "shared"),
    (dict(compile=Compile(uniform="p")), "compile.uniform"),
    (dict(shared=("q",)), "shared"),
    (dict(axis=("p", lambda params: [1, 2])), "axis"),
    (dict(axis=("t",)), "axis"),
    (dict(axis=("t", [1, 2])), "axis"),
    (dict(meanings={"p": 0.5}), "meanings"),
    (dict(check="no"), "check"),
    (dict(plot=3), "plot"),
    (dict(report="no"), "report"),
    (dict(compile={"uniform": ("p",)}), "compile"),
    (dict(compile=Compile(uniform=("q",))), "compile.uniform"),
    (dict(compile=Compile(bounds=("q",))), "compile.bounds"),
    (dict(compile=Compile(choices={"q": ("a",)})), "compile.choices"),
    (dict(compile=Compile(branches=("q",))), "compile.branches"),
    (dict(compile=Compile(branches=("p",))), "compile.branches"),
    (dict(compile=Compile(buckets={"coin": str})), "compile.buckets"),
    (dict(compile=Compile(level_loop=-1)), "compile.level_loop"),
    (dict(static=("n",), compile=Compile(bounds=("n",))), "static and compile.uniform / compile.bounds"),
    (dict(compile=Compile(uniform=("coin",))), "static and compile.uniform / compile.bounds"),
])
def test_each_bad_declaration_is_refused_naming_its_field(changes, field):
    with pytest.raises(ValueError, match=f"study 'coin': {re.escape(field)}"):
        _minimal(**changes)


def test_the_description_is_the_first_paragraph_of_the_trials_docstring():
    assert _minimal().description == "Coin flips of bias p: heads or tails."

    def undocumented(key, params):
        return {"x": jnp.zeros(())}

    assert _minimal(trial=undocumented).description == ""
    listed = {name: study.description for name, study in studies.STUDIES.items()}
    assert all(listed.values()) and "\n" not in "".join(listed.values())
    assert listed["gd-smoothed"] != listed["gd-parity-uniform"]  # one trial underneath, a docstring each


def test_the_old_attributes_read_from_the_new_fields():
    def values(params):
        return [1, 2]

    knobs = Compile(uniform=("p",), bounds=("n",), choices={"coin": ("fair", "biased")}, buckets={"coin": len},
                    cpu_opt_level=2, level_loop=8, bytes_per_trial=lambda params: 1)
    study = _minimal(axis=("t", values), shared=("coin",), compile=knobs,
                     meanings={"p": "the bias", "t": "the flip", "heads": "1 for heads"})
    assert study.parameters == {"p": "the bias"} and study.columns == {"t": "the flip", "heads": "1 for heads"}
    assert study.meaning("p") == "the bias" and study.meaning("n") == "the number of input bits"
    assert (study.uniform, study.bounds, study.choices, study.buckets) == (("p",), ("n",), knobs.choices, knobs.buckets)
    assert (study.branches, study.after, study.cpu_opt_level, study.level_loop) == ((), None, 2, 8)
    assert study.bytes_per_trial is knobs.bytes_per_trial and study.working_set_per_trial is None
    assert study.axis.name == "t" and study.axis.values is values and study.grouped == ("n", "p")
    assert study.key_hash({"p": 0.5, "coin": "fair", "n": 3}) == study.key_hash({"p": 0.5, "coin": "biased", "n": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        study.level_loop = False
    looped = dataclasses.replace(study, compile=dataclasses.replace(study.compile, level_loop=True))
    assert looped.level_loop is True and looped.static == study.static and looped.replicates == (4, 4)
    plotted = _minimal(plot=lambda rows, stem: [type(rows).__name__], report=lambda rows: type(rows).__name__)
    assert plotted.plot([{"p": 0.5}], "stem") == ["Table"] and plotted.report([{"p": 0.5}]) == "Table"


def test_the_declaration_changes_with_what_decides_rows_but_not_with_the_grids_values():
    study = _minimal(axis=("t", lambda params: [1]), compile=Compile(bytes_per_trial=len))
    declared = study.declaration()
    assert declared["parameters"] == ["coin", "n", "p"] and declared["static"] == ["coin"]
    assert declared["axis"] == "t" and declared["bytes_per_trial"] == "builtins.len" and declared["after"] is None
    regridded = dataclasses.replace(study, grid={"p": [0.1, 0.2, 0.3], "coin": "fair", "n": [4, 5]}, replicates=9)
    assert regridded.declaration() == declared
    for changed in (dataclasses.replace(study, shared=("p",)), dataclasses.replace(study, static=("coin", "n")),
                    dataclasses.replace(study, axis=("u", lambda params: [1])), dataclasses.replace(study, axis=None),
                    dataclasses.replace(study, compile=Compile(level_loop=False))):
        assert changed.declaration() != declared
    for study in studies.STUDIES.values():
        declared = study.declaration()
        assert declared["static"] == sorted(study.static) and declared["branches"] == list(study.branches)


@pytest.mark.parametrize("name", sorted(studies.STUDIES))
def test_every_built_in_study_declares_at_most_12_fields_4_required(name):
    fields = dataclasses.fields(studies.get(name))
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    assert len(fields) <= 14 and required == ["name", "trial", "grid", "replicates"]  # 12, condition and censored


def test_plot_condition_and_censored_are_validated_and_only_censored_is_declared():
    """Issue 70: presentation fields (a figure spec as plot, the compared condition) leave the declaration alone;
    censored outputs are declared where given, so the built-in studies' declarations do not change."""
    spec = dataclasses.make_dataclass("Spec", ["x", "hue", "col"], frozen=True)("p", (), ())
    study = _minimal(plot=spec, condition="p", censored=("steps",))
    assert study.plot is spec and study.condition == "p" and study.censored == ("steps",)
    assert study.declaration() == {**_minimal().declaration(), "censored": ["steps"]}
    assert "censored" not in studies.get("juntas").declaration() and _minimal().condition is None
    for changes, said in [({"condition": "q"}, "condition 'q' is not a grid parameter"),
                          ({"censored": "steps"}, "censored must be a tuple of parameter names"),
                          ({"censored": ("p",)}, "censored 'p' is a grid parameter or the axis"),
                          ({"censored": ("steps_censored",)}, "censored names outputs"),
                          ({"censored": ("a", "a")}, "censored names an output twice"),
                          ({"plot": 3}, "plot must be callable or None"),
                          ({"plot": figure(x="nope", hue="p")}, "jt.figure's x names 'nope', not a grid parameter"),
                          ({"plot": figure(x="p", hue="q", col=None)}, "jt.figure's hue names 'q'")]:
        with pytest.raises(ValueError, match=re.escape(said)):  # before: all trials ran, then the figure failed
            _minimal(**changes)
    assert _minimal(plot=figure(x="p", hue="coin", col=None)).plot.col == ()  # before: TypeError on col=None
