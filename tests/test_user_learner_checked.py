"""A user's own learner is checked and listed like a built-in one (issue 70): :func:`jaxtrees.learners.register`
refuses what would break later, the conformance suite reports a factory that returns no learner as a failed check,
and the resume contract covers a registered learner's code."""

from __future__ import annotations

import pytest

from jaxtrees import learners


@pytest.mark.parametrize("name", [123, "", "my learner", "my,learner", None])
def test_register_refuses_a_name_that_is_no_plain_word(name):
    with pytest.raises(ValueError, match=r"^name must be a non-empty str of letters, digits, '-' and '_'"):
        learners.register(name, lambda s: learners.Stump())
    assert name not in learners.names() and learners.names() == sorted(learners.names())


def test_register_refuses_a_factory_that_cannot_be_called():
    with pytest.raises(ValueError, match=r"^factory must be callable .*got None"):
        learners.register("bad-none", None)
    with pytest.raises(ValueError, match="unknown learner 'bad-none'"):
        learners.get("bad-none")


def test_list_learners_refuses_a_file_registering_a_number_in_one_sentence(tmp_path, capsys):
    """`jaxtrees list --learners FILE` where FILE registers a learner under the name 7: one sentence, no traceback."""
    from jaxtrees import cli

    path = tmp_path / "intname.py"
    path.write_text('import jaxtrees as jt\n\njt.learners.register(7, lambda s: jt.learners.get("id3-gini", s))\n')
    assert cli.main(["list", "--learners", str(path)]) == 2
    assert "name must be a non-empty str" in capsys.readouterr().err
    assert all(isinstance(name, str) for name in learners.names())


def test_check_reports_a_factory_that_returns_no_learner_as_a_failed_protocol_check():
    learners.register("bad-int", lambda s: 5)
    learners.register("raiser", lambda s: 1 / 0)
    try:
        with pytest.raises(learners.ConformanceError, match=r"^'bad-int' fails 1 of 7 conformance checks") as err:
            learners.check("bad-int")
        said = err.value.failures["protocol"]
        assert "the factory of 'bad-int' returned 5 (int), not a learner" in said
        assert "`access` (one of" in said and "`fit(key, data)`" in said
        with pytest.raises(learners.ConformanceError, match=r"\(protocol\)") as error:
            learners.check("raiser")
        assert error.value.failures == {"protocol": "the factory of 'raiser', called with learners.Size(), raised "
                                                    "ZeroDivisionError: division by zero"}
    finally:
        learners.unregister("bad-int")
        learners.unregister("raiser")
    with pytest.raises(learners.ConformanceError, match=r"got 5 \(int\), not a learner"):
        learners.check(5)


LEARNER_FILE = '''"""A study file with my own learner."""
import dataclasses
import jaxtrees as jt
from jaxtrees.experiments.studies import compare


@dataclasses.dataclass(frozen=True)
class Half:
    """ID3 (Gini) at half the depth."""
    depth: int = 4
    access = "sample"

    def fit(self, key, data):
        jt.learners.check_data(data)
        return jt.GreedyTree(jt.GrowthRule(max_depth=max(1, self.depth // 2), impurity="gini")).fit(key, data)


jt.learners.register("mine-half-70", lambda s: Half(depth=s.depth), about="ID3 at half the depth")
STUDY = compare.with_learners(["mine-half-70", "id3-gini"], name="atlas-mine-70")
'''


def test_the_contract_covers_a_registered_learner_of_a_compare_study(tmp_path):
    """compare.with_learners runs jaxtrees' own trial; the file that registers the user's learner is digested all the
    same: an edit of the learner is refused on resume, a comment is not (the sweep's S3: old and new rows pooled)."""
    from jaxtrees.experiments import contract, loading

    path = tmp_path / "mylearn.py"
    path.write_text(LEARNER_FILE)
    try:
        study, _ = loading.load(str(path))
        before = contract.study_terms(study)
        assert set(before["study_code"]["mylearn.py"]) >= {"Half", "STUDY"}
        path.write_text(LEARNER_FILE.replace("check_data(data)", "check_data(data)  # a comment"))
        assert contract.study_terms(study) == before
        path.write_text(LEARNER_FILE.replace("self.depth // 2", "self.depth // 4"))
        said = contract.differences(before, contract.study_terms(study))
        assert said == ["the study's own code was edited (mylearn.py: Half (edited))"]
    finally:
        learners.unregister("mine-half-70")


def test_the_contract_covers_a_registered_learner_of_no_file():
    """A learner defined in a notebook cell (no file): its factory's and its class's compiled code."""
    from jaxtrees.experiments import contract
    from jaxtrees.experiments.studies import compare

    def define(body: str):
        scope = {"__name__": "cell_70", "jt": __import__("jaxtrees")}
        exec(compile(f"class Stumpy:\n    access = 'sample'\n    def fit(self, key, data):\n        {body}\n"
                     "jt.learners.register('cell-stump-70', lambda s: Stumpy())\n", "<cell>", "exec"), scope)

    try:
        define("return jt.Stump(impurity='gini').fit(key, data)")
        study = compare.with_learners(["cell-stump-70"], name="cell-70")
        before = contract.study_terms(study)["study_code"]
        assert list(before) == ["learner cell-stump-70 (no file)"]
        define("return jt.Stump(impurity='error').fit(key, data)")
        assert contract.study_terms(study)["study_code"] != before
    finally:
        learners.unregister("cell-stump-70")
    assert contract.study_terms(compare.COMPARE)["study_code"] is None  # the built-in study: the package's digest


def test_the_contract_covers_a_local_module_the_study_file_imports(tmp_path, monkeypatch):
    """A helper module beside the study file (on PYTHONPATH, not installed): an edit of it is refused on resume, a
    comment is not (the sweep's S4: old and new rows pooled); installed and standard modules are not digested."""
    from jaxtrees.experiments import contract, loading

    helper = tmp_path / "helper_70.py"
    helper.write_text("import json\n\n\ndef scale():\n    return 1.0\n")
    (tmp_path / "uses_helper.py").write_text(
        'import jax\nimport jaxtrees as jt\nfrom helper_70 import scale\n\n\ndef trial(key, params):\n'
        '    return {"x": jax.random.uniform(key) * scale()}\n\n\n'
        'STUDY = jt.Study(name="helper", trial=trial, replicates=4, grid={"p": [1, 2]})\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "helper_70", raising=False)
    study, _ = loading.load(str(tmp_path / "uses_helper.py"))
    before = contract.study_terms(study)
    assert sorted(before["study_code"]) == ["helper_70.py", "uses_helper.py"]
    helper.write_text("import json\n\n\ndef scale():\n    return 1.0  # a comment\n")
    assert contract.study_terms(study) == before
    helper.write_text("import json\n\n\ndef scale():\n    return 1000.0\n")
    said = contract.differences(before, contract.study_terms(study))
    assert said == ["the study's own code was edited (helper_70.py: scale (edited))"]
