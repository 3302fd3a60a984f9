"""Built-in studies (``jaxtrees list``): each a :class:`~jaxtrees.runner.Study` with a quick size
for a laptop CPU and a full size for a GPU.

>>> sorted(STUDIES)
['addressing', 'agnostic', 'juntas', 'parity', 'trees']
"""

from jaxtrees.studies.counterexamples import ADDRESSING, AGNOSTIC
from jaxtrees.studies.learning import JUNTAS, PARITY, TREES

STUDIES = {s.name: s for s in (PARITY, JUNTAS, TREES, ADDRESSING, AGNOSTIC)}


def get(name: str):
    """The built-in study called ``name``; ValueError listing the known ones otherwise."""
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; known studies: {', '.join(sorted(STUDIES))}")
    return STUDIES[name]
