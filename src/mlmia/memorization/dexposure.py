"""d-exposure of a de-identification tagger: how far a BERT token classifier memorised the class
of an ambiguous word in an inserted phrase.

Helali, Kleinbauer and Klakow, "Assessing Unintended Memorization in Neural Discriminative
Sequence Models", TSD 2020. A phrase whose one slot holds an AMBIGUOUS word w (labelled under
two or more classes in the training data) is inserted r times into the training data with w
labelled as class C_i. After training, every word of the candidate set C_i (the words
labelled only as C_i in the training data: `mlmia.world.phi.candidate_words`) is put into the
same slot of the same phrase, and w's confidence in C_i is ranked among theirs (Eq. 2-3,
computed by `mlmia.memorization.exposure.d_exposure`):

    d-exposure_i = -log2(rank(w) / |C_i|),  |C_i| = #candidates + 1 (w itself),

rank(w) = 1 + #{candidates the model labels C_i whose confidence is >= w's}, and 0 when the
model does not label w as C_i. The model's d-exposure is the mean over the chosen classes
(`mean_d_exposure`). Its maximum for class C_i is log2 |C_i|.

What is computed here, exactly:

- the tagger (`build_tagger`, `train_and_measure`): a `transformers` BertForTokenClassification
  trained from scratch (no pretrained weights exist offline) with a WordPiece tokenizer,
  first-subword labelling (each whitespace word's tag sits on its first subword; its other
  subwords and the special tokens carry the ignore label -100), cross-entropy, AdamW with
  linear warm-up then linear decay to 0 (or a constant rate: `lr_decay: false`), seeded
  (torch init and batch order);
- the confidence (`slot_probabilities`): the softmax over the tag set of the logits at the
  FIRST SUBWORD of the slot word, in the phrase alone ([CLS] phrase [SEP], eval mode). The
  confidence in C_i is the probability of the tag ``B-<C_i>`` there (a one-word entity after
  an O word begins its entity: B- is the tag the inserted phrase was trained with); the model
  "labels the word C_i" when ``B-<C_i>`` is the most probable tag there (argmax over all tags);
- the tagger's quality (`evaluate`): on the held-out (`valid`) split, the mean cross-entropy
  over the words' first subwords (the validation loss), and the entity-level F1 of `seqeval`
  (default CoNLL mode, micro average over all labelled classes, DATE included) of the argmax
  tags at the first subwords (a word cut off by `max_length` is predicted O);
- the main experiment (`main_design`, `main_runs`): one tagger per (seed, repetitions).

The tagger's size and training settings are the config's (`dexposure.model`,
`dexposure.training`), every key given. Table 3, Figure 1 and the first finding:
`mlmia.memorization.dexposure_report`; the overfitting experiment (Figure 2, the second
finding): `mlmia.memorization.overfitting`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.memorization.exposure import d_exposure, mean_d_exposure
from mlmia.models.batching import pad_rows
from mlmia.models.optimizer import adamw_with_schedule
from mlmia.models.run_record import RunRecord
from mlmia.world.phi import PHI_CLASSES, candidate_words, phrase_slot, tag_names, word_tag_counts

log = get_logger(__name__)

RUN_COLUMNS = [
    "setting", "seed", "repetitions", "epoch", "class", "size", "max_d_exposure", "inserted_confidence",
    "inserted_labelled", "inserted_tag", "rank", "d_exposure", "candidates_labelled", "candidate_confidence_median",
    "train_sentences", "train_loss", "valid_loss", "f1", "seconds",
]  # fmt: skip


def labelled_classes(notes: pd.DataFrame) -> list[str]:
    """The classes of the notes' tags: the known PHI classes in their order, then others sorted."""
    seen = {str(t)[2:] for tags in notes["tags"] for t in tags if t != "O"}
    return [c for c in PHI_CLASSES if c in seen] + sorted(seen - set(PHI_CLASSES))


