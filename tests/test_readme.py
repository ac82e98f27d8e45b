"""The manual's runnable examples, extracted from where they are printed (not copied): the
bring-your-own audit from README.md, scoring a model from docs/byo.md (`EXAMPLES`).

`make test` runs them on the CI world: a fresh copy of the workflow with the
`config/ci.yaml`, holding the CI run's samples, models and tables, the examples'
`results/default/` read as `results/ci/`, `--patterns 10` as the CI config's K, and the audit given
the CI config's scoring and metric settings (K, draws), which its Table 2 was computed with. The
tests marked `default_world` run them exactly as printed on the full default run (`make test-default`).
"""

import json
import os
import re
import shutil
import subprocess

import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, copy_workflow

# the masking patterns per sample the README's scoring example prints (config/config.yaml's scoring.patterns)
DEFAULT_K = 10


#: each example: the page that prints it and its section's heading
EXAMPLES = {
    "bring_your_own": ("README.md", "Bring your own model and corpus"),
    "scoring": ("docs/byo.md", "Scoring a model"),
}


def section(example: str) -> str:
    """The section of its page that prints `example` (`EXAMPLES`), to the next heading of its level."""
    page, title = EXAMPLES[example]
    text = (REPO / page).read_text()
    start = text.index(f"\n## {title}\n") + 1
    end = text.find("\n## ", start + 3)
    return text[start : end if end > 0 else None]


def blocks(text: str, language: str, replace: dict[str, str]) -> list[str]:
    """The section's code blocks in `language`, each key of `replace` read as its value."""
    return [as_read(block, replace) for block in re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)]


def as_read(text: str, replace: dict[str, str]) -> str:
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


def run_lines(block: str, workdir) -> list[str]:
    outputs = []
    for line in block.strip().splitlines():
        result = subprocess.run(line, shell=True, cwd=workdir, capture_output=True, text=True, timeout=1800)
        assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        outputs.append(result.stdout)
    return outputs


def with_venv(workdir):
    venv = workdir / ".venv"
    if not venv.exists():
        venv.symlink_to(REPO / ".venv")  # the README's commands name .venv/bin/...
    return workdir


@pytest.fixture(scope="module")
def ci_world(ci_run, tmp_path_factory):
    """(workdir, what the examples read differently, config lines added to the audit's): a
    fresh workflow copy with the CI run's results (the session's CI run itself stays as the
    other tests expect it); the audit takes the CI config's scoring and metric settings, as its
    Table 2 did."""
    workdir = copy_workflow(tmp_path_factory.mktemp("readme"))
    shutil.copytree(ci_run / "results/ci", workdir / "results/ci", ignore=shutil.ignore_patterns("logs", "benchmarks"))
    ci = yaml.safe_load((REPO / "config/ci.yaml").read_text())
    replace = {"results/default/": "results/ci/", f"--patterns {DEFAULT_K}": f"--patterns {ci['scoring']['patterns']}"}
    return with_venv(workdir), replace, yaml.safe_dump({key: ci[key] for key in ("scoring", "metrics")})


def check_bring_your_own_example(workdir, replace: dict[str, str], added_config: str = "") -> None:
    text = section("bring_your_own")
    config = blocks(text, "yaml", replace)[0]  # the worked example
    name = re.search(r"save this as `([^`]+)`", text).group(1)
    (workdir / name).write_text(config + added_config)
    (commands,) = blocks(text, "bash", replace)
    outputs = run_lines(commands, workdir)
    assert "AUC (B)" in outputs[-1] and "samples (member)" in outputs[-1]
    # the README's claim: the same samples and models through the user-file path give Table 2's numbers
    audit = pd.read_csv(workdir / "results/my_audit/tables/audit.csv")
    table2 = pd.read_csv(workdir / as_read("results/default/tables/table2.csv", replace))
    for source, column in (("mimic", "sample_mimic"), ("i2b2", "sample_i2b2")):
        for attack in ("loss", "likelihood_ratio"):
            ours = audit[(audit.metric == "auc") & (audit.attack == attack) & (audit.nonmembers == source)
                         & (audit.length == "long") & (audit.level == "sample") & (audit.protocol == "corrected")].value  # fmt: skip
            theirs = table2[(table2.metric == "auc") & (table2.attack == attack) & (table2.column == column)
                            & (table2.protocol == "corrected")].value  # fmt: skip
            assert len(theirs) == 1 and ours.round(3).tolist() == theirs.round(3).tolist()


def check_scoring_example(workdir, replace: dict[str, str]) -> None:
    text = section("scoring")
    (commands,) = blocks(text, "bash", replace)
    run_lines(commands, workdir)
    out = workdir / re.search(r"--out (\S+)", commands).group(1)
    scores = pd.read_parquet(out)
    samples = pd.read_parquet(workdir / as_read("results/default/samples/clinical.parquet", replace))
    k = int(re.search(r"--patterns (\d+)", commands).group(1))
    assert scores.sample_id.tolist() == samples.sample_id.tolist() and (scores.patterns == k).all()
    # the workflow scored the same samples with the same masks: the same energies
    workflow = pd.read_parquet(workdir / as_read("results/default/scores/clinical/base.masked.parquet", replace))
    assert scores.energy.to_numpy() == pytest.approx(workflow.energy.to_numpy(), abs=1e-5)


