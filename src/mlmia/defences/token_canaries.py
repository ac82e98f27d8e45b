"""Black-box canaries of new tokens for the one-run audit of the final DP model (Panda, Tang, Nasr,
Choquette-Choo and Mittal, "Privacy auditing of large language models", ICLR 2025: a token the
training text never holds is the most distinguishable thing a canary can carry).

m canaries, each the template of the canary study (`canaries.template`, e.g. "Patient MRN is
{secret} .") with its secret replaced by `length` new tokens of its own ("canarytok0042x0").
Each is added once to the DP targets' training text with probability 1/2, as a line and a unit
of privacy of its own (`with_included_canaries`). The tokens of ALL m canaries, included or
not, are added to the vocabulary of the DP targets' tokenizer (`canary_tokenizer`), so that
the tokenizer, and the model's shape, say nothing of which canaries were included; the other
models keep the world's tokenizer, and the paper's tables are untouched (an ordinary text never
holds a canary token, so it tokenizes as before).

The score (`token_scores`) is the model's log-probability of a canary's own tokens with all of
them masked at once (one forward pass per canary, summed over its tokens): a token that was a
training label is pushed up, one that never was only down. The auditor guesses as in the
white-box audit (`mlmia.defences.audit.one_run_canary_audit`). Canary ids appear in messages,
never their text.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.memorization.canaries import split_template

PREFIX = "canarytok"


def draw_token_canaries(template: str, count: int, length: int, seed: int) -> pd.DataFrame:
    """The canaries: `count` of them, each with `length` new tokens and an inclusion bit (a fair
    coin from `seed`). Columns: canary_id, tokens (space-separated), text, included."""
    if count < 2:
        raise UserError(f"one-run canaries: at least 2 are needed, got {count}")
    if length < 1:
        raise UserError(f"one-run canaries: at least 1 new token per canary, got {length}")
    prefix, suffix = split_template(template)
    width = len(str(count - 1))
    tokens = [" ".join(f"{PREFIX}{i:0{width}d}x{j}" for j in range(length)) for i in range(count)]
    return pd.DataFrame(
        {
            "canary_id": [f"one_run_{i:0{width}d}" for i in range(count)],
            "tokens": tokens,
            "text": [prefix + t + suffix for t in tokens],
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
    """Each canary's score: the sum over its tokens of the model's log-probability (full
    vocabulary) of the token at its position, every canary token of the sentence masked at once."""
    import torch

    from mlmia.models.tokenizer import encode_text

    own = canary_token_ids(tokenizer, canaries)
    labels = canaries["canary_id"].astype(str).tolist()
    enc = encode_text(tokenizer, canaries["text"].tolist(), labels=labels, return_attention_mask=False)
    device = next(model.parameters()).device
    model.eval()
    scores = np.zeros(len(canaries))
    for start in range(0, len(canaries), batch_size):
        rows = list(range(start, min(start + batch_size, len(canaries))))
        width = max(len(enc["input_ids"][r]) for r in rows)
        ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
        for k, r in enumerate(rows):
            ids[k, : len(enc["input_ids"][r])] = torch.as_tensor(enc["input_ids"][r])
        targets = [torch.as_tensor(own[r]) for r in rows]
        masked = torch.stack([torch.isin(ids[k], targets[k]) for k in range(len(rows))])
        for k, r in enumerate(rows):
            if int(masked[k].sum()) != len(own[r]):
                raise UserError(f"one-run canaries: canary {labels[r]}: its tokens are not each one token of the text")
        inputs = ids.masked_fill(masked, tokenizer.mask_token_id)
        with torch.no_grad():
            logits = model(input_ids=inputs.to(device), attention_mask=(ids != tokenizer.pad_token_id).long().to(device),
                           token_type_ids=torch.zeros_like(inputs).to(device)).logits  # fmt: skip
        logp = torch.log_softmax(logits.float(), dim=-1).cpu()
        picked = logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
        scores[rows] = (picked * masked).sum(dim=1).double().numpy()
    return scores
