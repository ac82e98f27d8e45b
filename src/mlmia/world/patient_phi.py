"""The PHI values the embedded world gives each patient: what extraction tries to read back.

One row per (patient, kind, value) with the literal context the value stands in where the
templates always write one (`mlmia.memorization.extraction.locate_values` finds it there):

- `surname`: the patient's surname (the MIMIC history line names the patient by it);
- `physician`: the surname of the patient's physician, after "Dr. ";
- `date`: the admission date as the templates write it (ISO and US forms; the templates add 0-6
  days to the admission day, capped at 28, so each of those days is a value);
- `state`: the state the patient lives in;
- `drug`: each of the patient's drugs; `dose`: its dose, between the drug and " mg";
- `rare_diagnosis`: each of the patient's rare diagnoses.

The table is read from the patients the world built; building it draws no random number, so
every other table of the world is what it is without it.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from mlmia.world.patients import DATE_JITTER, LAST_DAY, render_date

#: the kinds of PHI value, in the order the tables print them
PHI_KINDS = ("surname", "physician", "date", "state", "drug", "dose", "rare_diagnosis")
#: the two forms the note templates write a date in (MIMIC's ISO, i2b2's US)
DATE_FORMS = ("iso", "us")


def patient_phi(patients: Iterable) -> pd.DataFrame:
    """The PHI values of `patients` (`mlmia.world.patients.Patient`), columns group_id, kind,
    value, left, right."""
    rows = []
    for p in patients:
        rows += [(p.pid, "surname", p.last, "", ""), (p.pid, "physician", p.doctor, "Dr. ", "")]
        year, month, day = p.admit
        for d in sorted({min(LAST_DAY, day + extra) for extra in range(DATE_JITTER + 1)}):
            rows += [(p.pid, "date", render_date(year, month, d, form), "", "") for form in DATE_FORMS]
        rows.append((p.pid, "state", p.state, "", ""))
        for med in p.meds:
            rows += [(p.pid, "drug", med.drug, "", ""), (p.pid, "dose", med.dose, f"{med.drug} ", " mg")]
        rows += [(p.pid, "rare_diagnosis", dx, "", "") for dx in p.rare_dx]
    return pd.DataFrame(rows, columns=["group_id", "kind", "value", "left", "right"]).drop_duplicates(ignore_index=True)


#: the kinds of value that name a patient or say where they live: what the vocabulary check counts
#: (`mlmia.memorization.vocabulary_check`); a first name is the world's too, though no template writes it alone
IDENTIFYING_KINDS = ("first_name", "surname", "physician", "state")


def identifying_values(samples: pd.DataFrame, phi: pd.DataFrame) -> pd.DataFrame:
    """Each patient's identifying values (`IDENTIFYING_KINDS`), one row per patient and kind:
    group_id, role, source, kind, value. `samples` is the world's sample table (its plain rows
    name each patient's role, source and full name, first name then surname), `phi` its PHI table
    (`patient_phi`: surname, physician, state)."""
    plain = samples[samples["variant"] == "plain"].drop_duplicates("group_id")
    patients = plain.set_index("group_id")[["role", "source", "name"]]
    by_kind = phi[phi["kind"].isin(IDENTIFYING_KINDS)].drop_duplicates(["group_id", "kind"])
    values = by_kind.pivot(index="group_id", columns="kind", values="value").reindex(patients.index)
    surnames = values["surname"].astype(str)
    names = patients["name"].astype(str)
    if not all(name.endswith(" " + last) for name, last in zip(names, surnames)):
        raise ValueError("the world's names do not end in their patients' surnames")
    values["first_name"] = [name[: len(name) - len(last) - 1] for name, last in zip(names, surnames)]
    rows = patients[["role", "source"]].join(values[list(IDENTIFYING_KINDS)]).reset_index()
    long = rows.melt(id_vars=["group_id", "role", "source"], var_name="kind", value_name="value")
    order = {kind: i for i, kind in enumerate(IDENTIFYING_KINDS)}
    long = long.sort_values(["kind", "group_id"], key=lambda c: c.map(order) if c.name == "kind" else c)
    return long.reset_index(drop=True)[["group_id", "role", "source", "kind", "value"]]
