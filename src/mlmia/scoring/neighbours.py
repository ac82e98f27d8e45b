"""Neighbour samples for the neighbourhood attack (`mlmia.attacks.neighbourhood`).

Mattern et al., "Membership Inference Attacks against Language Models via Neighbourhood
Comparison", Findings of ACL 2023, compare a text's loss with the losses of neighbours: the
same text with a word replaced by a masked language model's guess. Here neighbour ``j`` of a
sample replaces one content token:

1. a position is drawn among the sample's content tokens (not [CLS]/[SEP]/<s>; within the
   model's maximum length) by ``numpy.random.default_rng([seed, stable_key(sample_id), j,
   NEIGHBOUR_STREAM])``; the last entry keeps this stream apart from the masking patterns',
   which are drawn from ``[seed, stable_key(sample_id), j]`` (`mlmia.scoring.masks`);
2. the token there is masked and the replacement model runs once on that input (batched,
   ``torch.inference_mode``; one forward per distinct (sample, position));
3. the candidates, best logit first, exclude the original token, every special token
   (the unknown token included) and ids beyond the tokenizer's vocabulary; with a
   WordPiece tokenizer a candidate also keeps the original's kind: a continuation piece
   ("##...") only where the original is one, a word start only where the original is one,
   so that the words of the text stay the words they were;
4. the text is the original text with the replaced token's characters (from the fast
   tokenizer's offsets, together with the white space before it) swapped for the
   tokenizer's decoding of the new token after the previous one
   (``decode([prev, new])`` minus ``decode([prev])``); the rest of the text is kept as it
   is, characters the vocabulary does not know and case included. (Decoding the whole token
   sequence instead would lower-case and respace the text for an uncased WordPiece
   tokenizer and drop every unknown character: the same for members and non-members, but
   the neighbours would differ from the original in more than the one token.)
5. a candidate is kept only if the new text tokenizes (as the scorer reads text,
   `mlmia.models.tokenizer.encode_text`) to the original tokens with exactly that one
   position changed to the candidate; else the next candidate is tried (the top
   ``candidates`` first, then the rest of the vocabulary in logit order).

Neighbours of one sample that draw the same position take that position's next valid
candidates in turn, so that they are distinct texts. The same model, tokenizer, samples and
seed give the same neighbours (CPU, fp32). Nothing of the text is logged or put in a
message.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from mlmia.attacks.table import NEIGHBOUR_SEPARATOR
from mlmia.core.errors import UserError, shown_id
from mlmia.core.keys import stable_key
from mlmia.core.logs import get_logger
from mlmia.models.loading import max_sequence_length, mlm_parts
from mlmia.models.tokenizer import encode_text

log = get_logger(__name__)

#: the 4th entry of a neighbour's generator seed (apart from the masking patterns' stream)
NEIGHBOUR_STREAM = 7
#: tokens (padded rows x length) per forward pass when no batch size is given
DEFAULT_TOKEN_BUDGET = 4096


def neighbour_id(sample_id: str, j: int) -> str:
    """The sample id of neighbour `j` of `sample_id`: "<sample_id>~n<j>"."""
    return f"{sample_id}{NEIGHBOUR_SEPARATOR}{int(j)}"


def _word_pieces(tokenizer) -> str | None:
    """The continuation prefix ("##") of a WordPiece tokenizer, else None."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    model = getattr(backend, "model", None)
    if type(model).__name__ == "WordPiece":
        return str(getattr(model, "continuing_subword_prefix", "##") or "##")
    return None


