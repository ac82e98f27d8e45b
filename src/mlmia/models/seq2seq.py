"""A small encoder-decoder translation model, trained from scratch: the translation target of
Hisamoto et al.'s shadow protocol (TACL 2020; `snakemake shadow_mt`, `mlmia.shadow.translation`).

- `build_translation_model`: transformers' BartForConditionalGeneration from a config (`seq2seq_settings`; the config's defaults:
  2 encoder and 2 decoder layers, 128 wide, 2 heads, feed-forward 512; with the world's 3,000-token
  WordPiece vocabulary about 1.3 M parameters), the embeddings shared by encoder, decoder and output
  projection. Source and target share the tokenizer (the world's: `mlmia.models.tokenizer`). A source
  is read as `[CLS] text [SEP]`; the decoder starts from `[CLS]` and ends its output with `[SEP]`.
- `train_translation_model`: teacher-forced cross-entropy per target token (`[SEP]` included), AdamW
  with linear warm-up and decay (`mlmia.models.optimizer`), length-grouped random batches
  (`mlmia.models.training`), seeded (torch and numpy), so the same on one CPU setup every time. It
  saves the model, the tokenizer and the run's record (`mlmia.models.run_record`).
- `greedy_translate`: greedy decoding with the decoder's key-value cache, and the natural-log
  probability the model gives each token it outputs (the score of its own top-1 translation).

Nothing here logs text.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.models.batching import eval_mode, pad_rows, padded_batch
from mlmia.models.loading import load_tokenizer, quiet_transformers, resolve_device
from mlmia.models.optimizer import adamw_with_schedule
from mlmia.models.run_record import RunRecord
from mlmia.models.settings import seq2seq_settings
from mlmia.models.tokenizer import encode_text
from mlmia.models.training import save_model
from mlmia.models.training_batches import length_grouped_batches

log = get_logger(__name__)


def build_translation_model(config: dict, tokenizer):
    """A new BartForConditionalGeneration of `config`'s shape for `tokenizer`'s vocabulary. Nothing
    is forced or suppressed at decoding time (no forced BOS/EOS token): decoding is `greedy_translate`'s."""
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = seq2seq_settings(config)
    return BartForConditionalGeneration(
        BartConfig(
            vocab_size=len(tokenizer),
            d_model=int(cfg["d_model"]),
            encoder_layers=int(cfg["encoder_layers"]),
            decoder_layers=int(cfg["decoder_layers"]),
            encoder_attention_heads=int(cfg["attention_heads"]),
            decoder_attention_heads=int(cfg["attention_heads"]),
            encoder_ffn_dim=int(cfg["ffn_dim"]),
            decoder_ffn_dim=int(cfg["ffn_dim"]),
            max_position_embeddings=int(cfg["max_length"]),
            dropout=float(cfg["dropout"]),
            attention_dropout=0.0,
            activation_dropout=0.0,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
            decoder_start_token_id=tokenizer.cls_token_id,
            forced_bos_token_id=None,
            forced_eos_token_id=None,
            scale_embedding=False,
            tie_word_embeddings=True,
        )
    )


def load_translation_model(path: str | os.PathLike, device: str | None = "auto"):
    """(model, tokenizer) saved by `train_translation_model`, the model in eval mode on `device`."""
    from transformers import BartForConditionalGeneration

    path = Path(path)
    if not (path / "config.json").exists():
        raise UserError(f"{path}: no saved translation model (config.json missing)")
    with quiet_transformers():
        model = BartForConditionalGeneration.from_pretrained(str(path))
    model.to(resolve_device(device)).eval()
    return model, load_tokenizer(path)


def encode_sources(tokenizer, sources: Sequence[str], max_length: int) -> list[np.ndarray]:
    """`[CLS] source [SEP]` token ids, cut to `max_length` (special-token strings read as text)."""
    enc = encode_text(tokenizer, [str(s) for s in sources], truncation=True, max_length=int(max_length),
                      return_attention_mask=False, return_token_type_ids=False, verbose=False)  # fmt: skip
    return [np.asarray(ids, dtype=np.int64) for ids in enc["input_ids"]]


