"""Hypotheses: what learners return (:class:`Hypothesis`), the tree layouts shared by learned
trees and tree targets (:mod:`~jaxtrees.hypotheses.tree`: complete heap), sign-of-polynomial
hypotheses (:mod:`~jaxtrees.hypotheses.polynomial`) and weighted votes
(:mod:`~jaxtrees.hypotheses.ensemble`)."""

from jaxtrees.hypotheses.base import Hypothesis, sample_error
from jaxtrees.hypotheses.ensemble import Ensemble
from jaxtrees.hypotheses.tree import Tree

__all__ = ["Ensemble", "Hypothesis", "Tree", "sample_error"]
