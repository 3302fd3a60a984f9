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
