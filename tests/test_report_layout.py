"""The one Markdown table writer and the one findings layout, and that every study uses them."""

import dataclasses
import math
from pathlib import Path

import pytest

from mlmia.report.finding import FINDING_COLUMNS, VERDICTS, Finding, findings_frame, interval_verdict, render_findings
from mlmia.report.markdown import markdown_table

REPO = Path(__file__).resolve().parents[1]


def test_markdown_table_writes_the_layout_every_result_table_has():
    # the corner above the row labels is "| |", an empty body cell "|  |"; cells are str()-ed
    table = markdown_table(["", "A", "B"], [["x", "1", ""], ["y", 2, 3.5]])
    assert table == "| | A | B |\n|---|---|---|\n| x | 1 |  |\n| y | 2 | 3.5 |"
    assert markdown_table(["only"], []) == "| only |\n|---|"


def test_no_module_writes_a_markdown_table_by_hand():
    # every pipe table goes through markdown_table: no delimiter row is spelled out anywhere else
    sources = [
        *(REPO / "src" / "mlmia").rglob("*.py"),
        *(REPO / "bench").glob("*.py"),
        *(REPO / "workflow").rglob("*.py"),
    ]
    by_hand = [str(p.relative_to(REPO)) for p in sources if p.name != "markdown.py" and "|---" in p.read_text()]
    assert by_hand == []


# --------------------------------------------------------------------------- the Finding record


def finding(low, high, verdict, holds=True, margin=0.0, note="", **kw):
    fields = dict(finding="f", claim="a above b", kind="finding", scope="e1", measure="auc", first="a",
                  first_value=0.7, second="b", second_value=0.6, difference=0.1, difference_ci_low=low,
                  difference_ci_high=high, interval="paired bootstrap", n=100, margin=margin, holds=holds,
                  verdict=verdict, note=note)  # fmt: skip
    return Finding(**{**fields, **kw})


def test_each_verdict_from_the_interval_against_the_margin():
    assert interval_verdict(0.01, 0.2, 0.0) == "separated"
    assert interval_verdict(-0.2, -0.01, 0.0) == "reversed"
    assert interval_verdict(-0.01, 0.2, 0.0) == "not separated"
    assert interval_verdict(0.0, 0.2, 0.0) == "not separated"  # touching the margin is not above it
    assert interval_verdict(0.05, 0.2, 0.1) == "not separated"  # above 0, not above the margin
    assert interval_verdict(math.nan, math.nan, 0.0) == "not resolvable"
    assert interval_verdict(0.01, math.nan, 0.0) == "not resolvable"
    assert list(VERDICTS) == ["separated", "not separated", "reversed", "not resolvable"]


def test_a_finding_refuses_a_verdict_its_interval_contradicts():
    assert finding(0.01, 0.2, "separated").verdict == "separated"
    # not resolvable is also the verdict of a claim whose premise is not met: the interval may exist, the note says why
    assert finding(0.01, 0.2, "not resolvable", note="not reached").note == "not reached"
    with pytest.raises(ValueError, match="its interval says 'separated'"):
        finding(0.01, 0.2, "not separated")
    with pytest.raises(ValueError, match="needs a note"):
        finding(math.nan, math.nan, "not resolvable")
    with pytest.raises(ValueError, match="not one of"):
        finding(0.01, 0.2, "holds")
    with pytest.raises(ValueError, match="kind"):
        finding(0.01, 0.2, "separated", kind="claim")


def test_findings_frame_has_one_set_of_columns():
    frame = findings_frame([finding(0.01, 0.2, "separated"), finding(math.nan, math.nan, "not resolvable", note="x")])
    assert list(frame.columns) == FINDING_COLUMNS and "number_format" not in frame.columns
    assert {f.name for f in dataclasses.fields(Finding)} == {*FINDING_COLUMNS, "number_format"}
    assert frame["verdict"].tolist() == ["separated", "not resolvable"] and frame["n"].tolist() == [100, 100]
    assert findings_frame([]).columns.tolist() == FINDING_COLUMNS


def test_the_one_layout():
    records = [
        finding(0.01, 0.2, "separated", first_ci_low=0.65, first_ci_high=0.75),
        finding(-0.05, 0.2, "not separated", scope="e2"),
        finding(math.nan, math.nan, "not resolvable", holds=False, scope="e3", note="1 seed: no interval"),
        finding(-0.2, -0.01, "reversed", holds=False, kind="baseline", finding="g", claim="a above blind"),
    ]
    text = render_findings(records, "Findings of a study", "How it was checked.")
    assert text == "\n".join([
        "# Findings of a study",
        "",
        "How it was checked. Verdicts, from the interval of the difference against the margin: *separated* when it "
        "lies above the margin, *reversed* when below, *not separated* when it holds the margin, *not resolvable* "
        "when there is no interval or a premise of the claim is not met (the note says why).",
        "",
        "Findings: 2 of 3 hold; 1 separated, 1 not separated, 1 not resolvable. Checks against "
        "a baseline: 0 of 1 hold, 1 flagged; 1 reversed.",
        "",
        "## Findings",
        "",
        "### a above b: 2 of 3 hold; 1 separated, 1 not separated, 1 not resolvable",
        "",
        "Measure: auc. Margin: 0.000. Interval: paired bootstrap.",
        "",
        "| scope | first | value | second | value | difference [interval] | n | holds | verdict | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
        "| e1 | a | 0.700 [0.650, 0.750] | b | 0.600 | 0.100 [0.010, 0.200] | 100 | yes | separated |  |",
        "| e2 | a | 0.700 | b | 0.600 | 0.100 [-0.050, 0.200] | 100 | yes | not separated |  |",
        "| e3 | a | 0.700 | b | 0.600 | 0.100 | 100 | NO | not resolvable | 1 seed: no interval |",
        "",
        "## Checks against a baseline",
        "",
        "Not claims: a check that does not hold is flagged.",
        "",
        "### a above blind: 0 of 1 hold, 1 flagged; 1 reversed",
        "",
        "Measure: auc. Margin: 0.000. Interval: paired bootstrap.",
        "",
        "| scope | first | value | second | value | difference [interval] | n | holds | verdict | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
        "| e1 | a | 0.700 | b | 0.600 | 0.100 [-0.200, -0.010] | 100 | NO | reversed |  |",
        "",
    ])  # fmt: skip
    assert render_findings([], "T", "M.").splitlines()[4] == "No findings were checked."


def test_every_study_writes_its_findings_through_the_one_renderer():
    from mlmia.memorization import dexposure_report, overfitting
    from mlmia.report import findings as paper
    from mlmia.shadow import report as shadow

    # each study's checks return Finding records (paper, zoo and DP; shadow; d-exposure and its
    # overfitting experiment) ...
    for check in (paper.check_findings, shadow.findings, dexposure_report.findings, overfitting.findings):
        assert check.__annotations__["return"] == "list[Finding]", check.__module__
    # ... no module but mlmia.report.finding lays findings out ...
    sources = (REPO / "src" / "mlmia").rglob("*.py")
    assert [p.name for p in sources if p.name != "finding.py" and "def render_findings" in p.read_text()] == []
    # ... and every script that writes a findings file writes the records' one CSV
    for name in ("findings.py", "dexposure_report.py"):
        assert "findings_frame(" in (REPO / "workflow" / "scripts" / name).read_text(), name
    # (both runs of the shadow protocol, the MLM's and the translation target's, write theirs
    # through one writer in the library)
    import inspect

    assert "findings_frame(" in inspect.getsource(shadow.write_outputs)
    assert "write_outputs(" in (REPO / "workflow" / "scripts" / "shadow_tables.py").read_text()
