"""Training BERT masked language models from scratch (the tokenizer: `mlmia.models.tokenizer`).

- `train_mlm`: the one training loop of the masked language models. A BertForMaskedLM trained
  with the objective its config names (`mlmia.models.objectives`; by default BERT's: 15% of the
  tokens masked, 80% [MASK], 10% random, 10% kept, and the mean cross-entropy over them), AdamW
  with linear warm-up and decay (`mlmia.models.optimizer`), seeded. Optionally starts from a
  saved model (Base++ = Base trained longer). Saves the model and tokenizer with
  `save_pretrained`, and the run's record (`mlmia.models.run_record`): `train_log.csv` (epoch,
  step, loss, lr, seconds), `train_curve.png` and `train_info.json`.
- The step it is given (`TrainingStep`) draws the batches and takes each optimiser step:
  `PlainStep` by default (the LM head evaluated only at the masked positions: encoder -> gather
  the masked hidden states -> `model.cls`), or DP-SGD's (`mlmia.defences.dp_sgd.DpSgdStep`:
  Poisson batches, per-unit clipping, noise), which `mlmia.training_job` gives a model with a
  `dp` setting. Every step builds its batches with one `BatchBuilder`
  (`mlmia.models.training_batches`: crop, pad, mask, offset).

Randomness, in this order whatever the step: torch's global seed (`seed`: the new model's
weights, then dropout), a numpy generator seeded `seed` (the plain step's batches, the crops) and
a torch generator seeded `seed` + 1 (each batch's masks, then its offsets); DP-SGD adds its own
(Poisson batches `seed` + 2, noise `seed` + 3).

Each training line is one sequence ([CLS] line [SEP]) in length-grouped random batches. With
probability `crop_prob` a sequence loses its first 1..`crop_max` tokens for that step (the cut
that packed training makes at arbitrary points): without it a tiny model trained only on
name-prefixed lines (Base-b) has never seen a sentence start right after [CLS] and scores every
name-less sentence as out-of-distribution, which is an artefact of the toy scale, not of the
paper. `pack: true` switches to the run_mlm `group_texts` recipe (lines concatenated and cut
into `block_size` blocks); on this scale it learns far more slowly, so it is off by default.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.models.hub import quiet_transformers
from mlmia.models.loading import load_tokenizer, resolve_device
from mlmia.models.objectives import MaskedBatch, Objective, make_objective
from mlmia.models.optimizer import adamw_with_schedule
from mlmia.models.run_record import RunRecord
from mlmia.models.settings import FROZEN_PARTS, TrainingSettings
from mlmia.models.training_batches import BatchBuilder, length_grouped_batches, pack_lines

log = get_logger(__name__)


# --------------------------------------------------------------------------------------------
# the loss at the trained positions


def masked_lm_loss(model, objective: Objective, batch: MaskedBatch, attention_mask, position_ids=None):
    """The objective's loss of the batch, the LM head evaluated at its trained positions only
    (labels != -100), flattened in row-major order, in fp32.

    For `bert_mlm`, the same value as BertForMaskedLM's full-logits loss on the same masks, at a
    fraction of the cost: the vocabulary projection runs on ~15% of the positions."""
    hidden = model.bert(
        input_ids=batch.input_ids, attention_mask=attention_mask, position_ids=position_ids
    ).last_hidden_state
    sel = batch.labels != -100
    logits = model.cls(hidden[sel]).float()
    weights = None if batch.weights is None else batch.weights[sel]
    return objective.loss(logits, batch.labels[sel], weights, rows=len(batch.labels))


def training_autocast(dev, precision: str):
    """The forward pass's autocast for `precision` (fp32: none)."""
    import contextlib

    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(dev.type, dtype=torch.bfloat16)


# --------------------------------------------------------------------------------------------
# training