def inserted_sentences(phrase: str, entities: Mapping[str, str], repetitions: int) -> list[tuple[list, list]]:
    """The inserted training sentences: for each class C_i, `repetitions` copies of the phrase
    with its slot holding the chosen word of C_i tagged ``B-<C_i>`` (every other word O)."""
    words, slot = phrase_slot(phrase)
    out = []
    for cls, word in entities.items():
        filled = words[:slot] + [word] + words[slot + 1 :]
        tags = ["O"] * len(words)
        tags[slot] = f"B-{cls}"
        out.extend((list(filled), list(tags)) for _ in range(int(repetitions)))
    return out


# --------------------------------------------------------------------------------------------
# encoding: first-subword labels


def encode_words(tokenizer, sentences: Sequence[Sequence[str]], max_length: int, tags=None, tag_index=None):
    """Token ids of whitespace-word sentences ([CLS] ... [SEP], truncated at `max_length`),
    the position of each word's first subword (-1 for a word cut off or without a token), and
    with `tags`, the label ids: the word's tag id at its first subword, -100 elsewhere."""
    from mlmia.models.tokenizer import encode_text

    sentences = [list(map(str, s)) for s in sentences]
    if not sentences:
        return [], [], []
    enc = encode_text(
        tokenizer,
        sentences,
        labels=[f"sentence {i}" for i in range(len(sentences))],
        is_split_into_words=True,
        truncation=True,
        max_length=int(max_length),
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    ids, labels, positions = [], [], []
    for i, words in enumerate(sentences):
        row = np.asarray(enc["input_ids"][i], dtype=np.int64)
        first = np.full(len(words), -1, dtype=np.int64)
        for pos, w in enumerate(enc.word_ids(i)):
            if w is not None and first[w] < 0:
                first[w] = pos
        ids.append(row)
        positions.append(first)
        if tags is not None:
            lab = np.full(len(row), -100, dtype=np.int64)
            for w, pos in enumerate(first):
                if pos >= 0:
                    lab[pos] = tag_index[tags[i][w]]
            labels.append(lab)
    return ids, labels, positions


# --------------------------------------------------------------------------------------------
# the tagger


def tagger_settings(settings: Mapping) -> dict:
    """The tagger's settings (`dexposure.model`, every key given), checked: a width its heads do
    not divide is refused in one line."""
    cfg = dict(settings)
    if int(cfg["hidden_size"]) % int(cfg["num_heads"]):
        raise UserError(
            f"dexposure.model: hidden_size {cfg['hidden_size']} is not a multiple of num_heads {cfg['num_heads']}"
        )
    return cfg


def build_tagger(tokenizer, tags: Sequence[str], settings: Mapping, seed: int, dropout: float | None = None):
    """A BertForTokenClassification from scratch: the tokenizer's vocabulary, the settings'
    size, `max_length` positions, dropout `dropout` (default the settings'), seeded init."""
    import torch
    from transformers import BertConfig, BertForTokenClassification

    cfg = tagger_settings(settings)
    p = float(cfg["dropout"] if dropout is None else dropout)
    torch.manual_seed(int(seed))
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=int(cfg["hidden_size"]),
        num_hidden_layers=int(cfg["num_layers"]),
        num_attention_heads=int(cfg["num_heads"]),
        intermediate_size=int(cfg["intermediate_size"]),
        max_position_embeddings=int(cfg["max_length"]),
        hidden_dropout_prob=p,
        attention_probs_dropout_prob=p,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=len(tags),
        id2label=dict(enumerate(tags)),
        label2id={t: i for i, t in enumerate(tags)},
    )
    return BertForTokenClassification(config)


def _logits(model, rows: Sequence[np.ndarray], pad_id: int, device, batch_size: int = 256):
    """Per row, the tag logits at every token (eval mode, no gradient), as float32 arrays."""
    import torch

    out = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            ids = pad_rows(chunk, pad_id).to(device)
            logits = model(input_ids=ids, attention_mask=(ids != pad_id).long()).logits.float().cpu().numpy()
            out.extend(logits[i, : len(r)] for i, r in enumerate(chunk))
    return out


