import pandas as pd

from mlmia.core.io import write_text
from mlmia.core.runner import run_step
from mlmia.report.finding import findings_frame
from mlmia.report.findings import check_findings, render


def main(snakemake):
    metrics = {name: pd.read_parquet(path) for name, path in snakemake.input.items()}
    findings = check_findings(snakemake.params.checks, metrics)
    write_text(findings_frame(findings).to_csv(index=False), snakemake.output.table)
    write_text(render(findings, snakemake.params.world), snakemake.output.markdown)


run_step(snakemake, main)
