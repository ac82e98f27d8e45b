import pandas as pd

from mlmia.comparison import paper_comparison
from mlmia.io import write_text
from mlmia.runner import run_step


def main(snakemake):
    tables = [pd.read_csv(path) for path in snakemake.input]
    write_text(paper_comparison(tables, snakemake.params.world), snakemake.output[0])


run_step(snakemake, main)