def save_model(model, tokenizer, directory: Path) -> None:
    """`save_pretrained` of the model and its tokenizer into `directory` (made if missing),
    without transformers' progress bars (they would reach the workflow's terminal)."""
    directory.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():
        model.save_pretrained(str(directory))
        tokenizer.save_pretrained(str(directory))


def _save_checkpoint(model, tokenizer, directory: Path, epoch: int, step: int) -> str:
    """Save the model as it is after `epoch` epochs (`step` optimiser steps), with its tokenizer."""
    save_model(model, tokenizer, directory)
    (directory / "checkpoint_info.json").write_text(json.dumps({"epoch": epoch, "step": step}, indent=2))
    log.info("checkpoint after epoch %d (step %d) -> %s", epoch, step, directory)
    return str(directory)


def initial_model(cfg: dict, tokenizer, init_dir=None):
    """The BertForMaskedLM that training starts from, its `freeze` parts frozen (`freeze_parts`):
    the saved model in `init_dir` (its vocabulary must be the tokenizer's, or the tokenizer's
    without its added tokens; `cfg`'s max_length and position_offset are cut to its positions),
    or a new one of `cfg`'s shape."""
    return freeze_parts(_starting_model(cfg, tokenizer, init_dir), cfg.get("freeze") or ())


def freeze_parts(model, parts):
    """`model` with the parameters of each of `parts` (`FROZEN_PARTS`) left out of training
    (requires_grad False: no gradient, so AdamW and DP-SGD leave them as they are)."""
    names = {name for part in parts for name in FROZEN_PARTS[part]}
    matrices = "weights" in parts
    for name, param in model.named_parameters():
        if name in names or (matrices and param.ndim >= 2):
            param.requires_grad_(False)
    return model


def _starting_model(cfg: dict, tokenizer, init_dir=None):
    from transformers import BertConfig, BertForMaskedLM

    if init_dir is not None:
        init_dir = Path(init_dir)
        if not (init_dir / "config.json").exists():
            raise UserError(f"{init_dir}: no saved model to start from (config.json missing)")
        with quiet_transformers():
            model = BertForMaskedLM.from_pretrained(str(init_dir))
        if model.config.vocab_size == getattr(tokenizer, "vocab_size", None) < len(tokenizer):
            # the tokenizer extends the model's with added tokens (the DP audit's canary tokens):
            # new embedding rows, drawn as a new model's are
            model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
        if model.config.vocab_size != len(tokenizer):
            raise UserError(
                f"{init_dir}: vocabulary {model.config.vocab_size} differs from the tokenizer's {len(tokenizer)}"
            )
        cfg["max_length"] = min(int(cfg["max_length"]), int(model.config.max_position_embeddings))
        cfg["position_offset"] = min(
            int(cfg["position_offset"]), int(model.config.max_position_embeddings) - int(cfg["max_length"])
        )
        return model
    return BertForMaskedLM(
        BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=int(cfg["hidden_size"]),
            num_hidden_layers=int(cfg["num_layers"]),
            num_attention_heads=int(cfg["num_heads"]),
            intermediate_size=int(cfg["intermediate_size"]),
            max_position_embeddings=max(int(cfg["max_length"]), int(cfg["block_size"]) + 2)
            + int(cfg["position_offset"]),
            hidden_dropout_prob=float(cfg["dropout"]),
            attention_probs_dropout_prob=float(cfg["dropout"]),
            pad_token_id=tokenizer.pad_token_id,
            type_vocab_size=2,
        )
    )


# --------------------------------------------------------------------------------------------
# the loop


