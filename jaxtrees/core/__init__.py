"""Core: bitsets, random words, samplers and packed data, distributions, impurities, input checks.

Nothing here knows about targets, learners or studies; everything above builds on it.
"""
