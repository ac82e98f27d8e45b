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
