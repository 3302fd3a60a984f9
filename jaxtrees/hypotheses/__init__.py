"""Hypotheses: what learners return (:class:`Hypothesis`), and the tree layouts shared by learned
trees and tree targets (:mod:`~jaxtrees.hypotheses.tree`: complete heap)."""

from jaxtrees.hypotheses.base import Hypothesis, sample_error
from jaxtrees.hypotheses.tree import Tree

__all__ = ["Hypothesis", "Tree", "sample_error"]
