"""Black-box features of a translation query, the paper's own (Hisamoto, Post and Duh, TACL 2020,
Section 4 and 5.2), for the translation target (`snakemake shadow_mt`; the model:
`mlmia.models.seq2seq`; the corpus: `mlmia.world.parallel`).

Bob sends the source of a sentence pair and receives the model's translation, and where scores are
exposed its score. Per pair (`translation_features`):

- `bleu`, `precision_1..4` and the BLEU statistics `STAT_COLUMNS`: `mlmia.shadow.features.bleu_statistics`
  of the greedy translation against the reference target (sacrebleu's sentence BLEU with its defaults).
  Both sides are compared as the tokenizer reads them (`mlmia.shadow.features.decode` of their tokens,
  lower-cased for the world's uncased vocabulary): the model can only write what its vocabulary
  holds, so case and spacing the tokenizer drops are not counted against it. The translation is
  the output without its final `[SEP]`; a special token it writes elsewhere stays in the text
  (a black box returns whatever ranks first).
- `model_score`: the mean natural-log probability the model gives the tokens of its own greedy
  translation, `[SEP]` included (the paper's model score: the translation system's score of its
  top-1 output, here per token so that long and short sentences compare).
- `n_tokens`: the output's tokens (with `[SEP]`).

No text is returned or logged.
"""

from __future__ import annotations

import pandas as pd

from mlmia.core.errors import UserError, shown_id
from mlmia.core.io import require_columns
from mlmia.core.logs import get_logger
from mlmia.models.seq2seq import greedy_translate
from mlmia.models.tokenizer import encode_text
from mlmia.shadow.features import PRECISION_COLUMNS, STAT_COLUMNS, bleu_statistics, decode

log = get_logger(__name__)

#: the columns of a translation feature table
MT_FEATURE_COLUMNS = ["sample_id", "n_tokens", "model_score", "bleu", *PRECISION_COLUMNS, *STAT_COLUMNS]


def translation_features(model, tokenizer, pairs: pd.DataFrame, *, batch_size: int = 64) -> pd.DataFrame:
    """The features of every pair (`sample_id`, `text`: the source, `target`: the reference), one row
    each in input order, columns `MT_FEATURE_COLUMNS` (see the module docstring)."""
    require_columns(pairs, ["sample_id", "text", "target"], "translation features: pairs")
    sids = pairs["sample_id"].astype(str).tolist()
    if len(set(sids)) != len(sids):
        dup = pairs["sample_id"].astype(str)[pairs["sample_id"].astype(str).duplicated()].iloc[0]
        raise UserError(f"translation features: duplicate sample_id {shown_id(dup)}")
    if not sids:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "sample_id" else float) for c in MT_FEATURE_COLUMNS})
    translations = greedy_translate(model, tokenizer, pairs["text"].astype(str).tolist(), batch_size=batch_size)
    # the reference as the tokenizer reads it, uncut
    references = encode_text(tokenizer, pairs["target"].astype(str).tolist(), add_special_tokens=False,
                             return_attention_mask=False, return_token_type_ids=False, verbose=False)["input_ids"]  # fmt: skip
    end = tokenizer.sep_token_id
    records = []
    for sid, out, ref in zip(sids, translations, references):
        ids = out.ids[:-1] if out.ids.size and out.ids[-1] == end else out.ids
        record = {"sample_id": sid, "n_tokens": int(out.ids.size), "model_score": out.model_score}
        record.update(bleu_statistics(decode(tokenizer, ids), decode(tokenizer, ref)))
        records.append(record)
    unfinished = sum(1 for out in translations if not (out.ids.size and out.ids[-1] == end))
    log.info("translation features of %d pairs (%d cut at the length limit)", len(sids), unfinished)
    return pd.DataFrame.from_records(records, columns=MT_FEATURE_COLUMNS)
