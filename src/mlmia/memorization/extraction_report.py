"""The extraction study's tables, figure and findings (`snakemake extraction`).

Reads the reconstruction flags of the target and the reference (`mlmia.memorization.extraction.
infill`) and writes counts and rates only: no value, reconstruction or sample text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.io import atomic_path, write_text
from mlmia.memorization.extraction import extraction_rates, rate_by_occurrences, rate_differences
from mlmia.report.finding import Finding, findings_frame, interval_verdict, render_findings
from mlmia.report.markdown import markdown_table
from mlmia.world.patient_phi import PHI_KINDS

#: members are the patients the target trained on (held-in members included), non-members those it never saw
ROLE_OF = {"member": "member", "member_heldin": "member", "nonmember": "nonmember"}
LEVELS = ("sample", "patient")
INTERVAL = "paired patient bootstrap, 95% percentile interval"


def roles_of(samples: pd.DataFrame, sources) -> dict[str, str]:
    """Each audited patient's role: the members, and the non-members of `sources`."""
    chosen = samples[samples["role"].isin(ROLE_OF)]
    chosen = chosen[(chosen["role"] != "nonmember") | chosen["source"].isin(list(sources))]
    roles = dict(zip(chosen["group_id"].astype(str), chosen["role"].map(ROLE_OF)))
    for role in ("member", "nonmember"):
        if role not in roles.values():
            raise UserError(f"extraction: the sample table has no {role} patient (sources {', '.join(sources)})")
    return roles


def comparisons(target: str, reference: str) -> list[dict]:
    """The study's two claims, as data: each compares the `first` cell with the `second`."""
    return [
        {"name": "members_vs_nonmembers", "claim": "the target reconstructs its members' PHI more often than non-members'",
         "first": {"model": target, "role": "member"}, "second": {"model": target, "role": "nonmember"}},
        {"name": "target_vs_reference",
         "claim": "the target reconstructs its members' PHI more often than a reference that never saw them",
         "first": {"model": target, "role": "member"}, "second": {"model": reference, "role": "member"}},
    ]  # fmt: skip


def _cell_label(cell: dict) -> str:
    return f"{cell['model']}, {cell['role']}s"


def _rounded(value: float, digits: int, signed: bool = False) -> str:
    """`digits` decimals, and no "-0.0" for a value that rounds to zero."""
    rounded = round(value, digits) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"{rounded:+.{digits}f}" if signed else f"{rounded:.{digits}f}"


def interval_text(
    value: float,
    low: float = np.nan,
    high: float = np.nan,
    signed: bool = False,
    *,
    scale: float = 100.0,
    digits: int = 1,
) -> str:
    """`value` x `scale` (default: a share in percent, one decimal) with its interval in brackets where
    it has one; "n.r." (not resolvable) without a value."""
    if not np.isfinite(value):
        return "n.r."
    text = _rounded(scale * value, digits, signed)
    if np.isfinite(low) and np.isfinite(high):
        text += f" [{_rounded(scale * low, digits)}, {_rounded(scale * high, digits)}]"
    return text


def _rate_cell(row) -> str:
    """A rate with its interval, or "0 of n" when no unit gave its value back: the bootstrap
    interval of a zero count is degenerate ([0, 0]) and says nothing the count does not."""
    if row is None:
        return "–"
    if row["value"] == 0:
        return f"0 of {int(row['units'])}"
    return interval_text(row["value"], row["ci_low"], row["ci_high"])


def extraction_table(
    estimates: pd.DataFrame, differences: pd.DataFrame, target: str, reference: str, top_k: int
) -> str:
    """One Markdown table per level: per PHI kind, the top-1 and top-k rates (percent, with
    intervals) of the target on members and non-members and of the reference on members, the
    paired differences, and the units each rate rests on."""
    est = estimates.set_index(["model", "role", "kind", "level", "metric"])
    diff = differences.set_index(["comparison", "kind", "level", "metric"])
    kinds = [kind for kind in (*PHI_KINDS, "all") if kind in set(estimates["kind"])]
    parts = [
        "# PHI extraction by infilling",
        "",
        f"Each PHI value of a patient masked where a sample holds it (every occurrence in the sample) and read "
        f"back: top-1, the most likely token at every masked position is the value's; top-{top_k}, the value is among "
        f"the {top_k} most likely spans. Rates in percent with 95% patient-bootstrap intervals; differences paired "
        f"(the same resamples). Target: {target}; reference (never saw the patients): {reference}. Sample level: "
        "one unit per sample and value; patient level: one per patient and value, extracted when one of its "
        'samples gives it back. n: units (patients). "0 of n": no unit gave its value back (the bootstrap '
        "interval of a zero count is degenerate; at 95%, the rate is below 3/n by the rule of three).",
    ]
    for level in LEVELS:
        for metric, label in (("top1", "top-1"), ("topk", f"top-{top_k}")):
            rows = []
            for kind in kinds:
                cells = [
                    _rate_cell(est.loc[key] if key in est.index else None)
                    for key in ((m, r, kind, level, metric) for m, r in
                                ((target, "member"), (target, "nonmember"), (reference, "member")))
                ]  # fmt: skip
                none = all(cell.startswith("0 of") or cell == "–" for cell in cells)
                for name in ("members_vs_nonmembers", "target_vs_reference"):
                    key = (name, kind, level, metric)
                    row = diff.loc[key] if key in diff.index else None
                    # nothing extracted on either side: no difference to estimate
                    cells.append(
                        "–" if row is None or none else interval_text(row.difference, row.ci_low, row.ci_high, True)
                    )
                n = " / ".join(
                    f"{int(est.loc[key, 'units'])} ({int(est.loc[key, 'patients'])})" if key in est.index else "0 (0)"
                    for key in ((target, role, kind, level, metric) for role in ("member", "nonmember"))
                )
                rows.append([kind, *cells, n])
            header = ["kind", f"{target}, members", f"{target}, non-members", f"{reference}, members",
                      "members − non-members", "target − reference", "n: members / non-members"]  # fmt: skip
            parts += ["", f"## {level} level, {label}", "", markdown_table(header, rows)]
    return "\n".join(parts) + "\n"


