"""The learner registry's descriptions (``learners.ABOUT``, ``info``, ``describe``): every registered learner is
described, the Size fields each factory reads, and its access, are the declared ones (checked by recording:
``learners.fields_read``), and a user's learner is described like a built-in."""

from __future__ import annotations

import pytest

from jaxtrees import learners
from jaxtrees.learners import Size


def test_every_built_in_learner_is_described():
    missing = set(learners.names()) - set(learners.ABOUT)
    assert not missing, f"registered without an entry in learners.ABOUT (access, Size fields read, cost, what): {missing}"
    assert sorted(learners.ABOUT) == learners.names()
    for name in learners.names():
        about = learners.info(name)
        assert set(about) == {"name", "access", "reads", "cost", "what"}
        assert about["access"] in learners.ACCESS and set(about["reads"]) <= set(Size._fields)
        assert about["cost"] and about["what"] and "\n" not in about["cost"] + about["what"]


@pytest.mark.parametrize("name", learners.names())
def test_declared_fields_are_the_fields_the_factory_reads(name):
    read, learner = learners.fields_read(learners.entry(name).factory)
    assert read == learners.info(name)["reads"], f"{name}: reads {read}"
    assert learner.access == learners.info(name)["access"] and learner == learners.get(name)


def test_recording_catches_an_undeclared_read():
    read, learner = learners.fields_read(lambda s: learners.GreedyTree(learners.GrowthRule(max_depth=min(s.depth, s.n))))
    assert read == ("depth", "n") and learner.rule.max_depth == 3
    with pytest.raises(AttributeError, match="nope"):
        learners.fields_read(lambda s: s.nope)


@pytest.fixture
def user_learners():
    """Register two user learners for a test, and unregister them after it."""
    learners.register("half-id3", lambda s: learners.GreedyTree(learners.GrowthRule(max_depth=max(1, s.depth // 2))),
                      about="ID3 at half the depth", cost="2^(depth / 2) n m / 32 word ops")
    learners.register("bare", lambda s: learners.Stump())
    yield
    for name in ("half-id3", "bare"):
        learners.unregister(name)


def test_a_users_learner_is_described_like_a_built_in(user_learners):
    assert learners.info("half-id3") == {"name": "half-id3", "access": "sample", "reads": ("depth",),
                                         "cost": "2^(depth / 2) n m / 32 word ops", "what": "ID3 at half the depth"}
    assert learners.info("bare") == {"name": "bare", "access": "sample", "reads": (), "cost": learners.USER,
                                     "what": learners.USER}
    lines = learners.describe().splitlines()
    assert len(lines) == len(learners.names()) + 2
    assert any(line.startswith("half-id3 ") and line.endswith("ID3 at half the depth") for line in lines)
    with pytest.raises(ValueError, match="already registered .a built-in one"):
        learners.register("id3-gini", lambda s: learners.Stump())
    learners.register("half-id3", lambda s: learners.Stump())  # a user's name again (a notebook cell rerun): replaced
    assert isinstance(learners.get("half-id3"), learners.Stump)
    with pytest.raises(ValueError, match="about must be one line"):
        learners.register("two-lines", lambda s: learners.Stump(), about="a\nb")


def test_info_and_describe():
    assert learners.info("km") == {"name": "km", "access": "query", "reads": ("k", "m", "n", "theta"),
                                   "cost": "queries: (2 n + 1) m membership queries",
                                   "what": "KushilevitzMansour: heavy coefficients from queries"}
    with pytest.raises(ValueError, match="unknown learner 'nope'; registered: adaboost-cart"):
        learners.info("nope")
    lines = learners.describe().splitlines()
    assert lines[0].split()[:2] == ["name", "access"] and len(lines) == len(learners.names()) + 2
    assert lines[-1].startswith("(costs: n bits")
    body = dict(zip(learners.names(), lines[1:-1]))
    columns = [lines[0].index(head) for head in ("access", "Size fields read", "cost per fit", "what")]
    for name, line in body.items():
        about = learners.info(name)
        assert line.startswith(name + " ")
        cells = [line[a:b].strip() for a, b in zip(columns, columns[1:] + [None])]
        assert cells == [about["access"], ", ".join(about["reads"]) or "-", about["cost"], about["what"]]


def test_list_learners_shows_a_study_file_s_own_learner(tmp_path, capsys):
    """`jaxtrees list --learners FILE`: importing the file registers its learners, listed with the built-in ones."""
    from jaxtrees import cli

    path = tmp_path / "mine.py"
    path.write_text('import jaxtrees as jt\n\n'
                    'jt.learners.register("mine-stump", lambda s: jt.Stump(impurity="gini"), about="a stump of mine")\n\n'
                    'def trial(key, params):\n    return {"x": params["a"] > 0}\n\n'
                    'STUDY = jt.Study("mine", trial, grid={"a": [1.0]}, replicates=2)\n')
    try:
        assert cli.main(["list", "--learners", str(path)]) == 0
        out = capsys.readouterr().out
        assert any(line.startswith("mine-stump ") and line.endswith("a stump of mine") for line in out.splitlines())
        assert learners.info("mine-stump")["access"] == "sample"
    finally:
        learners.unregister("mine-stump")
    assert cli.main(["list", str(path)]) == 2
    assert "add --learners" in capsys.readouterr().err