def _banned(tokenizer, vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(banned where the original is a word start, banned where it is a continuation,
    is-continuation) over the model's vocabulary: specials, ids the tokenizer lacks, and
    for WordPiece the other kind of piece."""
    n_tok = len(tokenizer)
    base = np.zeros(vocab_size, dtype=bool)
    base[min(n_tok, vocab_size) :] = True
    special = [i for i in tokenizer.all_special_ids if isinstance(i, int) and 0 <= i < vocab_size]
    base[special] = True
    for i, tok in getattr(tokenizer, "added_tokens_decoder", {}).items():
        if getattr(tok, "special", False) and 0 <= i < vocab_size:
            base[i] = True
    continuation = np.zeros(vocab_size, dtype=bool)
    prefix = _word_pieces(tokenizer)
    if prefix is None:
        return base, base, continuation
    tokens = tokenizer.convert_ids_to_tokens(list(range(min(n_tok, vocab_size))))
    continuation[: len(tokens)] = [t is not None and t.startswith(prefix) for t in tokens]
    return base | continuation, base | ~continuation, continuation


class _Sample:
    """One sample's tokens: model input ids (special tokens included, cut to the model's
    length), the content positions in them, and the full content tokens with offsets."""

    def __init__(self, sid, text, model_ids, content_pos, full_ids, offsets):
        self.sid, self.text = sid, text
        self.model_ids = model_ids  # np.int64 array
        self.content_pos = content_pos  # positions in model_ids of content tokens, in order
        self.full_ids = full_ids  # content token ids of the whole text
        self.offsets = offsets  # (start, end) characters of each content token


def _prepare(tokenizer, sids: list[str], texts: list[str], max_len: int) -> list[_Sample]:
    labels = [f"sample {shown_id(sid)}" for sid in sids]
    common = dict(labels=labels, return_attention_mask=False, return_token_type_ids=False, verbose=False)
    enc = encode_text(tokenizer, texts, truncation=True, max_length=max_len, **common)
    full = encode_text(tokenizer, texts, add_special_tokens=False, return_offsets_mapping=True, **common)
    out = []
    for i, sid in enumerate(sids):
        ids = np.asarray(enc["input_ids"][i], dtype=np.int64)
        content = np.flatnonzero(np.asarray(enc["special_tokens_mask"][i]) == 0)
        if content.size == 0:
            raise UserError(f"sample {shown_id(sid)}: no tokens to replace (empty text after tokenization)")
        full_ids = np.asarray(full["input_ids"][i], dtype=np.int64)
        if not np.array_equal(full_ids[: content.size], ids[content]):  # pragma: no cover - tokenizer oddity
            raise UserError(
                f"sample {shown_id(sid)}: the tokenizer cuts the text differently with and without truncation"
            )
        offsets = [tuple(map(int, o)) for o in full["offset_mapping"][i]]
        out.append(_Sample(sid, texts[i], ids, content, full_ids, offsets))
    return out


def _candidate_text(tokenizer, sample: _Sample, k: int, new_id: int) -> str | None:
    """The text with content token `k` replaced by `new_id` (step 4 of the module docstring),
    or None where the decoding does not extend the previous token's."""
    start, end = sample.offsets[k]
    if k == 0:
        middle = tokenizer.decode([new_id], skip_special_tokens=False)
        return sample.text[:start] + middle + sample.text[end:]
    prev = int(sample.full_ids[k - 1])
    before = tokenizer.decode([prev], skip_special_tokens=False)
    both = tokenizer.decode([prev, new_id], skip_special_tokens=False)
    if not both.startswith(before):
        return None
    middle = both[len(before) :]
    prev_end = sample.offsets[k - 1][1]
    gap = sample.text[prev_end:start]
    if gap and not gap.strip() and middle[:1].isspace():
        middle = gap + middle.lstrip()  # keep the text's own white space (a new line stays one)
    return sample.text[:prev_end] + middle + sample.text[end:]


def _accepts(tokenizer, sample: _Sample, k: int, new_id: int, text: str) -> bool:
    """The new text tokenizes to the original content tokens with only token k changed, to new_id."""
    enc = encode_text(
        tokenizer,
        [text],
        labels=[f"neighbour of sample {sample.sid!r}"],
        add_special_tokens=False,
        return_attention_mask=False,
        return_token_type_ids=False,
        verbose=False,
    )
    ids = np.asarray(enc["input_ids"][0], dtype=np.int64)
    if ids.shape != sample.full_ids.shape or ids[k] != new_id:
        return False
    differs = ids != sample.full_ids
    return int(differs.sum()) == 1


