"""Plumbing every stage shares: user errors, logging, atomic output, code digests, the step runner."""
