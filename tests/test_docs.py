"""The manual and its pages: the README stays a manual (at most 250 lines), every relative link of
README.md, docs/, config/README.md and CHANGELOG.md resolves (file and heading), every page of
docs/ is in its index (docs/README.md), no page names this project's own issues or work history
(CHANGELOG.md included; another project's issue may be cited by name), and the tool that checked
that no number was lost when the README moved to docs/ (bench/readme_numbers.py) reads numbers
right."""

import re
import sys

import readme_numbers
from workflow_helpers import REPO

README_LINES = 250
PAGES = [
    REPO / "README.md",
    REPO / "config" / "README.md",
    REPO / "CHANGELOG.md",
    *sorted((REPO / "docs").rglob("*.md")),
]
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


INDEX = REPO / "docs" / "README.md"
#: another project's issue may be cited when one of these names stands within a few words before it
OTHER_PROJECTS = ("Opacus", "opacus", "PyTorch", "pytorch", "torch", "transformers", "Transformers", "Snakemake",
                  "snakemake", "tokenizers", "scikit-learn", "NumPy", "numpy", "pandas", "pyarrow", "SLURM", "Slurm")  # fmt: skip
_HISTORY = re.compile(r"\bissues?\s*#?\d+|\bthe issue\b|\bstop\s+\d+\b|(?<![\w/&#])#\d+\b", re.IGNORECASE)
_WORDS_BEFORE = 3


def index_links(text: str) -> set[str]:
    """The pages a Markdown index links to, as paths relative to its folder, without anchors."""
    return {target.partition("#")[0] for line in outside_code(text) for target in _LINK.findall(line)}


def unindexed_pages() -> list[str]:
    linked = {(INDEX.parent / path).resolve() for path in index_links(INDEX.read_text()) if path}
    return [
        str(page.relative_to(REPO))
        for page in sorted((REPO / "docs").rglob("*.md"))
        if page != INDEX and page.resolve() not in linked
    ]


def history_words(text: str, name: str) -> list[str]:
    """'name:line: hit' for each place a text speaks of this project's own work history: its issue
    numbers ("issue 40", "issues 40-41", "#23"), "the issue", "Stop 44". Another project's issue
    is allowed where one of OTHER_PROJECTS stands within a few words before it ("Opacus issue #571")."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for hit in _HISTORY.finditer(line):
            before = re.findall(r"[\w.-]+", line[: hit.start()])[-_WORDS_BEFORE:]
            if any(word in OTHER_PROJECTS for word in before):
                continue
            found.append(f"{name}:{number}: {hit.group(0)!r} in {line.strip()[:120]!r}")
    return found


def test_every_page_of_docs_is_in_its_index():
    missing = unindexed_pages()
    assert not missing, f"pages under docs/ that docs/README.md does not link: {missing}"


def rel(page) -> str:
    return str(page.relative_to(REPO))


def test_no_page_speaks_of_this_projects_issues():
    pages = [REPO / "README.md", REPO / "config" / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").rglob("*.md")]
    found = [hit for page in sorted(pages) if page.exists() for hit in history_words(page.read_text(), rel(page))]
    assert not found, "the docs name this project's issues or work history:\n" + "\n".join(found)


def test_the_history_words_of_a_text():
    text = (
        "the code before issue 40, as the issue asks\n"
        "Stop 44's CI run; issues 40-41; see #23.\n"
        "Opacus issue #571 and Opacus' issue 819; the transformers issue 1234; huggingface/tokenizers#1794\n"
        "a tissue 12, an issued 3, [x](#defs1), &#123; and stop-gap\n"
    )
    hits = history_words(text, "t.md")
    assert [hit.split(": ")[0] for hit in hits] == ["t.md:1", "t.md:1", "t.md:2", "t.md:2", "t.md:2"]
    assert [hit.split("'")[1] for hit in hits] == ["issue 40", "the issue", "Stop 44", "issues 40", "#23"]


def test_an_unindexed_page_is_named(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "README.md").write_text("| [a.md](a.md) | a |\n\n```\n[b.md](b.md)\n```\n")
    for name in ("a.md", "b.md", "sub/c.md"):
        (docs / name).write_text("# page\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "INDEX", docs / "README.md")
    assert unindexed_pages() == ["docs/b.md", "docs/sub/c.md"]
