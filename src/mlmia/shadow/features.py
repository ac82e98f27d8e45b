"""Black-box features of a fill-in query: the MLM analogue of the paper's translation query
(Hisamoto, Post and Duh, TACL 2020, Section 4: sentence BLEU of the translation, and in
Section 5.2 the model's score).

A fill-in query masks some content tokens of a sentence and asks the model for them. For
each sentence `fill_in_features` masks l = ceil(0.15 T) of its T content tokens, the
positions of `mlmia.scoring.masks.mask_patterns(seed, sample_id, T, 1, "ceil")` (the first pattern
the energy scorer draws for that sample), and fills every masked position with the model's
top-1 token from ONE forward pass of the masked sequence. From that pass:

- `bleu`: `sacrebleu.sentence_bleu(hypothesis, [reference])` (its defaults: 13a
  tokenization, exp smoothing, effective order), on a 0-100 scale, where the reference is
  the decoded content tokens of the sentence and the hypothesis the same tokens with the
  predictions put in. Both are decoded by `tokenizer.decode(ids, skip_special_tokens=False,
  clean_up_tokenization_spaces=False)`, so the text compared is the tokenizer's reading of
  the sentence (lower-cased for an uncased vocabulary), never the raw text; unmasked tokens
  are copied, so BLEU measures the fill-in only through the positions that were masked.
- `top1_accuracy`: the fraction of masked positions whose prediction is the original token.
- `model_score`: the mean natural-log probability the model gives its OWN top-1 tokens at the
  masked positions, from the same pass: the paper's model score (Section 5.2: the translation
  system's score of the translation it outputs) carried over. It needs no reference: what a
  black-box API that returns its output's score gives.
- `energy`: the mean cross-entropy (natural log) of the original tokens at the masked
  positions (the loss attack's statistic; an extra MLM column the shadow protocol does not
  use). It equals, up to float rounding, the masked energy of
  `mlmia.scoring.energy.score_samples` with patterns=1 (the same mask).
- the BLEU sufficient statistics (`hyp_len`, `ref_len`, `match_1..4`, `total_1..4`), so
  that the corpus BLEU of any set of sentences can be computed later without keeping text
  (`corpus_bleu_from_stats`; equal to `sacrebleu.corpus_bleu` of those sentences).

Tokenization is `mlmia.models.tokenizer.encode_text`: special-token strings in the text are
read as characters. The argmax runs over the whole vocabulary (a black-box fill-in API
returns whatever token ranks first, special tokens included). No text is logged or returned.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import sacrebleu
import torch
import torch.nn.functional as F
from sacrebleu.metrics import BLEU

from mlmia.core.errors import UserError, shown_id
from mlmia.core.io import require_columns
from mlmia.core.keys import stable_key
from mlmia.core.logs import get_logger
from mlmia.models.loading import max_sequence_length, mlm_parts
from mlmia.models.tokenizer import encode_text, word_counts
from mlmia.scoring.masks import MASK_FRACTION, mask_patterns, n_masked

log = get_logger(__name__)

NGRAM_ORDER = 4
STAT_COLUMNS = (
    ["hyp_len", "ref_len"] + [f"match_{n}" for n in range(1, 5)] + [f"total_{n}" for n in range(1, 5)]
)  # fmt: skip
#: the sentence's modified n-gram precisions (%, sacrebleu's `precisions`: exp-smoothed where nothing
#: matched), the paper's features beside BLEU (Section 4)
PRECISION_COLUMNS = [f"precision_{n}" for n in range(1, NGRAM_ORDER + 1)]
FEATURE_COLUMNS = [
    "sample_id", "n_tokens", "n_masked", "n_correct", "top1_accuracy", "energy", "model_score", "bleu",
    *PRECISION_COLUMNS, *STAT_COLUMNS,
]  # fmt: skip


def mask_positions(seed: int, sample_id: str, n_tokens: int, mask_fraction: float = MASK_FRACTION) -> np.ndarray:
    """Content positions (sorted) masked in a sample's fill-in query.

    With the default fraction 0.15: `mask_patterns(seed, sample_id, n_tokens, 1, "ceil")[0]`. Another
    fraction f masks l = max(1, ceil(f T)) positions (exact rational arithmetic, so 0.15 x 20
    is 3) drawn the way `mask_patterns` draws its first pattern: l positions without
    replacement from `numpy.random.default_rng([seed, sha256(sample_id), 0])`."""
    n_tokens = int(n_tokens)
    fraction = Fraction(str(mask_fraction))
    if not 0 < fraction <= 1:
        raise UserError(f"mask_fraction must be in (0, 1], got {mask_fraction}")
    n_mask = max(1, math.ceil(fraction * n_tokens))
    if n_mask == n_masked(n_tokens, "ceil"):
        return mask_patterns(seed, sample_id, n_tokens, 1, "ceil")[0]
    if n_mask >= n_tokens:
        return np.arange(n_tokens, dtype=np.int64)
    rng = np.random.default_rng([int(seed), stable_key(sample_id), 0])
    return np.sort(rng.choice(n_tokens, size=n_mask, replace=False)).astype(np.int64)


def bleu_statistics(hypothesis: str, reference: str) -> dict:
    """Sentence BLEU of one (hypothesis, reference) pair, its n-gram precisions and its sufficient
    statistics: `sacrebleu.sentence_bleu(hypothesis, [reference])`, its score clamped to [0, 100]
    (a perfect match can come out as 100.00000000000004 by rounding), `precision_n` its
    `precisions[n - 1]`."""
    score = sacrebleu.sentence_bleu(hypothesis, [reference])
    out = {
        "bleu": min(100.0, max(0.0, float(score.score))),
        "hyp_len": int(score.sys_len),
        "ref_len": int(score.ref_len),
    }
    for n in range(NGRAM_ORDER):
        out[f"match_{n + 1}"] = int(score.counts[n])
        out[f"total_{n + 1}"] = int(score.totals[n])
        out[f"precision_{n + 1}"] = float(score.precisions[n])
    return out


def corpus_bleu_from_stats(stats: pd.DataFrame) -> float:
    """Corpus BLEU (0-100) of the sentences whose statistics are the rows of `stats`: the
    statistics summed, then BLEU with sacrebleu's corpus defaults (exp smoothing, no effective
    order): the value `sacrebleu.corpus_bleu(hypotheses, [references])` gives."""
    if len(stats) == 0:
        return float("nan")
    total = stats[STAT_COLUMNS].sum()
    score = BLEU.compute_bleu(
        correct=[int(total[f"match_{n}"]) for n in range(1, 5)],
        total=[int(total[f"total_{n}"]) for n in range(1, 5)],
        sys_len=int(total["hyp_len"]),
        ref_len=int(total["ref_len"]),
        smooth_method="exp",
        effective_order=False,
    )
    return float(score.score)


def decode(tokenizer, ids) -> str:
    """The text a token sequence is scored as: `tokenizer.decode(ids, skip_special_tokens=False,
    clean_up_tokenization_spaces=False)`."""
    return tokenizer.decode([int(i) for i in ids], skip_special_tokens=False, clean_up_tokenization_spaces=False)


def fill_in_features(
    model,
    tokenizer,
    samples: pd.DataFrame,
    seed: int,
    mask_fraction: float = MASK_FRACTION,
    *,
    batch_size: int = 64,
    truncate: bool = False,
) -> pd.DataFrame:
    """Fill-in features of every sample (`sample_id`, `text`), one row each in input order,
    with the columns `FEATURE_COLUMNS` (see the module docstring for what each is).

    Sequences are run `batch_size` at a time in length order, in `torch.inference_mode` and
    eval mode, on the model's device in its dtype. A text longer than the model's maximum
    length is refused (its features would be a prefix's) unless `truncate`."""
    require_columns(samples, ["sample_id", "text"], "fill_in_features: samples")
    sids = samples["sample_id"].astype(str).tolist()
    texts = samples["text"].astype(str).tolist()
    if len(set(sids)) != len(sids):
        dup = pd.Series(sids)[pd.Series(sids).duplicated()].iloc[0]
        raise UserError(f"fill_in_features: duplicate sample_id {shown_id(dup)}")
    if int(seed) < 0:
        raise UserError(f"fill_in_features: the seed must be >= 0, got {seed}")
    if int(batch_size) < 1:
        raise UserError(f"fill_in_features: the batch size must be >= 1, got {batch_size}")
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise UserError("fill_in_features: the tokenizer has no mask token; not a masked language model")
    if not sids:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "sample_id" else float) for c in FEATURE_COLUMNS})
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    max_len = max_sequence_length(model, tokenizer)
    labels = [f"sample {shown_id(sid)}" for sid in sids]
    enc = encode_text(
        tokenizer,
        texts,
        labels=labels,
        truncation=True,
        max_length=max_len,
        return_attention_mask=False,
        return_token_type_ids=False,
        verbose=False,
    )
    full = encode_text(
        tokenizer,
        texts,
        labels=labels,
        add_special_tokens=False,
        return_attention_mask=False,
        return_token_type_ids=False,
        verbose=False,
    )
    ids_list, content_list, masked_list = [], [], []
    n_truncated = 0
    for i, (sid, ids, special) in enumerate(zip(sids, enc["input_ids"], enc["special_tokens_mask"])):
        ids = np.asarray(ids, dtype=np.int64)
        content = np.flatnonzero(np.asarray(special) == 0)
        if len(content) == 0:
            raise UserError(f"fill_in_features: sample {shown_id(sid)}: no tokens (empty text after tokenization)")
        if len(full["input_ids"][i]) > len(content):
            if not truncate:
                raise UserError(
                    f"fill_in_features: sample {shown_id(sid)} has {len(full['input_ids'][i])} content tokens, more than the "
                    f"model's maximum length ({max_len} with special tokens); shorten it or allow truncation"
                )
            n_truncated += 1
        ids_list.append(ids)
        content_list.append(content)
        masked_list.append(content[mask_positions(seed, sid, len(content), mask_fraction)])
    if n_truncated:
        log.warning(
            "fill-in features: %d of %d samples truncated to the model's maximum length", n_truncated, len(sids)
        )

    predictions: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(sids)
    ce_sums = np.zeros(len(sids), dtype=np.float64)
    top_sums = np.zeros(len(sids), dtype=np.float64)
    device = next(model.parameters()).device
    parts = mlm_parts(model)
    order = np.argsort([len(x) for x in ids_list], kind="stable")
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(order), int(batch_size)):
                rows = order[start : start + int(batch_size)]
                width = max(len(ids_list[i]) for i in rows)
                x = torch.full((len(rows), width), pad_id, dtype=torch.long)
                attn = torch.zeros((len(rows), width), dtype=torch.long)
                r_idx, p_idx = [], []
                for r, i in enumerate(rows):
                    x[r, : len(ids_list[i])] = torch.from_numpy(ids_list[i])
                    attn[r, : len(ids_list[i])] = 1
                    r_idx.extend([r] * len(masked_list[i]))
                    p_idx.extend(masked_list[i].tolist())
                r_t, p_t = torch.tensor(r_idx), torch.tensor(p_idx)
                targets = x[r_t, p_t].clone()
                x[r_t, p_t] = int(mask_id)
                x, attn = x.to(device), attn.to(device)
                if parts is not None:
                    encoder, head = parts
                    hidden = encoder(input_ids=x, attention_mask=attn).last_hidden_state
                    logits = head(hidden[r_t.to(device), p_t.to(device)]).float().cpu()
                else:
                    logits = (
                        model(input_ids=x, attention_mask=attn).logits[r_t.to(device), p_t.to(device)].float().cpu()
                    )
                top1 = logits.argmax(dim=-1).numpy()
                log_probs = F.log_softmax(logits.double(), dim=-1)
                ce = -log_probs.gather(1, targets[:, None]).squeeze(1).numpy()
                top = log_probs.max(dim=-1).values.numpy()
                offset = 0
                for i in rows:
                    n = len(masked_list[i])
                    predictions[i] = top1[offset : offset + n]
                    ce_sums[i] = ce[offset : offset + n].sum()
                    top_sums[i] = top[offset : offset + n].sum()
                    offset += n
    finally:
        model.train(was_training)

    records = []
    for i, sid in enumerate(sids):
        ids, content, masked = ids_list[i], content_list[i], masked_list[i]
        filled = ids.copy()
        filled[masked] = predictions[i]
        n_correct = int((predictions[i] == ids[masked]).sum())
        record = {
            "sample_id": sid,
            "n_tokens": len(content),
            "n_masked": len(masked),
            "n_correct": n_correct,
            "top1_accuracy": n_correct / len(masked),
            "energy": float(ce_sums[i] / len(masked)),
            "model_score": float(top_sums[i] / len(masked)),
        }
        record.update(bleu_statistics(decode(tokenizer, filled[content]), decode(tokenizer, ids[content])))
        records.append(record)
    log.info("fill-in features of %d samples (%d masked tokens)", len(sids), sum(len(m) for m in masked_list))
    return pd.DataFrame.from_records(records, columns=FEATURE_COLUMNS)


