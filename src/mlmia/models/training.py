"""Training BERT masked language models from scratch (the tokenizer: `mlmia.models.tokenizer`).

- `train_mlm`: a BertForMaskedLM trained with the objective its config names
  (`mlmia.models.objectives`; by default BERT's: 15% of the tokens masked, 80% [MASK], 10%
  random, 10% kept, and the mean cross-entropy over them), the LM head evaluated only at the
  masked positions (encoder -> gather the masked hidden states -> `model.cls`), AdamW with
  linear warm-up and decay (`mlmia.models.optimizer`), seeded. Optionally starts from a saved
  model (Base++ = Base trained longer). Saves the model and tokenizer with `save_pretrained`, and
  the run's record (`mlmia.models.run_record`): `train_log.csv` (epoch, step, loss, lr,
  seconds), `train_curve.png` and `train_info.json`. DP-SGD is another loop
  (`mlmia.defences.dp_sgd`), chosen where the job starts (`mlmia.training_job`).

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
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.models.hub import quiet_transformers
from mlmia.models.loading import load_tokenizer, resolve_device
from mlmia.models.objectives import MaskedBatch, Objective, make_objective, objective_names
from mlmia.models.optimizer import adamw_with_schedule
from mlmia.models.run_record import RunRecord
from mlmia.vocabulary.schema import defaults

log = get_logger(__name__)

#: what `freeze` may name, and the parameters of a BertForMaskedLM each holds ("weights": every
#: matrix, embeddings included, so that only the biases and LayerNorms train: BitFit, Ben Zaken,
#: Goldberg and Ravfogel, ACL 2022; under DP, Bu, Wang, Zha and Karypis, "Differentially private
#: bias-term fine-tuning of foundation models", ICML 2024)
FROZEN_PARTS = {
    "word_embeddings": ("bert.embeddings.word_embeddings.weight",),
    "embeddings": ("bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
                   "bert.embeddings.token_type_embeddings.weight"),
    "weights": (),
}  # fmt: skip


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


def model_settings(config: dict | None) -> dict:
    """The model config with defaults filled in: the training settings of a `models:` entry,
    each defaulting to the config schema's (`mlmia.vocabulary.schema.defaults`); unknown keys are an
    error. The `dp` setting is left as given: DP-SGD checks it (`mlmia.defences.dp_sgd.dp_settings`)."""
    config = dict(config or {})
    out = defaults("models", "*")
    extra = {"init", "reference", "corpus", "text", "description", "threads", "path", "role", "kind", "label"}
    unknown = [k for k in config if k not in out and k not in extra]
    if unknown:
        raise UserError(f"model config: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(out))})")
    out.update({k: v for k, v in config.items() if k in out})
    if out["hidden_size"] % out["num_heads"]:
        raise UserError(
            f"model config: hidden_size {out['hidden_size']} is not a multiple of num_heads {out['num_heads']}"
        )
    if out["objective"] not in objective_names():
        raise UserError(
            f"model config: objective must be one of {', '.join(objective_names())}, got {out['objective']!r}"
        )
    if out["precision"] not in ("fp32", "bf16"):
        raise UserError(f"model config: precision must be fp32 or bf16, got {out['precision']!r}")
    freeze = out["freeze"]
    if not (isinstance(freeze, list) and all(part in FROZEN_PARTS for part in freeze)):
        raise UserError(f"model config: freeze must be a list of {', '.join(FROZEN_PARTS)}, got {freeze!r}")
    if out["dp"] is not None and out["precision"] != "fp32":
        raise UserError(
            "model config: precision bf16 is not offered with dp (Opacus' per-sample gradients run in fp32)"
        )
    return out


def _batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Length-grouped random batches: shuffle, sort within chunks of 50 batches, shuffle batches."""
    order = rng.permutation(len(lengths))
    chunk = batch_size * 50
    batches = []
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches.extend(part[i : i + batch_size] for i in range(0, len(part), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def _pack(lines: list[np.ndarray], block: int, rng: np.random.Generator, sep_id: int) -> list[np.ndarray]:
    """One epoch of packed blocks (the `group_texts` recipe of transformers' run_mlm): the lines,
    in a fresh random order, each followed by [SEP], concatenated and cut into blocks of `block`
    tokens. Every sentence is trained, at varying positions and with varying left context, so the
    model does not learn "a sentence starts at position 1" and scores stand-alone sentences fairly."""
    order = rng.permutation(len(lines))
    sep = np.array([sep_id], dtype=np.int64)
    stream = np.concatenate([np.concatenate([lines[i], sep]) for i in order])
    return [stream[i : i + block] for i in range(0, len(stream), block)]


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
    or a new one of `cfg`'s shape. Shared by `train_mlm` and DP-SGD (`mlmia.defences.dp_sgd`)."""
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


def train_mlm(
    texts: Sequence[str],
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    config: dict | None = None,
    init_dir: str | os.PathLike | None = None,
    threads: int = 1,
    device: str | None = "auto",
    max_steps: int | None = None,
    log_every: int = 20,
    name: str | None = None,
    save_epochs: Sequence[int] = (),
    objective: Objective | None = None,
) -> dict:
    """Train a BertForMaskedLM on `texts` and save it (model + tokenizer) into `out_dir`, without DP
    (a model with a `dp` setting is trained by `mlmia.training_job.train_model`).

    `config`: a model entry's training settings (`model_settings`: sizes, epochs, batch_size,
    lr, ...). With `init_dir` the weights start from that saved model (its size settings win)
    and `epochs` more are trained.
    `max_steps` caps the number of optimiser steps (tests). `save_epochs`: also save a
    checkpoint (model + tokenizer) into `out_dir`/epoch_<e> at the end of each of these epochs
    (1..epochs; the learning-rate schedule is the whole run's; an epoch cut short by
    `max_steps` is not saved). Returns a summary dict (with `checkpoints`, {epoch: directory},
    when `save_epochs` is given). `objective`: the training objective (default: the one the
    config names, `mlmia.models.objectives`)."""
    import torch

    cfg = model_settings(config)
    if cfg["dp"] is not None:  # never silently without the DP that the config asks for
        raise UserError("train_mlm: a model with a dp setting is trained by mlmia.training_job.train_model (DP-SGD)")
    torch.set_num_threads(max(1, int(threads)))
    dev = resolve_device(device)
    seed = int(cfg["seed"])
    torch.manual_seed(seed)
    texts = [str(t) for t in texts if str(t).strip()]
    if not texts:
        raise UserError("train_mlm: no training text")
    tokenizer = load_tokenizer(tokenizer_dir)
    if objective is None:
        objective = make_objective(cfg, tokenizer)
    cfg["objective"] = objective.name
    out_dir = Path(out_dir)
    record = RunRecord(name or out_dir.name, log_every)

    model = initial_model(cfg, tokenizer, init_dir)
    model.to(dev)
    model.train()

    pack = bool(cfg["pack"])
    max_len = int(cfg["max_length"])
    block = int(cfg["block_size"])
    if pack:
        max_len = block + 2
        if max_len + int(cfg["position_offset"]) > (model.config.max_position_embeddings if init_dir else 10**9):
            raise UserError(
                f"block_size {block} does not fit the saved model's {model.config.max_position_embeddings} positions"
            )
    enc = tokenizer(
        texts,
        truncation=not pack,
        max_length=max_len,
        add_special_tokens=not pack,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    seqs = [np.asarray(x, dtype=np.int64) for x in enc["input_ids"]]
    lengths = np.array([len(s) for s in seqs])
    n_tokens = int(lengths.sum())
    special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)))
    pad_id = tokenizer.pad_token_id
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id

    batch_size = int(cfg["batch_size"])
    epochs = int(cfg["epochs"])
    n_units = math.ceil((n_tokens + len(seqs)) / block) if pack else len(seqs)
    steps_per_epoch = math.ceil(n_units / batch_size)
    total_steps = steps_per_epoch * epochs
    if max_steps is not None:
        total_steps = min(total_steps, int(max_steps))
    checkpoints = sorted({int(e) for e in save_epochs})
    if checkpoints and not 1 <= checkpoints[0] <= checkpoints[-1] <= epochs:
        raise UserError(f"save_epochs must lie in 1..{epochs} (the epochs trained), got {checkpoints}")
    saved: dict[int, str] = {}

    optim, sched = adamw_with_schedule(
        model, lr=cfg["lr"], weight_decay=cfg["weight_decay"], warmup_ratio=cfg["warmup_ratio"], total_steps=total_steps
    )
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    max_offset = int(cfg["position_offset"])
    crop_prob, crop_max = float(cfg["crop_prob"]), max(1, int(cfg["crop_max"]))

    step = 0
    record.start(total_steps)
    log.info(
        "%s: %d texts, %d tokens, %d epochs, %d steps, batch %d, lr %g, %d thread(s), device %s, init %s",
        record.name,
        len(seqs),
        n_tokens,
        epochs,
        total_steps,
        batch_size,
        cfg["lr"],
        threads,
        dev,
        init_dir,
    )
    done = False
    for epoch in range(1, epochs + 1):
        if pack:
            blocks = _pack(seqs, block, rng, sep_id)
            units = [np.concatenate([[cls_id], b, [sep_id]]) for b in blocks]
            batches = [np.arange(i, min(i + batch_size, len(units))) for i in range(0, len(units), batch_size)]
        else:
            units = seqs
            batches = _batches(lengths, batch_size, rng)
        epoch_start = step
        for idx in batches:
            rows_ids = [units[i] for i in idx]
            if crop_prob > 0:  # random left crop, as packed training cuts lines at arbitrary points
                cut = rng.integers(1, crop_max + 1, size=len(rows_ids))
                use = rng.random(len(rows_ids)) < crop_prob
                rows_ids = [
                    np.concatenate([u[:1], u[1 + min(c, max(0, len(u) - 5)) :]]) if k else u
                    for u, c, k in zip(rows_ids, cut, use)
                ]
            width = max(len(u) for u in rows_ids)
            ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
            for r, u in enumerate(rows_ids):
                ids[r, : len(u)] = torch.from_numpy(u)
            attn = (ids != pad_id).long()
            batch = objective.mask(ids, torch.isin(ids, special_ids), gen)
            pos = None
            if max_offset:  # random absolute offset per sequence: position-robust models
                off = torch.randint(0, max_offset + 1, (len(idx), 1), generator=gen)
                pos = (torch.arange(width).unsqueeze(0) + off).to(dev)
            with training_autocast(dev, cfg["precision"]):
                loss = masked_lm_loss(model, objective, batch.to(dev), attn.to(dev), position_ids=pos)
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            sched.step()
            step += 1
            record.add_loss(float(loss.detach()))
            record.end_step(epoch, step, optim.param_groups[0]["lr"])
            if step >= total_steps:
                done = True
                break
        if epoch in checkpoints and step - epoch_start == len(batches):  # a completed epoch
            saved[epoch] = _save_checkpoint(model, tokenizer, out_dir / f"epoch_{epoch}", epoch, step)
        if done:
            break
    record.finish(epoch, step, optim.param_groups[0]["lr"])

    model.eval()
    save_model(model, tokenizer, out_dir)
    info = record.write(out_dir, config=cfg, init_from=init_dir, n_texts=len(seqs), n_tokens=n_tokens, steps=step,
                        epochs_run=epoch, steps_per_epoch=steps_per_epoch, threads=threads, device=dev, model=model,
                        extra={"checkpoints": saved} if checkpoints else None)  # fmt: skip
    log.info(
        "%s: done in %.1f s (%.0f tokens/s), final loss %.3f",
        info["name"],
        record.train_seconds,
        info["tokens_per_second"],
        info["final_loss"],
    )
    return info
