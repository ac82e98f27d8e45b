"""Extraction of a patient's PHI by infilling: mask the value where it stands, read the model's best spans.

A masked LM is an infilling machine. For each sample and each PHI value of its patient that
the sample holds (a surname, a physician, a date, a drug and dose, a rare diagnosis), every
occurrence of the value in the sample is replaced by mask tokens, one per token of the value,
and the model's reconstruction of the first occurrence is compared with the value, token by
token (Carlini et al., "Extracting Training Data from Large Language Models", USENIX Security
2021, read for a masked LM: the span is the prompt's hole, as in Lehman et al., "Does BERT
Pretrained on Clinical Notes Reveal Sensitive Data?", NAACL 2021):

- top-1: the span filled one token at a time, most confident position first, each token read
  with the ones already filled in (greedy mask-predict, `_iterative_fill`), equals the value;
  `top1_one_pass` is the weaker reading of every position from one masked pass;
- top-k: the value is among the k (`top_k`, config extraction.top_k) most likely spans of one
  masked pass, spans scored by the sum of their positions' log-probabilities (the k best found
  exactly by merging the positions' k best), or the iterative fill gives it back.

The rate without memorisation is the same reconstruction by a reference model that never saw
the patient; the rate of non-member patients under the target is the rate a model reaches from
what it learnt of the population. Rates come per PHI kind, at the sample level (one unit per
sample and value) and the patient level (a value counts as extracted when one of the patient's
samples gives it back), with patient-bootstrap intervals whose replicates are shared by every
model and role (`mlmia.metrics.bootstrap.PatientResampler`), so differences are paired.

Nothing here logs, returns or writes a value or a reconstruction: spans are character offsets,
results are flags, counts and rates.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import read_table
from mlmia.core.logs import get_logger
from mlmia.metrics.bootstrap import PatientResampler
from mlmia.metrics.intervals import percentile_interval
from mlmia.world.corpus import build_world

log = get_logger(__name__)

#: a PHI value of a patient: `left` and `right` are literal context the value must stand between
#: (a dose between its drug and "mg"); empty strings: the value stands alone, between word boundaries
VALUE_COLUMNS = ["group_id", "kind", "value", "left", "right"]
SPAN_COLUMNS = ["sample_id", "group_id", "kind", "value_id", "occurrence", "start", "end", "occurrences"]
RESULT_COLUMNS = [
    "sample_id",
    "group_id",
    "kind",
    "value_id",
    "n_tokens",
    "occurrences",
    "top1",
    "top1_one_pass",
    "topk",
    "rank_below_k",
]


def check_values(values: pd.DataFrame, where: str = "PHI values") -> pd.DataFrame:
    """The values table with `left`/`right` filled in ('' when absent); one line naming the
    column or row when it cannot be used (never the value itself)."""
    missing = [c for c in ("group_id", "kind", "value") if c not in values.columns]
    if missing:
        raise UserError(f"{where}: missing column(s) {', '.join(missing)}")
    values = values.copy()
    for column in ("left", "right"):
        values[column] = values[column].fillna("").astype(str) if column in values.columns else ""
    text = values["value"].astype("string")
    empty = text.isna() | (text.str.strip() == "")
    if empty.any():
        raise UserError(f"{where}: row {int(np.flatnonzero(empty.to_numpy())[0])}: the value is empty")
    values["value"] = text.astype(str)
    values["group_id"] = values["group_id"].astype(str)
    values = values.drop_duplicates(VALUE_COLUMNS).reset_index(drop=True)
    values["value_id"] = [f"v{i:06d}" for i in range(len(values))]
    return values


@functools.cache  # a world's values repeat (drugs, states): compile each once
def _pattern(value: str, left: str, right: str) -> re.Pattern:
    # word boundaries outside the context, so "Ann" is not found inside "Annette"
    return re.compile(
        r"(?<![0-9A-Za-z])" + re.escape(left) + "(" + re.escape(value) + ")" + re.escape(right) + r"(?![0-9A-Za-z])",
        flags=re.IGNORECASE,
    )


def locate_values(samples: pd.DataFrame, values: pd.DataFrame, where: str = "PHI values") -> pd.DataFrame:
    """Every occurrence of each of a patient's values in that patient's samples: one row per
    (sample, value, occurrence) with its character span (`start`, `end`) and how many times the
    value occurs in the sample (`occurrences`). Values are matched case-insensitively between
    word boundaries, inside their literal context where they have one (`where`: the table, for messages)."""
    values = check_values(values, where)
    by_group: dict[str, list] = {}  # each value's pattern compiled once, read in each of its patient's samples
    for group_id, value_id, kind, value, left, right in values[
        ["group_id", "value_id", "kind", "value", "left", "right"]
    ].itertuples(index=False):
        by_group.setdefault(group_id, []).append((value_id, kind, _pattern(value, left, right)))
    rows = []
    for sample_id, group_id, text in samples[["sample_id", "group_id", "text"]].astype(str).itertuples(index=False):
        for value_id, kind, pattern in by_group.get(group_id, ()):
            found = [m.span(1) for m in pattern.finditer(text)]
            for j, (start, end) in enumerate(found):
                rows.append((sample_id, group_id, kind, value_id, j, start, end, len(found)))
    return pd.DataFrame(rows, columns=SPAN_COLUMNS)


def named_spans(samples: pd.DataFrame, phi: pd.DataFrame, where: str = "extraction.phi") -> pd.DataFrame:
    """The spans a user names (bring your own), in `locate_values`'s layout, from one of three forms:

    - character offsets: columns sample_id, kind, start, end (end exclusive); the named spans of
      one text (case-insensitive) in a sample are the occurrences of one value;
    - values per sample: sample_id, kind, value (optional left, right): found in that sample only;
    - values per patient: group_id, kind, value (optional left, right): found in the patient's samples.

    A row that cannot be used is refused in one line naming its row number, never its text."""
    form = phi_form(phi, where)
    samples = samples.assign(sample_id=samples["sample_id"].astype(str), group_id=samples["group_id"].astype(str))
    if form == "offsets":
        return _offset_spans(samples, phi, where)
    if form == "sample values":
        known = set(samples["sample_id"])
        phi = phi.assign(sample_id=phi["sample_id"].astype(str))
        unknown = np.flatnonzero(~phi["sample_id"].isin(known).to_numpy())
        if unknown.size:
            raise UserError(f"{where}: row {int(unknown[0])}: sample_id is not in the dataset")
        by_sample = samples.assign(group_id=samples["sample_id"])
        spans = locate_values(by_sample, phi.rename(columns={"sample_id": "group_id"}), where)
        return spans.assign(group_id=spans["sample_id"].map(dict(zip(samples["sample_id"], samples["group_id"]))))
    return locate_values(samples, phi, where)


def phi_table(phi: str | None, corpus: Mapping | None) -> pd.DataFrame:
    """The PHI the study extracts: the user's table at `phi` as read (every column a string, its
    form checked: `phi_form`), or the embedded world's PHI table, the world built again in memory
    from its `corpus` section (seconds), so that no file need hold the values between jobs."""
    if phi:
        table = read_table(phi).astype(str)
        phi_form(table, phi)
        return table
    return build_world(dict(corpus or {}))["phi"]


#: the columns each form of a user's PHI table needs (`named_spans`), by the column that tells the form
PHI_FORMS = {"offsets": ("sample_id", "kind", "start", "end"), "sample values": ("sample_id", "kind", "value"),
             "patient values": ("group_id", "kind", "value")}  # fmt: skip


def phi_form(phi: pd.DataFrame, where: str) -> str:
    """Which form of `named_spans` the user's PHI table `phi` takes ("offsets" with start and end,
    else "sample values" with sample_id, else "patient values" with group_id); refused in one line
    naming the columns it lacks (`where`: the file, and the config key that names it)."""
    columns = set(phi.columns)
    if {"start", "end"} <= columns:
        form = "offsets"
    elif "sample_id" in columns:
        form = "sample values"
    elif "group_id" in columns:
        form = "patient values"
    else:
        raise UserError(
            f"{where}: give sample_id, kind, start, end (offsets), or sample_id or group_id with kind and value"
        )
    missing = [column for column in PHI_FORMS[form] if column not in columns]
    if missing:
        raise UserError(f"{where}: missing column(s) {', '.join(missing)}")
    return form


def _offset_spans(samples: pd.DataFrame, phi: pd.DataFrame, where: str) -> pd.DataFrame:
    texts = dict(zip(samples["sample_id"], samples["text"].astype(str)))
    groups = dict(zip(samples["sample_id"], samples["group_id"]))
    rows = []
    for i, (sample_id, kind, start, end) in enumerate(
        phi[["sample_id", "kind", "start", "end"]].itertuples(index=False)
    ):
        sample_id = str(sample_id)
        if sample_id not in texts:
            raise UserError(f"{where}: row {i}: sample_id is not in the dataset")
        try:
            start, end = int(start), int(end)
        except (TypeError, ValueError):
            raise UserError(f"{where}: row {i}: start and end must be integers") from None
        if not 0 <= start < end <= len(texts[sample_id]):
            raise UserError(f"{where}: row {i}: the span {start}-{end} is not inside the sample's text")
        rows.append((sample_id, groups[sample_id], str(kind), texts[sample_id][start:end].lower(), start, end))
    frame = pd.DataFrame(rows, columns=["sample_id", "group_id", "kind", "text", "start", "end"]).drop_duplicates()
    keys = frame[["group_id", "kind", "text"]].drop_duplicates().reset_index(drop=True)
    keys["value_id"] = [f"v{i:06d}" for i in range(len(keys))]
    frame = frame.merge(keys, on=["group_id", "kind", "text"]).sort_values(["sample_id", "value_id", "start"])
    frame["occurrence"] = frame.groupby(["sample_id", "value_id"]).cumcount()
    frame["occurrences"] = frame.groupby(["sample_id", "value_id"])["start"].transform("size")
    return frame[SPAN_COLUMNS].reset_index(drop=True)


def _token_spans(offsets, start: int, end: int) -> list[int] | None:
    """Positions of the tokens that make up exactly the characters [start, end), or None when a
    token crosses a boundary (the value is part of a longer token)."""
    inside = [j for j, (a, b) in enumerate(offsets) if b > a and a >= start and b <= end]
    crossing = [j for j, (a, b) in enumerate(offsets) if b > a and a < end and b > start and (a < start or b > end)]
    if not inside or crossing:
        return None
    if offsets[inside[0]][0] != start or offsets[inside[-1]][1] != end:
        return None
    return inside


def k_best_sums(logp: np.ndarray, k: int) -> np.ndarray:
    """The k largest sums of one entry per row of `logp` (positions x vocabulary), in
    descending order: the k most likely spans when the positions are independent. Exact: the
    k best of a sum are among the sums of each part's k best (merged one position at a time)."""
    best = np.zeros(1)
    for row in np.asarray(logp, dtype=float):
        top = np.sort(row)[::-1][:k]
        best = np.sort((best[:, None] + top[None, :]).ravel())[::-1][:k]
    return best