def encode_targets(tokenizer, targets: Sequence[str], max_length: int) -> list[np.ndarray]:
    """`target [SEP]` token ids (what the decoder must output), at most `max_length` tokens."""
    enc = encode_text(tokenizer, [str(t) for t in targets], add_special_tokens=False, truncation=True,
                      max_length=int(max_length) - 1, return_attention_mask=False, return_token_type_ids=False,
                      verbose=False)  # fmt: skip
    sep = np.array([tokenizer.sep_token_id], dtype=np.int64)
    return [np.concatenate([np.asarray(ids, dtype=np.int64), sep]) for ids in enc["input_ids"]]


def teacher_forced_loss(model, sources: list[np.ndarray], outputs: list[np.ndarray], pad_id: int, start_id: int):
    """Mean cross-entropy (natural log) per output token of the batch, the decoder fed `[CLS]` + the output
    shifted right."""
    import torch.nn.functional as F

    src, src_mask = padded_batch(sources, pad_id)
    labels = pad_rows(outputs, -100)
    decoder_in = pad_rows([np.concatenate([[start_id], o[:-1]]) for o in outputs], pad_id)
    dec_mask = (labels != -100).long()
    device = next(model.parameters()).device
    logits = model(input_ids=src.to(device), attention_mask=src_mask.to(device),
                   decoder_input_ids=decoder_in.to(device), decoder_attention_mask=dec_mask.to(device)).logits  # fmt: skip
    return F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), labels.to(device).reshape(-1), ignore_index=-100
    )


def train_translation_model(
    sources: Sequence[str],
    targets: Sequence[str],
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    config: dict,
    *,
    threads: int,
    device: str | None,
    max_steps: int | None = None,
    log_every: int = 20,
    name: str | None = None,
) -> dict:
    """Train a translation model of `config` (`seq2seq_settings`) on the (source, target) pairs and save
    it with the tokenizer into `out_dir`; returns the run's summary (`train_info.json`). `max_steps`
    caps the optimiser steps (tests)."""
    import torch

    cfg = seq2seq_settings(config)
    sources, targets = [str(s) for s in sources], [str(t) for t in targets]
    if len(sources) != len(targets):
        raise UserError(f"translation training: {len(sources)} sources but {len(targets)} targets")
    if not sources:
        raise UserError("translation training: no training pairs")
    torch.set_num_threads(max(1, int(threads)))
    dev = resolve_device(device)
    seed = int(cfg["seed"])
    torch.manual_seed(seed)
    tokenizer = load_tokenizer(tokenizer_dir)
    out_dir = Path(out_dir)
    record = RunRecord(name or out_dir.name, log_every)
    model = build_translation_model(cfg, tokenizer).to(dev)
    model.train()

    max_len = int(cfg["max_length"])
    src = encode_sources(tokenizer, sources, max_len)
    tgt = encode_targets(tokenizer, targets, max_len)
    lengths = np.array([len(s) + len(t) for s, t in zip(src, tgt)])
    n_tokens = int(lengths.sum())
    batch_size, epochs = int(cfg["batch_size"]), int(cfg["epochs"])
    steps_per_epoch = math.ceil(len(src) / batch_size)
    total_steps = steps_per_epoch * epochs if max_steps is None else min(steps_per_epoch * epochs, int(max_steps))
    optim, sched = adamw_with_schedule(
        model, lr=cfg["lr"], weight_decay=cfg["weight_decay"], warmup_ratio=cfg["warmup_ratio"], total_steps=total_steps
    )
    rng = np.random.default_rng(seed)
    pad_id, start_id = tokenizer.pad_token_id, tokenizer.cls_token_id
    log.info("%s: %d pairs, %d tokens (both sides), %d epochs, %d steps, batch %d, lr %g, %d thread(s), device %s",
             record.name, len(src), n_tokens, epochs, total_steps, batch_size, cfg["lr"], threads, dev)  # fmt: skip
    step, epoch = 0, 0
    record.start(total_steps)
    while step < total_steps:
        epoch += 1
        for idx in length_grouped_batches(lengths, batch_size, rng):
            loss = teacher_forced_loss(model, [src[i] for i in idx], [tgt[i] for i in idx], pad_id, start_id)
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            sched.step()
            step += 1
            record.add_loss(float(loss.detach()))
            record.end_step(epoch, step, optim.param_groups[0]["lr"])
            if step >= total_steps:
                break
    record.finish(epoch, step, optim.param_groups[0]["lr"])
    model.eval()
    save_model(model, tokenizer, out_dir)
    info = record.write(out_dir, config=cfg, init_from=None, n_texts=len(src), n_tokens=n_tokens, steps=step,
                        epochs_run=epoch, steps_per_epoch=steps_per_epoch, threads=threads, device=dev, model=model,
                        loss_label="cross-entropy per target token")  # fmt: skip
    log.info("%s: done in %.1f s, final loss %.3f, %d parameters", info["name"], record.train_seconds,
             info["final_loss"], info["n_parameters"])  # fmt: skip
    return info


