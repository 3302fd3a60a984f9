"""Digests of the built-in studies' quick rows, column by column: proof that a change keeps every row's bytes.

Workload: ``jaxtrees run STUDY --quick`` of every built-in study (or those named), each in a fresh process, into
OUT/STUDY (about 6 minutes of CPU for all 15 on two cores with a warm compilation cache; rows already in OUT are
resumed, not rerun), then a SHA-256 of each column in (cell, replicate) order: its dtype and bytes, or its values
joined as text for strings. The digests go to DIGESTS.json (study -> column -> 16 hex digits).

Usage::

    python scripts/rows_digest.py OUT DIGESTS.json [STUDY...] [--compare BEFORE.json]

``--compare BEFORE.json`` then prints, per study, the columns whose digests differ from (or are missing in)
BEFORE.json's and exits 1 on any difference (0 when every column of every study compared is identical).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

import numpy as np


def digest(directory: str) -> dict:
    """Column name -> the first 16 hex digits of the SHA-256 of its dtype and values (the rows in ``directory``)."""
    from jaxtrees.experiments.results import read_results

    rows = read_results(directory)
    out = {}
    for name in rows.names:
        values = np.asarray(rows[name])
        h = hashlib.sha256(str(values.dtype).encode())
        h.update(values.tobytes() if values.dtype != object else "\x00".join(map(str, values)).encode())
        out[name] = h.hexdigest()[:16]
    return out


def run(out: str, names: list[str]) -> dict:
    """Each study's quick rows, run into ``out`` by the command line, digested."""
    result = {}
    for name in names:
        subprocess.run([sys.executable, "-m", "jaxtrees.cli", "run", name, "--quick", "--out", out, "--no-progress"],
                       check=True, stdout=subprocess.DEVNULL)
        result[name] = digest(os.path.join(out, name))
        print(name, flush=True)
    return result


def compare(after: dict, before: dict) -> int:
    """Print the studies' differing columns; the number of differences (a study or column missing counts)."""
    differences = columns = 0
    for name, digests in sorted(after.items()):
        old = before.get(name)
        if old is None:
            print(f"{name}: not in the digests compared with")
            differences += 1
            continue
        differ = sorted(c for c in set(digests) | set(old) if digests.get(c) != old.get(c))
        columns += len(set(digests) | set(old))
        differences += len(differ)
        print(f"{name}: {len(digests)} columns, " + (f"differing: {', '.join(differ)}" if differ else "identical"))
    print(f"{len(after)} studies, {columns} columns compared, {differences} differences")
    return differences


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the folder the studies run into (OUT/STUDY)")
    parser.add_argument("digests", help="the JSON file the digests are written to")
    parser.add_argument("studies", nargs="*", help="the studies (default: every built-in one)")
    parser.add_argument("--compare", metavar="BEFORE.json", help="digests to compare with: exit 1 on any difference")
    args = parser.parse_args(argv)
    from jaxtrees.experiments.studies import STUDIES

    result = run(args.out, args.studies or list(STUDIES))
    with open(args.digests, "w") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)
    if args.compare:
        with open(args.compare) as fh:
            return 1 if compare(result, json.load(fh)) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
