"""What a user declares: a :class:`Study` (grid, trial, axis, checks, compile knobs), its resolved :class:`Config`
and trial keys (:mod:`.declaration`); the trial building blocks (:mod:`.trials`)."""

from jaxtrees.experiments.study.declaration import (COMPILE_KNOBS, ID_COLUMNS, MAX_TRIALS, PARAMETER_MEANINGS, Axis,
                                                    Checks, Compile, Config, Study, cell_hash, column_descriptions,
                                                    configure, trial_key)

__all__ = ["Axis", "COMPILE_KNOBS", "Checks", "Compile", "Config", "ID_COLUMNS", "MAX_TRIALS", "PARAMETER_MEANINGS",
           "Study", "cell_hash", "column_descriptions", "configure", "trial_key"]