def neighbour_samples(
    model,
    tokenizer,
    samples: pd.DataFrame,
    n: int,
    seed: int,
    candidates: int = 10,
    batch_size: int | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
) -> pd.DataFrame:
    """`n` neighbours of each sample (see the module docstring), made with the masked
    language model `model` and its fast `tokenizer`.

    `samples` needs ``sample_id`` and ``text``; every other column (group_id, role, source,
    length, ...) is copied from the original row. Returns one row per neighbour, sample by
    sample in input order and ``j = 0 .. n-1`` within, with ``sample_id`` "<sample_id>~n<j>"
    and the neighbour's ``text``. `candidates`: how many of the best-ranked tokens are tried
    before the rest of the vocabulary; `batch_size` rows per forward pass, or as many as
    `token_budget` tokens allow."""
    for key, value, low in (("n", n, 1), ("candidates", candidates, 1), ("seed", seed, 0)):
        if int(value) != value or int(value) < low:
            raise UserError(f"neighbours: {key} must be an integer >= {low}, got {value!r}")
    if batch_size is not None and int(batch_size) < 1:
        raise UserError(f"neighbours: the batch size must be >= 1, got {batch_size!r}")
    for column in ("sample_id", "text"):
        if column not in samples.columns:
            raise UserError(f"neighbours: the samples lack column {column!r}")
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"neighbours: tokenizer {type(tokenizer).__name__} is not a fast tokenizer (offsets needed)")
    if tokenizer.mask_token_id is None:
        raise UserError(f"neighbours: tokenizer {type(tokenizer).__name__} has no mask token")
    sids = samples["sample_id"].astype(str).tolist()
    duplicated = pd.Series(sids).duplicated()
    if duplicated.any():
        raise UserError(f"neighbours: duplicate sample_id {shown_id(sids[int(np.flatnonzero(duplicated)[0])])}")
    n, seed, candidates = int(n), int(seed), int(candidates)
    began = time.perf_counter()
    prepared = _prepare(tokenizer, sids, samples["text"].astype(str).tolist(), max_sequence_length(model, tokenizer))

    # Step 1: each neighbour's content token k; requests = distinct (sample, k), in draw order.
    chosen = np.empty((len(prepared), n), dtype=np.int64)
    for i, sample in enumerate(prepared):
        key = stable_key(sample.sid)
        for j in range(n):
            rng = np.random.default_rng([seed, key, j, NEIGHBOUR_STREAM])
            chosen[i, j] = int(rng.integers(sample.content_pos.size))
    requests = sorted({(i, int(k)) for i in range(len(prepared)) for k in chosen[i]})

    vocab_size = int(getattr(model.config, "vocab_size", 0) or len(tokenizer))
    ban_start, ban_cont, continuation = _banned(tokenizer, vocab_size)
    texts: dict[tuple[int, int], list[str]] = {}  # (sample, k) -> its neighbours' texts, best first
    need = {req: 0 for req in requests}
    for i in range(len(prepared)):
        for k in chosen[i]:
            need[(i, int(k))] += 1
    device = next(model.parameters()).device
    parts = mlm_parts(model)
    lengths = np.array([prepared[i].model_ids.size for i, _ in requests], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    mask_id = int(tokenizer.mask_token_id)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    n_batches = n_full = 0
    was_training = model.training
    model.eval()
    try:
        a = 0
        while a < len(order):
            b = a + 1  # lengths ascend, so the last row of a batch is its longest
            while b < len(order) and (
                b - a < int(batch_size) if batch_size is not None else (b - a + 1) * lengths[order[b]] <= token_budget
            ):
                b += 1
            batch = [requests[r] for r in order[a:b]]
            logits = _forward(model, parts, prepared, batch, mask_id, pad_id, device)
            n_batches += 1
            for (i, k), row in zip(batch, logits):
                sample = prepared[i]
                original = int(sample.full_ids[k])
                banned = ban_cont if continuation[original] else ban_start
                found, full = _replacements(tokenizer, sample, k, row, banned, original, need[(i, k)], candidates)
                n_full += full
                texts[(i, k)] = found
            a = b
    finally:
        model.train(was_training)

    # Neighbours that share a position take its candidates in turn.
    rows_out, used = [], {}
    extra = [c for c in samples.columns if c not in ("sample_id", "text")]
    records = samples[extra].to_dict("records") if extra else [{} for _ in sids]
    for i, sample in enumerate(prepared):
        for j in range(n):
            key = (i, int(chosen[i, j]))
            r = used.get(key, 0)
            used[key] = r + 1
            rows_out.append({**records[i], "sample_id": neighbour_id(sample.sid, j), "text": texts[key][r]})
    out = pd.DataFrame(rows_out, columns=list(samples.columns))
    log.info(
        "neighbours: %d samples x %d = %d neighbours, %d forward passes in %d batches, %d past the top %d candidates, "
        "%.1f s",
        len(prepared), n, len(out), len(requests), n_batches, n_full, candidates, time.perf_counter() - began,
    )  # fmt: skip
    return out


def _forward(model, parts, prepared, batch, mask_id: int, pad_id: int, device) -> torch.Tensor:
    """fp32 logits (rows, vocabulary) at the masked position of each (sample, k) of `batch`."""
    seq_len = max(prepared[i].model_ids.size for i, _ in batch)
    ids = torch.full((len(batch), seq_len), pad_id, dtype=torch.long)
    attn = torch.zeros((len(batch), seq_len), dtype=torch.long)
    pos = torch.empty(len(batch), dtype=torch.long)
    for r, (i, k) in enumerate(batch):
        sample = prepared[i]
        ids[r, : sample.model_ids.size] = torch.from_numpy(sample.model_ids)
        attn[r, : sample.model_ids.size] = 1
        pos[r] = int(sample.content_pos[k])
    rows = torch.arange(len(batch))
    ids[rows, pos] = mask_id
    ids, attn, pos, rows = ids.to(device), attn.to(device), pos.to(device), rows.to(device)
    with torch.inference_mode():
        if parts is not None:
            encoder, head = parts
            hidden = encoder(input_ids=ids, attention_mask=attn).last_hidden_state
            logits = head(hidden[rows, pos])
        else:
            logits = model(input_ids=ids, attention_mask=attn).logits[rows, pos]
    return logits.float().cpu()


def _replacements(tokenizer, sample, k, logits, banned, original, count, candidates) -> tuple[list[str], int]:
    """The texts of the `count` best valid replacements of content token k (steps 3 to 5 of the
    module docstring), and 1 if the search went past the top `candidates`."""
    scores = logits.clone()
    ban = torch.from_numpy(banned[: scores.numel()])
    scores[ban] = -torch.inf
    scores[original] = -torch.inf
    allowed = int((~ban).sum()) - int(not bool(ban[original]))
    found: list[str] = []
    top = torch.topk(scores, min(candidates, max(allowed, 1))).indices.tolist()
    tried = set()
    for ranked, full in ((top, 0), (None, 1)):
        if ranked is None:  # the rest of the vocabulary, best first (ties: lower id first)
            ranked = torch.sort(scores, descending=True, stable=True).indices[:allowed].tolist()
        for new_id in ranked:
            if new_id in tried or not torch.isfinite(scores[new_id]):
                continue
            tried.add(new_id)
            text = _candidate_text(tokenizer, sample, k, int(new_id))
            if text is not None and _accepts(tokenizer, sample, k, int(new_id), text):
                found.append(text)
                if len(found) == count:
                    return found, full
    raise UserError(
        f"neighbours: sample {sample.sid!r}: no replacement of content token {k} gives a text that "
        "tokenizes back with only that token changed"
    )