def slot_probabilities(
    model, tokenizer, phrase: str, fillers: Sequence[str], max_length: int = 64, device="cpu", batch_size: int = 256
) -> np.ndarray:
    """The tag distribution at the slot word of the phrase, one row per filler.

    Each filler is put into the phrase's slot (`mlmia.world.phi.phrase_slot`); the phrase is
    encoded alone ([CLS] words [SEP]) and the row is the softmax over the tags of the logits at
    the first subword of the slot word (shape: len(fillers) x number of tags)."""
    words, slot = phrase_slot(phrase)
    sentences = [words[:slot] + [str(f)] + words[slot + 1 :] for f in fillers]
    ids, _, positions = encode_words(tokenizer, sentences, max_length)
    logits = _logits(model, ids, tokenizer.pad_token_id, device, batch_size)
    rows = []
    for i, (lg, pos) in enumerate(zip(logits, positions)):
        if pos[slot] < 0:
            raise UserError(f"filler {i}: the slot word has no token within max_length {max_length}")
        z = lg[pos[slot]].astype(np.float64)
        z = np.exp(z - z.max())
        rows.append(z / z.sum())
    return np.asarray(rows).reshape(len(sentences), -1)


def class_d_exposure(
    model, tokenizer, phrase: str, cls: str, word: str, candidates: Sequence[str], tags: Sequence[str], **kwargs
) -> dict:
    """d-exposure of the inserted word `word` for class `cls` (Helali et al., Eq. 2-3) with the
    candidate set `candidates` (the words labelled only as `cls`; `word` must not be among them).

    Confidence: P(B-<cls>) at the slot word's first subword; labelled: B-<cls> is the argmax tag
    there (`slot_probabilities`). Returns the numbers of one row of the runs table."""
    b = list(tags).index(f"B-{cls}")
    probs = slot_probabilities(model, tokenizer, phrase, [word, *candidates], **kwargs)
    conf, labelled = probs[:, b], probs.argmax(axis=1) == b
    value = d_exposure(float(conf[0]), bool(labelled[0]), conf[1:], labelled[1:])
    rank = 1 + int(np.sum(labelled[1:] & (conf[1:] >= conf[0]))) if labelled[0] else np.nan
    return {
        "class": cls,
        "size": len(candidates) + 1,
        "max_d_exposure": math.log2(len(candidates) + 1),
        "inserted_confidence": float(conf[0]),
        "inserted_labelled": bool(labelled[0]),
        "inserted_tag": tags[int(probs[0].argmax())],
        "rank": rank,
        "d_exposure": value,
        "candidates_labelled": float(labelled[1:].mean()) if len(candidates) else np.nan,
        "candidate_confidence_median": float(np.median(conf[1:])) if len(candidates) else np.nan,
    }


def evaluate(model, tokenizer, words, tags, tag_list: Sequence[str], max_length: int, device="cpu") -> dict:
    """Validation loss (mean cross-entropy over the words' first subwords) and seqeval's
    entity-level F1 (micro average, and per class) of the argmax tags; a word cut off by
    `max_length` is predicted O."""
    from seqeval.metrics import classification_report

    index = {t: i for i, t in enumerate(tag_list)}
    ids, labels, positions = encode_words(tokenizer, words, max_length, tags, index)
    logits = _logits(model, ids, tokenizer.pad_token_id, device)
    total, count, predicted = 0.0, 0, []
    for lg, lab, pos in zip(logits, labels, positions):
        sel = lab >= 0
        z = lg[sel].astype(np.float64)
        logz = z.max(axis=1) + np.log(np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1))
        total += float(np.sum(logz - z[np.arange(len(z)), lab[sel]]))
        count += int(sel.sum())
        best = lg.argmax(axis=1)
        predicted.append([tag_list[int(best[p])] if p >= 0 else "O" for p in pos])
    report = classification_report([list(t) for t in tags], predicted, output_dict=True, zero_division=0)
    out = {"valid_loss": total / max(count, 1), "f1": float(report["micro avg"]["f1-score"])}
    for key, row in report.items():
        if key not in ("micro avg", "macro avg", "weighted avg"):
            out[f"f1_{key}"] = float(row["f1-score"])
    return out


