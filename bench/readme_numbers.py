"""Nothing lost when the README moves to docs/: every number an old README held is on a page now.

Extracts the numbers of a Markdown text (integers, decimals, percentages, signed values,
bracketed intervals `[a, b]`, ranges `a-b`, dates, clock times, versions, powers and
scientific notation, and 7-hex commit hashes) and lists each one of the old README that no
page holds any more: the new README.md or a page under docs/.

    python bench/readme_numbers.py --old d5a04e7            # the README at a git revision
    python bench/readme_numbers.py --old-file OLD_README.md
    python bench/readme_numbers.py --old d5a04e7 --strict   # counts too (see below)

The default check is by value: a number of the old README is kept when some page holds it.
`--strict` also compares counts: for each number, the new README and docs/ together must
hold it at least as often as the old README and the old docs/ did (with `--old`: docs/ at
that revision), so that moving a table keeps every one of its cells, not only one cell per
value. Prints one line per missing number (`number  count-missing  first old line`) and a
summary line; exits 1 when anything is missing.

Not numbers here: digits inside words and paths (`table2.md`, `fig4`, `cu124`, `log2`), and
Markdown's line structure (table rules, list markers, heading hashes, line breaks)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
# the alternatives in order: the first that matches at a position wins
_TOKEN = re.compile(
    r"(?P<date>\b\d{4}-\d{2}-\d{2}\b)"
    r"|(?P<time>(?<![\w.:])\d{1,2}:\d{2}(?![\w:]))"
    r"|(?P<commit>\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7}\b)"
    r"|(?P<interval>\[\s*[-−+]?" + _NUM + r"%?\s*,\s*[-−+]?" + _NUM + r"%?\s*\])"
    r"|(?P<version>(?<![\w.])\d+\.\d+\.\d+(?:\.\d+)*(?![\w.]))"
    r"|(?P<sci>(?<![\w.])\d+(?:\.\d+)?e[-+]?\d+(?![\w.]))"
    r"|(?P<power>(?<![\w.])\d+\^\d+(?![\w.]))"
    r"|(?P<range>(?<![\w.,])" + _NUM + r"%?[-–]" + _NUM + r"%?(?![\w.]|\.\d))"
    r"|(?P<number>(?<![\w.\-−^])[-−+]?" + _NUM + r"%?(?:x(?!\w))?(?!\w|\.\d|,\d{3}))",
    re.M,
)


def normalise(token: str) -> str:
    """One spelling per value: the minus sign as '-', no '+' sign, no spaces in an interval."""
    token = token.replace("−", "-").replace("–", "-")
    token = re.sub(r"\s+", "", token)
    token = re.sub(r"(^|[\[,])\+", r"\1", token)
    return token


def numbers(text: str) -> list[tuple[str, int]]:
    """(number, line) for every number of a Markdown text, in order; an interval gives itself
    and its two ends, a range its two ends too."""
    found = []
    for match in _TOKEN.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        token = normalise(match.group(0))
        found.append((token, line))
        if match.lastgroup in ("interval", "range"):
            inner = token.strip("[]")
            ends = inner.split(",") if match.lastgroup == "interval" else re.split(r"(?<=[\d%])-", inner, maxsplit=1)
            found += [(end, line) for end in ends]
    return found


def pages(root: Path) -> dict[str, str]:
    """The new README and every page under docs/, in the working tree."""
    paths = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return {str(path.relative_to(root)): path.read_text() for path in paths if path.exists()}


def pages_at(revision: str, root: Path) -> dict[str, str]:
    """README.md and docs/**/*.md at a git revision."""
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", revision, "--", "README.md", "docs"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return {
        path: subprocess.run(
            ["git", "show", f"{revision}:{path}"], cwd=root, check=True, capture_output=True, text=True
        ).stdout
        for path in listing
        if path.endswith(".md")
    }


def missing(
    old_readme: str, new_pages: dict[str, str], old_pages: dict[str, str] | None = None
) -> list[tuple[str, int, int]]:
    """(number, how many are missing, its first line in the old README) for each number of
    the old README that the new pages lack. Without `old_pages`, by value: missing when no new
    page holds it. With them (the old README and old docs/), by count too: missing when the new
    pages hold it fewer times than the old ones did."""
    old = numbers(old_readme)
    first = {}
    for token, line in old:
        first.setdefault(token, line)
    new_counts = Counter(token for text in new_pages.values() for token, _ in numbers(text))
    if old_pages is None:
        wanted = Counter(dict.fromkeys(first, 1))
    else:
        readme_counts = Counter(token for token, _ in old)
        wanted = Counter(token for text in old_pages.values() for token, _ in numbers(text))
        wanted = Counter({token: wanted[token] for token in readme_counts})
    return [
        (token, wanted[token] - new_counts[token], first[token])
        for token in sorted(first, key=first.get)
        if new_counts[token] < wanted[token]
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--old", metavar="REVISION", help="the old README (and docs/) at this git revision")
    source.add_argument("--old-file", type=Path, help="the old README as a file")
    parser.add_argument("--strict", action="store_true", help="compare counts, not only values")
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout whose README and docs/ are read")
    args = parser.parse_args(argv)

    if args.old:
        old_pages = pages_at(args.old, args.root)
        old_readme = old_pages["README.md"]
    else:
        old_readme = args.old_file.read_text()
        old_pages = {"README.md": old_readme}
    new_pages = pages(args.root)
    lost = missing(old_readme, new_pages, old_pages if args.strict else None)
    for token, count, line in lost:
        print(f"{token}\t{count}\told README line {line}")
    checked = numbers(old_readme)
    print(
        f"{len(lost)} of {len(set(t for t, _ in checked))} distinct numbers of the old README "
        f"({len(checked)} in all) missing from README.md and {len(new_pages) - 1} pages under docs/"
        + (" (by count)" if args.strict else ""),
        file=sys.stderr,
    )
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
