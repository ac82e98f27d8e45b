"""A clone that stands alone: the authors' scores travel in the repository (checksums verified),
no tracked file names a place outside it, and the set-up the README prints satisfies the pins."""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import subprocess

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version
from workflow_helpers import REPO

SCORES = REPO / "resources" / "paper_scores"
# A place outside the repository: the folder beside the clone this project was written with, or
# a path under a machine's home, work or mount roots. System paths (/dev/null, /tmp, /etc) are fine.
OUTSIDE = re.compile(r"\.\./shared\b|(?<![\w.~-])/(?:home|root|mnt|srv|work|Users|scratch)/")


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [name for name in listed.stdout.decode().split("\0") if name]


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def changed_scores(root) -> list[str]:
    """The score files under `root` whose bytes differ from its SHA256SUMS, or that the file and the
    folder disagree on (listed but absent, present but not listed)."""
    listed = dict(reversed(line.split(maxsplit=1)) for line in (root / "SHA256SUMS").read_text().splitlines())
    present = {str(p.relative_to(root)) for p in root.glob("*/*.txt")}
    return sorted(set(listed) ^ present) + [n for n in sorted(set(listed) & present) if sha256(root / n) != listed[n]]


def test_the_vendored_scores_match_their_checksums():
    assert len(list(SCORES.glob("*/*.txt"))) == 18  # 5 long sets and 4 short ones, target and reference each
    assert changed_scores(SCORES) == []


def test_the_checksum_check_catches_one_changed_line(tmp_path):
    """A copy with one line changed, and one with a file missing, fail the check that the real folder passes."""
    import shutil

    copy = tmp_path / "scores"
    shutil.copytree(SCORES, copy)
    member = copy / "long" / "base__members.txt"
    member.write_bytes(member.read_bytes().replace(b"\n", b"0\n", 1))
    (copy / "short_enorm" / "pubmed__members.txt").unlink()
    assert changed_scores(copy) == ["short_enorm/pubmed__members.txt", "long/base__members.txt"]


def test_the_scores_carry_their_licence_and_origin():
    notice = (SCORES / "LICENSE").read_text()
    assert "MIT License" in notice
    assert "Copyright (c) 2020 Data Privacy and Trustworthy Machine Learning Research Lab" in notice
    readme = (SCORES / "README.md").read_text()
    assert "b3cdbf53da43fa245c4b3ef027ba6bf824db87e8" in readme
    # every file here is named beside its upstream file
    for path in sorted(SCORES.glob("*/*.txt")):
        assert f"| `{path.relative_to(SCORES)}` | `" in readme, path.name


def test_the_shipped_paper_scores_config_reads_the_repository():
    config = yaml.safe_load((REPO / "config" / "paper_scores.yaml").read_text())
    assert (REPO / config["imported"]["root"]).resolve() == SCORES.resolve()


def test_no_tracked_file_names_a_place_outside_the_repository():
    hits = []
    for name in tracked_files():
        path = REPO / name
        if not path.is_file() or path.suffix in {".png", ".parquet", ".safetensors", ".pdf"}:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        hits += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, f"tracked files name a place outside the repository: {hits}"


@pytest.mark.parametrize(
    "line, outside",
    [
        # written in pieces, so that this file does not name them itself
        ("scores in .." + "/shared/paper-scores", True),
        ("the run of /" + "work/base", True),
        ("see /" + "home/alice/notes", True),
        ("results/default/tables", False),
        ("log to /dev/null", False),
        ("conda: ../envs/mlmia.yaml", False),
    ],
)
def test_what_counts_as_outside(line, outside):
    assert bool(OUTSIDE.search(line)) is outside


def test_licence_and_citation():
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    metadata = importlib.metadata.metadata("mlmia")
    assert "MIT" in (metadata.get("License-Expression") or metadata.get("License") or "")
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["license"] == "MIT"
    paper = citation["references"][0]
    assert paper["doi"] == "10.18653/v1/2022.emnlp-main.570"
    assert paper["authors"][0]["family-names"] == "Mireshghallah"


def torch_floor_of(requirements) -> Version:
    """The highest lower bound on torch among requirements (strings), extras included."""
    floors = [Version("0")]
    for text in requirements:
        requirement = Requirement(text)
        if requirement.name == "torch":
            floors += [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
    return max(floors)


def test_the_readme_torch_commands_satisfy_every_pin():
    """The CPU and CUDA commands the README prints ask for a torch that the installed opacus and
    transformers accept, and that pyproject's floor admits; the floor is the real one."""
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r'TORCH="(torch==[^" ]+) --index-url (https://download\.pytorch\.org/whl/[a-z0-9]+)"', readme)
    builds = {url.rsplit("/", 1)[1] for _, url in commands}
    assert "cpu" in builds and any(b.startswith("cu") for b in builds), commands
    floor = max(torch_floor_of(importlib.metadata.requires(package) or []) for package in ("opacus", "transformers"))
    own = torch_floor_of(importlib.metadata.requires("mlmia") or [])  # pyproject's, as installed
    assert own == floor, f"pyproject's torch floor {own} is not the installed pins' {floor}"
    for pin, url in commands:
        assert Version(pin.removeprefix("torch==")) >= floor, f"{pin} ({url}) is below torch {floor}"
    makefile = (REPO / "Makefile").read_text()
    assert all(f'TORCH="{pin} --index-url {url}"' in makefile for pin, url in commands)
