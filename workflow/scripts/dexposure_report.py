import pandas as pd

from mlmia.core.io import read_table, write_text
from mlmia.core.runner import run_step
from mlmia.memorization import overfitting
from mlmia.memorization.dexposure import labelled_classes
from mlmia.memorization.dexposure_report import (
    FINDINGS_METHOD,
    FINDINGS_TITLE,
    entity_labels,
    findings,
    plot_figure1,
    render_table1,
    render_table2,
    render_table3,
    table3,
)
from mlmia.report.finding import findings_frame, render_findings
from mlmia.world.phi import ambiguous_words, class_statistics, entity_occurrences, word_tag_counts


def main(snakemake):
    params, out = snakemake.params, snakemake.output
    notes = read_table(snakemake.input.notes)
    chosen = read_table(snakemake.input.chosen)
    runs = pd.concat([read_table(path) for path in snakemake.input.runs], ignore_index=True)
    labelled = labelled_classes(notes)

    stats = class_statistics(notes, labelled)
    # Table 2: the inserted words, then (generated notes only) the other most balanced ambiguous words
    words = list(chosen["word"])
    if params.name_entities:
        others = ambiguous_words(word_tag_counts(notes, "train"), labelled)
        words += [w for w in others["surface"].head(params.table2_rows) if w not in words]
    occurrences = entity_occurrences(notes, words, labelled)
    inserted_as = dict(zip(chosen["word"], chosen["class"]))
    occurrences.insert(1, "inserted as", [inserted_as.get(w, "") for w in occurrences["word"]])
    if not params.name_entities:
        occurrences["word"] = [entity_labels(chosen, False)[inserted_as[w]] for w in occurrences["word"]]
    tidy = table3(runs)
    curve = overfitting.figure2_data(runs)
    trends = overfitting.seed_trends(runs)
    summary = overfitting.trend_summary(trends)
    checks = findings(runs) + overfitting.findings(runs)

    source = "the i2b2 2014 XML" if not params.name_entities else "generated notes of the embedded world"
    parts = {
        "table1": (render_table1(stats, source), stats),
        "table2": (render_table2(occurrences), occurrences),
        "table3": (render_table3(tidy, params.phrase), tidy),
        "overfit": (overfitting.render_overfit(curve, summary, params.overfit), summary),
        "findings": (render_findings(checks, FINDINGS_TITLE, FINDINGS_METHOD, level=2), findings_frame(checks)),
    }
    for key, (markdown, frame) in parts.items():
        write_text(markdown, out[f"{key}_md"])
        write_text(frame.to_csv(index=False), out[f"{key}_csv"])
    write_text(curve.to_csv(index=False), out.figure2_csv)
    write_text(trends.to_csv(index=False), out.overfit_seeds_csv)
    plot_figure1(tidy, [out.figure1_png, out.figure1_pdf], params.style)
    overfitting.plot_figure2(curve, runs, [out.figure2_png, out.figure2_pdf], params.overfit, params.style)
    write_text("\n".join(markdown for markdown, _ in parts.values()), out.report)


run_step(snakemake, main)
