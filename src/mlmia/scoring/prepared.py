"""What a sample is scored as: the scorer's parameters checked, each text tokenized and its
masking patterns laid out (`prepare`), and the scores' output frame (`score_frame`); shared by the
fast path (`mlmia.scoring.fast_path`) and the oracle (`mlmia.scoring.energy.score_samples_oracle`).

Content tokens: every token the tokenizer did not add; masks are keyed on `mask_keys` (the
`mask_id` column where given, else the sample id: `mlmia.scoring.masks`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError, shown_id
from mlmia.core.io import require_columns
from mlmia.core.logs import get_logger
from mlmia.models.loading import max_sequence_length
from mlmia.models.tokenizer import encode_text
from mlmia.scoring.masks import MASK_COUNTS, mask_keys
from mlmia.scoring.schedules import check_schedule, content_patterns
from mlmia.terms.scores import ENERGY_KINDS, PATTERN_SIZES, SCORE_COLUMNS, SIZED_KINDS

log = get_logger(__name__)

REDUCTIONS = ("mean", "sum")
#: energy kinds whose patterns also mask positions they do not score
UNSCORED_MASKS = ("pll_word_l2r", "progressive")
#: CUDA autocast dtypes (auto: bf16 where the GPU supports it, else fp16); CPU always runs fp32
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def check_params(
    energy: str,
    patterns: int,
    seed: int,
    reduction: str,
    batch_size: int | None,
    mask_count: str,
    precision: str,
    schedule: Mapping | None,
) -> dict | None:
    """Check the scoring parameters; the energy kind's schedule, checked whole (or None)."""
    if mask_count not in MASK_COUNTS:
        raise UserError(f"unknown mask count {mask_count!r} (use one of {', '.join(MASK_COUNTS)})")
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r} (use one of {', '.join(PRECISIONS)})")
    if energy not in ENERGY_KINDS:
        raise UserError(f"unknown energy kind {energy!r} (use one of {', '.join(ENERGY_KINDS)})")
    if reduction not in REDUCTIONS:
        raise UserError(f"unknown reduction {reduction!r} (use one of {', '.join(REDUCTIONS)})")
    if int(patterns) < 1:
        raise UserError(f"the number of masking patterns must be >= 1, got {patterns}")
    if int(seed) < 0:
        raise UserError(f"the seed must be >= 0, got {seed}")
    if batch_size is not None and int(batch_size) < 1:
        raise UserError(f"the batch size must be >= 1, got {batch_size}")
    return check_schedule(energy, schedule)


def sample_columns(samples: pd.DataFrame) -> tuple[list[str], list[str]]:
    require_columns(samples, ["sample_id", "text"], "samples")
    sids = samples["sample_id"].astype(str).tolist()
    dup = pd.Series(sids).duplicated()
    if dup.any():
        raise UserError(f"samples: duplicate sample_id {shown_id(sids[int(np.flatnonzero(dup.to_numpy())[0])])}")
    return sids, samples["text"].astype(str).tolist()


@dataclass
class Prepared:
    sample_ids: list[str]
    ids: list[np.ndarray]  # token ids of each sample, special tokens included
    # sequence positions to mask and score: (K_i, l_i), or K_i arrays where patterns differ in size
    patterns: list[np.ndarray | list[np.ndarray]]
    n_tokens: np.ndarray  # content tokens after truncation
    mask_id: int
    pad_id: int
    # further positions to mask (not scored) in each pattern (pll_word_l2r: the rest of the word;
    # progressive: the tokens earlier steps masked)
    extra: list[list[np.ndarray]] | None = None
    # a pattern's value is the sum of its cross-entropies times T / l (elbo, reduction sum)
    per_sequence: bool = False

    def masked(self, i: int, j: int) -> np.ndarray:
        """Every position pattern j of sample i masks."""
        return self.patterns[i][j] if self.extra is None else np.r_[self.patterns[i][j], self.extra[i][j]]


