"""Target functions f: {0,1}^n -> {0,1}: one protocol (:class:`Target`), one module per family.

>>> import jax, jax.numpy as jnp
>>> f = parity([0, 2], n=4)
>>> f(jnp.array([[1, 0, 1, 1], [1, 1, 0, 0]])).tolist()
[0, 1]
"""

from jaxtrees.targets.addressing import Addressing, addressing, code_distance, coded_addressing, random_code
from jaxtrees.targets.agnostic import agnostic_addressing, nearby_junta
from jaxtrees.targets.base import Target, label_covariance, support_mask
from jaxtrees.targets.juntas import (MAX_REJECTIONS, Junta, MaskParity, Parity, as_junta, from_table, junta, parity,
                                     random_function, random_junta, random_parity, random_subset, truth_table)
from jaxtrees.targets.rank_trees import NodeTreeTarget, random_decision_list, random_rank_tree
from jaxtrees.targets.trees import DecisionTree, decision_tree, random_tree

__all__ = ["Addressing", "DecisionTree", "Junta", "MAX_REJECTIONS", "MaskParity", "NodeTreeTarget", "Parity", "Target",
           "addressing", "agnostic_addressing", "as_junta", "code_distance", "coded_addressing", "decision_tree",
           "from_table", "junta", "label_covariance", "nearby_junta", "parity", "random_code", "random_decision_list",
           "random_function", "random_junta", "random_parity", "random_rank_tree", "random_subset", "random_tree",
           "support_mask", "truth_table"]
