"""One checked finding: the record every study's findings are made of, its verdict, and the one
layout (Markdown and CSV) every study's findings file is written in.

A finding compares a *first* value with a *second* (another cell, or a constant such as chance)
through their difference, against a margin. Each study keeps the logic of its own checks (which
cells, which interval, what its claim means) and returns `Finding` records: the paper's claims
and the zoo's and DP's checks (`mlmia.report.findings.check_findings`), the shadow study's
(`mlmia.shadow.report.findings`), d-exposure's (`mlmia.memorization.dexposure_report.findings`).
`findings_frame` writes the records as one CSV (`FINDING_COLUMNS`), `render_findings` as one
Markdown layout: a heading, a paragraph on the method, a line of counts, then per kind and
claim one table (first, second, the difference with its interval, holds, verdict).

Two readings of a check:

- `holds`: the claim by the point estimate (first minus second above the margin, unless the
  study says otherwise for its claim; see below);
- `verdict`: where the interval of the difference lies against the margin, one of `VERDICTS`
  (`interval_verdict`): *separated* (the whole interval above the margin), *reversed* (below it),
  *not separated* (it holds the margin), *not resolvable* (no interval, or a premise of the claim
  not met; the `note` says why).

The old vocabularies, mapped (every value, count and verdict of the old files is kept):

- paper, zoo and DP (`check_findings`): `holds` and separated / reversed / not separated as
  before; "no interval" (the difference undefined on every replicate) -> not resolvable.
- shadow (second: chance, 0.5; margin 0; the accuracy's group-bootstrap interval shifted by 0.5):
  "above chance" held when the interval lay above 0.5, which is *separated*: the old held count
  is the separated count, and `holds` now says the accuracy is above 0.5. "near 50%" is a claim
  that the difference from 0.5 is small: *separated* and *reversed* (above or below chance)
  disagree with it and *not separated* agrees; its `holds` keeps the old rule, within the band
  (`NEAR_CHANCE_MARGIN`) by the point estimate or *not separated* by the interval, so the held
  counts are unchanged.
- d-exposure (Student-t interval over seeds, margin 0): "grows with repetitions" held when the
  interval lay above 0: *separated*; "(1 seed: no interval)" -> not resolvable, `holds` by the
  point estimate as before. "does not keep growing once the validation loss rises" is checked
  by the slope of d-exposure after the validation minimum (first: its mean over seeds, second:
  no trend, 0; `mlmia.memorization.overfitting`), for the model and per class; it agrees with
  *not separated* or *reversed*, not with *separated*; `holds` is "no growth by the point
  estimate" (the mean slope at most 0); "not reached" (the validation loss did not pass its
  minimum in every seed) -> not resolvable, `holds` False, the note says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pandas as pd

from mlmia.report.markdown import markdown_table

#: the closed set of verdicts, in the order the counts are printed
VERDICTS = ("separated", "not separated", "reversed", "not resolvable")
#: the kinds of check (its section heading, and what the section says first): a claim, a check
#: against a baseline, which is no claim and is flagged where it does not hold, or a comparison
#: of two settings (e.g. two targets), no claim either
KINDS = {
    "finding": ("Findings", ""),
    "baseline": ("Checks against a baseline", "Not claims: a check that does not hold is flagged."),
    "comparison": (
        "Comparisons between settings",
        "Not claims: where each attack stands in one setting (first) against another (second) on the same "
        "samples. *holds*: the first is above by the point estimate; *separated*: resolved above, *reversed*: "
        "resolved below, *not separated*: no difference the interval resolves.",
    ),
}
NAN = float("nan")


def interval_verdict(low: float, high: float, margin: float) -> str:
    """The verdict of a difference's interval [low, high] against the margin (`VERDICTS`)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "not resolvable"
    if low > margin:
        return "separated"
    if high < margin:
        return "reversed"
    return "not separated"


@dataclass(frozen=True)
class Finding:
    """One check of a claim: first against second, their difference with its interval.

    `finding` names the claim (several records can check one claim, e.g. one per experiment),
    `claim` says it in words, `kind` is one of `KINDS`, `scope` where it was checked (an
    experiment, a table and evaluation set, a setting), `measure` the quantity compared.
    `interval` names the interval method (all intervals are 95%), `n` the number of values it is
    computed from (bootstrap replicates, or seeds). `number_format` is the format spec of every
    number in the Markdown (".3f"; ".1%" for fractions shown in percent)."""

    finding: str
    claim: str
    kind: str
    scope: str
    measure: str
    first: str
    first_value: float
    second: str
    second_value: float
    difference: float
    difference_ci_low: float
    difference_ci_high: float
    interval: str
    n: int
    margin: float
    holds: bool
    verdict: str
    note: str = ""
    first_ci_low: float = NAN
    first_ci_high: float = NAN
    second_ci_low: float = NAN
    second_ci_high: float = NAN
    number_format: str = ".3f"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"finding {self.finding!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"finding {self.finding!r}: verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        by_interval = interval_verdict(self.difference_ci_low, self.difference_ci_high, self.margin)
        if self.verdict != "not resolvable" and self.verdict != by_interval:
            raise ValueError(
                f"finding {self.finding!r}: verdict {self.verdict!r}, but its interval says {by_interval!r}"
            )
        if self.verdict == "not resolvable" and not self.note:
            raise ValueError(f"finding {self.finding!r}: a verdict 'not resolvable' needs a note saying why")