@dataclass(frozen=True)
class Translation:
    """A greedy translation: the output token ids (ending with `[SEP]` unless cut at the length limit)
    and the natural-log probability of each under the model, given the source and the tokens before it."""

    ids: np.ndarray
    log_probs: np.ndarray

    @property
    def model_score(self) -> float:
        """Mean log-probability per output token: the model's score of its own top-1 output."""
        return float(self.log_probs.mean()) if self.log_probs.size else float("nan")


def greedy_translate(
    model, tokenizer, sources: Sequence[str], *, batch_size: int = 64, max_new_tokens: int | None = None
) -> list[Translation]:
    """Greedy translations of `sources`, in input order: at each step the top-1 token over the whole
    vocabulary (ties: the lowest id), until `[SEP]` or `max_new_tokens` (default: the model's
    positions). Sources are cut to the model's positions; batches run in length order under
    `torch.inference_mode`, in eval mode, on the model's device, the log-softmax in fp32."""
    import torch

    if int(batch_size) < 1:
        raise UserError(f"greedy_translate: the batch size must be >= 1, got {batch_size}")
    positions = int(model.config.max_position_embeddings)
    limit = positions if max_new_tokens is None else min(int(max_new_tokens), positions)
    src = encode_sources(tokenizer, sources, positions)
    out: list[Translation | None] = [None] * len(src)
    pad_id, start_id, end_id = tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id
    device = next(model.parameters()).device
    order = np.argsort([len(s) for s in src], kind="stable")
    with eval_mode(model), torch.inference_mode():
        for begin in range(0, len(order), int(batch_size)):
            rows = order[begin : begin + int(batch_size)]
            ids, mask = padded_batch([src[i] for i in rows], pad_id)
            ids, mask = ids.to(device), mask.to(device)
            encoded = model.get_encoder()(input_ids=ids, attention_mask=mask)
            step_in = torch.full((len(rows), 1), start_id, dtype=torch.long, device=device)
            past, done = None, torch.zeros(len(rows), dtype=torch.bool, device=device)
            tokens, scores = [], []
            for _ in range(limit):
                result = model(encoder_outputs=encoded, attention_mask=mask, decoder_input_ids=step_in, cache=past,
                               use_cache=True)  # fmt: skip
                logp = torch.log_softmax(result.logits[:, -1].float(), dim=-1)
                top = logp.argmax(dim=-1)
                tokens.append(top.cpu())
                scores.append(logp.gather(1, top[:, None])[:, 0].double().cpu())
                done |= top == end_id
                if bool(done.all()):
                    break
                past, step_in = result.cache, top[:, None]
            tokens_t, scores_t = torch.stack(tokens, 1).numpy(), torch.stack(scores, 1).numpy()
            for r, i in enumerate(rows):
                ends = np.flatnonzero(tokens_t[r] == end_id)
                n = int(ends[0]) + 1 if ends.size else tokens_t.shape[1]
                out[i] = Translation(tokens_t[r, :n].astype(np.int64), scores_t[r, :n])
    return out  # type: ignore[return-value]
