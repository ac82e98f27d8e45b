import pandas as pd

from mlmia.findings import check_findings, render_findings
from mlmia.io import write_text
from mlmia.runner import run_step


def main(snakemake):
    levels = snakemake.params.levels
    metrics = {name: pd.read_parquet(path) for name, path in zip(levels, snakemake.input)}
    checks = check_findings(snakemake.params.findings, metrics, levels)
    write_text(checks.to_csv(index=False), snakemake.output.table)
    write_text(render_findings(checks, snakemake.params.world), snakemake.output.markdown)


run_step(snakemake, main)
