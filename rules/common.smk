import re

import yaml

from mlmia.attack import Experiment
from mlmia.errors import UserError
from mlmia.importing import files_from_config
from mlmia.provenance import module_digest


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
# Dataset names whose scores are imported, not computed; "(?!)" matches nothing.
IMPORTED_PATTERN = "|".join(map(re.escape, IMPORTED)) or "(?!)"


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
        for column in tables[name]["columns"]:
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
            for column in TABLES_SPEC["tables"][table]["columns"]
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


def all_targets():
    return (
        [path for table in TABLES for path in table_outputs(table)]
        + [path for figure in FIGURES for path in figure_outputs(figure)]
        + ["results/paper_comparison.md"]
    )
