"""What a user declares: a :class:`Study` and its trial keys (:mod:`.declaration`), its axis, compile knobs and checks
(:mod:`.options`), its resolved :class:`Config` (:mod:`.config`); the trial building blocks (:mod:`.trials`)."""

from jaxtrees.experiments.study.config import ID_COLUMNS, MAX_TRIALS, Config, column_descriptions, configure
from jaxtrees.experiments.study.declaration import PARAMETER_MEANINGS, Study, cell_hash, trial_key
from jaxtrees.experiments.study.options import COMPILE_KNOBS, Axis, Checks, Compile

__all__ = ["Axis", "COMPILE_KNOBS", "Checks", "Compile", "Config", "ID_COLUMNS", "MAX_TRIALS", "PARAMETER_MEANINGS",
           "Study", "cell_hash", "column_descriptions", "configure", "trial_key"]
