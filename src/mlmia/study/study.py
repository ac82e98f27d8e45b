"""The study a config describes: its experiments, tables, figures and findings, what each needs.

`Study.from_config(config, workflow_dir)` validates a config (defaults filled in,
`mlmia.terms.schema.validate`) and a tables spec (experiments, row sets, tables, figures,
findings: `config/tables.yaml`, or generated from an `audit:` section). It knows which
experiments each table, figure and finding reads, which attacks, thresholds, alphas and FPRs
each experiment's metrics must hold, and where every result of the run lies
(``results/<run>/``). The workflow only turns these answers into paths and rules.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.data.datasets import count_rows, declared_sources
from mlmia.models.hub import looks_like_hub_id
from mlmia.scoring.settings import ScoringSettings
from mlmia.scoring.shards import shard_count
from mlmia.study.audit import audit_spec
from mlmia.study.checks import check_config
from mlmia.study.checks.models import tokenizer_is_public
from mlmia.study.needs import ExperimentNeeds
from mlmia.study.optional import without_optional
from mlmia.study.plans import Plans, Resources
from mlmia.study.plans.base import resources
from mlmia.study.plans.dp import audit_replicas, gradient_canaries
from mlmia.study.pools import ReferencePools
from mlmia.study.resolve import resolve_config
from mlmia.study.validation import Validation
from mlmia.terms.experiment import NEIGHBOUR_SET, Experiment
from mlmia.terms.layout import (
    CANARY_TOKENIZER,
    CORPORA,
    ONE_RUN_CORPUS,
    RESULTS,
    TOKENIZER,
    WORLD_SETS,
    corpus_table,
    figure_files,
    findings_files,
    model_dir,
    table_files,
)
from mlmia.terms.manifest import NEIGHBOUR_ROLES, TRAINED_ROLES
from mlmia.terms.schema import load_yaml, schema_path, validate
from mlmia.terms.spec import DEFAULT_GROUP, DP_GROUP, Cell, figure_experiments, without_group

#: model keys that are not training settings (where the model comes from)
NOT_SETTINGS = ("corpus", "init", "path", "tokenizer", "training_text", "public_tokenizer")
#: the config keys of neighbours that draw the neighbour texts
NEIGHBOUR_KEYS = ("count", "candidates", "dropout", "seed", "subsample")
log = get_logger(__name__)


class Study(Validation, ExperimentNeeds, Plans):
    """Experiments, tables, figures and findings of one run, and what each needs: the config's
    checks (`Validation`), each experiment's needs (`ExperimentNeeds`) and each study's plan
    (`Plans`) are its parts."""

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
        check_config(config)
        resolve_config(config)  # the defaults that come from other sections: before anything reads the config
        for key in ("tables_spec", "paper_values"):
            if config.get(key):
                config[key] = _found(config[key], workflow_dir)
        if "audit" in config:
            spec = audit_spec(config)
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
        return self.tables[table]["kind"]

    # ------------------------------------------------------------------ models and sample sets

    @property
    def models(self) -> dict[str, dict]:
        return self.config.get("models", {})

    def model_dir(self, name: str) -> str:
        """A model's directory (or hub id): the user's `path`, or where the workflow trains it."""
        if name in self.reference_models() or name in self.study_models:
            return self.path(model_dir(name))
        if name not in self.models:
            raise UserError(f"config key models: {name!r} is not a configured model (models: {', '.join(self.models)})")
        return self.models[name].get("path", self.path(model_dir(name)))

    def model_input(self, name: str) -> str | list:
        """A model's directory as a rule's input; none ([]) for a hub id, nothing on disk to wait for."""
        return self.local_input(self.model_dir(name))

    @staticmethod
    def local_input(path: str) -> str | list:
        """A file or directory as a rule's input; none ([]) where it names a hub id."""
        return [] if is_hub_id(path) else path

    def model_settings(self, name: str) -> dict:
        """A configured model's training settings: its entry without where it comes from, for a
        model that copies them (a reference, a shadow model). The DP audit's gradient canaries
        are the audited model's own: a copy trains without them."""
        settings = {k: v for k, v in self.models[name].items() if k not in NOT_SETTINGS}
        if settings.get("dp") is not None and gradient_canaries(self.config) is not None:
            settings["dp"] = {**settings["dp"], "canaries": None}
        return settings

    def model_tokenizer(self, name: str) -> str | None:
        """The tokenizer a configured model names (`models.<name>.tokenizer`), None: its own."""
        return self.models.get(name, {}).get("tokenizer")

    def public_tokenizer(self, name: str) -> bool:
        """Whether a configured model's tokenizer is a public one, learnt on nothing of the owner's
        notes (`mlmia.study.checks.models.tokenizer_is_public`): its vocabulary check counts nothing."""
        return tokenizer_is_public(self.models, name)

    def reference_pool(self) -> list[str]:
        """The reference models the workflow trains for LiRA and RMIA (config `references`), their
        splits; a target of another training objective reads the same splits trained with it
        (`reference_models`, `mlmia.study.pools`)."""
        return self.pools.own_pool()

    def reference_models(self) -> list[str]:
        """Every reference model the workflow trains for LiRA and RMIA, of every objective's pool."""
        return self.pools.all()

    def trained_models(self) -> list[str]:
        """Every model the workflow trains: the config's models without a `path`, the
        reference pool and the MLMs the configured studies train (`study_models`: the shadow
        protocol's, the DP targets' audit replicas)."""
        return (
            [m for m, spec in self.models.items() if "path" not in spec]
            + self.reference_models()
            + list(self.study_models)
        )

    def training_spec(self, name: str) -> dict:
        """What model `name` trains on and how: {"text": table, "settings": model settings,
        "init": model to continue or None}. A reference takes the settings of the model its
        config names (`references.shape`), so it is trained as well as the target. The settings
        are complete: the validated config's, resolved (`mlmia.study.resolve`: the compute dtype
        `training.precision` unless the model sets its own, DP models fp32; a DP model's gradient
        canaries the DP audit's)."""
        return self._training_spec(name)

    def _training_spec(self, name: str) -> dict:
        if name in self.reference_models():
            references = self.config["references"]
            if "settings" in references:
                given = dict(references["settings"])
            else:
                given = self.model_settings(references["shape"])
            split, settings = self.pools.training(name, given)
            text = self.path("references", f"{split}.text.parquet")
            return {"text": text, "settings": settings, "init": references.get("init")}
        if name in self.study_models:  # a study's own MLM (its plan module says how it trains)
            return self.study_models[name].training(self, name)
        # public_tokenizer says what the vocabulary check reads, nothing the trainer takes (nor a change to retrain for)
        spec = {key: value for key, value in self.models[name].items() if key != "public_tokenizer"}
        return {"text": self.corpus_table(spec["corpus"]), "settings": spec, "init": spec.get("init")}

    def training_tokenizer(self, name: str) -> str:
        """The tokenizer a trained model uses: for the DP targets trained on the one-run canaries,
        the world's with the canaries' new tokens (`mlmia.defences.token_canaries.canary_tokenizer`); else the one of the model it
        continues (a public checkpoint fine-tuned on the pool), else the embedded world's."""
        replica = audit_replicas(self).get(name)
        if replica is not None:  # an audit replica trains as its target does
            return self.training_tokenizer(replica[0])
        if name in self.models and self.models[name].get("corpus") == ONE_RUN_CORPUS:
            return self.path(CANARY_TOKENIZER)
        init = self.training_spec(name)["init"]
        return self.model_dir(init) if init else self.path(TOKENIZER)

    def reference_pool_table(self) -> str:
        """The pool the references train on: a world corpus (`domain`) or a table file."""
        pool = self.config["references"]["pool"]
        return self.corpus_table(pool) if pool in CORPORA else pool

    def corpus_table(self, corpus: str) -> str:
        return self.path(corpus_table(corpus))

    def scored_sets(self) -> list[str]:
        """Sample tables the workflow scores: the embedded world's, the user's datasets, and
        the neighbour texts of those whose experiments ask for them."""
        own = list(WORLD_SETS if "corpus" in self.config else ()) + list(self.config.get("datasets", {}))
        return own + self.neighbour_sets()

    def neighbour_settings(self) -> dict:
        """How the neighbour texts are drawn (mlmia.scoring.neighbours; config key neighbours
        without its model, which the rule reads as an input)."""
        return {key: self.config["neighbours"][key] for key in NEIGHBOUR_KEYS}

    def neighbour_draw(self) -> dict:
        """Which audited samples have neighbour texts, for the attack tables: `neighbours.subsample`
        and the seed it is drawn with (`mlmia.terms.manifest.neighbour_subsample`)."""
        return {key: self.config["neighbours"][key] for key in ("subsample", "seed")}

    def neighbour_sets(self) -> list[str]:
        return sorted({e.neighbour_set for e in self.experiments.values() if e.neighbours})

    def scoring(self, energy: str = "masked") -> dict:
        """The scoring settings of energy kind `energy`, for the params of every rule that scores
        (`mlmia.scoring.settings.ScoringSettings.as_params`): what a score depends on, without the
        device and the batch size, which are the rules' resources (`resources("scoring")`)."""
        return ScoringSettings.from_config(self.config["scoring"], energy).as_params()

    def shards(self, dataset: str) -> int:
        """Scoring jobs per (model, energy kind) of a sample table: a user dataset's `shards`,
        at most one per sample (clamped with a warning) when its files can be counted; a
        neighbour table, its dataset's times the neighbour sets per sample over
        `scoring.neighbour_sets_per_job` (a job's start-up costs more than scoring one set)."""
        if dataset.endswith(NEIGHBOUR_SET):
            base = dataset[: -len(NEIGHBOUR_SET)]
            per_job = int(self.config["scoring"]["neighbour_sets_per_job"])
            return self._subsample_shards(base) * math.ceil(int(self.config["neighbours"]["count"]) / per_job)
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

    def _subsample_shards(self, dataset: str) -> int:
        """A neighbour table's shards per neighbour set: its dataset's, or with
        `neighbours.subsample` on the embedded world, those of the samples it draws (the audited
        roles' counts, the subsample's where it names one)."""
        subsample = self.config["neighbours"]["subsample"]
        if not subsample or dataset not in WORLD_SETS or "corpus" not in self.config:
            return self.shards(dataset)
        from mlmia.world.samples import sample_count

        samples = self.config["samples"]
        counts = {
            role: {source: subsample.get(role, {}).get(source, n) for source, n in samples["counts"][role].items()}
            for role in NEIGHBOUR_ROLES
        }
        return shard_count(sample_count(counts, samples["lengths"]), self.config["scoring"]["shard_size"])

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

    # ------------------------------------------------------------------ what the workflow's own rules pass

    def resources(self, kind: str) -> Resources:
        """What the `training` or `scoring` jobs ask for: threads, memory, device, GPUs per job (and
        the scoring jobs' batch size), each a rule's resource (changing one reruns nothing)."""
        return resources(self.config, kind)

    def exposure_device(self) -> str:
        """Where Table 7's embedding model runs (`exposure.device`): the exposure rule's resource,
        not a setting of its params (changing it reruns nothing)."""
        return self.config["exposure"]["device"]

    @property
    def figure_style(self) -> dict:
        """How every figure is drawn (config `figure_style`)."""
        return self.config["figure_style"]

    @property
    def world(self) -> str:
        """The run's world in the config's words (`world`), for the report's text."""
        return self.config["world"]

    @property
    def datasets(self) -> dict[str, dict]:
        """The sample sets read from the user's files (config `datasets`)."""
        return self.config.get("datasets", {})

    @property
    def imported(self) -> dict[str, dict]:
        """The published scores imported (config `imported.datasets`)."""
        return self.config.get("imported", {}).get("datasets", {})

    def imported_root(self) -> str:
        """Where the imported score files lie (config `imported.root`)."""
        return self.config["imported"]["root"]

    @property
    def raw(self) -> dict:
        """The raw MIMIC-III and i2b2 files imported first (config `raw`)."""
        return self.config.get("raw", {})

    def embedding_model(self) -> str:
        """The model whose [CLS] embedding Table 7's exposure features read (`exposure.embedding_model`)."""
        return self.config["exposure"]["embedding_model"]

    def neighbour_model(self) -> str:
        """The model that writes the neighbour texts (`neighbours.model`)."""
        return self.config["neighbours"]["model"]

    def reference_split_settings(self) -> dict:
        """How the reference pool's splits are drawn: the sample table whose patients they split
        (`references.dataset`), the seed, and whether the audited patients join them (`online`)."""
        references = self.config["references"]
        return {"dataset": references["dataset"], "seed": references["seed"], "online": references["online"]}

    def attack_settings(self) -> dict:
        """What every attack table's job passes to the attacks: the metrics' seed and the config's
        attack parameters (`attacks`)."""
        return {"seed": self.metrics["seed"], "attacks": self.config["attacks"]}

    def protocols(self) -> list[str]:
        """The metrics' protocols every table shows (`metrics.protocols`)."""
        return self.metrics["protocols"]

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
                    "finding": finding["id"], "claim": finding["claim"], "kind": finding["kind"],
                    "scope": " vs ".join(pair) if isinstance(name, list) else name, "group": finding_group,
                    "margin": float(finding["margin"]), "allow_equal": bool(finding["allow_equal"]),
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
        return [self.path(file) for file in table_files(table)]

    def figure_outputs(self, figure: str) -> list[str]:
        return [self.path(file) for file in figure_files(figure)]

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
        return {key: self.path(file) for key, file in findings_files(group).items()}

    def group(self, item: str, kind: str = "table") -> str:
        """The target group of a table or figure (`group:` in the spec; default: `snakemake`'s own)."""
        spec = self.tables[item] if kind == "table" else self.figures[item]
        return spec.get("group", DEFAULT_GROUP)


def _found(path: str, workflow_dir: Path) -> str:
    """`path` as given when it exists (relative to the working directory), else the
    workflow's own file of that name when there is one."""
    if Path(path).is_absolute() or Path(path).exists() or not (workflow_dir / path).exists():
        return path
    return str(workflow_dir / path)


def is_hub_id(name: str) -> bool:
    """A hub id names no local file (bert-base-uncased, org/name); loading resolves it."""
    return not os.path.exists(name) and looks_like_hub_id(name)
