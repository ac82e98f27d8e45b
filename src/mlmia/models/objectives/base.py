"""The interface of a training objective, and the registry that finds one by name.

An objective decides which tokens of a batch a training step trains on, what the model reads
there, and how the cross-entropies at those positions make the loss (`Objective`). Both steps
of the one training loop (`mlmia.models.training.train_mlm`) take one and branch on none: the
plain step evaluates the LM head on the trained positions of the whole batch, flattened, and asks
for the batch's loss (`Objective.loss`); DP-SGD's step (`mlmia.defences.dp_sgd`) keeps the rows as
the batch dimension and asks for each row's loss (`Objective.row_loss`), which must depend on that row
alone (each row's gradient is clipped on its own).

A model config names its objective (`objective`, default ``bert_mlm``). An objective is one
module of this package, named as the objective, holding one `Objective` subclass; a new one
(e.g. a masked-diffusion objective: a masking ratio t per sequence, the loss weighted by 1 / t)
is a new module with its name in the config schema's `objective` enum, and the loops stay as
they are: per-position or per-sequence weights travel in `MaskedBatch.weights` (`mdlm`). An
objective DP-SGD has not been checked with says so (`supports_dp`), and a DP model that names it
is refused where its training starts (`check_dp_objective`).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from mlmia.core.errors import UserError

if TYPE_CHECKING:
    import torch

#: modules of this package that hold no objective
#: the registry imports this package's modules by name (read by mlmia.core.provenance)
LOADS_BY_NAME = "mlmia.models.objectives"
_NOT_OBJECTIVES = ("base",)


@dataclass(frozen=True)
class MaskedBatch:
    """A training batch as an objective prepared it, each tensor (rows, width): `input_ids`, what
    the model reads; `labels`, the true token at each position the loss is taken at, -100
    elsewhere; `weights`, each such position's loss weight (float), or None when the
    objective's loss needs none."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    weights: torch.Tensor | None = None

    def to(self, device) -> MaskedBatch:
        weights = None if self.weights is None else self.weights.to(device)
        return MaskedBatch(self.input_ids.to(device), self.labels.to(device), weights)

    def rows(self, index, width: int) -> MaskedBatch:
        """The rows `index`, cut to their first `width` positions (past a row's end: padding)."""
        weights = None if self.weights is None else self.weights[index, :width]
        return MaskedBatch(self.input_ids[index, :width], self.labels[index, :width], weights)


class Objective:
    """A training objective. Subclasses set `name` (the module's name) and implement the three
    methods; `from_settings` builds one from a model's settings and its tokenizer; `supports_dp`
    says whether DP-SGD may train with it."""

    name: ClassVar[str] = ""
    supports_dp: ClassVar[bool] = True

    @classmethod
    def from_settings(cls, settings: dict, tokenizer) -> Objective:
        raise NotImplementedError

    def mask(self, input_ids: torch.Tensor, special_mask: torch.Tensor, generator: torch.Generator) -> MaskedBatch:
        """The batch to train on from the token ids (rows, width; `special_mask` True at [CLS],
        [SEP], [PAD], which are never trained on), drawing its randomness from `generator`."""
        raise NotImplementedError

    def loss(self, logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None, rows: int):
        """The batch's loss from its trained positions, in row-major order: `logits` (n, vocab,
        float32), `labels` (n,), their `weights` (n,) or None; `rows`: the batch's rows."""
        raise NotImplementedError

    def row_loss(self, logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None):
        """Each row's loss (rows,): `logits` (rows, width, vocab, float32) and `labels` (rows,
        width) hold each row's trained positions first, the rest padded with label -100;
        `weights` (rows, width) or None, gathered the same way; the padding must count for nothing."""
        raise NotImplementedError


def objective_names() -> list[str]:
    """The objectives this package holds (its modules, `base` aside)."""
    package = importlib.import_module("mlmia.models.objectives")
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name not in _NOT_OBJECTIVES)


def objective_class(name: str) -> type[Objective]:
    """The `Objective` subclass of module `name` of this package."""
    if name not in objective_names():
        raise UserError(f"model config: objective must be one of {', '.join(objective_names())}, got {name!r}")
    module = importlib.import_module(f"mlmia.models.objectives.{name}")
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Objective) and value.__module__ == module.__name__
    ]
    if len(found) != 1 or found[0].name != name:
        raise UserError(f"mlmia.models.objectives.{name}: needs exactly one Objective subclass named {name!r}")
    return found[0]


def make_objective(settings: dict, tokenizer) -> Objective:
    """The objective a model's settings name (`objective`), built for its tokenizer."""
    return objective_class(settings["objective"]).from_settings(settings, tokenizer)


def check_dp_objective(objective: Objective | type[Objective] | str) -> None:
    """Refuse, in one line, DP-SGD with an objective (an instance, a class or a module's name) it
    has not been checked with."""
    found = objective_class(objective) if isinstance(objective, str) else objective
    if not found.supports_dp:
        raise UserError(f"model config: dp is not offered with objective {found.name} yet (use objective bert_mlm)")
