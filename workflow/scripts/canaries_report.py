import pandas as pd

from mlmia.core.io import write_text
from mlmia.core.runner import run_step
from mlmia.memorization.canaries import exposure_markdown, exposure_summary, plot_exposure


def main(snakemake):
    params, out = snakemake.params, snakemake.output
    summary = exposure_summary(pd.read_parquet(snakemake.input[0]))
    write_text(summary.to_csv(index=False), out.csv)
    write_text(exposure_markdown(summary, params.digits, params.template), out.markdown)
    for path in (out.png, out.pdf):
        plot_exposure(summary, path, params.digits, params.style)


run_step(snakemake, main)