def _reconstruction(logp: np.ndarray, truth: np.ndarray, top_k: int) -> tuple[bool, bool, int]:
    """(top-1 exact, among the top_k best spans, the number of spans scored above the truth when
    fewer than top_k, else top_k)."""
    top1 = bool((logp.argmax(axis=1) == truth).all())
    true_score = float(logp[np.arange(len(truth)), truth].sum())
    above = int((k_best_sums(logp, top_k) > true_score + 1e-9).sum())
    return top1, above < top_k, above


def infill(
    model,
    tokenizer,
    samples: pd.DataFrame,
    spans: pd.DataFrame,
    *,
    top_k: int,
    batch_size: int,
) -> pd.DataFrame:
    """Reconstruct each (sample, value) of `spans` (`locate_values`): all its occurrences in the
    sample masked, its first occurrence read back (top-1 by the iterative fill, the one-pass
    readings and top-k by `_reconstruction`). A value whose span does not fall on token
    boundaries is left out and counted in the log."""
    import torch

    from mlmia.models.batching import eval_mode, padded_batch
    from mlmia.models.loading import max_sequence_length
    from mlmia.models.tokenizer import encode_text

    if top_k < 1:
        raise UserError(f"extraction: top_k must be at least 1 (got {top_k})")
    if spans.empty:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    texts = samples.set_index(samples["sample_id"].astype(str))["text"].astype(str)
    units = spans.groupby(["sample_id", "value_id"], sort=False)
    order = list(units.groups)
    needed = list(dict.fromkeys(s for s, _ in order))
    enc = encode_text(
        tokenizer, [texts[s] for s in needed], labels=needed, return_offsets_mapping=True, return_attention_mask=False
    )
    encoded = dict(zip(needed, zip(enc["input_ids"], enc["offset_mapping"])))
    limit = max_sequence_length(model, tokenizer)
    jobs, skipped = [], 0
    for key in order:
        part = units.get_group(key).sort_values("occurrence")
        ids, offsets = encoded[key[0]]
        if len(ids) > limit:
            raise UserError(f"extraction: sample {key[0]} has {len(ids)} tokens, more than the model's {limit}")
        positions = [_token_spans(offsets, int(a), int(b)) for a, b in zip(part["start"], part["end"])]
        if any(p is None for p in positions):
            skipped += 1
            continue
        first = part.iloc[0]
        jobs.append((first, np.asarray(ids, dtype=np.int64), positions))
    if skipped:
        log.info("extraction: %d (sample, value) pairs left out: the value is part of a longer token", skipped)
    # spans of one length together: a batch is read again until its longest span is filled
    jobs.sort(key=lambda job: len(job[2][0]))
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rows = []
    with torch.inference_mode(), eval_mode(model):
        for a in range(0, len(jobs), max(1, int(batch_size))):
            chunk = jobs[a : a + batch_size]
            masked_rows = []
            for _, ids, positions in chunk:
                masked = ids.copy()
                masked[np.concatenate(positions)] = tokenizer.mask_token_id
                masked_rows.append(masked)
            batch, attention = padded_batch(masked_rows, pad)

            def read(inputs, attention=attention):
                out = model(input_ids=inputs.to(device), attention_mask=attention.to(device)).logits
                return torch.log_softmax(out.float(), dim=-1).cpu().numpy()

            logp = read(batch)
            spans = [np.asarray(positions[0]) for _, _, positions in chunk]
            filled = _iterative_fill(read, batch, logp, spans)
            for r, (first, ids, _) in enumerate(chunk):
                span = spans[r]
                one_pass, topk, above = _reconstruction(logp[r, span], ids[span], top_k)
                top1 = bool((filled[r] == ids[span]).all())
                rows.append(
                    (first.sample_id, first.group_id, first.kind, first.value_id, len(span),
                     int(first.occurrences), top1, one_pass, topk or top1, above)
                )  # fmt: skip
    return pd.DataFrame(rows, columns=RESULT_COLUMNS).sort_values(["sample_id", "value_id"], ignore_index=True)


