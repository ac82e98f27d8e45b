import os
import re

import yaml

from mlmia.attack import Experiment
from mlmia.datasets import dataset_paths
from mlmia.errors import UserError
from mlmia.findings import finding_scope
from mlmia.importing import files_from_config
from mlmia.hub import looks_like_hub_id
from mlmia.provenance import module_digest
from mlmia.samples import sample_count
from mlmia.shards import shard_count


def load_yaml(path, key):
    try:
        with open(path) as handle:
            return yaml.safe_load(handle) or {}
    except FileNotFoundError:
        raise WorkflowError(f"config key {key!r}: file not found: {path}")
    except yaml.YAMLError as exc:
        raise WorkflowError(f"config key {key!r}: {path}: not valid YAML: {exc}")


if "audit" in config:
    # bring your own: the experiments, table and figure are generated from `audit:`
    from mlmia.audit import audit_spec

    try:
        TABLES_SPEC = audit_spec(
            config["audit"], config.get("datasets", {}), config.get("models", {})
        )
    except UserError as exc:
        raise WorkflowError(str(exc))
    config.setdefault("tables_spec", "config key 'audit'")
else:
    TABLES_SPEC = load_yaml(config["tables_spec"], "tables_spec")
PAPER_VALUES = (
    load_yaml(config["paper_values"], "paper_values")
    if "paper_values" in config
    else {}
)
ROW_SETS = TABLES_SPEC.get("row_sets", {})
IMPORTED = config.get("imported", {}).get("datasets", {})
MODELS = config.get("models", {})
# Sample sets read from the user's files (the paper's setup, bring your own).
DATASETS = config.get("datasets", {})
RAW = config.get("raw", {})
# The embedded world scores two sample sets: plain sentences, and the same sentences as
# Base-b was trained on them (members carry the patient's name).
WORLD_SETS = ["clinical", "clinical_named"] if "corpus" in config else []
SCORED = WORLD_SETS + list(DATASETS)


def name_pattern(names):
    """A wildcard constraint matching exactly these names ("(?!)" matches nothing)."""
    return "|".join(map(re.escape, names)) or "(?!)"


IMPORTED_PATTERN = name_pattern(IMPORTED)
DATASETS_PATTERN = name_pattern(DATASETS)
SCORED_PATTERN = name_pattern(SCORED)
TRAINED_PATTERN = name_pattern([m for m in MODELS if "path" not in MODELS[m]])
MODEL_PATTERN = name_pattern(
    list(MODELS) + [m for dataset in IMPORTED.values() for m in dataset["models"]]
)


def parse_experiments(spec):
    try:
        return {
            name: Experiment.from_config(name, entry)
            for name, entry in spec.get("experiments", {}).items()
        }
    except (UserError, TypeError) as exc:
        raise WorkflowError(f"{config['tables_spec']}: {exc}")


EXPERIMENTS = parse_experiments(TABLES_SPEC)


def selected_tables():
    tables = TABLES_SPEC.get("tables", {})
    chosen = config.get("tables") or list(tables)
    for name in chosen:
        if name not in tables:
            raise WorkflowError(
                f"config key 'tables': unknown table {name!r} (declared in {config['tables_spec']}: {', '.join(tables)})"
            )
    for name in chosen:
        for column in tables[name].get("columns", []):
            if column["experiment"] not in EXPERIMENTS:
                raise WorkflowError(
                    f"{config['tables_spec']}: table {name!r} column {column['id']!r}: unknown experiment {column['experiment']!r}"
                )
    return chosen


TABLES = selected_tables()
FIGURES = TABLES_SPEC.get("figures", {})


def figure_experiments(figure):
    spec = FIGURES[figure]
    return spec["experiments"] if "experiments" in spec else [spec["experiment"]]


def figure_inputs(wildcards):
    """Histograms read attack tables, ROC figures the ROC points of each experiment."""
    spec = FIGURES[wildcards.figure]
    pattern = (
        "results/attack/{}.parquet"
        if spec.get("kind") == "histogram"
        else "results/metrics/{}.roc.parquet"
    )
    return {name: pattern.format(name) for name in figure_experiments(wildcards.figure)}


def figure_outputs(figure):
    return [f"results/figures/{figure}.{ext}" for ext in ("png", "pdf")]


