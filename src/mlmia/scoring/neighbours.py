"""Neighbour samples for the neighbourhood attack (`mlmia.attacks.neighbourhood`), made as
Mattern et al. make them.

Mattern, Mireshghallah, Jin, Schölkopf, Sachan and Berg-Kirkpatrick, "Membership Inference
Attacks against Language Models via Neighbourhood Comparison", Findings of ACL 2023 (code:
mireshghallah/neighborhood-curvature-mia, and the same procedure in MIMIR's BERT neighbours,
iamgroot42/mimir ``mimir/attacks/neighborhood.py``, "deterministic" strategy): a neighbour is
the text with one token swapped for one a masked language model (here the configured
replacement model) finds likely in its place, and the N neighbours of a text are its N
best-scored single swaps over every position. Here:

1. every content token k of the sample (not [CLS]/[SEP]/<s>; within the model's maximum
   length) is a candidate position. The replacement model reads the text as it is, the token
   at k kept (not masked), with dropout on that token's input (word) embedding: each of its
   entries is zeroed with probability `dropout` (p, default 0.7 as in their code) and the
   others scaled by 1 / (1 - p). The dropout mask is drawn by ``numpy.random.default_rng([seed,
   stable_key(sample_id), k, NEIGHBOUR_STREAM])`` (the last entry keeps this stream apart from
   the masking patterns', ``[seed, stable_key(mask id), j]``, `mlmia.scoring.masks`), so it does
   not depend on the batch, the device or the other samples. One forward per (sample,
   position), batched, ``torch.inference_mode``, fp32.
2. the candidates at k are the `candidates` most probable tokens there (default the config's
   `neighbours.candidates`, 1, measured stronger than their code's 5: docs/neighbour_variants.md)
   other than the original;
   never a special token (the unknown token included) or an id beyond the tokenizer's vocabulary;
   with a WordPiece tokenizer a candidate keeps the original's kind (a continuation piece "##..."
   only where the original is one, a word start only where the original is one), so that the
   words of the text stay the words they were.
3. a swap (k, c) is scored p_k(c) / (1 - p_k(x_k)): the candidate's probability over the
   probability the model leaves off the original token x_k (their score; where p_k(x_k) is 1
   in floating point the denominator is 0.1, as in their code).
4. the swaps of every position are ranked by score (ties: the earlier position, then the lower
   token id) and taken in that order while they make valid texts (steps 5 and 6), until there
   are `n`. Neighbour j is the j-th taken (j = 0 the best). Should the top-`candidates` swaps
   of all positions give fewer than `n` valid texts (a short text), the other tokens of every
   position follow, ranked the same way (the count of such samples is logged).
5. the text is the original text with the swapped token's characters (from the fast
   tokenizer's offsets, together with the white space before it) replaced by the tokenizer's
   decoding of the new token after the previous one (``decode([prev, new])`` minus
   ``decode([prev])``); the rest of the text is kept as it is, characters the vocabulary does
   not know and case included. (Decoding the whole token sequence instead would lower-case and
   respace the text for an uncased WordPiece tokenizer and drop every unknown character: the
   same for members and non-members, but the neighbours would differ from the original in more
   than the one token.)
6. a swap is taken only if its text tokenizes (as the scorer reads text,
   `mlmia.models.tokenizer.encode_text`) to the original tokens with exactly that one position
   changed to the candidate; so the neighbours of a sample are distinct texts.

Where this differs from their code, on purpose: their dropout acts on the output of BERT's
embedding layer (word, position and token-type embeddings, layer-normed), which is then fed
back as ``inputs_embeds``, so that the position and token-type embeddings are added twice;
here it acts on the word embedding alone and the model adds the rest once. Their positions
include the final [SEP], their candidate list is the top 6 tokens with the original dropped
(5 or 6), and their neighbour text is the decoded token sequence; here content tokens only,
`candidates` others after the specials and the other piece kind are dropped, and the text
outside the swapped token is kept (step 5).

Each neighbour row carries ``neighbour_of``, its sample's id (what the attack table joins on,
`mlmia.attacks.table`), and ``mask_id``, the id its sample's masking patterns are keyed on
(`mlmia.scoring.masks.mask_keys`), so that the target scores a neighbour under its sample's
patterns (common random numbers: the attack's difference does not carry the masking noise of
two draws). The same model, tokenizer, samples and seed give the same neighbours (CPU, fp32).
Nothing of the text is logged or put in a message.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from mlmia.core.errors import UserError, shown_id
from mlmia.core.keys import stable_key
from mlmia.core.logs import get_logger
from mlmia.models.loading import max_sequence_length, mlm_parts
from mlmia.models.tokenizer import encode_text
from mlmia.scoring.masks import MASK_ID, mask_keys
from mlmia.terms.manifest import NEIGHBOUR_OF

log = get_logger(__name__)

#: a neighbour's sample id: "<sample_id>~n<j>" (ids only; the attack table joins on `NEIGHBOUR_OF`)
NEIGHBOUR_SEPARATOR = "~n"
#: the 4th entry of a dropout mask's generator seed (apart from the masking patterns' stream)
NEIGHBOUR_STREAM = 7
#: tokens (padded rows x length) per forward pass when no batch size is given
DEFAULT_TOKEN_BUDGET = 4096
#: the score's denominator where the original token's probability is 1 (their code's 1 - 0.9)
CERTAIN_DENOMINATOR = 0.1


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
        labels=[f"neighbour of sample {shown_id(sample.sid)}"],
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
    *,
    n: int,
    seed: int,
    candidates: int,
    dropout: float,
    batch_size: int | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
) -> pd.DataFrame:
    """`n` neighbours of each sample (see the module docstring), made with the masked
    language model `model` and its fast `tokenizer`.

    `samples` needs ``sample_id`` and ``text``; every other column (group_id, role, source,
    length, ...) is copied from the original row. Returns one row per neighbour, sample by
    sample in input order and ``j = 0 .. n-1`` within (the best-scored swap first), with
    ``sample_id`` "<sample_id>~n<j>", the neighbour's ``text``, ``neighbour_of`` (the sample's
    id) and ``mask_id`` (the id the sample's masking patterns are keyed on). `candidates`:
    tokens per position; `dropout`: the probability of zeroing an entry of the position's
    embedding; `batch_size` rows per forward pass, or as many as `token_budget` tokens allow."""
    _check_arguments(tokenizer, samples, n, seed, candidates, dropout, batch_size)
    n, seed, candidates, dropout = int(n), int(seed), int(candidates), float(dropout)
    sids = samples["sample_id"].astype(str).tolist()
    keys = mask_keys(samples)
    began = time.perf_counter()
    prepared = _prepare(tokenizer, sids, samples["text"].astype(str).tolist(), max_sequence_length(model, tokenizer))

    # One forward per (sample, content token); sorted by length, stably, so that a sample's
    # positions stay together and in order: a sample is ranked as soon as its last one is run.
    requests = [(i, k) for i, sample in enumerate(prepared) for k in range(sample.content_pos.size)]
    lengths = np.array([prepared[i].model_ids.size for i, _ in requests], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    vocab_size = int(getattr(model.config, "vocab_size", 0) or len(tokenizer))
    ban_start, ban_cont, continuation = _banned(tokenizer, vocab_size)
    embeddings = model.get_input_embeddings()
    width = int(embeddings.weight.shape[1])
    seeds = [stable_key(sid) for sid in sids]
    parts = mlm_parts(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    texts: list[list[str]] = [[] for _ in prepared]
    pending: dict[int, list[torch.Tensor]] = {}
    counts = {"checked": 0, "past_top": 0}
    batches = _batches(lengths[order], batch_size, token_budget)
    was_training = model.training
    model.eval()
    try:
        for a, b in batches:
            batch = [requests[r] for r in order[a:b]]
            drops = np.stack([_dropout_mask(seed, seeds[i], k, width, dropout) for i, k in batch])
            logits = _forward(model, parts, embeddings, prepared, batch, drops, pad_id)
            for (i, k), row in zip(batch, logits):
                sample = prepared[i]
                original = int(sample.full_ids[k])
                banned = ban_cont if continuation[original] else ban_start
                pending.setdefault(i, []).append(_swap_scores(row, original, banned))
                if len(pending[i]) == sample.content_pos.size:
                    texts[i] = _best_swaps(tokenizer, sample, torch.stack(pending.pop(i)), n, candidates, counts)
    finally:
        model.train(was_training)

    extra = [c for c in samples.columns if c not in ("sample_id", "text")]
    records = samples[extra].to_dict("records") if extra else [{} for _ in sids]
    rows_out = [
        {**records[i], "sample_id": neighbour_id(sid, j), "text": text, NEIGHBOUR_OF: sid, MASK_ID: keys[i]}
        for i, sid in enumerate(sids)
        for j, text in enumerate(texts[i])
    ]
    columns = list(samples.columns) + [c for c in (NEIGHBOUR_OF, MASK_ID) if c not in samples.columns]
    out = pd.DataFrame(rows_out, columns=columns)
    log.info(
        "neighbours: %d samples x %d = %d neighbours; %d forward passes (one per content token) in %d batches; "
        "%d swaps checked, %d samples past the top %d candidates per position; dropout %.2f; %.1f s",
        len(prepared), n, len(out), len(requests), len(batches), counts["checked"], counts["past_top"], candidates,
        dropout, time.perf_counter() - began,
    )  # fmt: skip
    return out


def _check_arguments(tokenizer, samples, n, seed, candidates, dropout, batch_size) -> None:
    for key, value, low in (("n", n, 1), ("candidates", candidates, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or int(value) != value or int(value) < low:
            raise UserError(f"neighbours: {key} must be an integer >= {low}, got {value!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= float(dropout) < 1.0:
        raise UserError(f"neighbours: dropout must be a probability in [0, 1), got {dropout!r}")
    if batch_size is not None and int(batch_size) < 1:
        raise UserError(f"neighbours: the batch size must be >= 1, got {batch_size!r}")
    for column in ("sample_id", "text"):
        if column not in samples.columns:
            raise UserError(f"neighbours: the samples lack column {column!r}")
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"neighbours: tokenizer {type(tokenizer).__name__} is not a fast tokenizer (offsets needed)")
    duplicated = samples["sample_id"].astype(str).duplicated()
    if duplicated.any():
        first = samples["sample_id"].astype(str).iloc[int(np.flatnonzero(duplicated)[0])]
        raise UserError(f"neighbours: duplicate sample_id {shown_id(first)}")


def _batches(lengths: np.ndarray, batch_size: int | None, token_budget: int) -> list[tuple[int, int]]:
    """[a, b) cuts of rows of ascending `lengths`: `batch_size` rows, or as many as fit in
    `token_budget` padded tokens (at least one)."""
    out, a = [], 0
    while a < len(lengths):
        b = a + 1  # lengths ascend, so the last row of a batch is its longest
        while b < len(lengths) and (
            b - a < int(batch_size) if batch_size is not None else (b - a + 1) * lengths[b] <= token_budget
        ):
            b += 1
        out.append((a, b))
        a = b
    return out


def _dropout_mask(seed: int, sample_key: int, k: int, width: int, p: float) -> np.ndarray:
    """The factors of content token k's embedding entries: 0 with probability p, else 1 / (1 - p)."""
    if p == 0.0:
        return np.ones(width, dtype=np.float32)
    kept = np.random.default_rng([seed, sample_key, int(k), NEIGHBOUR_STREAM]).random(width) >= p
    return kept.astype(np.float32) / np.float32(1.0 - p)


def _forward(model, parts, embeddings, prepared, batch, drops: np.ndarray, pad_id: int) -> torch.Tensor:
    """fp32 logits (rows, vocabulary) at content token k of each (sample, k) of `batch`, the
    model reading the text with dropout `drops` (rows, embedding width) on that token's
    word embedding."""
    device = embeddings.weight.device
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
    ids, attn, pos, rows = ids.to(device), attn.to(device), pos.to(device), rows.to(device)
    with torch.inference_mode():
        embeds = embeddings(ids)
        embeds[rows, pos] = embeds[rows, pos] * torch.from_numpy(drops).to(device=device, dtype=embeds.dtype)
        if parts is not None:
            encoder, head = parts
            hidden = encoder(inputs_embeds=embeds, attention_mask=attn).last_hidden_state
            logits = head(hidden[rows, pos])
        else:
            logits = model(inputs_embeds=embeds, attention_mask=attn).logits[rows, pos]
    return logits.float().cpu()


def _swap_scores(logits: torch.Tensor, original: int, banned: np.ndarray) -> torch.Tensor:
    """Each token's score as the swap of `original` at this position (step 3 of the module
    docstring), float64; -inf for the original and the banned tokens."""
    probs = torch.softmax(logits.double(), dim=-1)
    left = 1.0 - float(probs[original])
    scores = probs / (left if left > 0.0 else CERTAIN_DENOMINATOR)
    scores[torch.from_numpy(banned[: scores.numel()])] = -torch.inf
    scores[original] = -torch.inf
    return scores


def _best_swaps(tokenizer, sample: _Sample, scores: torch.Tensor, n: int, candidates: int, counts: dict) -> list[str]:
    """The texts of the `n` best valid swaps of `sample` (steps 4 to 6 of the module docstring),
    from `scores` (content tokens, vocabulary)."""
    found: list[str] = []
    tried: set[tuple[int, int]] = set()

    def walk(positions: torch.Tensor, tokens: torch.Tensor) -> None:
        values = scores[positions, tokens].numpy()
        keep = np.isfinite(values)
        positions, tokens, values = positions.numpy()[keep], tokens.numpy()[keep], values[keep]
        for r in np.lexsort((tokens, positions, -values)):
            swap = (int(positions[r]), int(tokens[r]))
            if swap in tried:
                continue
            tried.add(swap)
            counts["checked"] += 1
            text = _candidate_text(tokenizer, sample, *swap)
            if text is not None and _accepts(tokenizer, sample, *swap, text):
                found.append(text)
                if len(found) == n:
                    return

    per_position = min(int(candidates), scores.shape[1])
    top = torch.topk(scores, per_position, dim=1).indices
    walk(torch.arange(scores.shape[0]).repeat_interleave(per_position), top.reshape(-1))
    if len(found) < n:
        counts["past_top"] += 1
        walk(*torch.nonzero(torch.isfinite(scores), as_tuple=True))
    if len(found) < n:
        raise UserError(
            f"neighbours: sample {shown_id(sample.sid)}: only {len(found)} single-token swaps give a text that "
            f"tokenizes back with only that token changed; {n} neighbours were asked for"
        )
    return found
