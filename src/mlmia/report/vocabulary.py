"""How the vocabulary check prints (`mlmia.memorization.vocabulary_check` computes it): one table
per model, per kind of identifying value the share of each role's values that are whole entries
of the model's vocabulary, and the paired differences; a tokenizer the config marks public, one
line that says so (`PUBLIC`). Read by the extraction study's vocabulary table and by the audit cards."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.report.markdown import markdown_table
from mlmia.terms.manifest import ROLES

#: every role a share is given for, in print order ("unknown": a value whose patient has no role in the samples)
SHARE_ROLES = (*ROLES, "unknown")
ROLE_LABELS = {"member": "members", "member_heldin": "held-in members", "nonmember": "non-members",
               "population": "population", "unknown": "no role"}  # fmt: skip


#: what the check says of a tokenizer the config marks public (`models.<name>.public_tokenizer`): it counts nothing
PUBLIC = "public: it holds nothing learnt from the owner's notes"
#: the `row` of a public tokenizer's one line in a check's table
PUBLIC_ROW = "public"


def is_public(rows: pd.DataFrame) -> bool:
    """Whether one model's check (`mlmia.memorization.vocabulary_check.COLUMNS`) is a public tokenizer's line."""
    return bool((rows["row"] == PUBLIC_ROW).any())


def public_line(tokenizer: str) -> str:
    """A public tokenizer's check in words: what it is, and why nothing is counted."""
    return (f"Tokenizer {tokenizer}: {PUBLIC} (the config marks it public: models.<name>.public_tokenizer), so "
            "whether a value is one of its entries tells nothing of membership; nothing counted.")  # fmt: skip


def percent(value: float, low: float = np.nan, high: float = np.nan, signed: bool = False, unit: str = "") -> str:
    """A share or difference in percent, one decimal (`unit` after the number), with its interval in
    brackets when there is one."""
    if not np.isfinite(value):
        return "n.a."
    text = (f"{100 * value + 0.0:+.1f}" if signed else f"{100 * value + 0.0:.1f}") + unit
    if np.isfinite(low) and np.isfinite(high):
        text += f" [{100 * low + 0.0:.1f}, {100 * high + 0.0:.1f}]"
    return text


def share_cell(row) -> str:
    """'121 / 220 (55.0% [48.2, 61.4])': whole entries of values, and the share with its interval."""
    share = percent(row["value"], row["ci_low"], row["ci_high"], unit="%")
    return f"{int(row['whole'])} / {int(row['values'])} ({share})"


def is_separated(value) -> bool:
    """A `separated` flag as read back from a CSV (a bool, or its text)."""
    return value is True or str(value) == "True"


def difference_cell(row) -> str:
    """'+26.9 [18.8, 34.1], separated': the paired difference in points, and whether its interval excludes 0."""
    text = percent(row["value"], row["ci_low"], row["ci_high"], signed=True)
    return text + (", separated" if is_separated(row["separated"]) else "")


def vocabulary_markdown(rows: pd.DataFrame) -> list[str]:
    """One model's check (`mlmia.memorization.vocabulary_check.COLUMNS`) as Markdown lines: per kind,
    the shares by role and the differences; said so when there is no difference to take (no value of
    a member, or none of a non-member or the population)."""
    shares, differences = rows[rows["row"] == "share"], rows[rows["row"] == "difference"]
    roles = [role for role in SHARE_ROLES if role in set(shares["role"])]
    pairs = list(dict.fromkeys(zip(differences["role"], differences["versus"])))
    header = [
        "kind",
        *(ROLE_LABELS[r] for r in roles),
        *(f"{ROLE_LABELS[a]} − {ROLE_LABELS[b]} (points)" for a, b in pairs),
    ]
    body = []
    for kind in dict.fromkeys(shares["kind"]):
        cells = [kind]
        for role in roles:
            found = shares[(shares["kind"] == kind) & (shares["role"] == role)]
            cells.append(share_cell(found.iloc[0]) if len(found) else "–")
        for first, second in pairs:
            found = differences[
                (differences["kind"] == kind) & (differences["role"] == first) & (differences["versus"] == second)
            ]
            cells.append(difference_cell(found.iloc[0]) if len(found) else "–")
        body.append(cells)
    lines = [markdown_table(header, body)]
    if not pairs:
        lines += ["", "No value belongs to a member and a non-member or population patient: the shares alone, "
                      "no comparison."]  # fmt: skip
    return lines