def table_experiments(table):
    columns = TABLES_SPEC["tables"][table].get("columns", [])  # static tables have none
    return list(dict.fromkeys(c["experiment"] for c in columns))


def experiment_alphas(name):
    """The alphas the selected tables ask of one experiment (its metrics params)."""
    return sorted(
        {
            float(column.get("alpha", 0.1))
            for table in TABLES
            for column in TABLES_SPEC["tables"][table].get("columns", [])
            if column["experiment"] == name
        }
    )


def metric_settings(wildcards):
    settings = config["metrics"]
    return {
        "protocols": settings.get("protocols", ["published", "corrected"]),
        "alphas": experiment_alphas(wildcards.experiment),
        "fprs": settings.get("fprs", [0.001, 0.01, 0.1]),
        "draws": settings.get("draws", 10),
        "seed": settings.get("seed", 2),
        "bootstrap": settings.get("bootstrap", 200),
        "level": EXPERIMENTS[wildcards.experiment].level,
    }


def samples_path(dataset):
    return f"results/samples/{dataset}.parquet"


def scores_path(dataset, model, energy):
    return f"results/scores/{dataset}/{model}.{energy}.parquet"


def attack_inputs(wildcards):
    experiment = EXPERIMENTS[wildcards.experiment]
    return {
        "samples": samples_path(experiment.dataset),
        "target": scores_path(experiment.dataset, experiment.target, experiment.energy),
        "reference": scores_path(
            experiment.dataset, experiment.reference, experiment.energy
        ),
    }


def imported_files(wildcards):
    dataset = IMPORTED[wildcards.dataset]
    root = config["imported"]["root"]
    return [
        path
        for model in dataset["models"]
        for path in files_from_config(dataset, root, model).values()
    ]


def imported_model_files(wildcards):
    dataset = IMPORTED[wildcards.dataset]
    return list(
        files_from_config(dataset, config["imported"]["root"], wildcards.model).values()
    )


def table_metric_inputs(wildcards):
    """Each experiment's metrics: attack metrics, or exposure metrics for Table 7."""
    source = TABLES_SPEC["tables"][wildcards.table].get("source", "metrics")
    return [
        f"results/{source}/{name}.parquet"
        for name in table_experiments(wildcards.table)
    ]


def table_outputs(table):
    return [f"results/tables/{table}.{ext}" for ext in ("csv", "md", "tex")]


def findings_experiments():
    """Experiments the findings compare: those named, and every experiment of a level
    the selected tables use when a finding spans a level."""
    in_tables = [name for table in TABLES for name in table_experiments(table)]
    names = []
    levels = {name: EXPERIMENTS[name].level for name in in_tables}
    for finding in TABLES_SPEC.get("findings", []):
        names += [n for n in finding_scope(finding, levels) if n is not None]
        names += [finding[side].get("experiment") for side in ("compare", "against")]
        names = [n for n in names if n is not None]
    return list(dict.fromkeys(names))


def findings_inputs(wildcards):
    return [f"results/metrics/{name}.parquet" for name in findings_experiments()]


def all_targets():
    return (
        [path for table in TABLES for path in table_outputs(table)]
        + [path for figure in FIGURES for path in figure_outputs(figure)]
        + (["results/paper_comparison.md"] if "paper_values" in config else [])
        + (["results/findings.md"] if TABLES_SPEC.get("findings") else [])
    )


# --- the embedded world: corpora, training, scoring -----------------------------------

CORPUS_TABLES = {
    "target": "results/corpus/train_target.parquet",
    "target_named": "results/corpus/train_target_named.parquet",
    "domain": "results/corpus/train_domain.parquet",
    "general": "results/corpus/train_general.parquet",
}


def corpus_tables(wildcards):
    return list(CORPUS_TABLES.values())


def train_inputs(wildcards):
    spec = MODELS[wildcards.model]
    inputs = {
        "text": CORPUS_TABLES[spec["corpus"]],
        "tokenizer": "results/models/tokenizer",
    }
    if spec.get("init"):
        inputs["init"] = model_dir(spec["init"])
    return inputs