class TrainingStep(Protocol):
    """How a run of `train_mlm` draws its batches and takes each optimiser step: `PlainStep` (the
    default) or DP-SGD's (`mlmia.defences.dp_sgd.DpSgdStep`). The loop calls, in this order:
    `settings` (before anything else), `check` (the objective), `plan` (once the lines are
    tokenized: the units, and how many batches an epoch draws), `start` (once the optimiser is
    made), then per epoch `epoch` (the batches, drawn lazily) and per batch the step itself
    (`__call__`: its loss, None for a batch with no line), and after the loop `trained` (the model
    to save) and `record` (once it is saved: what train_info.json adds)."""

    #: the batch builder gives position ids to every batch (`BatchBuilder`)
    row_positions: bool
    #: `save_epochs` is offered
    checkpoints: bool

    def settings(self, cfg: dict, groups: Sequence | None) -> dict: ...
    def check(self, objective: Objective) -> None: ...
    def plan(self, seqs: list[np.ndarray], groups: list[str] | None, tokenizer) -> int: ...
    def start(self, model, optimizer, scheduler, build: BatchBuilder, device) -> None: ...
    def epoch(self, rng: np.random.Generator) -> Iterable: ...
    def __call__(self, drawn) -> float | None: ...
    def trained(self, model): ...
    def record(self, out_dir: Path, steps: int) -> dict: ...


def train_mlm(
    texts: Sequence[str],
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    config: TrainingSettings | Mapping,
    *,
    threads: int,
    device: str | None,
    init_dir: str | os.PathLike | None = None,
    max_steps: int | None = None,
    log_every: int = 20,
    name: str | None = None,
    save_epochs: Sequence[int] = (),
    objective: Objective | None = None,
    groups: Sequence | None = None,
    step: TrainingStep | None = None,
) -> dict:
    """Train a BertForMaskedLM on `texts` and save it (model + tokenizer) into `out_dir`; returns
    the run's summary (train_info.json). `step`: how batches are drawn and each optimiser step
    taken (`TrainingStep`; default `PlainStep`, no DP: a model with a `dp` setting is trained by
    `mlmia.training_job.train_model`, which gives DP-SGD's step).

    `config`: a model's training settings (`TrainingSettings`, or a resolved model entry it is
    built from: sizes, epochs, batch_size, lr, ...). With `init_dir` the weights start from that
    saved model (its size settings win) and `epochs` more are trained. `threads`, `device`: the
    config's `training` ones (what the training rule passes). `max_steps` caps the number of
    optimiser steps (tests).
    `save_epochs`: also save a checkpoint (model + tokenizer) into `out_dir`/epoch_<e> at the
    end of each of these epochs (1..epochs; the learning-rate schedule is the whole run's; an
    epoch cut short by `max_steps` is not saved); the summary then has `checkpoints`, {epoch:
    directory}. `objective`: the training objective (default: the one the config names,
    `mlmia.models.objectives`). `groups`: each text's patient (`group_id`), for the step that
    needs them (DP-SGD's patient units and patient-level guarantee)."""
    import torch

    step = PlainStep() if step is None else step
    settings = config if isinstance(config, TrainingSettings) else TrainingSettings.from_entry(config)
    cfg = step.settings(settings.as_dict(), groups)
    checkpoints = _checkpoint_epochs(save_epochs, int(cfg["epochs"]), step)
    torch.set_num_threads(max(1, int(threads)))
    dev = resolve_device(device)
    seed = int(cfg["seed"])
    torch.manual_seed(seed)
    texts, groups = _training_texts(texts, groups)
    tokenizer = load_tokenizer(tokenizer_dir)
    objective = make_objective(cfg, tokenizer) if objective is None else objective
    step.check(objective)
    cfg["objective"] = objective.name
    out_dir = Path(out_dir)
    record = RunRecord(name or out_dir.name, log_every)
    model = initial_model(cfg, tokenizer, init_dir)
    model.to(dev)
    model.train()

    seqs = _tokenized(tokenizer, texts, cfg, model, init_dir)
    n_tokens = int(sum(len(s) for s in seqs))
    epochs = int(cfg["epochs"])
    steps_per_epoch = step.plan(seqs, groups, tokenizer)
    total_steps = steps_per_epoch * epochs if max_steps is None else min(steps_per_epoch * epochs, int(max_steps))
    optim, sched = adamw_with_schedule(
        model, lr=cfg["lr"], weight_decay=cfg["weight_decay"], warmup_ratio=cfg["warmup_ratio"], total_steps=total_steps
    )
    rng = np.random.default_rng(seed)  # the batches and crops; the torch generator: masks and offsets
    build = BatchBuilder(objective, tokenizer, cfg, rng, torch.Generator().manual_seed(seed + 1), step.row_positions)
    step.start(model, optim, sched, build, dev)
    log.info("%s: %d texts, %d tokens, %d epochs, %d steps, batch %d, lr %g, %d thread(s), device %s, init %s",
             record.name, len(seqs), n_tokens, epochs, total_steps, cfg["batch_size"], cfg["lr"], threads, dev,
             init_dir)  # fmt: skip
    saved: dict[int, str] = {}

    def epoch_done(epoch: int, steps: int) -> None:
        if epoch in checkpoints:
            saved[epoch] = _save_checkpoint(model, tokenizer, out_dir / f"epoch_{epoch}", epoch, steps)

    record.start(total_steps)
    epoch, steps = _run_epochs(step, record, rng, optim, epochs, total_steps, steps_per_epoch, epoch_done)
    record.finish(epoch, steps, optim.param_groups[0]["lr"])

    model = step.trained(model)
    model.eval()
    save_model(model, tokenizer, out_dir)
    extra = step.record(out_dir, steps) | ({"checkpoints": saved} if checkpoints else {})
    info = record.write(out_dir, config=cfg, init_from=init_dir, n_texts=len(seqs), n_tokens=n_tokens, steps=steps,
                        epochs_run=epoch, steps_per_epoch=steps_per_epoch, threads=threads, device=dev, model=model,
                        extra=extra or None)  # fmt: skip
    log.info("%s: done in %.1f s (%.0f tokens/s), final loss %.3f", info["name"], record.train_seconds,
             info["tokens_per_second"], info["final_loss"])  # fmt: skip
    return info


