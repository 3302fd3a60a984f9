"""Hypotheses: what learners return (:class:`Hypothesis`), the tree layouts shared by learned
trees and tree targets (:mod:`~jaxtrees.hypotheses.tree`: complete heap;
:mod:`~jaxtrees.hypotheses.node_tree`: node lists for deep, sparse trees), sign-of-polynomial
hypotheses (:mod:`~jaxtrees.hypotheses.polynomial`) and weighted votes
(:mod:`~jaxtrees.hypotheses.ensemble`)."""

from jaxtrees.hypotheses.base import Hypothesis, sample_error
from jaxtrees.hypotheses.ensemble import Ensemble, Forest
from jaxtrees.hypotheses.node_tree import NodeTree
from jaxtrees.hypotheses.tree import Tree

__all__ = ["Ensemble", "Forest", "Hypothesis", "NodeTree", "Tree", "sample_error"]
