"""The gradient-descent studies (issue 5, 000 Open Question 1: how long does SGD take on juntas?), by name.

A re-export of :mod:`~jaxtrees.experiments.studies.gd_parity` (gd-parity-uniform, gd-smoothed),
:mod:`~jaxtrees.experiments.studies.gd_vs_id3`, :mod:`~jaxtrees.experiments.studies.gd_scaling` (the
trial and declaration) with :mod:`~jaxtrees.experiments.studies.gd_scaling_report` and
:mod:`~jaxtrees.experiments.studies.gd_scaling_fits` (its report), and what they share
(:mod:`~jaxtrees.experiments.studies.gd_common`). The studies' design notes: docs/gd-notes.md.
"""

from jaxtrees.experiments.report import summary  # noqa: F401
from jaxtrees.experiments.studies.gd_common import (BARAK, BARAK_BUDGET, EXACT_MAX_N, OPTIMIZER_NAMES,  # noqa: F401
                                                    STATIC_TRAINING, TRAINING, train_config)
from jaxtrees.experiments.studies.gd_common import divergence_note as _divergence_note  # noqa: F401
from jaxtrees.experiments.studies.gd_common import network_text as _network_text  # noqa: F401
from jaxtrees.experiments.studies.gd_common import network_title as _network_title  # noqa: F401
from jaxtrees.experiments.studies.gd_parity import GD_PARITY_UNIFORM, GD_SMOOTHED  # noqa: F401
from jaxtrees.experiments.studies.gd_scaling import (CPU_REPORT, FAMILIES, GD_SCALING, INITS,  # noqa: F401
                                                     OPTIMIZERS, SCALING_MAX_K, _separation, checkpoints,
                                                     scaling_config)
from jaxtrees.experiments.studies.gd_scaling_fits import BOOTSTRAP, RANGE_MIN_N, RANGES  # noqa: F401
from jaxtrees.experiments.studies.gd_scaling_fits import local_slopes as _local_slopes  # noqa: F401
from jaxtrees.experiments.studies.gd_scaling_fits import sensitivity as _sensitivity  # noqa: F401
from jaxtrees.experiments.studies.gd_scaling_fits import trials as _trials  # noqa: F401
from jaxtrees.experiments.studies.gd_scaling_report import RESOLVING_TEST_SIZE  # noqa: F401
from jaxtrees.experiments.studies.gd_vs_id3 import GD_VS_ID3  # noqa: F401