def extraction_findings(differences: pd.DataFrame, claims: list[dict]) -> list[Finding]:
    """Per claim (`comparisons`) and level, the check on all kinds pooled, top-1."""
    by_name = {claim["name"]: claim for claim in claims}
    out = []
    for row in differences[(differences["kind"] == "all") & (differences["metric"] == "top1")].itertuples():
        claim = by_name[row.comparison]
        verdict = interval_verdict(row.ci_low, row.ci_high, 0.0)
        out.append(
            Finding(
                finding=row.comparison, claim=claim["claim"], kind="finding", scope=f"{row.level} level",
                measure="top-1 rate", first=_cell_label(claim["first"]), first_value=float(row.first),
                second=_cell_label(claim["second"]), second_value=float(row.second),
                difference=float(row.difference), difference_ci_low=float(row.ci_low),
                difference_ci_high=float(row.ci_high), interval=INTERVAL, n=int(row.n), margin=0.0,
                holds=bool(row.difference > 0), verdict=verdict,
                note="no interval: no replicate has the difference" if verdict == "not resolvable" else "",
                number_format=".1%",
            )
        )  # fmt: skip
    return out


def plot_extraction(estimates: pd.DataFrame, by_count: pd.DataFrame, target: str, reference: str, path, style):
    """Left: top-1 rate per kind (sample level) for the target's members and non-members and the
    reference's members, with intervals; right: the patient-level top-1 rate by the number of the
    patient's samples that hold the value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mlmia.report.style import apply_style, save_figure

    style = apply_style(style)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    cells = [(target, "member", f"{target}, members"), (target, "nonmember", f"{target}, non-members"),
             (reference, "member", f"{reference}, members")]  # fmt: skip
    chosen = estimates[(estimates["level"] == "sample") & (estimates["metric"] == "top1")]
    kinds = [kind for kind in (*PHI_KINDS, "all") if kind in set(chosen["kind"])]
    width = 0.8 / len(cells)
    for i, (model, role, label) in enumerate(cells):
        part = chosen[(chosen["model"] == model) & (chosen["role"] == role)].set_index("kind").reindex(kinds)
        x = np.arange(len(kinds)) + (i - 1) * width
        err = np.vstack([part["value"] - part["ci_low"], part["ci_high"] - part["value"]]).clip(min=0)
        left.bar(x, 100 * part["value"], width, yerr=100 * np.nan_to_num(err), label=label, capsize=2)
    left.set_xticks(np.arange(len(kinds)), kinds, rotation=30, ha="right")
    left.set_ylabel("top-1 reconstructed (% of samples)")
    left.legend(fontsize="small")
    for (model, role), part in by_count.groupby(["model", "role"], sort=False):
        right.plot(part["samples_bin"].astype(str), 100 * part["top1"], marker="o", label=f"{model}, {role}s")
    right.set_xlabel("the patient's samples holding the value")
    right.set_ylabel("top-1 reconstructed (% of values)")
    right.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, [path], style)


def write_extraction_report(
    samples: pd.DataFrame,
    infilled: Mapping[str, pd.DataFrame],
    settings: Mapping,
    outputs: Mapping[str, str | os.PathLike],
    style: Mapping,
) -> None:
    """Every output of the study: rates, differences and the count curve (CSV), the table and
    the findings (Markdown, CSV), the figure (PNG)."""
    target, reference = settings["target"], settings["reference"]
    roles = roles_of(samples, settings["sources"])
    results = pd.concat([frame.assign(model=name) for name, frame in infilled.items()], ignore_index=True)
    results = results[results["group_id"].astype(str).isin(roles)]
    if results.empty:
        raise UserError("extraction: no audited sample holds a PHI value of its patient")
    estimates, replicates = extraction_rates(
        results, roles, seed=int(settings["seed"]), replicates=int(settings["bootstrap"])
    )
    claims = comparisons(target, reference)
    differences = rate_differences(estimates, replicates, claims)
    by_count = rate_by_occurrences(results.assign(role=results["group_id"].astype(str).map(roles)))
    findings = extraction_findings(differences, claims)
    for key, frame in (("rates", estimates), ("differences", differences), ("by_count", by_count),
                       ("findings_csv", findings_frame(findings))):  # fmt: skip
        with atomic_path(outputs[key]) as tmp:
            frame.to_csv(tmp, index=False)
    write_text(extraction_table(estimates, differences, target, reference, int(settings["top_k"])), outputs["table"])
    method = (
        "Embedded world's patients; each check on all PHI kinds pooled, top-1. In brackets: 95% intervals of the "
        "patient bootstrap (patients resampled within each role); both sides on the same replicates, so the "
        "difference's interval is paired."
    )
    write_text(render_findings(findings, "Extraction findings", method), outputs["findings"])
    plot_extraction(estimates, by_count, target, reference, outputs["figure"], dict(style))
