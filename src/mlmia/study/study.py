"""The study a config describes: its experiments, tables, figures and findings, what each needs.

`Study.from_config(config, workflow_dir)` validates a config (defaults filled in,
`mlmia.study.schema.validate`) and a tables spec (experiments, row sets, tables, figures,
findings: `config/tables.yaml`, or generated from an `audit:` section). It knows which
experiments each table, figure and finding reads, which attacks, thresholds, alphas and FPRs
each experiment's metrics must hold, and where every result of the run lies
(``results/<run>/``). The workflow only turns these answers into paths and rules.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from mlmia.attacks.base import get_attack
from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.data.datasets import count_rows, dataset_paths, declared_sources
from mlmia.data.importing import files_from_config
from mlmia.data.manifest import TRAINED_ROLES
from mlmia.models.hub import looks_like_hub_id
from mlmia.scoring.settings import ScoringSettings
from mlmia.scoring.shards import shard_count
from mlmia.shadow.split import shadow_model_settings
from mlmia.study.audit import audit_spec
from mlmia.study.experiment import NEIGHBOUR_SET, Experiment
from mlmia.study.optional import without_optional
from mlmia.study.pools import ReferencePools
from mlmia.study.schema import load_yaml, schema_path, validate

#: what a table row or column may pin down of a cell
CELL_KEYS = ("metric", "attack", "threshold", "fpr", "split", "features", "role", "versus")
METRICS = ("auc", "tpr_at_fpr", "precision", "recall")
COUNT_METRICS = ("n_samples", "n_patients")
THRESHOLD_METRICS = ("precision", "recall")
RESULTS = "results"
#: the target group of what `snakemake` builds; tables, figures and findings may name another (`snakemake zoo`)
DEFAULT_GROUP = "default"
#: the DP audit's target group (`snakemake dp`): built only when the config has `dp_audit`
DP_GROUP = "dp"
#: the shadow protocol's models: shadow_alice, shadow_bob_0, ...
SHADOW_PREFIX = "shadow_"
#: the translation target's models (`snakemake shadow_mt`): shadow_mt_alice, shadow_mt_bob_0, ...
SHADOW_MT_PREFIX = "shadow_mt_"
#: model keys that are not training settings (where the model comes from)
NOT_SETTINGS = ("corpus", "init", "path", "tokenizer", "training_text")
log = get_logger(__name__)
#: the embedded world's training corpora (`corpus:` of a model); its two scored sample sets:
#: plain sentences, and the same sentences as Base-b saw them (members carry the name)
CORPORA = ("target", "target_named", "domain", "general")
#: the DP targets' private text (mlmia.world.dp_corpus) plus the one-run audit's canaries (token_canaries.with_included_canaries)
ONE_RUN_CORPUS = "dp_private"
WORLD_SETS = ("clinical", "clinical_named")


@dataclass(frozen=True)
class Cell:
    """One metric of one experiment: e.g. the likelihood ratio's recall at the population
    threshold, or its TPR at 1% FPR."""

    metric: str
    attack: str | None = None
    threshold: str | None = None
    fpr: float | None = None
    split: str | None = None
    features: str | None = None
    role: str | None = None
    versus: str | None = None  # a second attack: the cell also shows its paired difference to it

    @classmethod
    def pinned(cls, *parts: dict) -> Cell:
        """The cell that a row and a column pin down together (a later part wins)."""
        merged: dict = {}
        for part in parts:
            merged.update({key: part[key] for key in CELL_KEYS if part.get(key) is not None})
        return cls(**merged)

    @property
    def key(self) -> str:
        """The paper-values key: "metric/attack[/threshold][@fpr]" ("recall/loss/heldin_mean")."""
        parts = [self.metric, self.attack or self.features or self.role or ""]
        if self.threshold:
            parts.append(self.threshold)
        text = "/".join(parts)
        return text + (f"@{self.fpr:g}" if self.fpr is not None else "") + (f":{self.split}" if self.split else "")


class Study:
    """Experiments, tables, figures and findings of one run, and what each needs."""

    def __init__(self, config: dict, spec: dict, spec_name: str = "tables spec") -> None:
        self.config = config
        self.spec_name = spec_name
        if config.get("dp_audit") is None:  # no DP targets configured: the dp group's outputs are left out
            spec = without_group(spec, DP_GROUP)
        imported = {m for d in config.get("imported", {}).get("datasets", {}).values() for m in d["models"]}
        spec = without_optional(spec, set(config.get("models", {})) | imported)  # e.g. no masked-diffusion target
        self.run = config["run"]
        self.results = f"{RESULTS}/{self.run}"
        self.metrics = config["metrics"]
        self.row_sets = spec.get("row_sets", {})
        self.experiments = self._experiments(spec)
        self.pools = ReferencePools(config.get("references"), self.models, self.experiments)
        self.tables = self._tables(spec)
        self.figures = dict(spec.get("figures", {}))
        self.findings = list(spec.get("findings", []))
        self.paper_values = load_yaml(config["paper_values"], "paper_values") if config.get("paper_values") else {}
        self._rows: dict[str, int | None] = {}
        self._check()

    @classmethod
    def from_config(cls, config: dict, workflow_dir: str | os.PathLike, config_files: list = ()) -> Study:
        """Validate `config` (defaults filled in) against the workflow's schemas
        (`workflow_dir`/config/schema), check the `config_files` it was read from for keys
        given twice, load its tables spec (or generate it from `audit:`), validate that, and
        build the study. The spec and paper-values files are found relative to the working
        directory, else to `workflow_dir` (so a run from another directory finds them)."""
        workflow_dir = Path(workflow_dir)
        for path in config_files:
            load_yaml(path)
        validate(config, schema_path("config"))
        dexposure = config.get("dexposure") or {}
        if "corpus" not in config and dexposure.get("i2b2_xml") and dexposure.get("tokenizer") == "world":
            raise UserError(
                "config key dexposure.tokenizer: 'world' needs the embedded world (a corpus: section); "
                "with dexposure.i2b2_xml alone, set it to 'notes'"
            )
        one_run = ((config.get("dp_audit") or {}).get("canaries") or {}).get("count", 0)
        for name, model in (config.get("models") or {}).items():
            # without dp_audit the DP targets are left out (their group is); with it, they need canaries
            if model.get("corpus") == ONE_RUN_CORPUS and (
                "corpus" not in config or ("dp_audit" in config and one_run < 2)
            ):
                raise UserError(
                    f"config key models.{name}.corpus: {ONE_RUN_CORPUS} needs the embedded world and "
                    f"dp_audit.canaries.count >= 2 (got {one_run})"
                )
        for key in ("tables_spec", "paper_values"):
            if config.get(key):
                config[key] = _found(config[key], workflow_dir)
        if "audit" in config:
            spec = audit_spec(config["audit"], config.get("datasets", {}), config.get("models", {}))
            name = "config key audit"
        else:
            spec = load_yaml(config["tables_spec"], "tables_spec")
            name = config["tables_spec"]
        validate(spec, schema_path("tables"), what=f"{name}: key")
        return cls(config, spec, name)

    # ------------------------------------------------------------------ the spec

    def _experiments(self, spec: dict) -> dict[str, Experiment]:
        try:
            return {
                name: Experiment.from_config(name, self._population_chosen(dict(entry)))
                for name, entry in spec["experiments"].items()
            }
        except UserError as exc:
            raise UserError(f"{self.spec_name}: {exc}") from None

    def _population_chosen(self, entry: dict) -> dict:
        """An experiment whose `population` lists sources takes the first one its sample table
        has population samples of in its length bucket, as far as the config says (the
        embedded world's counts, a dataset's files); where it cannot tell, the first."""
        candidates = entry.get("population")
        if not isinstance(candidates, list):
            return entry
        dataset, length = entry.get("dataset"), entry.get("length")
        if dataset in WORLD_SETS and "corpus" in self.config:
            from mlmia.world.samples import sources_with

            samples = self.config["samples"]
            available = sources_with(samples["counts"], "population", length, samples["lengths"])
        elif dataset in self.config.get("datasets", {}):
            available = declared_sources(self.config["datasets"][dataset], "population", length)
        else:
            available = None
        found = [source for source in candidates if available is None or source in available]
        return {**entry, "population": (found or candidates)[0]}

    def _tables(self, spec: dict) -> dict[str, dict]:
        tables = spec.get("tables", {})
        chosen = self.config.get("tables") or list(tables)
        for name in chosen:
            if name not in tables:
                raise UserError(
                    f"config key tables: unknown table {name!r} (declared in {self.spec_name}: {', '.join(tables)})"
                )
        return {name: tables[name] for name in chosen}

    def rows(self, table: str, rows=None, seen: tuple = ()) -> list[dict]:
        """A table's rows: a row set is named by a string, in place of its rows or among them."""
        rows = self.tables[table].get("rows", []) if rows is None else rows
        out = []
        for item in [rows] if isinstance(rows, str) else rows:
            if not isinstance(item, str):
                out.append(dict(item))
            elif item not in self.row_sets or item in seen:
                problem = "names itself" if item in seen else "is unknown"
                raise UserError(f"{self.spec_name}: table {table!r}: row set {item!r} {problem}")
            else:
                out += self.rows(table, self.row_sets[item], (*seen, item))
        return out

    def cells(self, table: str):
        """(column, row, cell) of every cell of a metrics or exposure table."""
        for column in self.tables[table].get("columns", []):
            for row in self.rows(table):
                yield column, row, Cell.pinned(column, row)

    def kind(self, table: str) -> str:
        return self.tables[table].get("kind", "metrics")

    def _check(self) -> None:
        """Every name the tables, figures and findings use exists; one line each."""
        where = self.spec_name
        models = self.config.get("models", {})
        for name, spec in models.items():
            init = spec.get("init")
            if init is not None and (init not in models or init == name or "path" in spec):
                raise UserError(
                    f"config key models.{name}.init: {init!r} is not another configured model "
                    f"(models: {', '.join(models)}); init continues the training of one"
                )
        self._check_files()
        self._check_pools()
        for table in self.tables:
            if self.kind(table) == "static":
                continue
            for column, row, cell in self.cells(table):
                if column["experiment"] not in self.experiments:
                    raise UserError(
                        f"{where}: table {table!r} column {column['id']!r}: unknown experiment {column['experiment']!r}"
                    )
                self._check_cell(cell, f"{where}: table {table!r} row {row.get('label', cell.key)!r}",
                                 exposure=self.kind(table) == "exposure")  # fmt: skip
        for name, figure in self.figures.items():
            for experiment in figure_experiments(figure):
                if experiment not in self.experiments:
                    raise UserError(f"{where}: figure {name!r}: unknown experiment {experiment!r}")
            for attack in figure_attacks(figure):
                self._check_attack(attack, f"{where}: figure {name!r}")
        for check in self.finding_checks():
            for side in ("compare", "against"):
                experiment = check[side]["experiment"]
                if experiment not in self.experiments:
                    raise UserError(f"{where}: finding {check['finding']!r}: unknown experiment {experiment!r}")
                self._check_cell(Cell.pinned(check[side]), f"{where}: finding {check['finding']!r} {side}")
        for table in self.tables:
            if self.kind(table) == "exposure":
                self._check_attack(self.tables[table].get("attack", "likelihood_ratio"), f"{where}: table {table!r}")
                embedding = self.config["exposure"]["embedding_model"]
                if embedding not in self.config.get("models", {}):
                    raise UserError(
                        f"config key exposure.embedding_model: {embedding!r} is not a configured model "
                        f"(table {table!r} needs it)"
                    )

    def _check_files(self) -> None:
        """The files the config names exist (those the raw importers write excepted), and every
        experiment's models and dataset are configured: refused at start, not after hours."""
        produced = {v for source in ("mimic", "i2b2") for v in self.raw_outputs(source).values()}
        for name, spec in self.config.get("datasets", {}).items():
            for i, path in enumerate(dataset_paths(spec)):
                if not path.exists() and str(path) not in produced:
                    raise UserError(f"config key datasets.{name}.files[{i}].path: file not found: {path}")
            if not spec.get("tokenizer") and not self.models:
                raise UserError(f"config key datasets.{name}.tokenizer: needed when no models are configured")
        for source, spec in self.config.get("raw", {}).items():
            if not isinstance(spec, dict):
                continue
            for key in ("noteevents", "member_lists", "names", "xml"):
                for i, path in enumerate([spec[key]] if isinstance(spec.get(key), str) else spec.get(key) or []):
                    if not Path(path).exists():
                        index = f"[{i}]" if isinstance(spec.get(key), list) else ""
                        raise UserError(f"config key raw.{source}.{key}{index}: file not found: {path}")
        imported = self.config.get("imported", {})
        for name, dataset in imported.get("datasets", {}).items():
            for model in dataset["models"]:
                for score_set, path in files_from_config(dataset, imported["root"], model).items():
                    if not Path(path).exists():
                        raise UserError(
                            f"config key imported.datasets.{name}: score file of model {model!r}, set {score_set!r} "
                            f"not found: {path}"
                        )
        for name, spec in self.models.items():
            path = spec.get("path")
            if path is not None and not Path(path).expanduser().exists() and not looks_like_hub_id(path):
                raise UserError(f"config key models.{name}.path: no such directory: {path}")
        known_sets = set(self.scored_sets()) | set(self.config.get("imported", {}).get("datasets", {}))
        imported_models = {m for d in self.config.get("imported", {}).get("datasets", {}).values() for m in d["models"]}
        for experiment in self.experiments.values():
            if experiment.dataset not in known_sets:
                raise UserError(
                    f"{self.spec_name}: experiment {experiment.name!r}: dataset {experiment.dataset!r} is not configured "
                    f"(datasets: {', '.join(sorted(known_sets)) or 'none'})"
                )
            for role, model in experiment.models.items():
                if model not in self.models and model not in imported_models:
                    raise UserError(
                        f"{self.spec_name}: experiment {experiment.name!r}: {role} {model!r} is not a configured model"
                    )

    def attack_params(self, name: str) -> dict:
        """An attack's parameters from the config (``attacks.<name>``), over its defaults."""
        return get_attack(name, self.config.get("attacks", {}).get(name)).params

    def _check_pools(self) -> None:
        """Experiments that read the reference pool or neighbour texts have them configured."""
        needs_pool = sorted(e.name for e in self.experiments.values() if e.references)
        references = self.config.get("references")
        if needs_pool and not references:
            raise UserError(
                f"config key references: missing, and experiment {needs_pool[0]!r} reads the reference pool"
            )
        if references:
            if ("shape" in references) == ("settings" in references):
                raise UserError("config key references: give either shape (a configured model) or settings")
            for key in ("shape", "init"):
                if key in references and references[key] not in self.models:
                    raise UserError(f"config key references.{key}: {references[key]!r} is not a configured model")
            init = references.get("init")
            # a model the workflow trains is there when the pool trains; a given one must be there now
            if init and "path" in self.models[init] and not Path(self.model_dir(init)).is_dir():
                raise UserError(f"config key references.init: {init!r} must be a local model directory")
            pool = references["pool"]
            if pool not in CORPORA and not Path(pool).exists():
                raise UserError(f"config key references.pool: file not found: {pool}")
        if any(e.neighbours for e in self.experiments.values()):
            model = self.config["neighbours"]["model"]
            if model not in self.models:
                raise UserError(f"config key neighbours.model: {model!r} is not a configured model")
        phi = self.config["extraction"].get("phi")
        if "corpus" in self.config or phi:  # the extraction study
            for key in ("target", "reference"):
                model = self.config["extraction"][key]
                if model not in self.models:
                    raise UserError(f"config key extraction.{key}: {model!r} is not a configured model")
            if phi and not Path(phi).is_file():
                raise UserError(f"config key extraction.phi: file not found: {phi}")

    def _check_attack(self, name: str, where: str) -> None:
        try:
            get_attack(name, self.config.get("attacks", {}).get(name))
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None

    def _check_cell(self, cell: Cell, where: str, exposure: bool = False) -> None:
        if exposure:
            if cell.metric not in THRESHOLD_METRICS or not cell.features or not cell.split:
                raise UserError(f"{where}: an exposure cell needs metric precision|recall, features and split")
            return
        if cell.metric in COUNT_METRICS:
            if cell.role is None:
                raise UserError(f"{where}: {cell.metric} needs a role")
            return
        if cell.metric not in METRICS:
            raise UserError(
                f"{where}: unknown metric {cell.metric!r} (use one of {', '.join(METRICS + COUNT_METRICS)})"
            )
        if not cell.attack:
            raise UserError(f"{where}: names no attack")
        self._check_attack(cell.attack, where)
        if cell.versus is not None:
            self._check_attack(cell.versus, f"{where} (versus)")
        if (cell.metric in THRESHOLD_METRICS) != (cell.threshold is not None):
            raise UserError(
                f"{where}: precision and recall need a threshold (population, heldin_mean); other metrics none"
            )
        if (cell.metric == "tpr_at_fpr") != (cell.fpr is not None):
            raise UserError(f"{where}: tpr_at_fpr needs an fpr; other metrics none")

    # ------------------------------------------------------------------ experiments

    def table_experiments(self, table: str) -> list[str]:
        """The experiments a table's columns read, in column order."""
        return list(dict.fromkeys(c["experiment"] for c in self.tables[table].get("columns", [])))

    def _metric_cells(self, name: str) -> list[tuple[Cell, float]]:
        """(cell, alpha) of every table cell and finding cell that reads experiment `name`'s metrics."""
        return self._metric_cells_by_experiment.get(name, [])

    @cached_property
    def _metric_cells_by_experiment(self) -> dict[str, list[tuple[Cell, float]]]:
        """`_metric_cells` of every experiment, in one pass over the tables and findings (the
        workflow asks for each experiment's at every start)."""
        out: dict[str, list[tuple[Cell, float]]] = {}
        for table in self.tables:
            if self.kind(table) != "metrics":
                continue
            for column, _, cell in self.cells(table):
                cells, alpha = out.setdefault(column["experiment"], []), float(column.get("alpha", 0.1))
                cells.append((cell, alpha))
                if cell.versus:  # the attack a cell is compared with is computed too
                    cells.append((replace(cell, attack=cell.versus, versus=None), alpha))
        for check in self.finding_checks():
            for side in ("compare", "against"):
                out.setdefault(check[side]["experiment"], []).append(
                    (Cell.pinned(check[side]), float(check[side].get("alpha", 0.1)))
                )
        return out

    def metric_experiments(self) -> list[str]:
        """Experiments whose metrics some table or finding reads."""
        return [name for name in self.experiments if self._metric_cells(name)]

    def metric_settings(self, name: str) -> dict:
        """What experiment `name`'s metrics job computes (its params: a change reruns it)."""
        cells = self._metric_cells(name)
        thresholded = [(cell, alpha) for cell, alpha in cells if cell.metric in THRESHOLD_METRICS]
        return {
            "protocols": list(self.metrics["protocols"]),
            "attacks": sorted({cell.attack for cell, _ in cells if cell.attack}),
            "alphas": sorted({alpha for _, alpha in thresholded}),
            "thresholds": sorted({cell.threshold for cell, _ in thresholded}),
            "fprs": sorted(set(self.metrics["fprs"]) | {cell.fpr for cell, _ in cells if cell.fpr is not None}),
            "draws": self.metrics["draws"],
            "seed": self.metrics["seed"],
            "bootstrap": self.metrics["bootstrap"],
            "level": self.experiments[name].level,
            "attack_params": {
                a: self.attack_params(a) for a in sorted({cell.attack for cell, _ in cells if cell.attack})
            },
        }

    def roc_attacks(self, name: str) -> list[str]:
        """The attacks whose ROC curves the figures draw on experiment `name`."""
        return sorted({
            attack for figure in self.figures.values() if figure.get("kind") == "roc" and name in figure_experiments(figure)
            for attack in figure_attacks(figure)
        })  # fmt: skip

    def roc_experiments(self) -> list[str]:
        return [name for name in self.experiments if self.roc_attacks(name)]

    def exposure_settings(self, name: str) -> dict:
        """Table 7's settings for experiment `name`: the attack that labels members exposed and
        its alpha (one per experiment), plus the config's `exposure` section."""
        asked = {
            (self.tables[t].get("attack", "likelihood_ratio"), float(c.get("alpha", 0.1)))
            for t in self.tables if self.kind(t) == "exposure"
            for c in self.tables[t]["columns"] if c["experiment"] == name
        }  # fmt: skip
        if len(asked) > 1:
            raise UserError(
                f"{self.spec_name}: exposure tables ask experiment {name!r} for several (attack, alpha): {sorted(asked)}"
            )
        attack, alpha = asked.pop() if asked else ("likelihood_ratio", 0.1)
        return {"attack": attack, "alpha": alpha, **self.config["exposure"]}

    def exposure_experiments(self) -> list[str]:
        return list(
            dict.fromkeys(e for t in self.tables if self.kind(t) == "exposure" for e in self.table_experiments(t))
        )

    def required_roles(self, name: str) -> list[str]:
        """The roles experiment `name` needs samples of: members and non-members always; the
        population for a population threshold (corrected protocol), Table 7, a histogram
        that draws one or an attack that compares with it (RMIA); held-in members for the
        loss baseline's mu threshold."""
        settings = self.metric_settings(name)
        roles = ["member", "nonmember"]
        population = "population" in settings["thresholds"] and "corrected" in settings["protocols"]
        population |= name in self.exposure_experiments()
        population |= any(get_attack(attack).reads_population for attack in self.experiment_attacks(name))
        population |= any(
            f.get("kind") == "histogram" and f["experiment"] == name and f["protocol"] == "corrected"
            for f in self.figures.values()
        )
        if population:
            roles.append("population")
        if "heldin_mean" in settings["thresholds"]:
            roles.append("member_heldin")
        return roles

    def dataset_requirements(self, dataset: str) -> list[dict]:
        """What the experiments on a sample table need of it: (experiment, role, source,
        length) rows, checked when the table is prepared, before anything is scored."""
        out = []
        for experiment in self.experiments.values():
            if experiment.dataset != dataset or experiment.name not in self.attack_experiments():
                continue
            sources = {"nonmember": experiment.nonmembers, "population": experiment.population}
            for role in self.required_roles(experiment.name):
                out.append({"experiment": experiment.name, "role": role, "source": sources.get(role),
                            "length": experiment.length})  # fmt: skip
        return out

    def experiment_attacks(self, name: str) -> list[str]:
        """Every attack some output reads on experiment `name` (its attack table's columns)."""
        attacks = set(self.metric_settings(name)["attacks"]) | set(self.roc_attacks(name))
        for figure in self.figures.values():
            if figure.get("kind") == "histogram" and figure["experiment"] == name:
                attacks |= set(figure_attacks(figure))
        if name in self.exposure_experiments():
            attacks.add(self.exposure_settings(name)["attack"])
        return sorted(attacks)

    def attack_columns(self, name: str) -> dict[str, list[str]]:
        """For each model role, the score columns experiment `name`'s attacks read."""
        columns: dict[str, list[str]] = {}
        for attack in self.experiment_attacks(name):
            for role, wanted in get_attack(attack, self.config.get("attacks", {}).get(attack)).inputs.items():
                columns.setdefault(role, [])
                columns[role] += [c for c in wanted if c not in columns[role]]
        return dict(sorted(columns.items()))

    def score_inputs(self, name: str) -> dict[str, tuple[str, str, str]]:
        """The score tables experiment `name`'s attack table reads: {"<role>__<energy kind>":
        (dataset, model, energy kind)}; the references' as "references.<i>__<kind>", the
        neighbours' (the target on the neighbour texts) as "neighbours__<kind>"."""
        experiment = self.experiments[name]
        out = {}
        for role, wanted in self.attack_columns(name).items():
            for column in wanted:
                kind = column.split("@", 1)[1] if "@" in column else experiment.energy
                if role in experiment.models:
                    out[f"{role}__{kind}"] = (experiment.dataset, experiment.models[role], kind)
                elif role == "references":
                    for i, model in enumerate(self.pools.of(experiment)):
                        out[f"references.{i}__{kind}"] = (experiment.dataset, model, kind)
                elif role == "neighbours":
                    out[f"neighbours__{kind}"] = (experiment.neighbour_set, experiment.target, kind)
        return out

    def score_rows(self, dataset: str, model: str, energy: str) -> list[dict]:
        """Which rows of sample table `dataset` model `model`'s `energy` scores must cover: the
        selections (`Experiment.selection`) of every experiment that reads them, distinct, in a
        stable order (`mlmia.data.manifest.rows_read` takes their union). A DP target read on
        long samples only is scored on those (and on their neighbours) only; neighbour texts are
        scored for the audited samples only, never the population's (`NEIGHBOUR_ROLES`)."""
        wanted = (dataset, model, energy)
        selections = set()
        for name in self.attack_experiments():
            roles = {key.split("__")[0] for key, value in self.score_inputs(name).items() if value == wanted}
            if not roles:
                continue
            selection = self.experiments[name].selection()
            if roles == {"neighbours"}:
                selection["population"] = None
            selections.add(tuple(sorted(selection.items())))
        return [dict(items) for items in sorted(selections, key=repr)]

    def experiment_models(self, name: str) -> dict[str, str | list[str]]:
        """The models by input role: target, reference, references (the pool), neighbours (the target)."""
        experiment = self.experiments[name]
        models: dict = dict(experiment.models)
        if experiment.references:
            models["references"] = self.pools.of(experiment)
        if experiment.neighbours:
            models["neighbours"] = experiment.target
        return models

    def attack_experiments(self) -> list[str]:
        return [name for name in self.experiments if self.experiment_attacks(name)]

    # ------------------------------------------------------------------ models and sample sets

    @property
    def models(self) -> dict[str, dict]:
        return self.config.get("models", {})

    def model_dir(self, name: str) -> str:
        """A model's directory (or hub id): the user's `path`, or where the workflow trains it."""
        if name in self.reference_models() or name in self.shadow_models():
            return self.path("models", name)
        if name not in self.models:
            raise UserError(f"config key models: {name!r} is not a configured model (models: {', '.join(self.models)})")
        return self.models[name].get("path", self.path("models", name))

    def reference_pool(self) -> list[str]:
        """The reference models the workflow trains for LiRA and RMIA (config `references`), their
        splits; a target of another training objective reads the same splits trained with it
        (`reference_models`, `mlmia.study.pools`)."""
        return self.pools.own_pool()

    def reference_models(self) -> list[str]:
        """Every reference model the workflow trains for LiRA and RMIA, of every objective's pool."""
        return self.pools.all()

    def shadow_models(self) -> list[str]:
        """The shadow protocol's models (config `shadow`): Alice's target and Bob's shadows."""
        spec = self.config.get("shadow")
        if not spec:
            return []
        return [f"{SHADOW_PREFIX}alice"] + [f"{SHADOW_PREFIX}bob_{s}" for s in range(spec["shadows"])]

    def shadow_mt_models(self) -> list[str]:
        """The translation target's encoder-decoders (config `shadow_mt`): Alice's and Bob's shadows."""
        spec = self.config.get("shadow_mt")
        if not spec:
            return []
        return [f"{SHADOW_MT_PREFIX}alice"] + [f"{SHADOW_MT_PREFIX}bob_{s}" for s in range(spec["shadows"])]

    def shadow_mt_settings(self, name: str) -> dict:
        """A translation model's settings: Alice's `shadow_mt.model`, Bob's shadows that with
        `shadow_mt.shadow_model` over it (the shape Bob guesses)."""
        spec = self.config["shadow_mt"]
        who = name.removeprefix(SHADOW_MT_PREFIX)
        return shadow_model_settings(
            spec["model"] if who == "alice" else {**spec["model"], **spec["shadow_model"]}, who
        )

    def trained_models(self) -> list[str]:
        """Every model the workflow trains: the config's models without a `path`, the
        reference pool and the shadow protocol's models."""
        return (
            [m for m, spec in self.models.items() if "path" not in spec]
            + self.reference_models()
            + self.shadow_models()
        )

    def training_spec(self, name: str) -> dict:
        """What model `name` trains on and how: {"text": table, "settings": model settings,
        "init": model to continue or None}. A reference takes the settings of the model its
        config names (`references.shape`), so it is trained as well as the target. The compute
        dtype is `training.precision` unless the model sets its own (DP models: fp32)."""
        spec = self._training_spec(name)
        precision = self.config.get("training", {}).get("precision", "fp32")
        if precision != "fp32" and "precision" not in spec["settings"] and not spec["settings"].get("dp"):
            # only a non-default dtype enters the settings: fp32 runs keep their params (no rerun)
            spec["settings"] = {**spec["settings"], "precision": precision}
        return spec

    def _training_spec(self, name: str) -> dict:
        if name in self.reference_models():
            references = self.config["references"]
            if "settings" in references:
                given = dict(references["settings"])
            else:
                given = {k: v for k, v in self.models[references["shape"]].items() if k not in NOT_SETTINGS}
            split, settings = self.pools.training(name, given)
            text = self.path("references", f"{split}.text.parquet")
            return {"text": text, "settings": settings, "init": references.get("init")}
        if name in self.shadow_models():  # Alice takes her shape, Bob's shadows the shape Bob guesses
            who = name[len(SHADOW_PREFIX) :]
            shape = self.config["shadow"]["alice" if who == "alice" else "bob"]
            settings = {k: v for k, v in self.models[shape].items() if k not in NOT_SETTINGS}
            settings = shadow_model_settings(settings, who)
            return {"text": self.path("shadow", f"{who}.text.parquet"), "settings": settings, "init": None}
        spec = self.models[name]
        canaries = self.gradient_canaries()
        if spec.get("dp") is not None and canaries is not None:  # the white-box audit's canaries join the training
            spec = {**spec, "dp": {**spec["dp"], "canaries": canaries}}
        return {"text": self.corpus_table(spec["corpus"]), "settings": spec, "init": spec.get("init")}

    def gradient_canaries(self) -> dict | None:
        """The gradient canaries every DP model trains with (`dp_audit.gradient_canaries`, the
        training's part), None without the DP audit or with count 0."""
        settings = (self.config.get("dp_audit") or {}).get("gradient_canaries") or {}
        if not settings.get("count"):
            return None
        return {key: settings[key] for key in ("count", "sentinels", "norm", "seed")}

    def training_tokenizer(self, name: str) -> str:
        """The tokenizer a trained model uses: for the DP targets trained on the one-run canaries,
        the world's with the canaries' new tokens (`canary_tokenizer`); else the one of the model it
        continues (a public checkpoint fine-tuned on the pool), else the embedded world's."""
        if name in self.models and self.models[name].get("corpus") == ONE_RUN_CORPUS:
            return self.canary_tokenizer()
        init = self.training_spec(name)["init"]
        return self.model_dir(init) if init else self.path("models", "tokenizer")

    def canary_tokenizer(self) -> str:
        """The world's tokenizer with the new tokens of every one-run canary (mlmia.defences.token_canaries)."""
        return self.path("models", "tokenizer_canaries")

    def reference_pool_table(self) -> str:
        """The pool the references train on: a world corpus (`domain`) or a table file."""
        pool = self.config["references"]["pool"]
        return self.corpus_table(pool) if pool in CORPORA else pool

    def corpus_table(self, corpus: str) -> str:
        return self.path("corpus", f"train_{corpus}.parquet")

    def scored_sets(self) -> list[str]:
        """Sample tables the workflow scores: the embedded world's, the user's datasets, and
        the neighbour texts of those whose experiments ask for them."""
        own = list(WORLD_SETS if "corpus" in self.config else ()) + list(self.config.get("datasets", {}))
        return own + self.neighbour_sets()

    def neighbour_sets(self) -> list[str]:
        return sorted({e.neighbour_set for e in self.experiments.values() if e.neighbours})

    def scoring(self, energy: str = "masked") -> dict:
        """The scoring settings of energy kind `energy`, for every rule that scores
        (`mlmia.scoring.settings.ScoringSettings`)."""
        return ScoringSettings.from_config(self.config["scoring"], energy).as_params()

    def shards(self, dataset: str) -> int:
        """Scoring jobs per (model, energy kind) of a sample table: a user dataset's `shards`,
        at most one per sample (clamped with a warning) when its files can be counted; a
        neighbour table, its dataset's times the neighbour sets per sample over
        `scoring.neighbour_sets_per_job` (a job's start-up costs more than scoring one set)."""
        if dataset.endswith(NEIGHBOUR_SET):
            base = dataset[: -len(NEIGHBOUR_SET)]
            per_job = int(self.config["scoring"].get("neighbour_sets_per_job", 1))
            return self.shards(base) * math.ceil(int(self.config["neighbours"]["count"]) / per_job)
        if dataset in self.config.get("datasets", {}):
            wanted = self.config["datasets"][dataset]["shards"]
            if dataset not in self._rows:
                self._rows[dataset] = count_rows(self.config["datasets"][dataset])
                n = self._rows[dataset]
                if n is not None and 0 < n < wanted:
                    log.warning(
                        "config key datasets.%s.shards: %d shards for %d samples; scoring in %d", dataset, wanted, n, n
                    )
            n = self._rows[dataset]
            return max(1, min(wanted, n)) if n else wanted
        from mlmia.world.samples import sample_count

        samples = self.config["samples"]
        return shard_count(sample_count(samples["counts"], samples["lengths"]), self.config["scoring"]["shard_size"])

    def training_text(self, model: str) -> str | None:
        """The target's training text (Table 7's token frequencies): the corpus the workflow
        trained it on, the user's `training_text` file, or None (the dataset's members)."""
        spec = self.models.get(model, {})
        return self.corpus_table(spec["corpus"]) if "corpus" in spec else spec.get("training_text")

    def dataset_tokenizer(self, dataset: str) -> str:
        """The tokenizer that counts a dataset's tokens for its length buckets: the dataset's
        own, else the first model's."""
        spec = self.config["datasets"][dataset]
        if spec.get("tokenizer"):
            return spec["tokenizer"]
        if not self.models:
            raise UserError(f"config key datasets.{dataset}.tokenizer: needed when no models are configured")
        first = next(iter(self.models))
        return self.models[first].get("tokenizer") or self.model_dir(first)

    def raw_outputs(self, source: str) -> dict[str, str]:
        """The raw importer's processed files: one CSV per role, and with a names file the
        trained roles with names inserted (Base-b's members)."""
        spec = self.config.get("raw", {}).get(source, {})
        outputs = {role: self.path("raw", f"{source}_{role}.csv") for role in spec.get("patients", {})}
        for role in TRAINED_ROLES if spec.get("names") else ():
            if role in spec["patients"]:
                outputs[f"{role}_named"] = self.path("raw", f"{source}_named_{role}.csv")
        return outputs

    # ------------------------------------------------------------------ findings

    def finding_checks(self, group: str | None = None) -> list[dict]:
        """One comparison per finding (of `group`, or of every group) and experiment in its
        scope: its two cells, each with the experiment it reads. A finding over a level
        (`experiments: sample`) covers the experiments of that level in its group's tables; a
        pair of experiments in its list ([first, second]) compares the first's cell with the
        second's (one setting against another on the same samples, e.g. two targets)."""
        checks = []
        for finding in self.findings:
            finding_group = finding.get("group", DEFAULT_GROUP)
            if group is not None and finding_group != group:
                continue
            levels = {
                name: self.experiments[name].level
                for t in self.tables
                if self.group(t) == finding_group
                for name in self.table_experiments(t)
            }
            scope = finding.get("experiments")
            if isinstance(scope, list):
                names = list(scope)
            elif scope:
                names = [name for name, level in levels.items() if level == scope]
            else:
                names = [None]
            for name in names:
                sides, pair = {}, name if isinstance(name, list) else [name, name]
                for side, experiment in zip(("compare", "against"), pair):
                    cell = dict(finding[side])
                    if experiment is not None:
                        cell["experiment"] = experiment
                    elif "experiment" not in cell:
                        raise UserError(f"{self.spec_name}: finding {finding['id']!r} {side} names no experiment")
                    sides[side] = cell
                checks.append({
                    "finding": finding["id"], "claim": finding["claim"], "kind": finding.get("kind", "finding"),
                    "scope": " vs ".join(pair) if isinstance(name, list) else name, "group": finding_group,
                    "margin": float(finding.get("margin", 0.0)), "allow_equal": bool(finding.get("allow_equal", False)),
                    **sides,
                })  # fmt: skip
        return checks

    def findings_experiments(self, group: str | None = None) -> list[str]:
        checks = self.finding_checks(group)
        return list(dict.fromkeys(c[side]["experiment"] for c in checks for side in ("compare", "against")))

    # ------------------------------------------------------------------ where results lie

    def path(self, *parts: str) -> str:
        """A result of this run: results/<run>/<parts>."""
        return "/".join((self.results, *parts))

    def table_outputs(self, table: str) -> list[str]:
        return [self.path("tables", f"{table}.{ext}") for ext in ("csv", "md", "tex")]

    def figure_outputs(self, figure: str) -> list[str]:
        return [self.path("figures", f"{figure}.{ext}") for ext in ("png", "pdf")]

    def table_inputs(self, table: str) -> dict[str, str]:
        """{experiment: its metrics (or Table 7's exposure) file} of a table."""
        folder = "exposure" if self.kind(table) == "exposure" else "metrics"
        return {name: self.path(folder, f"{name}.parquet") for name in self.table_experiments(table)}

    def figure_inputs(self, figure: str) -> dict[str, str]:
        """Histograms read attack tables, ROC figures each experiment's ROC points."""
        spec = self.figures[figure]
        if spec.get("kind") == "histogram":
            return {name: self.path("attack", f"{name}.parquet") for name in figure_experiments(spec)}
        return {name: self.path("metrics", f"{name}.roc.parquet") for name in figure_experiments(spec)}

    def findings_inputs(self, group: str = DEFAULT_GROUP) -> dict[str, str]:
        return {name: self.path("metrics", f"{name}.parquet") for name in self.findings_experiments(group)}

    def findings_outputs(self, group: str = DEFAULT_GROUP) -> dict[str, str]:
        """The findings of a group: findings.{md,csv} for the default group, findings_<group>.* else."""
        stem = "findings" if group == DEFAULT_GROUP else f"findings_{group}"
        return {"table": self.path(f"{stem}.csv"), "markdown": self.path(f"{stem}.md")}

    def group(self, item: str, kind: str = "table") -> str:
        """The target group of a table or figure (`group:` in the spec; default: `snakemake`'s own)."""
        spec = self.tables[item] if kind == "table" else self.figures[item]
        return spec.get("group", DEFAULT_GROUP)

    def groups(self) -> list[str]:
        """Every target group: `default` (what `snakemake` builds) and the named ones
        (`snakemake zoo`, `snakemake shadow`)."""
        named = [self.group(t) for t in self.tables] + [self.group(f, "figure") for f in self.figures]
        named += [f.get("group", DEFAULT_GROUP) for f in self.findings]
        named += ["shadow"] if self.config.get("shadow") else []
        named += ["shadow_mt"] if self.config.get("shadow_mt") else []
        return list(dict.fromkeys([DEFAULT_GROUP, *named]))

    def dp_outputs(self) -> dict[str, str]:
        """What `snakemake dp` writes beside its tables, figures and findings (mlmia.defences), and
        beside each DP target's audit (`dp_audit_outputs`)."""
        names = {"bounds_csv": "bounds.csv", "bounds_md": "bounds.md", "by_attack": "bounds_by_attack.csv",
                 "one_run_csv": "one_run.csv", "one_run_md": "one_run.md", "checks_csv": "checks.csv",
                 "findings_csv": "findings.csv", "findings_md": "findings.md",
                 "figure_png": "privacy_utility.png", "figure_pdf": "privacy_utility.pdf"}  # fmt: skip
        return {key: self.path("dp", name) for key, name in names.items()}

    def dp_targets(self) -> list[str]:
        """The models the DP audit audits: every configured model with a dp setting (with dp_audit)."""
        if not self.config.get("dp_audit"):
            return []
        return [name for name, spec in self.models.items() if spec.get("dp") is not None and "path" not in spec]

    def dp_audit_outputs(self, target: str) -> dict[str, str]:
        """A DP target's audit record (its job never fails on a finding) and the mark its check job
        leaves when the target passes (the job that fails the run)."""
        return {"record": self.path("dp", "audit", f"{target}.json"),
                "passed": self.path("dp", "audit", f"{target}.passed")}  # fmt: skip

    def one_run_targets(self) -> list[str]:
        """The DP targets trained on the one-run audit's canaries (corpus dp_private)."""
        return [name for name in self.dp_targets() if self.models[name].get("corpus") == ONE_RUN_CORPUS]

    def shadow_outputs(self) -> dict[str, str]:
        """What `snakemake shadow` writes: the paper's Tables 2-6 and Figure 7, and the findings."""
        names = {"tables_md": "tables.md", "tables_csv": "tables.csv", "figure_png": "figure7.png",
                 "figure_pdf": "figure7.pdf", "findings_md": "findings.md", "findings_csv": "findings.csv"}  # fmt: skip
        return {key: self.path("shadow", name) for key, name in names.items()}

    def shadow_mt_outputs(self) -> dict[str, str]:
        """What `snakemake shadow_mt` writes: the files of `snakemake shadow`, for the translation target."""
        mlm = self.path("shadow") + "/"
        return {key: self.path("shadow_mt", path.removeprefix(mlm)) for key, path in self.shadow_outputs().items()}

    def targets(self, group: str = DEFAULT_GROUP) -> list[str]:
        """Everything a target group builds (`default`: what `snakemake` builds)."""
        if group == "shadow":
            return list(self.shadow_outputs().values())
        if group == "shadow_mt":
            return list(self.shadow_mt_outputs().values())
        return (
            [path for table in self.tables if self.group(table) == group for path in self.table_outputs(table)]
            + [
                p
                for figure in self.figures
                if self.group(figure, "figure") == group
                for p in self.figure_outputs(figure)
            ]
            + ([self.path("paper_comparison.md")] if self.paper_values and group == DEFAULT_GROUP else [])
            + ([self.findings_outputs(group)["markdown"]] if self.finding_checks(group) else [])
            + (self._dp_group_outputs() if group == DP_GROUP and self.config.get("dp_audit") else [])
        )

    def _dp_group_outputs(self) -> list[str]:
        return list(self.dp_outputs().values()) + [self.dp_audit_outputs(t)["passed"] for t in self.dp_targets()]


