"""Training objectives of the masked language models: which tokens a training step masks and
how their losses make the step's loss (`base`: the interface and the registry; one module per
objective, named as the objective: `bert_mlm`, `mdlm`)."""

from mlmia.models.objectives.base import (
    MaskedBatch,
    Objective,
    check_dp_objective,
    make_objective,
    objective_class,
    objective_names,
)

__all__ = [
    "MaskedBatch",
    "Objective",
    "check_dp_objective",
    "make_objective",
    "objective_class",
    "objective_names",
]
