"""The DP targets' private text: Base's training text plus more patients of the same kind.

DP-SGD pays off with more private data (Li, Tramèr, Liang and Hashimoto, ICLR 2022; Yu et al.,
ICLR 2022): at a fixed epsilon the noise on the mean clipped gradient falls as the batch grows,
and a larger batch keeps the sampling rate, hence the noise multiplier, small only when there
are many training units. So the DP targets train on `dp_corpus.patients` more MIMIC-style
patients beside the target's own (members and held-in members), all of them private.

The new patients are drawn from a random stream of their own (`dp:<corpus seed>`), after the
world is built and from none of its draws, so every other table of the world, and every paper
table, is what it is without them. A new line whose text is anywhere in the world's sample table
or in the target's text is dropped: a non-member sample must never be trained on, and a member's
line must not be trained twice. The members and non-members the attacks score are the world's,
so the DP experiments are unchanged but for the target they attack.
"""

from __future__ import annotations

import random

import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.world.corpus import corpus_settings, patient_sentences
from mlmia.world.lexicon import lexicon
from mlmia.world.patients import make_patient, sentence_count

log = get_logger(__name__)

#: the patient ids of the DP corpus' own patients: "<prefix><5 digits>"
PATIENT_PREFIX = "mimic-dp-"


#: the keys of the `dp_corpus:` section
DP_CORPUS_KEYS = ("patients",)


def dp_corpus_settings(value: dict) -> dict:
    """The `dp_corpus:` section (resolved: every key given), checked; a wrong key or value is a
    UserError, a missing key a KeyError."""
    unknown = sorted(set(value) - set(DP_CORPUS_KEYS))
    if unknown:
        raise UserError(f"dp_corpus: unknown key(s) {', '.join(unknown)} (known: {', '.join(DP_CORPUS_KEYS)})")
    out = {key: value[key] for key in DP_CORPUS_KEYS}
    patients = out["patients"]
    if not isinstance(patients, int) or isinstance(patients, bool) or patients < 0:
        raise UserError(f"dp_corpus.patients: must be a non-negative integer, got {patients!r}")
    return out


def dp_private_text(
    target: pd.DataFrame, world_samples: pd.DataFrame, corpus: dict | None, dp_corpus: dict
) -> pd.DataFrame:
    """The DP targets' training text (sample_id, group_id, text): `target`'s lines, then the
    lines of `dp_corpus.patients` new MIMIC-style patients (module docstring), those whose text
    is in `world_samples` or `target` left out."""
    cfg = corpus_settings(corpus)
    settings = dp_corpus_settings(dp_corpus)
    lex = lexicon()
    rng = random.Random(f"dp:{int(cfg['seed'])}")
    per_patient = int(cfg["sentences_per_patient"])
    rows = []
    for i in range(settings["patients"]):
        pid = f"{PATIENT_PREFIX}{i:05d}"
        patient = make_patient(rng, lex, pid, "mimic")
        for j, (_, text) in enumerate(patient_sentences(rng, patient, sentence_count(rng, per_patient), "mimic")):
            rows.append({"sample_id": f"{pid}-{j:03d}", "group_id": pid, "text": text})
    extra = pd.DataFrame(rows, columns=["sample_id", "group_id", "text"])
    known = set(world_samples["text"]) | set(target["text"])
    kept = extra[~extra["text"].isin(known)]
    log.info(
        "DP private text: %d target lines and %d lines of %d new patients (%d dropped: their text is in the world's "
        "samples or the target's text)",
        len(target), len(kept), settings["patients"], len(extra) - len(kept),
    )  # fmt: skip
    return pd.concat([target[["sample_id", "group_id", "text"]], kept], ignore_index=True)
