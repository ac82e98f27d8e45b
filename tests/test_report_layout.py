"""The one Markdown table writer and the one findings layout, and that every study uses them."""

from pathlib import Path

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
