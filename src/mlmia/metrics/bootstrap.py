"""The patient bootstrap: resample patients within each stratum, the same way in every experiment.

The samples of one patient are correlated (shared facts, shared register), so the unit of
resampling is the patient: a drawn patient brings all its samples (the cluster bootstrap;
Davison and Hinkley, "Bootstrap methods and their application", 1997, Section 3.8; Field
and Welsh, JRSS-B 69, 2007). Patients are drawn with replacement within each stratum
(a role and the source it comes from), so every replicate keeps the design: as many
member, non-member and population patients as the data has.

Replicate `b` of stratum `s` draws its patients from the stratum's *universe*, the patients
that the whole sample table has in that role and source, with a generator seeded by
(seed, b, s) alone. Every experiment on the same sample table therefore sees the same
patients in replicate `b`: two experiments (two attacks, two references, long and short
samples, sample and patient level) are compared on the same resamples, and the difference
of their replicate values is a paired bootstrap of their difference. Intervals of replicate values:
`mlmia.metrics.intervals.percentile_interval`.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from mlmia.core.errors import shown_id
from mlmia.core.keys import stable_key


def multiplicities(n_patients: int, seed: int, replicate: int, stratum: tuple[Hashable, ...]) -> np.ndarray:
    """How often each of the stratum's `n_patients` patients (in universe order) is drawn in
    replicate `replicate`: a multinomial draw of n_patients with equal probabilities, a pure
    function of (seed, replicate, stratum)."""
    if n_patients == 0:
        return np.zeros(0, dtype=np.int64)
    rng = np.random.default_rng([int(seed), int(replicate), stable_key("/".join(map(str, stratum)))])
    return rng.multinomial(n_patients, np.full(n_patients, 1.0 / n_patients))


class PatientResampler:
    """Draws the rows of a table for each bootstrap replicate, patient by patient.

    `strata` labels each row's stratum (e.g. (role, source)), `patients` its patient;
    `universe` maps each stratum to its patients in a fixed order (default: the patients the
    rows hold, sorted). A row is repeated as often as its patient is drawn.
    """

    def __init__(
        self,
        strata: list[tuple[Hashable, ...]],
        patients: np.ndarray,
        seed: int,
        universe: dict[tuple[Hashable, ...], list[str]] | None = None,
    ) -> None:
        self.seed = int(seed)
        self._n_rows = len(strata)
        patients = np.asarray(patients, dtype=object).astype(str)
        keys = list(dict.fromkeys(strata))
        self._parts = []
        for key in keys:
            rows = np.array([i for i, s in enumerate(strata) if s == key], dtype=np.int64)
            members = sorted(set(patients[rows])) if universe is None or key not in universe else list(universe[key])
            position = {patient: i for i, patient in enumerate(members)}
            missing = [p for p in patients[rows] if p not in position]
            if missing:
                raise ValueError(
                    f"bootstrap stratum {key}: patient {shown_id(missing[0], 'group_id')} is not in its universe"
                )
            self._parts.append(
                (key, rows, np.array([position[p] for p in patients[rows]], dtype=np.int64), len(members))
            )

    def weights(self, replicate: int) -> np.ndarray:
        """How often each row is drawn in replicate `replicate` (its patient's multiplicity), in
        row order: `rows` as counts, for a statistic that weights rows instead of repeating them."""
        out = np.zeros(self._n_rows, dtype=np.int64)
        for key, rows, patient_of_row, n_patients in self._parts:
            out[rows] = multiplicities(n_patients, self.seed, replicate, key)[patient_of_row]
        return out

    def rows(self, replicate: int) -> np.ndarray:
        """Row indices of replicate `replicate` (with repetition), stratum by stratum."""
        drawn = []
        for key, rows, patient_of_row, n_patients in self._parts:
            counts = multiplicities(n_patients, self.seed, replicate, key)
            drawn.append(np.repeat(rows, counts[patient_of_row]))
        return np.concatenate(drawn) if drawn else np.zeros(0, dtype=np.int64)