#: the CSV columns of every study's findings: the record's fields but its number format
FINDING_COLUMNS = [
    "finding", "claim", "kind", "scope", "measure", "first", "first_value", "first_ci_low", "first_ci_high", "second",
    "second_value", "second_ci_low", "second_ci_high", "difference", "difference_ci_low", "difference_ci_high",
    "interval", "n", "margin", "holds", "verdict", "note",
]  # fmt: skip


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """The records as a table, one row per finding, columns `FINDING_COLUMNS`."""
    return pd.DataFrame([asdict(f) for f in findings], columns=[*FINDING_COLUMNS, "number_format"])[FINDING_COLUMNS]


# --------------------------------------------------------------------------- Markdown


def _number(value: float, spec: str) -> str:
    return "–" if value is None or not math.isfinite(value) else format(value, spec)


def _with_interval(value: float, low: float, high: float, spec: str) -> str:
    text = _number(value, spec)
    if math.isfinite(value) and math.isfinite(low) and math.isfinite(high):
        text += f" [{_number(low, spec)}, {_number(high, spec)}]"
    return text


def _verdict_counts(part: Sequence[Finding]) -> str:
    counts = {v: sum(f.verdict == v for f in part) for v in VERDICTS}
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


def _held(part: Sequence[Finding]) -> str:
    held = sum(f.holds for f in part)
    flagged = f", {len(part) - held} flagged" if part[0].kind == "baseline" and held < len(part) else ""
    return f"{held} of {len(part)} hold{flagged}"


def summary_line(findings: Sequence[Finding]) -> str:
    """Per kind: how many hold, and how many of each verdict."""
    if not findings:
        return "No findings were checked."
    parts = []
    for kind, (heading, _) in KINDS.items():
        part = [f for f in findings if f.kind == kind]
        if part:
            parts.append(f"{heading}: {_held(part)}; {_verdict_counts(part)}.")
    return " ".join(parts)


def _claim_section(part: Sequence[Finding], level: int = 3) -> list[str]:
    first = part[0]

    def distinct(values) -> str:
        return "; ".join(dict.fromkeys(str(v) for v in values))

    body = [
        [f.scope, f.first, _with_interval(f.first_value, f.first_ci_low, f.first_ci_high, f.number_format),
         f.second, _with_interval(f.second_value, f.second_ci_low, f.second_ci_high, f.number_format),
         _with_interval(f.difference, f.difference_ci_low, f.difference_ci_high, f.number_format), f.n,
         "yes" if f.holds else "NO", f.verdict, f.note]
        for f in part
    ]  # fmt: skip
    header = ["scope", "first", "value", "second", "value", "difference [interval]", "n", "holds", "verdict", "note"]
    return [
        f"{'#' * level} {first.claim}: {_held(part)}; {_verdict_counts(part)}",
        "",
        f"Measure: {distinct(f.measure for f in part)}. Margin: "
        f"{distinct(_number(f.margin, f.number_format) for f in part)}. Interval: {distinct(f.interval for f in part)}.",
        "",
        markdown_table(header, body),
        "",
    ]


def render_findings(findings: Sequence[Finding], title: str, method: str, level: int = 1) -> str:
    """The one Markdown layout of a study's findings: `# title`, the method paragraph (the study's
    `method`, then what the verdicts mean), the summary line, then for each kind present a section
    with one table per claim (in the order of the records). `level`: the title's heading level
    (2 where the findings are a section of a larger report). Ends with a newline."""
    lines = [
        f"{'#' * level} {title}",
        "",
        f"{method.strip()} Verdicts, from the interval of the difference against the margin: *separated* when "
        "it lies above the margin, *reversed* when below, *not separated* when it holds the margin, *not "
        "resolvable* when there is no interval or a premise of the claim is not met (the note says why).",
        "",
        summary_line(findings),
        "",
    ]
    for kind, (heading, intro) in KINDS.items():
        part = [f for f in findings if f.kind == kind]
        if not part:
            continue
        lines += [f"{'#' * (level + 1)} {heading}", "", *([intro, ""] if intro else [])]
        for name in dict.fromkeys(f.finding for f in part):
            lines += _claim_section([f for f in part if f.finding == name], level + 2)
    return "\n".join(lines)
