"""Memorization: which samples leak (Table 7)."""
