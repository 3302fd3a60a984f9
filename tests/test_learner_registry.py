"""The learner registry's descriptions (``learners.ABOUT``, ``info``, ``describe``): every registered learner is
described, and the Size fields each factory reads, and its access, are the declared ones (checked by recording)."""

from __future__ import annotations

import pytest

from jaxtrees import learners
from jaxtrees.learners import Size


class RecordingSize:
    """A Size that records which fields are read (each read returns the default Size's value)."""

    def __init__(self):
        self.read = set()

    def __getattr__(self, name):
        if name not in Size._fields:
            raise AttributeError(f"a factory read {name!r}, which is no Size field")
        self.read.add(name)
        return getattr(Size(), name)


def test_every_registered_learner_is_described():
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
    size = RecordingSize()
    learner = learners.get(name, size)  # get hands the factory the size as it is
    assert size.read == set(learners.info(name)["reads"]), f"{name}: reads {sorted(size.read)}"
    assert learner.access == learners.info(name)["access"]


def test_recording_catches_an_undeclared_read():
    size = RecordingSize()
    (lambda s: learners.GreedyTree(learners.GrowthRule(max_depth=min(s.depth, s.n))))(size)
    assert size.read == {"depth", "n"}


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
