"""Black-box canaries of new tokens for the one-run audit of the final DP model (Panda, Tang, Nasr,
Choquette-Choo and Mittal, "Privacy auditing of large language models", ICLR 2025: a token the
training text never holds is the most distinguishable thing a canary can carry).

m canaries, each the template of the canary study (`canaries.template`, e.g. "Patient MRN is
{secret} .") with its secret replaced by `repeat` copies of `length` new tokens of its own
("canarytok0042x0").
Each is added once to the DP targets' training text with probability 1/2, as a line and a unit
of privacy of its own (`with_included_canaries`). The tokens of ALL m canaries, included or
not, are added to the vocabulary of the DP targets' tokenizer (`canary_tokenizer`), so that
the tokenizer, and the model's shape, say nothing of which canaries were included; the other
models keep the world's tokenizer, and the paper's tables are untouched (an ordinary text never
holds a canary token, so it tokenizes as before).

The score (`token_scores`) is the model's log-probability of a canary's own tokens, each copy's
masked in turn with the other copies visible, summed over its tokens and copies (with one copy:
all of them masked at once, one forward pass per canary): a token that was a training label is
pushed up, one that never was only down. Why copies: the masked-LM objective makes a token a
label in about 12% of the steps its line joins (15% masked, 80% of those [MASK]), and under DP a
canary's clipped gradient reaches its own embedding row mostly then; with several copies one of
them is nearly always masked, so the line trains its row (from the visible copies) at about every
step it joins. On the default world's ε = 8 recipe (bench/token_canary_design.py, docs/dp.md) the
score's AUC was 0.56 with one copy, 0.60-0.72 with 8 over three draws of the canaries. The auditor guesses as in the
white-box audit (`mlmia.defences.audit.one_run_canary_audit`). Canary ids appear in messages,
never their text.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.memorization.canaries import split_template

PREFIX = "canarytok"


def draw_token_canaries(template: str, count: int, length: int, seed: int, repeat: int = 1) -> pd.DataFrame:
    """The canaries: `count` of them, each with `length` new tokens, written `repeat` times in its
    line, and an inclusion bit (a fair coin from `seed`). Columns: canary_id, tokens (one copy,
    space-separated), text, included."""
    if count < 2:
        raise UserError(f"one-run canaries: at least 2 are needed, got {count}")
    if length < 1:
        raise UserError(f"one-run canaries: at least 1 new token per canary, got {length}")
    if repeat < 1:
        raise UserError(f"one-run canaries: at least 1 copy of a canary's tokens, got {repeat}")
    prefix, suffix = split_template(template)
    width = len(str(count - 1))
    tokens = [" ".join(f"{PREFIX}{i:0{width}d}x{j}" for j in range(length)) for i in range(count)]
    return pd.DataFrame(
        {
            "canary_id": [f"one_run_{i:0{width}d}" for i in range(count)],
            "tokens": tokens,
            "text": [prefix + " ".join([t] * repeat) + suffix for t in tokens],
            "included": np.random.default_rng([seed, 2]).random(count) < 0.5,
        }
    )


def with_included_canaries(text: pd.DataFrame, canaries: pd.DataFrame) -> pd.DataFrame:
    """A training table (sample_id, group_id, text) with each included canary added once as a
    line of its own, its canary id as both sample and group id (its own unit of privacy)."""
    chosen = canaries[canaries["included"].astype(bool)]
    added = pd.DataFrame({"sample_id": chosen["canary_id"], "group_id": chosen["canary_id"], "text": chosen["text"]})
    return pd.concat([text[["sample_id", "group_id", "text"]], added], ignore_index=True)


def _new_tokens(canaries: pd.DataFrame) -> list[str]:
    return [token for tokens in canaries["tokens"] for token in str(tokens).split()]


def canary_tokenizer(tokenizer, canaries: pd.DataFrame):
    """`tokenizer` with every canary's tokens added to its vocabulary (after its own ids, in
    canary order); each must be new and become one token, else a one-line UserError."""
    tokens = _new_tokens(canaries)
    known = [t for t in tokens if t in tokenizer.get_vocab()]
    if known:
        raise UserError(f"one-run canaries: the tokenizer already holds {len(known)} of the canary tokens")
    tokenizer.add_tokens(tokens)
    canary_token_ids(tokenizer, canaries)
    return tokenizer


def canary_token_ids(tokenizer, canaries: pd.DataFrame) -> list[np.ndarray]:
    """Each canary's token ids, in its order; a UserError naming the canary where a token is not
    one token of `tokenizer` (a model trained without the canaries' tokenizer)."""
    vocab = tokenizer.get_vocab()
    ids = []
    for canary_id, tokens in zip(canaries["canary_id"], canaries["tokens"]):
        found = [vocab.get(t) for t in str(tokens).split()]
        if any(i is None for i in found):
            raise UserError(f"one-run canaries: canary {canary_id}: its tokens are not in the model's vocabulary "
                            "(train the DP targets with the canaries' tokenizer, models/tokenizer_canaries)")  # fmt: skip
        ids.append(np.asarray(found, dtype=np.int64))
    return ids


def token_scores(model, tokenizer, canaries: pd.DataFrame, batch_size: int = 128) -> np.ndarray:
    """Each canary's score: the sum over its tokens and copies of the model's log-probability (full
    vocabulary) of the token at its position, each copy's tokens masked at once in a pass of their
    own with the other copies visible (one copy: every canary token of the sentence masked at once)."""
    import torch

    from mlmia.models.tokenizer import encode_text

    own = canary_token_ids(tokenizer, canaries)
    labels = canaries["canary_id"].astype(str).tolist()
    enc = encode_text(tokenizer, canaries["text"].tolist(), labels=labels, return_attention_mask=False)
    # one pass per (canary, copy): the positions of that copy's tokens
    passes = []
    for r, tokens in enumerate(own):
        row = np.asarray(enc["input_ids"][r])
        at = np.flatnonzero(np.isin(row, tokens))
        copies = len(at) // len(tokens)
        if copies < 1 or not np.array_equal(row[at], np.tile(tokens, copies)):
            raise UserError(f"one-run canaries: canary {labels[r]}: its tokens are not each one token of the text")
        passes += [(r, at[j * len(tokens) : (j + 1) * len(tokens)]) for j in range(copies)]
    device = next(model.parameters()).device
    model.eval()
    scores = np.zeros(len(canaries))
    for start in range(0, len(passes), batch_size):
        chunk = passes[start : start + batch_size]
        width = max(len(enc["input_ids"][r]) for r, _ in chunk)
        ids = torch.full((len(chunk), width), tokenizer.pad_token_id, dtype=torch.long)
        masked = torch.zeros((len(chunk), width), dtype=torch.bool)
        for k, (r, at) in enumerate(chunk):
            ids[k, : len(enc["input_ids"][r])] = torch.as_tensor(enc["input_ids"][r])
            masked[k, torch.as_tensor(at)] = True
        inputs = ids.masked_fill(masked, tokenizer.mask_token_id)
        with torch.no_grad():
            logits = model(input_ids=inputs.to(device), attention_mask=(ids != tokenizer.pad_token_id).long().to(device),
                           token_type_ids=torch.zeros_like(inputs).to(device)).logits  # fmt: skip
        logp = torch.log_softmax(logits.float(), dim=-1).cpu()
        picked = logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
        np.add.at(scores, [r for r, _ in chunk], (picked * masked).sum(dim=1).double().numpy())
    return scores