def test_the_examples_are_where_the_tests_read_them():
    """Each example's page still prints it the way the tests below read it (no workflow run)."""
    byo = section("bring_your_own")
    config = yaml.safe_load(blocks(byo, "yaml", {})[0])
    assert {"run", "datasets", "models", "audit"} <= set(config)
    assert re.search(r"save this as `([^`]+)`", byo)
    (commands,) = blocks(byo, "bash", {})
    assert "--configfile my_audit.yaml" in commands and "audit.md" in commands
    (commands,) = blocks(section("scoring"), "bash", {})
    assert commands.strip().startswith(".venv/bin/mlmia score")
    assert re.search(r"--out (\S+)", commands) and re.search(rf"--patterns {DEFAULT_K}\b", commands)


def test_the_bring_your_own_example_runs_on_the_ci_world(ci_world):
    check_bring_your_own_example(*ci_world)


#: the example cards committed under docs/cards/<folder>/ (docs/audit_cards.md)
EXAMPLE_CARDS = REPO / "docs" / "cards"
#: what differs between two runs of the same code on the same inputs: the date, the digests, the version
_RUN_SPECIFIC = [
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC"), "<date>"),
    (re.compile(r"\b[0-9a-f]{16}\b|\b[0-9a-f]{64}\b"), "<digest>"),
    (re.compile(r"mlmia \d+\.\d+\.\d+\S*"), "mlmia <version>"),
]


def comparable_card(markdown: str, numbers: str) -> tuple[str, dict]:
    """A card's Markdown and JSON with what is specific to one run (date, digests, version) masked."""
    for pattern, mask in _RUN_SPECIFIC:
        markdown = pattern.sub(mask, markdown)
    found = json.loads(numbers)
    found.pop("provenance", None)
    return markdown, found


def check_example_card(cards, model: str, folder: str) -> None:
    """The card a fresh run made equals the one committed in docs/cards/<folder>/, but for its date and
    digests. MLMIA_UPDATE_CARDS=1 writes the fresh one there instead (the one command that remakes it)."""
    committed = EXAMPLE_CARDS / folder
    if os.environ.get("MLMIA_UPDATE_CARDS") == "1":
        committed.mkdir(parents=True, exist_ok=True)
        for suffix in (".md", ".json", "_roc.png"):
            shutil.copy2(cards / f"{model}{suffix}", committed / f"{model}{suffix}")
    fresh = comparable_card((cards / f"{model}.md").read_text(), (cards / f"{model}.json").read_text())
    kept = comparable_card((committed / f"{model}.md").read_text(), (committed / f"{model}.json").read_text())
    assert fresh[0] == kept[0], (
        f"docs/cards/{folder}/{model}.md differs from a fresh card: remake it (docs/audit_cards.md)"
    )
    assert fresh[1] == kept[1]


def test_the_bring_your_own_examples_card_is_the_committed_one(ci_world):
    """The README's worked example on the CI world, then `snakemake audit_cards`: its card is
    docs/cards/byo_example/my_model.md (made so by the current code)."""
    workdir = ci_world[0]
    if not (workdir / "results/my_audit/tables/audit.csv").exists():
        check_bring_your_own_example(*ci_world)
    result = subprocess.run(
        [".venv/bin/snakemake", "--cores", "2", "audit_cards", "--configfile", "my_audit.yaml"],
        cwd=workdir, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    check_example_card(workdir / "results/my_audit/cards", "my_model", "byo_example")


def test_a_card_differs_from_another_but_for_its_run(tmp_path):
    """The comparison masks dates, digests and the version, and nothing else."""
    card = "made 2026-11-28 17:31 UTC; code digest d5736b314f5f1494; mlmia 0.1.0; AUC 0.780 [0.757, 0.801]"
    other = "made 2026-12-01 09:02 UTC; code digest 0123456789abcdef; mlmia 0.2.0; AUC 0.780 [0.757, 0.801]"
    assert comparable_card(card, "{}")[0] == comparable_card(other, "{}")[0]
    assert comparable_card(card, "{}")[0] != comparable_card(card.replace("0.780", "0.781"), "{}")[0]


def test_the_scoring_example_runs_on_the_ci_world(ci_world):
    check_scoring_example(*ci_world[:2])


def test_the_bring_your_own_example_runs_as_printed(default_run):
    check_bring_your_own_example(with_venv(default_run), {})


def test_the_scoring_example_runs_as_printed(default_run):
    check_scoring_example(with_venv(default_run), {})


def test_the_default_worlds_base_card_is_the_committed_one(default_run):
    """`snakemake audit_cards` on the default run: Base's card is docs/cards/default/base.md (made so by
    the current code; the other models' cards are made too, as the documented command makes them)."""
    result = subprocess.run(
        [".venv/bin/snakemake", "--cores", "2", "audit_cards"],
        cwd=with_venv(default_run), capture_output=True, text=True, timeout=3 * 3600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    check_example_card(default_run / "results/default/cards", "base", "default")
