"""Where the results of a run lie: every named path under ``results/<run>/`` that more than one
rule, study or module reads, in one place (a study's own outputs are its plan's:
`mlmia.study.plans`). Paths here are relative to the run's folder; `Study.path` prefixes it.
(The columns of a score table are another layout: `mlmia.terms.scores`.)"""

from __future__ import annotations

from mlmia.terms.spec import DEFAULT_GROUP

#: the folder of every run's results: results/<run>/
RESULTS = "results"
#: the embedded world's tokenizer, which every model the workflow trains from scratch uses
TOKENIZER = "models/tokenizer"
#: the world's tokenizer with the new tokens of every one-run canary (mlmia.defences.token_canaries)
CANARY_TOKENIZER = "models/tokenizer_canaries"
#: the embedded world: its patients, notes and registers (mlmia.world)
WORLD = "corpus/world.parquet"
#: the DP targets' private text before the one-run canaries join it (mlmia.world.dp_corpus)
DP_PRIVATE_TEXT = "corpus/dp_private_text.parquet"
#: real Wikipedia prose, the shadow protocol's out-of-domain register
WIKIPEDIA_REGISTER = "corpus/register_wikipedia.parquet"
#: the reference pool's training splits (LiRA, RMIA; mlmia.study.pools)
REFERENCE_SPLITS = "references/splits.parquet"
#: the one-run audit's token canaries (rules/canaries.smk, read by the DP audit)
ONE_RUN_CANARIES = "canaries/one_run.parquet"
#: the embedded world's training corpora (`corpus:` of a model); its two scored sample sets:
#: plain sentences, and the same sentences as Base-b saw them (members carry the name)
CORPORA = ("target", "target_named", "domain", "general")
#: the DP targets' private text (mlmia.world.dp_corpus) plus the one-run audit's canaries (token_canaries.with_included_canaries)
ONE_RUN_CORPUS = "dp_private"
WORLD_SETS = ("clinical", "clinical_named")
#: the shadow protocol's models: shadow_alice, shadow_bob_0, ...
SHADOW_PREFIX = "shadow_"
#: the translation target's models (`snakemake shadow_mt`): shadow_mt_alice, shadow_mt_bob_0, ...
SHADOW_MT_PREFIX = "shadow_mt_"
#: what names a DP target's audit replica (`dp_audit.gradient_canaries.runs`): <target>~run2, <target>~run3, ...;
#: a configured model's name cannot hold it (the schema's names are letters, digits, _, + and -)
AUDIT_RUN_SEPARATOR = "~run"


def corpus_table(corpus: str) -> str:
    """A world corpus's training table."""
    return f"corpus/train_{corpus}.parquet"


def model_dir(model: str) -> str:
    """Where the workflow trains a model."""
    return f"models/{model}"


def audit_run(target: str, run: int) -> str:
    """The model that is run `run` (2, 3, ...) of DP target `target` for its white-box audit (run 1 is the target)."""
    return f"{target}{AUDIT_RUN_SEPARATOR}{run}"


def samples(dataset: str) -> str:
    """A sample table the workflow scores."""
    return f"samples/{dataset}.parquet"


def token_files(experiment: str) -> dict[str, str]:
    """An experiment's per-slot attack scores beside its attack table (`mlmia.memorization.token_kinds`):
    one row per (attack, sample, slot) with its position and token kind, and the summary by kind."""
    return {"tokens": f"attack/{experiment}.tokens.parquet", "kinds": f"attack/{experiment}.token_kinds.csv"}


def span_file(dataset: str) -> str:
    """The PHI spans of a sample table (sample_id, kind, start, end: character offsets, no value),
    from the extraction study's PHI: where rule token_kinds places each slot's token."""
    return f"extraction/spans/{dataset}.parquet"


def table_files(table: str) -> list[str]:
    """A rendered table of the tables spec: its tidy CSV, Markdown and LaTeX."""
    return [f"tables/{table}.{ext}" for ext in ("csv", "md", "tex")]


def figure_files(figure: str) -> list[str]:
    """A figure of the tables spec: PNG and PDF."""
    return [f"figures/{figure}.{ext}" for ext in ("png", "pdf")]


def findings_files(group: str = DEFAULT_GROUP) -> dict[str, str]:
    """The findings of a group: findings.{md,csv} for the default group, findings_<group>.* else."""
    stem = "findings" if group == DEFAULT_GROUP else f"findings_{group}"
    return {"table": f"{stem}.csv", "markdown": f"{stem}.md"}
