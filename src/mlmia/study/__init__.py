"""The study: experiments, tables, figures, findings and each study's plan from a config; `Study`, the one seam to Snakemake."""