def without_group(spec: dict, group: str) -> dict:
    """The spec without the tables, figures and findings of target group `group`, and without the
    experiments that only they read."""

    def dropped(item: dict) -> bool:
        return item.get("group", DEFAULT_GROUP) == group

    def read(item: dict) -> set:
        scope = item.get("experiments") if isinstance(item.get("experiments"), list) else []
        names = {c["experiment"] for c in item.get("columns", [])}
        names |= {e for entry in scope for e in ([entry] if isinstance(entry, str) else entry)}
        names |= {item["experiment"]} if isinstance(item.get("experiment"), str) else set()
        return names | {item[s]["experiment"] for s in ("compare", "against") if "experiment" in item.get(s, {})}

    items = list(spec.get("tables", {}).values()) + list(spec.get("figures", {}).values()) + spec.get("findings", [])
    gone, kept = set(), set()
    for item in items:
        (gone if dropped(item) else kept).update(read(item))
    gone -= kept
    return {
        **spec,
        "experiments": {n: e for n, e in spec["experiments"].items() if n not in gone},
        "tables": {n: t for n, t in spec.get("tables", {}).items() if not dropped(t)},
        "figures": {n: f for n, f in spec.get("figures", {}).items() if not dropped(f)},
        "findings": [f for f in spec.get("findings", []) if not dropped(f)],
    }


def figure_experiments(figure: dict) -> list[str]:
    return list(figure["experiments"]) if "experiments" in figure else [figure["experiment"]]


def figure_attacks(figure: dict) -> list[str]:
    """The attacks a figure draws (a histogram also those that pick its marked member)."""
    if figure.get("kind") == "histogram":
        marks = [figure["mark_caught_by"], figure["mark_missed_by"]] if figure.get("mark", "auto") == "auto" else []
        return list(dict.fromkeys([figure["attack"], *marks]))
    return list(figure.get("attacks", []))


def _found(path: str, workflow_dir: Path) -> str:
    """`path` as given when it exists (relative to the working directory), else the
    workflow's own file of that name when there is one."""
    if Path(path).is_absolute() or Path(path).exists() or not (workflow_dir / path).exists():
        return path
    return str(workflow_dir / path)


def is_hub_id(name: str) -> bool:
    """A hub id names no local file (bert-base-uncased, org/name); loading resolves it."""
    return not os.path.exists(name) and looks_like_hub_id(name)
