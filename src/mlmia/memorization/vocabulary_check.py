"""The vocabulary check: how many of the patients' identifying values are whole entries of a model's vocabulary.

A WordPiece vocabulary learnt on training text keeps a word whole when the text repeats it often
enough, so a tokenizer trained on the notes holds the names its patients carry (in the
default world, the surname of 121 of 220 member patients is one entry of Base's 3,000, against 73
of 260 non-members' and 45 of 160 of the population's). The vocabulary ships with the model and
lies outside a DP guarantee on its weights: it is a membership signal of its own.

For each kind of value (the embedded world's first names, surnames, physicians and states:
`mlmia.world.patient_phi.identifying_values`; a user's PHI table, `extraction.phi`, every kind it
names) and each role (members, held-in members, non-members, the population: how common such
values are), the share of values that the model's tokenizer reads as one token
(`mlmia.models.tokenizer.VocabularyReader.whole`, after its own normalizer), with a 95%
patient-bootstrap interval (patients resampled within their role, the same patients for every
kind: `mlmia.metrics.bootstrap.PatientResampler`), and the paired differences members minus
non-members and members minus population, "separated" when their interval excludes 0. Values
whose patient has no role in the sample table count under role "unknown": their share alone.

A tokenizer the config marks public (`models.<name>.public_tokenizer`, e.g. a public checkpoint's
that a model fine-tuned on the notes keeps) holds nothing learnt from the owner's notes: its check
counts nothing and is one row that says so (`public_check`, row "public"), not a table of shares
that would read as "no leak".

Nothing here writes or logs a value: the outputs are counts, shares and intervals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.metrics.bootstrap import PatientResampler
from mlmia.metrics.intervals import percentile_interval
from mlmia.report.vocabulary import PUBLIC_ROW, SHARE_ROLES

#: the paired differences: (name, first role, second role)
COMPARISONS = (("members_vs_nonmembers", "member", "nonmember"), ("members_vs_population", "member", "population"))
COLUMNS = ["model", "tokenizer", "vocabulary_size", "kind", "row", "role", "versus", "patients", "values", "whole",
           "value", "ci_low", "ci_high", "separated", "replicates"]  # fmt: skip


def user_values(samples: pd.DataFrame, phi: pd.DataFrame, where: str = "extraction.phi") -> pd.DataFrame:
    """A user's PHI table (`mlmia.memorization.extraction.named_spans`'s three forms) as values:
    group_id, role, source, kind, value. Offsets give the text they span in their sample; values
    per sample take the sample's patient; values per patient stand as given; a patient's value
    written in two cases is one value (the first as written). Each patient's role and source come
    from the sample table (`unknown` for a patient it does not hold)."""
    from mlmia.memorization.extraction import check_values, named_spans, phi_form

    form = phi_form(phi, where)
    samples = samples.assign(sample_id=samples["sample_id"].astype(str), group_id=samples["group_id"].astype(str))
    if form == "offsets":
        spans = named_spans(samples, phi, where)
        texts = dict(zip(samples["sample_id"], samples["text"].astype(str)))
        values = pd.DataFrame({
            "group_id": spans["group_id"], "kind": spans["kind"].astype(str),
            "value": [texts[s][a:b] for s, a, b in zip(spans["sample_id"], spans["start"], spans["end"])],
        })  # fmt: skip
    elif form == "sample values":
        named_spans(samples, phi, where)  # every row checked as extraction reads it
        patient = dict(zip(samples["sample_id"], samples["group_id"]))
        values = phi.assign(group_id=phi["sample_id"].astype(str).map(patient))
    else:
        values = phi
    values = check_values(values[["group_id", "kind", "value"]], where)[["group_id", "kind", "value"]]
    values["kind"] = values["kind"].astype(str)
    patients = samples.drop_duplicates("group_id").set_index("group_id")
    values["role"] = values["group_id"].map(patients["role"]).fillna("unknown").astype(str)
    values["source"] = values["group_id"].map(patients["source"]).fillna("").astype(str) if "source" in patients else ""
    # one value per patient and kind whatever its case, as extraction counts it (`named_spans`): the first as written
    once = ~values.assign(key=values["value"].str.casefold()).duplicated(["group_id", "kind", "key"])
    return values[once].reset_index(drop=True)[["group_id", "role", "source", "kind", "value"]]


def chosen_kinds(
    values: pd.DataFrame, kinds: Sequence[str] | None, key: str = "audit_cards.vocabulary_kinds"
) -> list[str]:
    """The kinds the check counts: `kinds` (each must be in `values`), or every kind `values` holds."""
    present = list(dict.fromkeys(values["kind"]))
    if kinds is None:
        return present
    missing = [kind for kind in kinds if kind not in present]
    if missing:
        raise UserError(f"config key {key}: kind {missing[0]!r} is not among the values' kinds ({', '.join(present)})")
    return list(kinds)


def vocabulary_shares(values: pd.DataFrame, whole: np.ndarray, replicates: int, seed: int) -> pd.DataFrame:
    """Per kind and role, the share of values that are whole vocabulary entries (`whole`, one flag
    per row of `values`) with its 95% patient-bootstrap interval, and the paired differences
    (`COMPARISONS`); rows in `COLUMNS`' layout, without the model's columns."""
    values = values.assign(whole=np.asarray(whole, dtype=bool), group_id=values["group_id"].astype(str))
    universes = {(role,): sorted(set(part["group_id"])) for role, part in values.groupby("role")}
    shares, draws = [], {}
    for kind in dict.fromkeys(values["kind"]):
        for role in [r for r in SHARE_ROLES if (r,) in universes]:
            part = values[(values["kind"] == kind) & (values["role"] == role)]
            if part.empty:
                continue
            resampler = PatientResampler([(role,)] * len(part), part["group_id"].to_numpy(), seed, universes)
            weights = np.stack([resampler.weights(b) for b in range(replicates)]) if replicates else np.zeros((0, 1))
            hits = part["whole"].to_numpy(dtype=float)
            with np.errstate(invalid="ignore", divide="ignore"):
                drawn = (weights @ hits) / weights.sum(axis=1) if replicates else np.zeros(0)
            draws[kind, role] = drawn
            low, high = percentile_interval(drawn)
            shares.append({"kind": kind, "row": "share", "role": role, "versus": None,
                           "patients": part["group_id"].nunique(), "values": len(part), "whole": int(hits.sum()),
                           "value": float(hits.mean()), "ci_low": low, "ci_high": high, "separated": None,
                           "replicates": int(np.isfinite(drawn).sum())})  # fmt: skip
    frame = pd.DataFrame(shares)
    rows = []
    for kind in dict.fromkeys(values["kind"]):
        for _, first, second in COMPARISONS:
            if (kind, first) not in draws or (kind, second) not in draws:
                continue
            point = {role: frame[(frame["kind"] == kind) & (frame["role"] == role)].iloc[0] for role in (first, second)}
            paired = draws[kind, first] - draws[kind, second]
            low, high = percentile_interval(paired)
            separated = bool(np.isfinite(low) and (low > 0 or high < 0))
            rows.append({"kind": kind, "row": "difference", "role": first, "versus": second,
                         "patients": None, "values": None, "whole": None,
                         "value": float(point[first]["value"] - point[second]["value"]), "ci_low": low,
                         "ci_high": high, "separated": separated, "replicates": int(np.isfinite(paired).sum())})  # fmt: skip
    return pd.concat([frame, pd.DataFrame(rows)], ignore_index=True) if rows else frame


def vocabulary_check(
    values: pd.DataFrame, reader, model: str, tokenizer: str, kinds: Sequence[str] | None, replicates: int, seed: int
) -> pd.DataFrame:
    """The check of one model: its tokenizer (`reader`, a `VocabularyReader`; `tokenizer` names it
    by digest) on the `kinds` of `values` (group_id, role, source, kind, value), in `COLUMNS`."""
    chosen = values[values["kind"].isin(chosen_kinds(values, kinds))].reset_index(drop=True)
    if chosen.empty:
        raise UserError("vocabulary check: no identifying value to count")
    whole = np.array([reader.whole(value) for value in chosen["value"].astype(str)], dtype=bool)
    rows = vocabulary_shares(chosen, whole, replicates, seed)
    rows.insert(0, "model", model)
    rows.insert(1, "tokenizer", tokenizer)
    rows.insert(2, "vocabulary_size", int(reader.size))
    return rows[COLUMNS]


def public_check(model: str, tokenizer: str) -> pd.DataFrame:
    """The check of a model whose tokenizer the config marks public: one row (`row` "public", in
    `COLUMNS`), no count (`vocabulary_size` empty: the tokenizer is not read)."""
    row = dict.fromkeys(COLUMNS)
    row |= {"model": model, "tokenizer": tokenizer, "row": PUBLIC_ROW}
    return pd.DataFrame([row], columns=COLUMNS)


def write_vocabulary_report(checks: Sequence[pd.DataFrame], csv_path, markdown_path, values_from: str) -> None:
    """The extraction study's vocabulary table: every model's check (`vocabulary_check`) as one CSV
    and one Markdown page (`values_from`: where the values come from, in words)."""
    from mlmia.core.io import atomic_path, write_text
    from mlmia.report.vocabulary import is_public, public_line, vocabulary_markdown

    table = pd.concat(list(checks), ignore_index=True)
    with atomic_path(csv_path) as tmp:
        table.to_csv(tmp, index=False)
    parts = [
        "# The vocabulary check",
        "",
        f"How many of the patients' identifying values ({values_from}) are one entry of each model's vocabulary: "
        "read by the model's own tokenizer (its normalizer first: BERT uncased lowercases and strips accents), alone "
        "or after a space, as exactly one token that is not the unknown token. A vocabulary learnt on the training "
        "text keeps a value whole when that text repeats it: the vocabulary ships with the model and tells its "
        "members' values from others'. Per kind and role: whole entries / values (share in percent, 95% "
        "patient-bootstrap interval); the differences in points, paired (the same resamples), separated when "
        "their interval excludes 0. The population's share says how common such values are.",
    ]
    if (table["row"] == PUBLIC_ROW).any():
        parts[-1] += (" A tokenizer the config marks public (learnt on nothing of the owner's notes) is said to be so, "
                      "and nothing is counted.")  # fmt: skip
    for model, rows in table.groupby("model", sort=False):
        first = rows.iloc[0]
        if is_public(rows):
            parts += ["", f"## {model}", "", public_line(first["tokenizer"])]
            continue
        parts += ["", f"## {model}", "", f"Tokenizer {first['tokenizer']}: {int(first['vocabulary_size'])} entries.",
                  "", *vocabulary_markdown(rows)]  # fmt: skip
    write_text("\n".join(parts) + "\n", markdown_path)
