"""The tables spec's checks, and the config's that need the study: every name they use exists,
every file they name is there, every cell is one the metrics compute, every trained model's
settings are ones its trainer takes; one line per error, at start, not after hours. (The config's
own checks: `mlmia.study.checks`.)"""

from __future__ import annotations

from pathlib import Path

from mlmia.attacks.base import get_attack
from mlmia.core.errors import UserError
from mlmia.data.datasets import dataset_paths
from mlmia.data.importing import files_from_config
from mlmia.models.hub import looks_like_hub_id
from mlmia.models.vocabulary_files import check_checkpoint_files
from mlmia.study.checks.training import check_training
from mlmia.study.plans.tokens import check_extraction_token_kinds
from mlmia.terms.layout import CORPORA
from mlmia.terms.spec import (
    COUNT_METRICS,
    DP_GROUP,
    METRICS,
    THRESHOLD_METRICS,
    Cell,
    figure_attacks,
    figure_experiments,
)


class Validation:
    """`Study._check`: the checks of a study's config and tables spec (a part of `Study`)."""

    def _check(self) -> None:
        """Every name the tables, figures and findings use exists; one line each."""
        where = self.spec_name
        check_training(self)
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
        check_extraction_token_kinds(self)
        # the plans the rules build when they are included (mlmia.study.plans): their refusals, here
        self.plans()
        self.plan(DP_GROUP)

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
            text = spec.get("training_text")
            if text is not None and not Path(text).is_file():
                raise UserError(f"config key models.{name}.training_text: file not found: {text}")
        tokenizers = {f"models.{name}.tokenizer": spec.get("tokenizer") for name, spec in self.models.items()}
        tokenizers |= {
            f"datasets.{name}.tokenizer": spec.get("tokenizer")
            for name, spec in self.config.get("datasets", {}).items()
        }
        for key, tokenizer in tokenizers.items():
            if tokenizer is not None and not Path(tokenizer).expanduser().exists() and not looks_like_hub_id(tokenizer):
                raise UserError(f"config key {key}: no such file or directory: {tokenizer}")
        self._check_vocabularies()
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

    def _check_vocabularies(self) -> None:
        """Each checkpoint given by path against the tokenizer it is scored with, and each dataset
        tokenizer that is a checkpoint's (a hub id: `bert-base-uncased`) against that checkpoint,
        from their files (local, or the local hub cache): a tokenizer that is not the checkpoint's
        own would count every length and score every sample wrong (`mlmia.models.vocabulary_files`)."""
        for name, spec in self.models.items():
            if spec.get("path") is not None:
                key = f"models.{name}.tokenizer" if spec.get("tokenizer") else f"models.{name}.path"
                check_checkpoint_files(key, spec["path"], spec.get("tokenizer") or spec["path"])
        for name, spec in self.config.get("datasets", {}).items():
            if spec.get("tokenizer"):
                check_checkpoint_files(f"datasets.{name}.tokenizer", spec["tokenizer"], spec["tokenizer"])

    def _check_pools(self) -> None:
        """Experiments that read the reference pool or neighbour texts have them configured."""
        needs_pool = sorted(e.name for e in self.experiments.values() if e.references)
        references = self.config.get("references")
        if needs_pool and not references:
            raise UserError(
                f"config key references: missing, and experiment {needs_pool[0]!r} reads the reference pool"
            )
        if references and not needs_pool:
            raise UserError(
                f"config key references: no experiment of {self.spec_name} reads the reference pool (references: "
                "pool), so none would be trained; leave it out"
            )
        if references:
            if ("shape" in references) == ("settings" in references):
                raise UserError("config key references: give either shape (a configured model) or settings")
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
        if phi and not Path(phi).is_file():  # the extraction study's names: mlmia.study.checks.names
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
