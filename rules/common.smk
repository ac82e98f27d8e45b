# Paths and input functions. What the study means (which experiments a table needs, which
# attacks, alphas and FPRs each experiment's metrics hold, where a model lies, how many
# shards a sample table gets) is STUDY's (mlmia.study.study); each study's settings, files
# and resources are its plan's (mlmia.study.plans). No rule reads the config itself.
import re
from pathlib import Path

from mlmia.attacks.base import attack_modules
from mlmia.core.provenance import import_closure, script_digest
from mlmia.data.datasets import dataset_paths
from mlmia.data.importing import files_from_config
from mlmia.terms.layout import (
    CANARY_TOKENIZER,
    CORPORA,
    ONE_RUN_CANARIES,
    REFERENCE_SPLITS,
    TOKENIZER,
    model_dir,
    samples,
)
from mlmia.study.study import is_hub_id
from mlmia.terms.scores import ENERGY_KINDS
from snakemake.io import report as report_flag

DATASETS = STUDY.datasets  # sample sets read from the user's files
IMPORTED = STUDY.imported  # published scores
CORPUS_TABLES = {name: STUDY.corpus_table(name) for name in CORPORA}
# what the training and scoring jobs of the workflow's own rules ask for (threads, memory, device,
# the scoring batch size). The torch device and the scoring batch size are every rule's
# `resources:`, never its params: they choose how a job runs, not what it computes, and Snakemake
# reruns a job when its params change but not its resources, so moving a run from the CPU to a GPU
# or tuning the batch size reruns nothing (mlmia.study.plans.base.RUN_ONLY_KEYS; tests/test_plans.py).
TRAINING = STUDY.resources("training")
SCORING = STUDY.resources("scoring")


def library_code(script):
    """A digest of the library code that workflow/scripts/`script` runs, for a rule's params:
    the modules it imports, transitively (mlmia.core.provenance), and, where it reaches the
    attack registry, the attacks registered from outside the library (a user's own)."""
    path = Path(workflow.basedir) / "workflow" / "scripts" / script
    registry = "mlmia.attacks.base" in import_closure(path)
    return script_digest(path, *(attack_modules() if registry else []))


def result(path):
    """A file of this run: results/<run>/<path>."""
    return STUDY.path(path)


def plans_with_rules(rule_file):
    """The plans of the configured studies whose rules live in `rule_file` (rules/<name>.smk)."""
    return [plan for plan in STUDY_PLANS.values() if rule_file in plan.rules]


def plan_outputs(plan, step):
    """A step's outputs of a study's plan (mlmia.study.plans), those the HTML report shows
    flagged for it with its category and labels, and the caption of every study
    (report/study.rst), which renders the plan's caption (the job's param `caption`)."""
    return {
        name: (
            report_flag(
                path,
                caption="../report/study.rst",
                category=plan.report[path].category,
                subcategory=plan.report[path].subcategory,
                labels=plan.report[path].labels,
            )
            if path in plan.report
            else path
        )
        for name, path in plan.outputs[step].items()
    }


def name_pattern(names):
    """A wildcard constraint matching exactly these names ("(?!)" matches nothing)."""
    return "|".join(map(re.escape, names)) or "(?!)"


IMPORTED_PATTERN = name_pattern(IMPORTED)
DATASETS_PATTERN = name_pattern(DATASETS)
SCORED_PATTERN = name_pattern(STUDY.scored_sets())
TRAINED_PATTERN = name_pattern(STUDY.trained_models())
MODEL_PATTERN = name_pattern(
    list(STUDY.models)
    + STUDY.reference_models()
    + [m for dataset in IMPORTED.values() for m in dataset["models"]]
)


def samples_path(dataset):
    return result(samples(dataset))


def scores_path(dataset, model, energy):
    return result(f"scores/{dataset}/{model}.{energy}.parquet")


def attack_inputs(wildcards):
    """The sample table, the score tables the attacks read ("<role>__<energy kind>"), with
    reference models their training splits, and with neighbour scores the neighbour table
    (which sample each neighbour belongs to)."""
    experiment = STUDY.experiments[wildcards.experiment]
    needed = STUDY.score_inputs(experiment.name)
    splits = {"splits": result(REFERENCE_SPLITS)} if experiment.references else {}
    neighbours = (
        {"neighbour_samples": samples_path(experiment.neighbour_set)}
        if any(key.startswith("neighbours__") for key in needed)
        else {}
    )
    return (
        {"samples": samples_path(experiment.dataset)}
        | splits
        | neighbours
        | {key: scores_path(*where) for key, where in needed.items()}
    )


def metrics_inputs(wildcards):
    """The attack table, and the sample table whose patients the bootstrap resamples."""
    experiment = STUDY.experiments[wildcards.experiment]
    return {
        "attack": result(f"attack/{experiment.name}.parquet"),
        "samples": samples_path(experiment.dataset),
    }


def imported_files(wildcards, model=None):
    """Every model's score files of an imported dataset (or one model's)."""
    dataset, root = IMPORTED[wildcards.dataset], STUDY.imported_root()
    models = [model] if model else dataset["models"]
    return [p for m in models for p in files_from_config(dataset, root, m).values()]


def imported_model_files(wildcards):
    return imported_files(wildcards, wildcards.model)


def train_inputs(wildcards):
    """A trained model's text (a world corpus, or a reference's split), the world's
    tokenizer, and the model it continues (`init`)."""
    spec = STUDY.training_spec(wildcards.model)
    inputs = {
        "text": spec["text"],
        "tokenizer": STUDY.training_tokenizer(wildcards.model),
    }
    return inputs | ({"init": STUDY.model_dir(spec["init"])} if spec["init"] else {})


def model_input_of(model):
    """A model's directory as an input file, unless the model is a hub id."""
    return STUDY.model_input(model)


def model_input(wildcards):
    return model_input_of(wildcards.model)


def shard_scores(wildcards):
    prefix = f"scores/{wildcards.dataset}/shards/{wildcards.model}.{wildcards.energy}"
    shards = range(STUDY.shards(wildcards.dataset))
    return [result(f"{prefix}.{shard}.parquet") for shard in shards]


def exposure_inputs(wildcards):
    """Table 7: the attack table, the samples' text, the target's training text (token
    frequencies; the dataset's members when not given) and the embedding model."""
    experiment = STUDY.experiments[wildcards.experiment]
    inputs = {
        "attack": result(f"attack/{experiment.name}.parquet"),
        "samples": samples_path(experiment.dataset),
        "training_text": STUDY.training_text(experiment.target)
        or samples_path(experiment.dataset),
    }
    embedding = STUDY.model_dir(STUDY.embedding_model())
    return inputs | ({} if is_hub_id(embedding) else {"embedding_model": embedding})


def dataset_inputs(wildcards):
    paths = dataset_paths(DATASETS[wildcards.dataset])
    tokenizer = STUDY.dataset_tokenizer(wildcards.dataset)
    return {"files": [str(p) for p in paths]} | (
        {} if is_hub_id(tokenizer) else {"tokenizer": tokenizer}
    )
