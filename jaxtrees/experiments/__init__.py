"""Experiments: the study runner (:mod:`~jaxtrees.experiments.runner`), summaries and figures
(:mod:`~jaxtrees.experiments.summary`) and the built-in studies (:mod:`~jaxtrees.experiments.studies`)."""
