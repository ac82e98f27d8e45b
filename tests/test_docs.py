"""The manual and its pages: the README stays a manual (at most 250 lines), every relative link of
README.md, docs/ and config/README.md resolves (file and heading), and the tool that checked that
no number was lost when the README moved to docs/ (bench/readme_numbers.py) reads numbers right."""

import re

import readme_numbers
from workflow_helpers import REPO

README_LINES = 250
PAGES = [REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~)")


def outside_code(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks, inline code spans blanked."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", lambda m: m.group(0) if "](" not in m.group(0) else "", line))
    return lines


def anchors(text: str) -> set[str]:
    """The heading anchors GitHub gives a page: lower case, punctuation but - and _ dropped, spaces
    as -, a repeated heading suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for line in outside_code(text):
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower().replace("`", "")).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def broken_links(page) -> list[str]:
    broken = []
    text = page.read_text()
    for line in outside_code(text):
        for target in _LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
                broken.append(f"{target} (no such heading)")
    return broken


def test_the_readme_is_a_manual_of_at_most_250_lines():
    lines = len((REPO / "README.md").read_text().splitlines())
    assert lines <= README_LINES, f"README.md has {lines} lines: results, history and timings go to a page under docs/"


def test_every_relative_link_resolves():
    broken = {
        str(page.relative_to(REPO)): links for page in PAGES if page.exists() for links in [broken_links(page)] if links
    }
    assert not broken, broken


def test_the_readme_keeps_the_command_ci_runs():
    assert "make test" in (REPO / ".ci" / "run").read_text()
    assert "make test " in (REPO / "README.md").read_text()


def test_the_anchor_of_a_heading_as_github_makes_it():
    text = "# Title\n\n## Masked diffusion targets: `base_mdlm` and SAMA\n\n## Known gaps\n\n```\n## not a heading\n```\n## Known gaps\n"
    assert anchors(text) == {"title", "masked-diffusion-targets-base_mdlm-and-sama", "known-gaps", "known-gaps-1"}


def test_the_numbers_of_a_text():
    text = (
        "| AUC (B) | 0.803 [0.773, 0.834] (0.900) | 1,290 units, Δ −0.121 [−0.167, −0.075] |\n"
        "took 9.5 min at commit afec6d4 (2026-11-26, 22:37), 1.5x faster; 46.5-53.5% of 10^6; 1e-9;\n"
        "torch==2.13.0, table2.md, fig4, log2, cu124 and L-12_H-768 hold no number.\n"
    )
    assert [token for token, _ in readme_numbers.numbers(text)] == [
        "0.803", "[0.773,0.834]", "0.773", "0.834", "0.900", "1,290", "-0.121", "[-0.167,-0.075]", "-0.167",
        "-0.075", "9.5", "afec6d4", "2026-11-26", "22:37", "1.5x", "46.5-53.5%", "46.5", "53.5%", "10^6", "1e-9",
        "2.13.0",
    ]  # fmt: skip


def test_a_number_the_new_pages_lack_is_listed(tmp_path):
    old = "AUC 0.803 [0.773, 0.834], 0.803 again, and 12 patients\n"
    moved = {"docs/paper.md": "AUC 0.803 [0.773, 0.834] and 12 patients\n"}
    assert readme_numbers.missing(old, moved) == []
    # by count, the second 0.803 is lost
    assert readme_numbers.missing(old, moved, {"README.md": old}) == [("0.803", 1, 1)]
    assert readme_numbers.missing(old, {"README.md": "12 patients"}) == [
        ("0.803", 1, 1), ("[0.773,0.834]", 1, 1), ("0.773", 1, 1), ("0.834", 1, 1)
    ]  # fmt: skip
