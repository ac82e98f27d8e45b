"""The canonical sample table (the manifest) every stage reads: one row per sample with its
unique `sample_id`, its patient (`group_id`), its `text`, the `role` it plays, the `source` it
comes from, its length bucket and its number of content tokens."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.keys import stable_key

#: the roles a sample plays in an experiment; a patient plays one role
ROLES = ("member", "member_heldin", "nonmember", "population")
#: roles whose samples the target was trained on
TRAINED_ROLES = ("member", "member_heldin")
#: roles whose samples' neighbour texts are scored: the audited ones. No attack compares a
#: population sample with its neighbours (the neighbourhood attack scores these roles only), so
#: a population sample's neighbours are made but never scored (a fifth of the neighbour scoring)
NEIGHBOUR_ROLES = (*TRAINED_ROLES, "nonmember")
#: the neighbour table's column naming the sample a neighbour was made from (mlmia.scoring.neighbours)
NEIGHBOUR_OF = "neighbour_of"
#: the 3rd entry of the neighbour subsample's generator seed (apart from the dropout masks' streams)
SUBSAMPLE_STREAM = 11
MANIFEST_COLUMNS = ["sample_id", "group_id", "text", "role", "source", "length", "n_tokens"]

#: length buckets in content tokens (word pieces without [CLS]/[SEP])
SHORT = (10, 19)
LONG = (20, 60)
LENGTHS = ("short", "long")


def length_bucket(n_tokens: int) -> str | None:
    """'short' for 10-19 content tokens, 'long' for 20-60, None otherwise."""
    n = int(n_tokens)
    if SHORT[0] <= n <= SHORT[1]:
        return "short"
    if LONG[0] <= n <= LONG[1]:
        return "long"
    return None


def patient_in_two_roles(manifest: pd.DataFrame) -> tuple[str, list[str]] | None:
    """The first patient (`group_id`) listed under more than one role, with its roles in the
    order of `ROLES`; None when every patient plays one role."""
    roles = manifest[["group_id", "role"]].astype(str).drop_duplicates()
    twice = roles["group_id"].duplicated(keep=False)
    if not twice.any():
        return None
    patient = roles.loc[twice, "group_id"].iloc[0]
    return patient, sorted(roles.loc[roles["group_id"] == patient, "role"], key=ROLES.index)


def check_roles_disjoint(manifest: pd.DataFrame, where: str, hint: str = "") -> None:
    """A patient plays one role: one listed as a member and as a non-member (or population)
    would make every patient-level number wrong. Names the patient and both roles; `hint`, when
    given, ends the message."""
    found = patient_in_two_roles(manifest)
    if found is not None:
        patient, both = found
        raise UserError(
            f"{where}: patient {patient!r} is in two roles ({' and '.join(both)}); a patient plays one role{hint}"
        )


def taken(manifest: pd.DataFrame, nonmembers: str, population: str | None, length: str | None) -> pd.Series:
    """Which rows an experiment takes: every member and held-in member, the non-members of source
    `nonmembers`, the population samples of source `population` (None: none), of one length
    bucket (None: every length)."""
    keep = (
        manifest["role"].isin(TRAINED_ROLES)
        | ((manifest["role"] == "nonmember") & (manifest["source"] == nonmembers))
        | ((manifest["role"] == "population") & (manifest["source"] == population))
    )
    return keep & (manifest["length"] == length) if length is not None else keep


def rows_read(samples: pd.DataFrame, selections: list[dict]) -> pd.DataFrame:
    """The rows of a sample table that at least one of `selections` (each an experiment's
    `selection()`: nonmembers, population, length) takes, in the table's order: what a model's
    scores must cover. A neighbour table's rows carry their sample's role, source and length,
    so the neighbours of exactly those samples are kept. No selections (scores no experiment
    reads, asked for by name): every row."""
    if not selections:
        return samples
    keep = pd.Series(False, index=samples.index)
    for selection in selections:
        keep |= taken(samples, selection["nonmembers"], selection["population"], selection["length"])
    return samples[keep]


def neighbour_subsample(samples: pd.DataFrame, subsample: dict, seed: int) -> pd.Series:
    """Which rows of a sample table get neighbour texts (config key `neighbours.subsample`), as a
    boolean Series on its index. No subsample (``{}``): every row, as ever. With one,
    ``{role: {source: n}}`` (n for every length bucket, or ``{short: n, long: m}``): n samples
    of each named (role, source) and length bucket, drawn without replacement; every sample of
    an audited role (`NEIGHBOUR_ROLES`) or source not named; no population sample (its
    neighbours are never scored). A draw reads the stratum's sample ids, sorted, with a
    generator seeded by (seed, `SUBSAMPLE_STREAM`, the stratum) alone: the same whatever the
    table's row order or its other strata. A stratum with fewer samples than asked is an error."""
    if not subsample:
        return pd.Series(True, index=samples.index)
    unknown = sorted(set(subsample) - set(NEIGHBOUR_ROLES))
    if unknown:
        raise UserError(
            f"config key neighbours.subsample.{unknown[0]}: not an audited role (use {', '.join(NEIGHBOUR_ROLES)})"
        )
    keep = pd.Series(samples["role"].isin(NEIGHBOUR_ROLES).to_numpy(), index=samples.index)
    lengths = samples["length"] if "length" in samples.columns else pd.Series(None, index=samples.index)
    for role, by_source in subsample.items():
        for source, count in by_source.items():
            in_source = (samples["role"] == role) & (samples["source"].astype(str) == str(source))
            if not in_source.any():
                raise UserError(
                    f"config key neighbours.subsample.{role}.{source}: the sample table has no {role} samples of "
                    f"source {source!r}"
                )
            for length in sorted(set(lengths[in_source].astype(str))):
                stratum = in_source & (lengths.astype(str) == length)
                n = int(count.get(length, 0)) if isinstance(count, dict) else int(count)
                ids = samples.loc[stratum, "sample_id"].astype(str)
                if n > len(ids):
                    raise UserError(
                        f"config key neighbours.subsample.{role}.{source}: {n} {length} samples asked for, the "
                        f"sample table has {len(ids)}"
                    )
                rng = np.random.default_rng([int(seed), SUBSAMPLE_STREAM, stable_key(f"{role}/{source}/{length}")])
                ordered = ids.sort_values(kind="stable")
                chosen = set(ordered.iloc[np.sort(rng.choice(len(ordered), n, replace=False))])
                keep[stratum] = ids.isin(chosen).to_numpy()
    return keep
