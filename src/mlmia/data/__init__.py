"""Data in: user sample files, raw MIMIC-III / i2b2 importers, published scores (the sample table they fill: `mlmia.terms.manifest`)."""
