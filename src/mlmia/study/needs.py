"""What each experiment's jobs need: its attacks, score tables, rows, roles and metric settings
(a part of `Study`)."""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property

from mlmia.attacks.base import get_attack
from mlmia.core.errors import UserError
from mlmia.terms.spec import THRESHOLD_METRICS, Cell, figure_attacks, figure_experiments


class ExperimentNeeds:
    """Which attacks, cells, score tables and sample rows every experiment needs."""

    def attack_params(self, name: str) -> dict:
        """An attack's parameters from the config (``attacks.<name>``), over its defaults."""
        return get_attack(name, self.config["attacks"].get(name)).params

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
                cells, alpha = out.setdefault(column["experiment"], []), float(column["alpha"])
                cells.append((cell, alpha))
                if cell.versus:  # the attack a cell is compared with is computed too
                    cells.append((replace(cell, attack=cell.versus, versus=None), alpha))
        for check in self.finding_checks():
            for side in ("compare", "against"):
                out.setdefault(check[side]["experiment"], []).append(
                    (Cell.pinned(check[side]), float(check[side]["alpha"]))
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
        """Table 7's settings for experiment `name` (one of `exposure_experiments`): the attack that
        labels members exposed and its alpha (one per experiment; the tables spec's defaults
        filled in), plus the config's `exposure` section but its device (the rule's resource:
        `Study.exposure_device`)."""
        asked = {
            (self.tables[t]["attack"], float(c["alpha"]))
            for t in self.tables if self.kind(t) == "exposure"
            for c in self.tables[t]["columns"] if c["experiment"] == name
        }  # fmt: skip
        if not asked:
            raise KeyError(f"experiment {name!r} is in no exposure table")
        if len(asked) > 1:
            raise UserError(
                f"{self.spec_name}: exposure tables ask experiment {name!r} for several (attack, alpha): {sorted(asked)}"
            )
        attack, alpha = asked.pop()
        settings = {key: value for key, value in self.config["exposure"].items() if key != "device"}
        return {"attack": attack, "alpha": alpha, **settings}

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
            for role, wanted in get_attack(attack, self.config["attacks"].get(attack)).inputs.items():
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
        stable order (`mlmia.terms.manifest.rows_read` takes their union). A DP target read on
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
