"""Training splits of reference models (LiRA, RMIA): which patients each reference trains on.

Carlini et al. ("Membership Inference Attacks From First Principles", IEEE S&P 2022) train M
reference models on random halves of a data pool so that every example is IN for half of
them and OUT for the other half. Here the unit is the patient (a drawn patient brings all its
sentences): each patient of the pool, and of the audited samples when `online`, is IN for
exactly M/2 references (M odd: floor or ceil at random), chosen by a generator seeded by
(seed, patient id) alone, so the split does not depend on the order of the tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.keys import stable_key

#: the audited roles a reference may train on (online LiRA): never the population or held-in samples
AUDITED_ROLES = ("member", "nonmember")


def patient_halves(patients: list[str], count: int, seed: int) -> dict[str, np.ndarray]:
    """{patient: bool array of length `count`, True where that reference trains on it}."""
    out = {}
    for patient in patients:
        rng = np.random.default_rng([int(seed), stable_key(patient)])
        n_in = count // 2 + (int(rng.integers(0, 2)) if count % 2 else 0)
        inside = np.zeros(count, dtype=bool)
        inside[rng.permutation(count)[:n_in]] = True
        out[patient] = inside
    return out


def reference_splits(
    pool: pd.DataFrame,
    samples: pd.DataFrame,
    names: list[str],
    seed: int,
    online: bool,
    pool_where: str = "the reference pool",
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """(splits, training texts): `splits` has a row per (sample of `samples`, reference) with
    `in` (did that reference train on it); `texts[name]` is reference `name`'s training text
    (columns sample_id, group_id, text): its half of the pool's patients, and with `online`
    its half of the audited (member and non-member) patients' samples. `pool_where`: the pool's
    table in messages (its file)."""
    for table, where in ((pool, pool_where), (samples, "the sample table")):
        missing = [c for c in ("sample_id", "group_id", "text") if c not in table.columns]
        if missing:
            raise UserError(f"{where} lacks column(s) {', '.join(missing)}")
    if len(names) < 2:
        raise UserError("config key references.count: at least 2 reference models (IN and OUT for each sample)")
    pool_ids = set(pool["group_id"].astype(str))
    shared = pool_ids & set(samples["group_id"].astype(str))
    if shared:
        raise UserError(
            f"reference pool: patient {sorted(shared)[0]!r} is also in the sample table (the pool must be disjoint)"
        )
    count = len(names)
    pool_in = patient_halves(sorted(pool_ids), count, seed)
    audited = samples[samples["role"].isin(AUDITED_ROLES)] if online else samples.iloc[0:0]
    audited_in = patient_halves(sorted(set(audited["group_id"].astype(str))), count, seed + 1)
    texts = {}
    for i, name in enumerate(names):
        from_pool = pool[[pool_in[g][i] for g in pool["group_id"].astype(str)]]
        from_audit = audited[[audited_in[g][i] for g in audited["group_id"].astype(str)]]
        texts[name] = pd.concat([from_pool, from_audit], ignore_index=True)[["sample_id", "group_id", "text"]]
    groups = samples["group_id"].astype(str).to_numpy()
    audited_mask = samples["role"].isin(AUDITED_ROLES).to_numpy() & bool(online)
    rows = []
    for i, name in enumerate(names):
        inside = np.array([audited_mask[j] and audited_in[g][i] for j, g in enumerate(groups)], dtype=bool)
        rows.append(
            pd.DataFrame({"sample_id": samples["sample_id"].astype(str).to_numpy(), "reference": name, "in": inside})
        )
    return pd.concat(rows, ignore_index=True), texts


def with_aliases(splits: pd.DataFrame, aliases: dict[str, str]) -> pd.DataFrame:
    """`splits` with the rows of each reference in `aliases` ({reference: the reference whose split
    it trains on}, a pool of another training objective: `mlmia.study.pools`) copied from its split's."""
    copies = [splits[splits["reference"] == split].assign(reference=name) for name, split in aliases.items()]
    return pd.concat([splits, *copies], ignore_index=True) if copies else splits
