"""Which kinds of token carry the membership signal: an attack's per-slot scores, each slot placed
on its token and the token labelled with the kind of PHI its characters belong to.

An attack with per-slot evidence (`mlmia.attacks.base.Attack.token_statistics`: one score per
slot, higher = more member-like) says where in a sample its statistic comes from. A slot is one
masked position of one masking pattern, in the order of the score table's token lists: pattern
0's positions, then pattern 1's, ... The patterns are a pure function of (scoring seed, the
sample's mask key, its number of content tokens T, the pattern index) (`mlmia.scoring.masks`), so
slot j is placed again here, without the scorer: `slot_positions`. Only the masked energy's
layout (K patterns of l = ceil(0.15 T) positions) is placed; another energy kind is refused.

A position is the token's index among the sample's content tokens (the tokens the tokenizer did
not add: [CLS] and [SEP] are not counted), as the masks number them. Its characters come from the
tokenizer's offsets on the sample's text (the scorer keeps none), and its `kind` is the kind of
the PHI span that holds one of them (`slot_kinds`; a token inside several spans takes the
shortest span's kind), else "other". The PHI spans are those the extraction study finds
(`mlmia.memorization.extraction.named_spans`: the embedded world's values of each patient, or a
user's `extraction.phi`); without them every slot is "other".

`kind_summary`: per attack and kind, over the audited samples (members and non-members), the
slots and samples of that kind, the mean slot score of members and of non-members, their
difference with a 95% patient-bootstrap interval (`mlmia.metrics.bootstrap.PatientResampler`,
patients resampled within (role, source) from the sample table's universe, as the metrics do),
and the share of members and of non-members whose top-scoring slot is of that kind.

Nothing here writes, logs or returns a token, a token id, a value or a text: positions, kinds
and numbers only; messages name samples by id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import row_ids
from mlmia.core.errors import UserError, shown_id
from mlmia.core.logs import get_logger
from mlmia.memorization.extraction import named_spans, phi_form
from mlmia.metrics.bootstrap import PatientResampler
from mlmia.metrics.intervals import percentile_interval
from mlmia.models.tokenizer import encode_text
from mlmia.scoring.masks import mask_keys, mask_patterns
from mlmia.terms.scores import OTHER_KIND
from mlmia.world.patient_phi import PHI_KINDS

log = get_logger(__name__)

#: a token outside every PHI span
OTHER = OTHER_KIND
#: the energy kinds whose slots are placed here (the masked energy: K patterns of l positions)
SLOT_ENERGIES = ("masked",)
#: the roles the summary compares
AUDITED = ("member", "nonmember")
SLOT_COLUMNS = ["sample_id", "group_id", "role", "source", "attack", "slot", "pattern", "position", "kind", "score"]
SUMMARY_COLUMNS = ["attack", "kind", "slots", "samples", "member_mean", "nonmember_mean", "difference", "ci_low",
                   "ci_high", "minus_other", "minus_other_low", "minus_other_high", "member_top_share",
                   "nonmember_top_share", "members", "nonmembers", "phi_from"]  # fmt: skip


def has_token_statistics(attack: Attack) -> bool:
    """Whether an attack can give per-slot scores (it overrides `Attack.token_statistics`)."""
    return type(attack).token_statistics is not Attack.token_statistics


def slot_positions(
    key: str, n_tokens: int, n_slots: int, *, seed: int, patterns: int, mask_count: str, label: str
) -> tuple[np.ndarray, np.ndarray]:
    """(pattern, position) of each of a sample's `n_slots` slots under the masked energy: the
    patterns of `mlmia.scoring.masks.mask_patterns` laid end to end. A count that is not K_eff * l
    for `n_tokens` content tokens is refused in one line naming the sample (`label`)."""
    layout = mask_patterns(seed, key, int(n_tokens), patterns, mask_count)
    if layout.size != n_slots:
        raise UserError(
            f"{label}: {n_slots} slots, but {int(n_tokens)} tokens give {layout.shape[0]} patterns of {layout.shape[1]} "
            "(scored with other scoring settings, or another tokenizer)"
        )
    return np.repeat(np.arange(layout.shape[0]), layout.shape[1]), layout.reshape(-1)


def token_offsets(tokenizer, texts: Sequence[str], labels: Sequence[str]) -> list[list[tuple[int, int]]]:
    """Each text's content tokens' character spans (the tokenizer's offsets, `encode_text`'s reading)."""
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(
            f"token kinds: the tokenizer {type(tokenizer).__name__} gives no character offsets (needs a fast one)"
        )
    enc = encode_text(tokenizer, list(texts), labels=list(labels), add_special_tokens=False,
                      return_offsets_mapping=True, return_attention_mask=False, return_token_type_ids=False)  # fmt: skip
    return [[(int(a), int(b)) for a, b in offsets] for offsets in enc["offset_mapping"]]


def slot_kinds(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int, str]]) -> list[str]:
    """Each token's kind: that of the span (start, end, kind; end exclusive) holding one of its
    characters, the shortest such span's (then the kind's name) where several do; else `OTHER`."""
    ordered = sorted(spans, key=lambda span: (span[1] - span[0], span[2]))
    kinds = []
    for a, b in offsets:
        hit = next((kind for start, end, kind in ordered if a < end and b > start and b > a), OTHER)
        kinds.append(hit)
    return kinds


def phi_spans(samples: pd.DataFrame, phi: pd.DataFrame | None, where: str) -> pd.DataFrame | None:
    """The character spans (sample_id, kind, start, end) of the PHI `phi` names in `samples` (the
    extraction study's matcher, `named_spans`); None without `phi`. A table keyed by sample
    (offsets or values per sample) is read for the samples given only."""
    if phi is None:
        return None
    if phi_form(phi, where) != "patient values":
        phi = phi[phi["sample_id"].astype(str).isin(set(samples["sample_id"].astype(str)))]
    return named_spans(samples, phi, where)[["sample_id", "kind", "start", "end"]]


def slot_table(
    table: pd.DataFrame,
    attacks: Mapping[str, Attack],
    samples: pd.DataFrame,
    tokenizer,
    *,
    energy: str,
    seed: int,
    patterns: int,
    mask_count: str,
    spans: pd.DataFrame | None,
) -> pd.DataFrame:
    """One row per (attack, sample, slot) of the attack table `table` (`SLOT_COLUMNS`): each
    attack's per-slot score with the slot's pattern, position and kind. `samples`: the sample
    table (sample_id, text; mask_id where the scorer keyed masks on it); `spans`: `phi_spans`."""
    if energy not in SLOT_ENERGIES:
        raise UserError(
            f"token kinds: energy kind {energy!r} has no slot layout here (only {', '.join(SLOT_ENERGIES)})"
        )
    ids = table["sample_id"].astype(str).tolist()
    labels = [f"sample {i}" for i in row_ids(table)]
    known = samples.assign(sample_id=samples["sample_id"].astype(str)).drop_duplicates("sample_id")
    present = set(known["sample_id"])
    missing = [i for i in ids if i not in present]
    if missing:
        raise UserError(f"token kinds: sample {shown_id(missing[0])} of the attack table is not in the sample table")
    known = known.set_index("sample_id", drop=False).loc[ids]
    keys = mask_keys(known.reset_index(drop=True))
    offsets = token_offsets(tokenizer, known["text"].astype(str).tolist(), labels)
    given = table["n_tokens"] if "n_tokens" in table.columns else pd.Series([None] * len(table))
    n_tokens = [len(o) if pd.isna(t) else int(t) for t, o in zip(given, offsets)]
    by_sample = (
        {} if spans is None else {s: list(zip(p["start"], p["end"], p["kind"])) for s, p in spans.groupby("sample_id")}
    )
    kinds = []
    for sid, label, t, token_spans in zip(ids, labels, n_tokens, offsets):
        if t > len(token_spans):
            raise UserError(f"{label}: scored with {t} tokens, the tokenizer reads {len(token_spans)}")
        kinds.append(np.array(slot_kinds(token_spans[:t], by_sample.get(sid, [])), dtype=object))
    frames = []
    for name, attack in attacks.items():
        scores = attack.token_statistics(table)
        if scores is None:
            log.info("token kinds: attack %s gives no per-slot scores; left out", name)
            continue
        chosen = attack.scored(table)
        for i in range(len(table)) if chosen is None else np.flatnonzero(chosen):
            values = np.asarray(scores[i], dtype=float).reshape(-1)
            pattern, position = slot_positions(keys[i], n_tokens[i], values.size, seed=seed, patterns=patterns,
                                               mask_count=mask_count, label=f"attack {name}: {labels[i]}")  # fmt: skip
            frames.append(pd.DataFrame({"sample_id": ids[i], "attack": name, "slot": np.arange(values.size),
                                        "pattern": pattern, "position": position, "kind": kinds[i][position],
                                        "score": values}))  # fmt: skip
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SLOT_COLUMNS})
    out = pd.concat(frames, ignore_index=True)
    rows = table.assign(sample_id=ids)[["sample_id", "group_id", "role", "source"]].drop_duplicates("sample_id")
    out = out.merge(rows, on="sample_id", how="left")[SLOT_COLUMNS]
    log.info("token kinds: %d slots of %d samples, %d attack(s); kinds: %s", len(out), len(ids), len(attacks),
             ", ".join(f"{k} {n}" for k, n in out["kind"].value_counts().sort_index().items()))  # fmt: skip
    return out


def kind_order(kinds) -> list[str]:
    """Kinds in the order the summary prints them: the world's PHI kinds, the others by name, `OTHER` last."""
    kinds = set(kinds)
    return [k for k in PHI_KINDS if k in kinds] + sorted(kinds - set(PHI_KINDS) - {OTHER}) + [OTHER] * (OTHER in kinds)


def kind_summary(
    slots: pd.DataFrame,
    *,
    seed: int,
    replicates: int,
    universe: dict | None = None,
    phi_from: str = "",
) -> pd.DataFrame:
    """Per attack and kind over the audited samples' slots (`SUMMARY_COLUMNS`): `slots` and
    `samples` of the kind; the pooled mean slot score of members' slots and of non-members'
    (`member_mean`, `nonmember_mean`), `difference` = member − non-member with its 95% percentile
    interval over `replicates` patient-bootstrap replicates (`ci_low`, `ci_high`; a replicate's
    means weight each sample by its patient's draws, a replicate without a side's slot is left
    out); the share of members (of non-members) whose highest slot score (the first on a tie) is
    of the kind, out of `members` (`nonmembers`) samples. Against the ordinary words: `minus_other` =
    the kind's difference less `OTHER`'s, its interval from the same replicates (paired: a kind's signal
    above the ordinary words' is this interval lying above 0; NaN for `OTHER` itself, or without it).
    `universe`: the bootstrap's patients per (role, source) (`mlmia.attacks.protocols.sample_universe`);
    `phi_from`: where the spans came from."""
    audited = slots[slots["role"].isin(AUDITED) & np.isfinite(slots["score"].to_numpy(float))]
    rows = []
    for attack, part in audited.groupby("attack", sort=False):
        part = part.sort_values(["sample_id", "slot"], kind="stable")
        units = part.drop_duplicates("sample_id").set_index("sample_id")[["group_id", "role", "source"]]
        kinds = kind_order(part["kind"])
        cells = part.groupby(["sample_id", "kind"])["score"].agg(["sum", "size"])
        sums, counts = (
            cells[column].unstack(fill_value=0).reindex(index=units.index, columns=kinds, fill_value=0).to_numpy(float)
            for column in ("sum", "size")
        )
        top = part.loc[part.groupby("sample_id", sort=False)["score"].idxmax()].set_index("sample_id")["kind"]
        top = top.reindex(units.index).to_numpy()
        member = (units["role"] == "member").to_numpy()
        strata = list(zip(units["role"].astype(str), units["source"].astype(str)))
        resampler = PatientResampler(strata, units["group_id"].to_numpy(), seed, universe)
        weights = np.stack([resampler.weights(b) for b in range(replicates)]).astype(float) if replicates else None
        found, replicated = [], {}
        for k, kind in enumerate(kinds):
            side = {}
            for name, mask in (("member", member), ("nonmember", ~member)):
                s, c = sums[mask, k], counts[mask, k]
                side[name] = s.sum() / c.sum() if c.sum() else np.nan
                if weights is not None:
                    with np.errstate(invalid="ignore", divide="ignore"):
                        side[f"{name}_b"] = (weights[:, mask] @ s) / (weights[:, mask] @ c)
            replicated[kind] = side["member_b"] - side["nonmember_b"] if weights is not None else None
            low, high = percentile_interval(replicated[kind]) if weights is not None else (np.nan, np.nan)
            found.append({"attack": attack, "kind": kind, "slots": int(counts[:, k].sum()),
                         "samples": int((counts[:, k] > 0).sum()), "member_mean": side["member"],
                         "nonmember_mean": side["nonmember"], "difference": side["member"] - side["nonmember"],
                         "ci_low": low, "ci_high": high,
                         "member_top_share": float(np.mean(top[member] == kind)) if member.any() else np.nan,
                         "nonmember_top_share": float(np.mean(top[~member] == kind)) if (~member).any() else np.nan,
                         "members": int(member.sum()), "nonmembers": int((~member).sum()), "phi_from": phi_from})  # fmt: skip
        other = next((row for row in found if row["kind"] == OTHER), None)
        for row in found:
            paired = other is not None and row is not other
            low, high = (np.nan, np.nan)
            if paired and weights is not None:
                low, high = percentile_interval(replicated[row["kind"]] - replicated[OTHER])
            row.update(minus_other=row["difference"] - other["difference"] if paired else np.nan,
                       minus_other_low=low, minus_other_high=high)  # fmt: skip
        rows += found
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def experiment_token_kinds(
    table: pd.DataFrame,
    samples: pd.DataFrame,
    tokenizer,
    attacks: Mapping[str, Attack],
    spans: pd.DataFrame | None,
    settings: Mapping,
    universe: dict | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(`slot_table`, `kind_summary`) of one experiment's attack table. `spans`: the PHI spans of the
    sample table (`phi_spans`; None: no PHI table, every slot "other"). `settings`: "energy" (the
    experiment's), "scoring" (config scoring's "seed", "patterns", "mask_count"), "bootstrap"
    (config metrics' "seed" and "bootstrap" replicates: "replicates"), "where" (where the PHI comes
    from, for the summary's `phi_from`)."""
    where = settings.get("where") or "PHI"
    phi_from = where if spans is not None else "none: no PHI table (extraction.phi), every slot is other"
    if spans is None:
        log.info("token kinds: no PHI table (extraction.phi): every slot is %s", OTHER)
    ids = set(table["sample_id"].astype(str))
    rows = samples[samples["sample_id"].astype(str).isin(ids)]
    if spans is not None:
        spans = spans[spans["sample_id"].astype(str).isin(ids)]
    scoring, bootstrap = settings["scoring"], settings["bootstrap"]
    slots = slot_table(table, attacks, rows, tokenizer, energy=settings["energy"], seed=scoring["seed"],
                       patterns=scoring["patterns"], mask_count=scoring["mask_count"], spans=spans)  # fmt: skip
    summary = kind_summary(slots, seed=bootstrap["seed"], replicates=bootstrap["replicates"], universe=universe,
                           phi_from=phi_from)  # fmt: skip
    return slots, summary
