import pandas as pd

from mlmia.core.io import write_text
from mlmia.core.runner import run_step
from mlmia.report.comparison import paper_comparison


def main(snakemake):
    tables = [pd.read_csv(path) for path in snakemake.input]
    write_text(paper_comparison(tables, snakemake.params.world), snakemake.output[0])


run_step(snakemake, main)
