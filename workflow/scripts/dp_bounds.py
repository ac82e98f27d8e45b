import json

from mlmia.core.io import write_text
from mlmia.core.runner import run_step
from mlmia.defences.report import (
    audit_findings,
    bounds_markdown,
    bounds_table,
    by_attack_table,
    checks_table,
    findings_markdown,
    one_run_markdown,
    one_run_table,
)
from mlmia.report.finding import findings_frame


def main(snakemake):
    output, settings = snakemake.output, snakemake.params.settings
    audits = []
    for path in snakemake.input:
        with open(path) as handle:
            audits.append(json.load(handle))
    write_text(bounds_table(audits).to_csv(index=False), output.bounds_csv)
    write_text(bounds_markdown(bounds_table(audits), settings["fpr"], settings["confidence"]), output.bounds_md)
    write_text(by_attack_table(audits).to_csv(index=False), output.by_attack)
    one_run, checks = one_run_table(audits), checks_table(audits)
    write_text(one_run.to_csv(index=False), output.one_run_csv)
    write_text(checks.to_csv(index=False), output.checks_csv)
    write_text(one_run_markdown(one_run, checks, settings), output.one_run_md)
    findings = audit_findings(audits, settings["confidence"])
    write_text(findings_frame(findings).to_csv(index=False), output.findings_csv)
    write_text(findings_markdown(findings, settings["confidence"]), output.findings_md)


run_step(snakemake, main)