def prepare(
    model,
    tokenizer,
    samples: pd.DataFrame,
    energy: str,
    patterns: int,
    seed: int,
    mask_count: str,
    truncate: bool,
    schedule: Mapping | None,
    reduction: str,
) -> Prepared:
    """Tokenize and lay out every sample's masking patterns. A text longer than the model's
    maximum length is refused (its score would be the score of a prefix) unless `truncate`,
    then cut and counted in the log.

    Content tokens: every token the tokenizer did not add ([CLS], [SEP], <s>, </s>); text
    that spells a special token is content like any other (`encode_text`), the count
    `mlmia.models.tokenizer.content_tokens` gives."""
    (sids, texts), keys = sample_columns(samples), mask_keys(samples)  # masks keyed on mask_id where given
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise UserError(f"tokenizer of {type(model).__name__} has no mask token; not a masked language model")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    max_len = max_sequence_length(model, tokenizer)
    per_sequence = energy == "elbo" and reduction == "sum"
    if not texts:
        return Prepared(
            sids,
            [],
            [],
            np.zeros(0, dtype=np.int64),
            int(mask_id),
            int(pad_id),
            [] if energy in UNSCORED_MASKS else None,
            per_sequence,
        )
    # special-token strings in the text ("[MASK]", "<pad>") are read as characters: see encode_text
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
    ids_list, laid_out, n_tok = [], [], np.empty(len(texts), dtype=np.int64)
    extra: list[list[np.ndarray]] | None = [] if energy in UNSCORED_MASKS else None
    if energy == "pll_word_l2r" and not getattr(enc, "is_fast", False):
        raise UserError("energy pll_word_l2r needs word boundaries: a fast tokenizer (tokenizer.json)")
    n_truncated = 0
    for i, (sid, ids, special) in enumerate(zip(sids, enc["input_ids"], enc["special_tokens_mask"])):
        ids = np.asarray(ids, dtype=np.int64)
        content = np.flatnonzero(np.asarray(special) == 0)
        t = len(content)
        if t == 0:
            raise UserError(f"sample {shown_id(sid)}: no tokens to score (empty text after tokenization)")
        if len(full["input_ids"][i]) > t:
            if not truncate:
                raise UserError(
                    f"sample {shown_id(sid)} is longer than the model's maximum length ({max_len} tokens with special tokens; "
                    f"it has {len(full['input_ids'][i])} content tokens): shorten the samples, or allow truncation "
                    "(config scoring.truncate: true; mlmia score --truncate)"
                )
            n_truncated += 1
        pat, unscored = content_patterns(energy, seed, keys[i], t, patterns, mask_count, schedule)
        ids_list.append(ids)
        laid_out.append(content[pat] if isinstance(pat, np.ndarray) else [content[p] for p in pat])
        n_tok[i] = t
        if energy == "pll_word_l2r":
            extra.append(rest_of_word(enc.word_ids(i), content))
        elif extra is not None:
            extra.append([content[p] for p in unscored])
    if n_truncated:
        log.warning(
            "%d of %d samples are longer than the model's maximum length (%d tokens with special tokens) and were truncated",
            n_truncated,
            len(texts),
            max_len,
        )
    return Prepared(sids, ids_list, laid_out, n_tok, int(mask_id), int(pad_id), extra, per_sequence)


def rest_of_word(word_ids: list, content: np.ndarray) -> list[np.ndarray]:
    """For each content position, the later content positions of the same word (PLL-word-l2r)."""
    out = []
    for n, position in enumerate(content):
        word = word_ids[position]
        later = []
        for other in content[n + 1 :]:
            if word is None or word_ids[other] != word:
                break
            later.append(other)
        out.append(np.asarray(later, dtype=np.int64))
    return out


def score_frame(
    prep: Prepared, per_pattern: list[np.ndarray], evidence: list[dict], energy: str, seed: int, model_name: str
) -> pd.DataFrame:
    n = len(prep.sample_ids)

    def lists(key, cast):
        return pd.Series([np.asarray(e[key]).astype(cast).tolist() for e in evidence], dtype=object)

    sized = energy in SIZED_KINDS
    sizes = [[len(pattern) for pattern in p] for p in prep.patterns]
    frame = pd.DataFrame(
        {
            "sample_id": pd.Series(prep.sample_ids, dtype=object),
            "model": pd.Series([model_name] * n, dtype=object),
            "energy_kind": pd.Series([energy] * n, dtype=object),
            "energy": np.array([float(np.mean(v)) for v in per_pattern], dtype=np.float64),
            "n_tokens": prep.n_tokens.astype(np.int64),
            "n_masked": np.array(
                [sum(z) if sized else p.shape[1] for z, p in zip(sizes, prep.patterns)], dtype=np.int64
            ),
            "per_pattern": pd.Series([np.asarray(v, dtype=np.float64).tolist() for v in per_pattern], dtype=object),
            "patterns": np.array([len(p) for p in prep.patterns], dtype=np.int64),
            "seed": np.full(n, int(seed), dtype=np.int64),
            "token_logp": lists("logp", np.float64),
            "token_mean": lists("mean", np.float64),
            "token_var": lists("var", np.float64),
            "token_top1": lists("top1", bool),
        },
        columns=SCORE_COLUMNS,
    )
    if sized:
        frame[PATTERN_SIZES] = pd.Series(sizes, dtype=object)
    return frame