def _iterative_fill(read, batch, logp: np.ndarray, spans: list[np.ndarray]) -> list[np.ndarray]:
    """Each row's span filled one token at a time, most confident position first (the token of
    highest probability among the still-masked positions of the span, written into the input
    and the text read again): the greedy mask-predict decoding of a masked LM (Ghazvininejad et
    al., EMNLP 2019, one token per iteration), stronger than reading every position from one
    pass when the positions depend on each other (a date, a diagnosis of several words)."""
    inputs = batch.clone()
    remaining = [list(span) for span in spans]
    while True:
        for r, rest in enumerate(remaining):
            if rest:
                best = max(rest, key=lambda j, r=r: float(logp[r, j].max()))
                inputs[r, best] = int(logp[r, best].argmax())
                rest.remove(best)
        if not any(remaining):
            break
        logp = read(inputs)
    return [inputs[r, span].numpy() for r, span in enumerate(spans)]


# --------------------------------------------------------------------------- rates


def _units(results: pd.DataFrame, level: str) -> pd.DataFrame:
    """One row per unit: a (sample, value) at sample level; a (patient, value) at patient
    level, extracted when any of its samples gives it back, with the number of its samples."""
    if level == "sample":
        return results.assign(samples=1)
    if level != "patient":
        raise UserError(f"extraction: unknown level {level!r} (use sample or patient)")
    keys = ["model", "role", "group_id", "kind", "value_id"]
    return results.groupby(keys, as_index=False, sort=True).agg(
        top1=("top1", "max"), topk=("topk", "max"), samples=("sample_id", "nunique")
    )


