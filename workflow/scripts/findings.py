import pandas as pd

from mlmia.core.io import write_text
from mlmia.core.runner import run_step
from mlmia.report.findings import check_findings, render_findings


def main(snakemake):
    metrics = {name: pd.read_parquet(path) for name, path in snakemake.input.items()}
    checks = check_findings(snakemake.params.checks, metrics)
    write_text(checks.to_csv(index=False), snakemake.output.table)
    write_text(render_findings(checks, snakemake.params.world), snakemake.output.markdown)


run_step(snakemake, main)
