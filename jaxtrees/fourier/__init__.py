"""Fourier analysis of Boolean functions (seed 001): transforms of truth tables and exact sparse
spectra of trees and targets, with their summaries.

- :mod:`~jaxtrees.fourier.transforms`: fast Walsh-Hadamard (uniform) and p-biased transforms, inverses;
- :mod:`~jaxtrees.fourier.spectra`: :class:`Spectrum` (masks, values), built exactly for trees,
  juntas, parities and any small target; L1, L0, degree, weight by degree, influences, noise
  stability; the seed's low-degree, sparse approximation of trees.

The learners built on them (LMN, ...) are in :mod:`jaxtrees.learners.fourier`.
"""

from jaxtrees.fourier import spectra, transforms
from jaxtrees.fourier.spectra import (Approximation, Spectrum, approximate, coefficient, degree, influences, l1,
                                      noise_stability, sparsity, spectrum, total_influence, weight_by_degree)
from jaxtrees.fourier.transforms import (biased_transform, inverse_biased_transform, inverse_walsh_hadamard, signs,
                                         walsh_hadamard)

__all__ = ["Approximation", "Spectrum", "approximate", "biased_transform", "coefficient", "degree", "influences",
           "inverse_biased_transform", "inverse_walsh_hadamard", "l1", "noise_stability", "signs", "sparsity",
           "spectra", "spectrum", "total_influence", "transforms", "walsh_hadamard", "weight_by_degree"]