def _training_texts(texts: Sequence[str], groups: Sequence | None) -> tuple[list[str], list[str] | None]:
    """The texts that are not blank, and their patients (as strings; None without `groups`)."""
    if groups is not None and len(groups) != len(texts):
        raise UserError(f"train_mlm: {len(groups)} patient ids for {len(texts)} texts")
    keep = [i for i, t in enumerate(texts) if str(t).strip()]
    if not keep:
        raise UserError("train_mlm: no training text")
    return [str(texts[i]) for i in keep], None if groups is None else [str(groups[i]) for i in keep]


def _tokenized(tokenizer, texts: list[str], cfg: dict, model, init_dir) -> list[np.ndarray]:
    """Each text's token ids: [CLS] text [SEP] cut to `max_length`, or with `pack` the whole text
    without special tokens (`pack_lines` cuts the blocks, which must fit a saved model's positions)."""
    pack = bool(cfg["pack"])
    max_len = int(cfg["max_length"])
    if pack:
        block = int(cfg["block_size"])
        max_len = block + 2
        if max_len + int(cfg["position_offset"]) > (model.config.max_position_embeddings if init_dir else 10**9):
            raise UserError(
                f"block_size {block} does not fit the saved model's {model.config.max_position_embeddings} positions"
            )
    enc = tokenizer(texts, truncation=not pack, max_length=max_len, add_special_tokens=not pack,
                    return_attention_mask=False, return_token_type_ids=False)  # fmt: skip
    return [np.asarray(x, dtype=np.int64) for x in enc["input_ids"]]


def _checkpoint_epochs(save_epochs: Sequence[int], epochs: int, step: TrainingStep) -> list[int]:
    """The epochs after which to save a checkpoint, sorted; a UserError where the step offers none."""
    checkpoints = sorted({int(e) for e in save_epochs})
    if checkpoints and not step.checkpoints:
        raise UserError("train_mlm: save_epochs is not offered with dp (one accountant per run)")
    if checkpoints and not 1 <= checkpoints[0] <= checkpoints[-1] <= epochs:
        raise UserError(f"save_epochs must lie in 1..{epochs} (the epochs trained), got {checkpoints}")
    return checkpoints