def _words(text: str) -> set[str]:
    """The words of one text: `word_counts` units holding at least one letter or digit."""
    return {w for w in word_counts([text]) if any(ch.isalnum() for ch in w)}


def oov_flags(texts, reference_texts) -> np.ndarray:
    """For each text: does it hold at least one word absent from `reference_texts` (the
    paper's out-of-vocabulary subset, Table 5: a word the model never trained on)?

    A word is a unit of `mlmia.models.tokenizer.word_counts` (BERT uncased normalisation, then
    splits at whitespace and punctuation: what the WordPiece model sees as one word) that
    holds at least one letter or digit; punctuation marks are not words."""
    known: set[str] = set()
    for text in reference_texts:
        known |= _words(str(text))
    return np.array([bool(_words(str(text)) - known) for text in texts], dtype=bool)


def shadow_oov_flags(rows: pd.DataFrame, texts: pd.Series, training_texts: dict[int, pd.Series]) -> np.ndarray:
    """Per row of Bob's labelled pairs (`sample_id`, `shadow`): does its sentence hold a word
    that shadow model `shadow` never trained on (`training_texts[shadow]`, its training
    sentences)? `texts` maps sample ids to the sentences. The paper flags OOV against the model
    that is queried; a sentence a shadow trained on is never OOV for it."""
    require_columns(rows, ["sample_id", "shadow"], "OOV flags: Bob's pairs")
    flags = np.zeros(len(rows), dtype=bool)
    shadows = rows["shadow"].astype(int).to_numpy()
    for shadow in np.unique(shadows):
        if int(shadow) not in training_texts:
            raise UserError(f"OOV flags: no training text for shadow model {int(shadow)}")
        at = np.flatnonzero(shadows == shadow)
        ids = rows["sample_id"].astype(str).to_numpy()[at]
        missing = [i for i in ids if i not in texts.index]
        if missing:
            raise UserError(f"OOV flags: sample {shown_id(missing[0])} has no text")
        flags[at] = oov_flags(texts.loc[ids].tolist(), training_texts[int(shadow)])
    return flags