def extraction_rates(
    results: pd.DataFrame,
    roles: dict[str, str],
    *,
    levels: Sequence[str] = ("sample", "patient"),
    seed: int,
    replicates: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rates of top-1 and top-k extraction per (model, role, kind, level) with 95% patient-
    bootstrap intervals, and their replicates (for paired differences: `rate_differences`).

    `results` holds `infill`'s rows of every model (column `model`); `roles` maps each patient
    (group_id) to its role. Patients are resampled within each role, from every patient of that
    role in `roles` (so every model, kind and level draws the same patients in replicate b); a
    replicate's rate is the weighted share of its units. Kind `all` pools the kinds."""
    results = results.assign(role=results["group_id"].astype(str).map(roles))
    if results["role"].isna().any():
        raise UserError("extraction: a result's patient has no role in the sample table")
    universes = {(role,): sorted(g for g, r in roles.items() if r == role) for role in set(roles.values())}
    estimates, reps = [], []
    for level in levels:
        units = _units(results, level)
        pooled = pd.concat([units, units.assign(kind="all")], ignore_index=True)
        for (model, role, kind), part in pooled.groupby(["model", "role", "kind"], sort=True):
            resampler = PatientResampler([(role,)] * len(part), part["group_id"].to_numpy(), seed, universes)
            weights = np.stack([resampler.weights(b) for b in range(replicates)])
            for metric in ("top1", "topk"):
                hits = part[metric].to_numpy(dtype=float)
                with np.errstate(invalid="ignore", divide="ignore"):
                    values = (weights @ hits) / weights.sum(axis=1)
                low, high = percentile_interval(values)
                key = dict(model=model, role=role, kind=kind, level=level, metric=metric)
                estimates.append({**key, "value": float(hits.mean()), "ci_low": low, "ci_high": high,
                                  "units": len(part), "patients": part["group_id"].nunique()})  # fmt: skip
                reps.append(pd.DataFrame({**key, "replicate": np.arange(replicates), "value": values}))
    return pd.DataFrame(estimates), pd.concat(reps, ignore_index=True)


def rate_differences(estimates: pd.DataFrame, replicates: pd.DataFrame, comparisons: Sequence[dict]) -> pd.DataFrame:
    """Paired differences of rates. Each comparison has a `name` and names its `first` and
    `second` cells as dicts of model and role; the difference is taken per (kind, level, metric),
    its 95% interval the percentile interval of the differences on the same replicates, `n` the
    replicates that have it."""
    keys = ["kind", "level", "metric"]

    def cell(table: pd.DataFrame, side: dict, index: list[str]) -> pd.Series:
        return table[(table["model"] == side["model"]) & (table["role"] == side["role"])].set_index(index)["value"]

    rows = []
    for comparison in comparisons:
        first, second = (cell(estimates, comparison[s], keys) for s in ("first", "second"))
        paired = cell(replicates, comparison["first"], [*keys, "replicate"]) - cell(
            replicates, comparison["second"], [*keys, "replicate"]
        )
        by_key = {key: part.to_numpy() for key, part in paired.dropna().groupby(level=keys)}
        for key in first.index.intersection(second.index):
            low, high = percentile_interval(by_key.get(key, np.zeros(0)))
            rows.append({"comparison": comparison["name"], **dict(zip(keys, key)), "first": first[key],
                         "second": second[key], "difference": first[key] - second[key], "ci_low": low,
                         "ci_high": high, "n": len(by_key.get(key, ()))})  # fmt: skip
    return pd.DataFrame(rows)


def _bin_labels(edges: Sequence[float]) -> list[str]:
    labels = []
    for low, high in zip(edges, edges[1:]):
        labels.append(
            f"{low}+" if not np.isfinite(high) else (f"{low}" if high == low + 1 else f"{low}-{int(high) - 1}")
        )
    return labels


def rate_by_occurrences(results: pd.DataFrame, bins: Sequence[int] = (1, 2, 3, 5)) -> pd.DataFrame:
    """Patient-level top-1 and top-k rates by how many of the patient's samples hold the value
    (`bins`: lower edges, the last open), per model and role: how extraction grows with
    repetition."""
    units = _units(results if "role" in results.columns else results.assign(role="all"), "patient")
    edges = [*bins, np.inf]
    units["samples_bin"] = pd.cut(units["samples"], edges, right=False, labels=_bin_labels(edges))
    return units.groupby(["model", "role", "samples_bin"], observed=True, as_index=False).agg(
        top1=("top1", "mean"), topk=("topk", "mean"), units=("top1", "size")
    )