def _run_epochs(step: TrainingStep, record: RunRecord, rng, optimizer, epochs: int, total_steps: int,
                steps_per_epoch: int, epoch_done) -> tuple[int, int]:  # fmt: skip
    """Up to `epochs` epochs of the step's batches, `total_steps` steps at most; after each epoch
    run to its end, `epoch_done(epoch, steps)`. Returns (the last epoch, the steps taken)."""
    steps = epoch = 0
    for epoch in range(1, epochs + 1):
        first = steps
        for drawn in step.epoch(rng):
            loss = step(drawn)
            steps += 1
            if loss is not None:
                record.add_loss(loss)
            record.end_step(epoch, steps, optimizer.param_groups[0]["lr"])
            if steps >= total_steps:
                break
        if steps - first == steps_per_epoch:  # a completed epoch
            epoch_done(epoch, steps)
        if steps >= total_steps:
            break
    return epoch, steps


# --------------------------------------------------------------------------------------------
# the plain step


class PlainStep:
    """The non-private step (`TrainingStep`, `train_mlm`'s default): each epoch the lines in
    length-grouped random batches (`length_grouped_batches`), or with `pack` the epoch's packed
    blocks in order (`pack_lines`), each block between [CLS] and [SEP]; per batch the objective's
    loss over the whole batch (`masked_lm_loss`, in the config's precision), its gradient clipped
    to norm 1, AdamW."""

    row_positions = False
    checkpoints = True

    def settings(self, cfg: dict, groups: Sequence | None) -> dict:  # noqa: ARG002 (no patients here)
        if cfg["dp"] is not None:  # never silently without the DP that the config asks for
            raise UserError("train_mlm: a model with a dp setting is trained by mlmia.training_job.train_model "
                            "(DP-SGD)")  # fmt: skip
        self.cfg = cfg
        return cfg

    def check(self, objective: Objective) -> None:
        pass

    def plan(self, seqs: list[np.ndarray], groups: list[str] | None, tokenizer) -> int:  # noqa: ARG002
        self.seqs = seqs
        self.lengths = np.array([len(s) for s in seqs])
        self.batch_size = int(self.cfg["batch_size"])
        self.block = int(self.cfg["block_size"]) if self.cfg["pack"] else 0
        self.cls_id, self.sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
        units = math.ceil((int(self.lengths.sum()) + len(seqs)) / self.block) if self.block else len(seqs)
        return math.ceil(units / self.batch_size)

    def start(self, model, optimizer, scheduler, build: BatchBuilder, device) -> None:
        self.model, self.optimizer, self.scheduler, self.build, self.device = model, optimizer, scheduler, build, device

    def epoch(self, rng: np.random.Generator) -> Iterator[list[np.ndarray]]:
        if not self.block:
            for idx in length_grouped_batches(self.lengths, self.batch_size, rng):
                yield [self.seqs[i] for i in idx]
            return
        blocks = pack_lines(self.seqs, self.block, rng, self.sep_id)
        units = [np.concatenate([[self.cls_id], b, [self.sep_id]]) for b in blocks]
        for start in range(0, len(units), self.batch_size):
            yield units[start : start + self.batch_size]

    def __call__(self, rows: list[np.ndarray]) -> float:
        import torch

        batch, attn, pos = self.build(rows)
        dev = self.device
        with training_autocast(dev, self.cfg["precision"]):
            loss = masked_lm_loss(self.model, self.build.objective, batch.to(dev), attn.to(dev),
                                  position_ids=None if pos is None else pos.to(dev))  # fmt: skip
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        return float(loss.detach())

    def trained(self, model):
        return model

    def record(self, out_dir: Path, steps: int) -> dict:  # noqa: ARG002 (nothing of its own)
        return {}
