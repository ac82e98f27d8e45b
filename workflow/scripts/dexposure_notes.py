import pandas as pd

from mlmia.core.errors import naming_keys
from mlmia.core.io import write_parquet
from mlmia.core.runner import run_step
from mlmia.memorization.dexposure import labelled_classes
from mlmia.world.phi import choose_entities, class_counts, load_notes, word_key, word_tag_counts


def main(snakemake):
    settings = snakemake.params.settings
    xml = list(snakemake.input.xml)
    with naming_keys({path: f"dexposure.i2b2_xml[{i}]" for i, path in enumerate(xml)}):  # the user's XML
        notes = load_notes(settings, xml)
    labelled = labelled_classes(notes)
    counts = word_tag_counts(notes, "train")
    chosen = choose_entities(counts, settings["classes"], labelled, settings["entities"])
    by_class = class_counts(counts, labelled)
    rows = [{"class": cls, "word": word, **by_class.loc[word_key(word)].to_dict()} for cls, word in chosen.items()]
    write_parquet(notes, snakemake.output.notes)
    write_parquet(pd.DataFrame(rows), snakemake.output.chosen)


run_step(snakemake, main)
