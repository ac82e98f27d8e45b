"""Data in: the canonical sample table, user sample files, raw MIMIC-III / i2b2 importers, published scores."""
