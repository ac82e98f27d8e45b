"""The reference models the workflow trains for LiRA and RMIA (config `references`), by training
objective.

The pool is M reference models trained on random halves of disjoint patients (and, online, of the
audited ones: `mlmia.data.splits`), each as the model `references.shape` names (or with
`references.settings`): ``pool_ref_0`` .. ``pool_ref_<M-1>``. A target trained with another
objective (a masked-diffusion model, `mlmia.models.objectives.mdlm`) is calibrated by references
trained as it was: the same M splits trained with its objective, ``pool_ref_<objective>_<i>``
(reference i of such a pool reads the split of ``pool_ref_<i>``). Otherwise a loss of power on
that target would only say that its references do not match it. An experiment reads the pool of
its target's objective; a target the workflow does not train (a `path`) reads the pool itself.
"""

from __future__ import annotations

from mlmia.terms.experiment import Experiment
from mlmia.terms.schema import defaults

#: the objective of a model whose settings name none (the config schema's default): the pool's
#: own without references (a resolved model entry always names one)
DEFAULT_OBJECTIVE = defaults("models", "*")["objective"]

#: the reference models the workflow trains: pool_ref_0, pool_ref_1, ...
REFERENCE_PREFIX = "pool_ref_"


def model_objective(models: dict, name: str) -> str | None:
    """The training objective of a model the workflow trains from a `models:` entry (None for one
    it does not: a `path`, a reference, a shadow model)."""
    spec = models.get(name)
    return None if spec is None or "path" in spec else spec.get("objective", DEFAULT_OBJECTIVE)


class ReferencePools:
    """{training objective: reference models} of a config's `references` and experiments."""

    def __init__(self, references: dict | None, models: dict, experiments: dict[str, Experiment]) -> None:
        self.models = models
        self.pools: dict[str, list[str]] = {}
        #: {reference of another objective's pool: the pool's own reference whose split it trains on}
        self.aliases: dict[str, str] = {}
        self.own = DEFAULT_OBJECTIVE
        if not references:
            return
        settings = references["settings"] if "settings" in references else models.get(references["shape"], {})
        self.own = settings.get("objective", DEFAULT_OBJECTIVE)
        self.pools[self.own] = [f"{REFERENCE_PREFIX}{i}" for i in range(references["count"])]
        for experiment in experiments.values():
            objective = model_objective(models, experiment.target) or self.own
            if experiment.references and objective not in self.pools:
                count = references["count"]
                self.pools[objective] = [f"{REFERENCE_PREFIX}{objective}_{i}" for i in range(count)]
        self.aliases = {
            name: self.pools[self.own][i]
            for objective, names in self.pools.items()
            if objective != self.own
            for i, name in enumerate(names)
        }

    def own_pool(self) -> list[str]:
        """The pool trained as `references` says (the splits are its references')."""
        return self.pools[self.own] if self.pools else []

    def all(self) -> list[str]:
        return [name for names in self.pools.values() for name in names]

    def of(self, experiment: Experiment) -> list[str]:
        """The references an experiment reads: the pool of its target's objective."""
        return self.pools.get(model_objective(self.models, experiment.target) or self.own, [])

    def training(self, name: str, settings: dict) -> tuple[str, dict]:
        """(the reference whose split `name` trains on, its training settings from the pool's
        `settings`): the pool's own keep them as given; another objective's name it."""
        objective = next(o for o, names in self.pools.items() if name in names)
        if objective == self.own:
            return name, settings
        return self.aliases[name], {**settings, "objective": objective}
