"""What the scikit-learn estimators of :mod:`jaxtrees.sklearn` share: :class:`BooleanClassifier` and its imports.

Importing this module without scikit-learn raises ModuleNotFoundError naming the pip extra that installs it
(:data:`INSTALL`). Features enter as bits x > ``threshold``; ``fit`` on other values than 0 and 1 warns once
(:class:`BinarizationWarning`); labels are any two classes.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np

#: The pip extra that installs scikit-learn for the estimators (pyproject.toml's ``sklearn`` extra).
INSTALL = 'pip install "jaxtrees[sklearn]"'

try:
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.exceptions import DataConversionWarning
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data
except ModuleNotFoundError as e:  # the same exception, saying which extra installs it
    if e.name is None or e.name.split(".")[0] != "sklearn":
        raise
    raise ModuleNotFoundError(f"jaxtrees' scikit-learn estimators need scikit-learn, which is not installed: "
                              f"{INSTALL} (or pip install scikit-learn)", name="sklearn") from e

from jaxtrees.core import checks, sampling
from jaxtrees.learners.growth import EXACT_WEIGHT_RANGE


class BinarizationWarning(DataConversionWarning):
    """``fit`` got features other than 0 and 1 and binarized them as x > ``threshold``."""


class BooleanClassifier(ClassifierMixin, BaseEstimator):
    """What the estimators share: two classes, features binarized as bits x > ``self.threshold``."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _fit_data(self, X, y, sample_weight) -> sampling.Data:
        """Validate, set ``classes_``, and pack (bits, label = second class, weights)."""
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        threshold = checks.real("threshold", self.threshold)
        _warn_unless_binary(X, threshold)
        classes, y_index = np.unique(y, return_inverse=True)
        if classes.size > 2:
            raise ValueError(f"Only binary classification is supported: y has {classes.size} classes "
                             f"({classes[:5].tolist()}...)")
        data = sampling.from_arrays(X > threshold, y_index == 1)
        self._exact_weights = False
        if sample_weight is not None:
            w = _check_sample_weight(sample_weight, X, dtype=np.float64)
            positive = w[w > 0]
            self._exact_weights = bool(positive.size and positive.max() > EXACT_WEIGHT_RANGE * positive.min())
            data = sampling.with_weights(data, w)
        self.classes_ = classes
        return data

    def _bits(self, X):
        """Fitted check, validation, and the bits of X."""
        check_is_fitted(self)
        return validate_data(self, X, dtype=np.float64, reset=False) > self.threshold

    def _key(self):
        """The learner's key from ``random_state`` (an int >= 0; None is seed 0)."""
        seed = 0 if self.random_state is None else checks.integer("random_state", self.random_state, low=0)
        return jax.random.key(seed)

    def _proba(self, q):
        """``[m, n_classes]`` from q = Pr[second class] (one column of ones when one class was seen)."""
        q = np.asarray(q, np.float64)
        return np.stack([1 - q, q], axis=1) if self.classes_.size == 2 else np.ones((q.shape[0], 1))

    def _classes(self, labels):
        """The classes of 0/1 labels (1: the second class; the only class when one was seen)."""
        return self.classes_[np.minimum(np.asarray(labels, int), self.classes_.size - 1)]


def _warn_unless_binary(X, threshold):
    """One :class:`BinarizationWarning` (pointing at the caller of ``fit``) when X holds a value other than 0 and 1."""
    other = (X != 0) & (X != 1)
    if other.any():
        example = X[other].flat[0]
        warnings.warn(f"X has values other than 0 and 1 ({int(other.sum())} of {X.size}, e.g. {example:g}): each "
                      f"feature enters as the bit x > threshold={threshold:g}; binarize X yourself or pass threshold "
                      f"to choose the cut (warnings.filterwarnings('ignore', category=jaxtrees.sklearn."
                      f"BinarizationWarning) silences this)", BinarizationWarning, stacklevel=4)

