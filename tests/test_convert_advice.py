"""An old CSV directory that ``jaxtrees convert`` cannot take is refused in one sentence saying what to do instead,
and nothing is changed."""

import json

import pytest

from jaxtrees import cli

ROWS = "study,seed,cell,replicate,n\njuntas,0,0,0,8\n"


@pytest.mark.parametrize("config, says", [
    (None, "neither metadata.json nor parts/config.json says which run wrote its CSV rows, so they can be neither "
           "converted nor resumed; nothing was changed (the CSV files stay as they are: restore metadata.json from a "
           "copy and convert, or rerun the study into a new --out)"),
    ({"study": "juntas", "grid": {"n": [8]}, "replicates": 1, "seed": 0, "quick": True},
     "its run's grid (n) is not the parameters of this jaxtrees' juntas study (c, impurity, k, m_max, m_min, n), so "
     "its rows cannot be resumed into; nothing was changed"),
])
def test_an_old_directory_convert_cannot_take_says_what_to_do_instead(tmp_path, capsys, config, says):
    old = tmp_path / "juntas"
    (old / "parts").mkdir(parents=True)
    (old / "parts" / "0001.csv").write_text(ROWS)
    if config is not None:
        (old / "parts" / "config.json").write_text(json.dumps({"config": config}))
    before = sorted(p.name for p in old.rglob("*"))
    assert cli.main(["convert", str(old)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and "rerun the study into a new --out" in err
    assert sorted(p.name for p in old.rglob("*")) == before
