"""Built-in studies (``jaxtrees list``): each a :class:`~jaxtrees.experiments.study.Study` with a quick size
for a laptop CPU and a full size for a GPU.

>>> sorted(STUDIES)
['addressing', 'addressing-samples', 'agnostic', 'boosting', 'compare', 'fourier', 'gd-parity-uniform', 'gd-scaling', 'gd-smoothed', 'gd-vs-id3', 'juntas', 'parity', 'rank', 'smoothed-base', 'trees']
"""

from jaxtrees.experiments.studies.boosting import BOOSTING
from jaxtrees.experiments.studies.compare import COMPARE
from jaxtrees.experiments.studies.counterexamples import ADDRESSING, AGNOSTIC
from jaxtrees.experiments.studies.finite_addressing import ADDRESSING_SAMPLES
from jaxtrees.experiments.studies.fourier import FOURIER
from jaxtrees.experiments.studies.gd_parity import GD_PARITY_UNIFORM, GD_SMOOTHED
from jaxtrees.experiments.studies.gd_scaling import GD_SCALING
from jaxtrees.experiments.studies.gd_vs_id3 import GD_VS_ID3
from jaxtrees.experiments.studies.learning import JUNTAS, PARITY, TREES
from jaxtrees.experiments.studies.rank import RANK
from jaxtrees.experiments.studies.smoothed_base import SMOOTHED_BASE

STUDIES = {s.name: s for s in (PARITY, JUNTAS, TREES, ADDRESSING, AGNOSTIC, GD_PARITY_UNIFORM, GD_SMOOTHED,
                                   GD_SCALING, GD_VS_ID3, FOURIER, BOOSTING, RANK, COMPARE, SMOOTHED_BASE,
                                   ADDRESSING_SAMPLES)}


def get(name: str):
    """The built-in study called ``name``; ValueError listing the known ones otherwise."""
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; known studies: {', '.join(sorted(STUDIES))}")
    return STUDIES[name]