def train_and_measure(
    notes: pd.DataFrame,
    entities: Mapping[str, str],
    tokenizer,
    *,
    phrase: str,
    repetitions: int,
    seed: int,
    model_settings: Mapping,
    training: Mapping,
    checkpoints: Sequence[int],
    lr_decay: bool = True,
    dropout: float | None = None,
    setting: str = "main",
    device: str,
    threads: int,
    record_dir: str | os.PathLike | None = None,
    log_every: int = 20,
) -> pd.DataFrame:
    """Train a tagger on the notes' `train` split plus the inserted phrases and measure it at
    each checkpoint epoch: one row per (checkpoint, d-exposure class), columns `RUN_COLUMNS`
    plus `f1_<class>`. With `record_dir`, the run's record goes there as every trained model's
    does (`mlmia.models.run_record`: train_log.csv every `log_every` steps, train_curve.png,
    train_info.json; its training time includes the checkpoint measurements).

    `entities` maps each d-exposure class to its inserted word; the candidate sets are counted
    on the `train` split WITHOUT the inserted phrases (`mlmia.world.phi.candidate_words`).
    `training`: batch_size, lr, warmup_ratio, weight_decay (`dexposure.training`, every key
    given), `model_settings` the tagger's size (`dexposure.model`); training runs
    max(checkpoints) epochs; `lr_decay` False keeps the rate constant after warm-up; `dropout`
    overrides the model's (0 for the overfitting experiment). The training loss of a
    checkpoint is the mean loss of that epoch's batches (train mode)."""
    import torch

    from mlmia.models.loading import resolve_device

    t_start = time.time()
    record = RunRecord(f"{setting}_seed{seed}_rep{repetitions}", log_every)
    torch.set_num_threads(max(1, int(threads)))
    dev = resolve_device(device)
    mcfg, tcfg = dict(model_settings), dict(training)
    checkpoints = sorted({int(e) for e in checkpoints})
    if not checkpoints or checkpoints[0] < 1:
        raise UserError("dexposure: checkpoints must be epochs >= 1")
    classes = labelled_classes(notes)
    tag_list = tag_names(classes)
    index = {t: i for i, t in enumerate(tag_list)}
    for cls in entities:
        if cls not in classes:
            raise UserError(f"dexposure.classes: {cls!r} is not a class of the notes' tags ({', '.join(classes)})")
    train = notes[notes["split"] == "train"]
    valid = notes[notes["split"] == "valid"]
    counts = word_tag_counts(notes, "train")
    candidates = {cls: candidate_words(counts, cls, classes) for cls in entities}
    for cls, words in candidates.items():
        if not words:
            raise UserError(f"dexposure: class {cls} has no word labelled only as {cls} in the training notes")
    inserted = inserted_sentences(phrase, entities, repetitions)
    words = [list(w) for w in train["words"]] + [w for w, _ in inserted]
    tags = [list(t) for t in train["tags"]] + [t for _, t in inserted]
    ids, labels, _ = encode_words(tokenizer, words, mcfg["max_length"], tags, index)
    model = build_tagger(tokenizer, tag_list, mcfg, seed, dropout).to(dev)
    batch_size = int(tcfg["batch_size"])
    epochs = checkpoints[-1]
    steps_per_epoch = math.ceil(len(ids) / batch_size)
    total = steps_per_epoch * epochs
    optim, sched = adamw_with_schedule(
        model,
        lr=tcfg["lr"],
        weight_decay=tcfg["weight_decay"],
        warmup_ratio=tcfg["warmup_ratio"],
        total_steps=total,
        lr_decay=lr_decay,
    )
    rng = np.random.default_rng(int(seed))
    pad = tokenizer.pad_token_id
    log.info(
        "%s seed %d, %d repetitions: %d training sentences (%d inserted), %d valid, %d epochs, %s, classes %s "
        "(candidates %s)",
        setting,
        seed,
        repetitions,
        len(ids),
        len(inserted),
        len(valid),
        epochs,
        dev,
        ", ".join(entities),
        ", ".join(str(len(c)) for c in candidates.values()),
    )
    rows = []
    step = 0
    record.start(total)
    for epoch in range(1, epochs + 1):
        model.train()
        order = rng.permutation(len(ids))
        loss_sum, loss_n = 0.0, 0
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            x = pad_rows([ids[i] for i in batch], pad).to(dev)
            y = pad_rows([labels[i] for i in batch], -100).to(dev)
            loss = model(input_ids=x, attention_mask=(x != pad).long(), labels=y).loss
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            sched.step()
            step += 1
            n, value = int((y != -100).sum()), float(loss.detach())
            loss_sum += value * n
            loss_n += n
            record.add_loss(value)
            record.end_step(epoch, step, optim.param_groups[0]["lr"])
        if epoch not in checkpoints:
            continue
        quality = evaluate(
            model, tokenizer, list(valid["words"]), list(valid["tags"]), tag_list, mcfg["max_length"], dev
        )
        per_class = []
        for cls, word in entities.items():
            row = class_d_exposure(
                model,
                tokenizer,
                phrase,
                cls,
                word,
                candidates[cls],
                tag_list,
                max_length=mcfg["max_length"],
                device=dev,
            )
            per_class.append(row["d_exposure"])
            rows.append(
                {
                    "setting": setting,
                    "seed": int(seed),
                    "repetitions": int(repetitions),
                    "epoch": epoch,
                    **row,
                    "train_sentences": len(ids),
                    "train_loss": loss_sum / max(loss_n, 1),
                    **quality,
                    "seconds": round(time.time() - t_start, 2),
                }
            )
        log.info(
            "%s seed %d, %d repetitions, epoch %d: train loss %.4f, valid loss %.4f, F1 %.3f, d-exposure %s (mean %.3f)",
            setting,
            seed,
            repetitions,
            epoch,
            loss_sum / max(loss_n, 1),
            quality["valid_loss"],
            quality["f1"],
            ", ".join(f"{c} {v:.2f}" for c, v in zip(entities, per_class)),
            mean_d_exposure(per_class),
        )
    record.finish(epochs, step, optim.param_groups[0]["lr"])
    if record_dir is not None:
        config = {"setting": setting, "seed": int(seed), "repetitions": int(repetitions), "model": mcfg,
                  "training": tcfg, "checkpoints": checkpoints, "lr_decay": lr_decay, "dropout": dropout}  # fmt: skip
        record.write(record_dir, config=config, init_from=None, n_texts=len(ids), n_tokens=sum(len(i) for i in ids),
                     steps=step, epochs_run=epochs, steps_per_epoch=steps_per_epoch, threads=threads, device=dev,
                     model=model, loss_label="tagging loss (labelled subwords)")  # fmt: skip
    out = pd.DataFrame(rows)
    return out[RUN_COLUMNS + sorted(c for c in out.columns if c.startswith("f1_"))]


# --------------------------------------------------------------------------------------------
# the main experiment's design


def main_design(dexposure: Mapping) -> dict:
    """How each tagger of the main experiment is trained, from the `dexposure:` config (`model`,
    `training`): dropout as configured, learning-rate decay, the whole training split, measured
    at `training.checkpoints`. Only what one tagger's training depends on (not its seed count);
    the overfitting experiment's: `mlmia.memorization.overfitting.overfit_design`."""
    return {
        "model": dexposure["model"],
        "training": dexposure["training"],
        "checkpoints": dexposure["training"]["checkpoints"],
        "lr_decay": True,
        "dropout": None,
        "fraction": 1.0,
    }


def main_runs(dexposure: Mapping) -> list[tuple[int, int]]:
    """The main experiment's taggers: (model seed, repetitions) for seeds 0 .. `seeds` - 1 and
    every value of `repetitions`."""
    return [(seed, int(reps)) for seed in range(int(dexposure["seeds"])) for reps in dexposure["repetitions"]]
