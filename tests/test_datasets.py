"""The real data sets (jaxtrees.datasets): Table 1's feature counts, labels, the binarization rule,
the shipped copies against the raw files in ../shared (skipped when it is absent), the split
protocol, and bad input."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxtrees import datasets

RAW = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "reyzin"
needs_raw = pytest.mark.skipif(not RAW.is_dir(), reason="../shared/data/reyzin is not beside this checkout")

#: Table 1 of seed 004 (cancer: 80 on the 683 complete rows, see datasets.load), labeled rows.
COUNTS = {"census": 131, "splice": 240, "ocr17": 403, "ocr49": 403, "cancer": 80, "ecoli": 356, "heart": 371}
ROWS = {"census": 2000, "splice": 1000, "ocr17": 2000, "ocr49": 2000, "cancer": 683, "ecoli": 336, "heart": 270}


@pytest.mark.parametrize("name", datasets.SHIPPED)
def test_shipped_sets_have_table_1s_feature_counts(name):
    d = datasets.load(name)
    assert d.X.shape == (ROWS[name], COUNTS[name]) and d.y.shape == (ROWS[name],)
    assert d.X.dtype == d.y.dtype == np.uint8 and set(np.unique(d.X)) <= {0, 1} and set(np.unique(d.y)) == {0, 1}
    assert len(d.features) == len(set(d.features)) == COUNTS[name]
    assert d.train_size == datasets.TRAIN_SIZE[name] < ROWS[name]


@needs_raw
@pytest.mark.parametrize("name", ["ocr17", "ocr49"])
def test_ocr_sets_load_from_a_path_with_table_1s_counts(name):
    d = datasets.load(name, str(RAW))
    assert d.X.shape == (2000, 403) and len(d.features) == 403
    assert 0.4 < d.y.mean() < 0.6  # two digits, balanced


@needs_raw
@pytest.mark.parametrize("stem", ["census.names", "census.train", "census.test", "dna.names", "dna.train", "dna.test",
                                  "heart.dat", "wisconsin.dat", "ecoli.data", "ecoli.names"])
def test_shipped_copies_are_the_raw_files(stem):
    shipped = Path(datasets.__file__).parent / "uci" / f"{stem}.gz"
    assert gzip.decompress(shipped.read_bytes()) == (RAW / stem).read_bytes()


def test_ocr_sets_are_not_shipped_and_need_a_path():
    assert not any(name.startswith("ocr") for name in os.listdir(Path(datasets.__file__).parent / "uci"))
    with pytest.raises(ValueError, match="ocr17 is not shipped .* pass path="):
        datasets.load("ocr17")


def test_labels_follow_the_stated_classes():
    heart = datasets.load("heart")
    raw = np.loadtxt(gzip.open(Path(datasets.__file__).parent / "uci" / "heart.dat.gz", "rt"), delimiter=",")
    np.testing.assert_array_equal(heart.y, raw[:, -1] == 2)  # presence of heart disease
    assert datasets.load("cancer").y.sum() == 239  # malignant rows of the 683
    census = gzip.open(Path(datasets.__file__).parent / "uci" / "census.train.gz", "rt").read().split()
    assert datasets.load("census").y.sum() == census.count(">50K") == 1001  # a (nearly) balanced subsample
    cp = datasets.load("ecoli", ecoli_positive=("cp",))  # another merge, as an option
    assert cp.y.sum() == 143 and datasets.load("ecoli").y.sum() == 143 + 77 + 35  # cp, im, imU (default)
    np.testing.assert_array_equal(cp.X, datasets.load("ecoli").X)


def test_binarization_rule_on_a_tiny_course_file(tmp_path):
    """One-hot over the values seen (in the .names order), thresholds x >= v for every distinct value
    but the smallest, values collected over labeled and unlabeled rows, labeled rows returned."""
    (tmp_path / "ocr17.names").write_text("1 7\n\ncolour red green blue\nsize numeric\n")
    (tmp_path / "ocr17.train").write_text("red 1 7\nblue 3 1\n")
    (tmp_path / "ocr17.test").write_text("red 5\n")
    d = datasets.load("ocr17", str(tmp_path))
    assert d.features == ("colour=red", "colour=blue", "size>=3", "size>=5")  # green never seen
    np.testing.assert_array_equal(d.X, [[1, 0, 0, 0], [0, 1, 1, 0]])
    np.testing.assert_array_equal(d.y, [1, 0])


def test_the_split_protocol_is_the_data_set_problems():
    d = datasets.load("heart")
    problem = d.problem()
    train, test = problem.train(jax.random.key(3), d.train_size), problem.test(jax.random.key(3), d.train_size)
    assert int(train.m) == 100 and int(test.m) == 170 and train.X.shape[0] == 371
    again = problem.train(jax.random.key(3), d.train_size)
    np.testing.assert_array_equal(np.asarray(train.X), np.asarray(again.X))  # split s is the key s


@pytest.mark.parametrize("kwargs, match", [
    (dict(name="mnist"), "name must be one of"),
    (dict(name="heart", path="/nonexistent"), "path must be a directory"),
    (dict(name="ecoli", ecoli_positive=("xx",)), "ecoli_positive must be a nonempty proper subset"),
    (dict(name="ecoli", ecoli_positive=()), "ecoli_positive must be a nonempty proper subset"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        datasets.load(**kwargs)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="ocr49.names .* not found"):
        datasets.load("ocr49", str(tmp_path))


def _damaged_copy(tmp_path, stem, data: bytes):
    """A copy of the shipped files in ``tmp_path`` with ``stem``'s replaced by ``data``."""
    shipped = Path(datasets.__file__).parent / "uci"
    for f in shipped.glob("*.gz"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / stem).write_bytes(data)
    return str(tmp_path)


@pytest.mark.parametrize("name, stem, data, why", [
    ("heart", "heart.dat.gz", b"plain text, not gzip\n", "BadGzipFile"),
    ("census", "census.names.gz", gzip.compress(b"\xff\xfe\xfa broken \x80\x81\n", mtime=0), "UnicodeDecodeError"),
    ("cancer", "wisconsin.dat.gz", gzip.compress(b"5,1,1\x00garbage,2\n", mtime=0), "not numbers"),
    ("ecoli", "ecoli.data.gz", b"\x1f\x8b\x08\x00" + b"\x00" * 12, "(EOFError|BadGzipFile|error)"),
], ids=["heart", "census", "cancer", "ecoli"])  # ids without the bytes: every xdist worker collects the same names
def test_a_damaged_file_is_named_with_the_next_step(tmp_path, name, stem, data, why):
    path = _damaged_copy(tmp_path, stem, data)
    with pytest.raises(ValueError, match=f"data file .*{stem.removesuffix('.gz')}.*{why}.*(download|reinstall)") as e:
        datasets.load(name, path)
    assert str(tmp_path) in str(e.value)
