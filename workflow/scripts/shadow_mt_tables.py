import pandas as pd

from mlmia.core.io import write_text
from mlmia.core.runner import run_step
from mlmia.report.finding import findings_frame
from mlmia.shadow.mt_workflow import tables
from mlmia.shadow.report import plot_top_share, render_all


def main(snakemake):
    params, out = snakemake.params, snakemake.output
    features = {name: pd.read_parquet(path) for name, path in zip(params.names, snakemake.input.features)}
    training = {name: pd.read_parquet(path) for name, path in zip(params.names, snakemake.input.training)}
    split, pairs = pd.read_parquet(snakemake.input.split), pd.read_parquet(snakemake.input.pairs)
    result = tables(split, pairs, features, training, params.settings)
    markdown = render_all(result, params.settings["bootstrap"])
    write_text("\n\n".join(text for key, text in markdown.items() if key != "findings") + "\n", out.tables_md)
    tidy = pd.concat(
        [frame.assign(result=key) for key, frame in result.items() if key not in ("findings", "shift")],
        ignore_index=True,
    )
    write_text(tidy.to_csv(index=False), out.tables_csv)
    for path in (out.figure_png, out.figure_pdf):
        plot_top_share(result["figure7"], path)
    write_text(markdown["findings"], out.findings_md)
    write_text(findings_frame(result["findings"]).to_csv(index=False), out.findings_csv)


run_step(snakemake, main)
