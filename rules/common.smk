import re

import yaml

from mlmia.attack import Experiment
from mlmia.errors import UserError
from mlmia.importing import files_from_config
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


TABLES_SPEC = load_yaml(config["tables_spec"], "tables_spec")
PAPER_VALUES = load_yaml(config["paper_values"], "paper_values")
ROW_SETS = TABLES_SPEC.get("row_sets", {})
IMPORTED = config.get("imported", {}).get("datasets", {})
MODELS = config.get("models", {})
# The embedded world scores two sample sets: plain sentences, and the same sentences as
# Base-b was trained on them (members carry the patient's name).
SCORED = ["clinical", "clinical_named"] if "corpus" in config else []


def name_pattern(names):
    """A wildcard constraint matching exactly these names ("(?!)" matches nothing)."""
    return "|".join(map(re.escape, names)) or "(?!)"


IMPORTED_PATTERN = name_pattern(IMPORTED)
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
    for finding in TABLES_SPEC.get("findings", []):
        if finding.get("experiments"):
            names += [
                n for n in in_tables if EXPERIMENTS[n].level == finding["experiments"]
            ]
        names += [finding[side].get("experiment") for side in ("compare", "against")]
        names = [n for n in names if n is not None]
    return list(dict.fromkeys(names))


def findings_inputs(wildcards):
    return [f"results/metrics/{name}.parquet" for name in findings_experiments()]


def all_targets():
    return (
        [path for table in TABLES for path in table_outputs(table)]
        + [path for figure in FIGURES for path in figure_outputs(figure)]
        + ["results/paper_comparison.md"]
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


def n_shards(dataset):
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


def exposure_inputs(wildcards):
    experiment = EXPERIMENTS[wildcards.experiment]
    return {
        "attack": f"results/attack/{experiment.name}.parquet",
        "samples": samples_path(experiment.dataset),
        "training_text": CORPUS_TABLES[MODELS[experiment.target]["corpus"]],
        "embedding_model": model_dir(
            config.get("exposure", {}).get("embedding_model", "ref_general")
        ),
    }


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
