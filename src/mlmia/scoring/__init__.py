"""Scoring: the energy of every sample under a model (masks, batched scorer, shards)."""