def model_dir(model):
    """A model's directory: trained by the workflow, or a user's path / hub id."""
    name = model if isinstance(model, str) else model.model
    return MODELS[name].get("path", f"results/models/{name}")


def is_hub_id(name):
    """A hub id names no local file (bert-base-uncased, org/name); loading resolves it."""
    return not os.path.exists(name) and looks_like_hub_id(name)


def model_input(wildcards):
    """The model directory as an input file, unless the model is a hub id."""
    path = model_dir(wildcards)
    return [] if is_hub_id(path) else path


def model_tokenizer(wildcards):
    return MODELS[wildcards.model].get("tokenizer")


def n_shards(dataset):
    if dataset in DATASETS:
        return DATASETS[dataset].get("shards", 4)
    settings = config["samples"]
    n = sample_count(settings["counts"], settings["lengths"])
    return shard_count(n, config["scoring"]["shard_size"])


def shard_scores(wildcards):
    return [
        f"results/scores/{wildcards.dataset}/shards/{wildcards.model}.{wildcards.energy}.{shard}.parquet"
        for shard in range(n_shards(wildcards.dataset))
    ]


def scoring_k(energy):
    return config["scoring"]["k"] if energy == "masked" else None


def training_text(model):
    """The target's training text (token frequencies of Table 7): the corpus the workflow
    trained it on, the user's `training_text` file, or else the dataset's own members.
    """
    spec = MODELS.get(model, {})
    if "corpus" in spec:
        return CORPUS_TABLES[spec["corpus"]]
    return spec.get("training_text")


def exposure_model():
    """The model whose [CLS] embedding Table 7 uses (the general reference by default)."""
    name = config.get("exposure", {}).get("embedding_model", "ref_general")
    if name not in MODELS:
        raise WorkflowError(
            f"config key exposure.embedding_model: {name!r} is not a configured model"
        )
    return model_dir(name)


def exposure_inputs(wildcards):
    experiment = EXPERIMENTS[wildcards.experiment]
    embedding = exposure_model()
    inputs = {
        "attack": f"results/attack/{experiment.name}.parquet",
        "samples": samples_path(experiment.dataset),
        "training_text": training_text(experiment.target)
        or samples_path(experiment.dataset),
    }
    if not is_hub_id(embedding):
        inputs["embedding_model"] = embedding
    return inputs


def exposure_alpha(name):
    """The alpha of the exposure table's columns (Table 7) for this experiment."""
    alphas = {
        float(column.get("alpha", 0.1))
        for table in TABLES
        if TABLES_SPEC["tables"][table].get("source") == "exposure"
        for column in TABLES_SPEC["tables"][table]["columns"]
        if column["experiment"] == name
    }
    if len(alphas) > 1:
        raise WorkflowError(
            f"{config['tables_spec']}: exposure tables ask experiment {name!r} for several alphas {sorted(alphas)}"
        )
    return alphas.pop() if alphas else 0.1


# --- user sample sets and raw importers ----------------------------------------------


def dataset_files(wildcards):
    return [str(path) for path in dataset_paths(DATASETS[wildcards.dataset])]


def dataset_tokenizer(dataset):
    """The tokenizer that counts tokens for length buckets: the dataset's, or the first model's."""
    spec = DATASETS[dataset]
    if spec.get("tokenizer"):
        return spec["tokenizer"]
    if not MODELS:
        raise WorkflowError(
            f"config key datasets.{dataset}.tokenizer: needed when no models are configured"
        )
    first = next(iter(MODELS))
    return MODELS[first].get("tokenizer") or model_dir(first)


def dataset_inputs(wildcards):
    inputs = {"files": dataset_files(wildcards)}
    tokenizer = dataset_tokenizer(wildcards.dataset)
    if not is_hub_id(tokenizer):
        inputs["tokenizer"] = tokenizer
    return inputs


def raw_outputs(source):
    """One processed CSV per role; with a names file, also the trained roles with names
    inserted (Base-b's members)."""
    spec = RAW.get(source, {})
    outputs = {
        role: f"results/raw/{source}_{role}.csv" for role in spec.get("patients", {})
    }
    if spec.get("names"):
        for role in ("member", "member_heldin"):
            if role in spec["patients"]:
                outputs[f"{role}_named"] = f"results/raw/{source}_named_{role}.csv"
    return outputs
