"""Canary exposure of masked language models: secrets inserted into the training text, and how
far the trained model singles each one out among all the secrets it could have been.

Carlini, Liu, Erlingsson, Kos and Song, "The Secret Sharer: Evaluating and Testing Unintended
Memorization in Neural Networks", USENIX Security 2019. A canary is a sentence of a fixed
template with a secret r drawn uniformly from a randomness space R; some canaries are inserted
into the training text, each a number of times, others never (the zero-repetition baseline).
The exposure of a canary (their Eq. 1) is log2 |R| - log2 rank, rank 1 being the secret the
model finds most likely (`mlmia.memorization.exposure`).

Here the secret is d decimal digits written apart ("Patient MRN is 4 8 1 5 2 6 ."), so that
EACH DIGIT IS ONE TOKEN of the tokenizer (checked for every canary and candidate; a template
where it is not is refused): R = {0..9}^d, |R| = 10^d. Two estimates per canary and model:

- exact (`secret_log_probs`, `exact_exposures`): one forward pass with all d secret positions
  masked at once gives, at each position, the log-probabilities of the 10 digit tokens,
  renormalised over the digits (log-softmax of the 10 digit logits: the probability of a
  digit given that the position holds a digit; a per-position constant, so no rank changes).
  A candidate's score is the sum of its digits' log-probabilities, and `exact_rank` counts
  the canary's rank among all 10^d candidates exactly.
- extrapolated (`pll_scores`, `extrapolated_exposures`): the pseudo-log-likelihood of the
  whole canary sentence (the scorer's normalized energy: each content position masked alone;
  PLL = -energy x tokens) against the PLLs of a uniform sample of candidate sentences, with the
  paper's skew-normal fit (Section 4.3, `skewnorm_exposure`).

The canaries' sentences are also a membership-inference test set
(`mlmia.memorization.canary_membership`).

Canary secrets appear in the result tables only, never in a log or an error message: those
name canary ids.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.memorization.exposure import exact_rank, exposure, skewnorm_exposure
from mlmia.report.markdown import markdown_table

log = get_logger(__name__)

PLACEHOLDER = "{secret}"
#: the symbols of the secret space, in the order of the columns of `secret_log_probs`
DIGITS = "0123456789"
#: roles of the canaries: inserted (members), never inserted (non-members, the zero-repetition
#: baseline) and further never inserted (the population that sets membership thresholds)
CANARY_ROLES = ("member", "nonmember", "population")
#: the model-entry keys that say where a model comes from, not how it is trained
NOT_TRAINING_SETTINGS = ("corpus", "init", "path", "tokenizer", "training_text")
ESTIMATES = ("exact", "extrapolated")


# --------------------------------------------------------------------------- secrets and sentences


def split_template(template: str) -> tuple[str, str]:
    """The text before and after the template's one `{secret}` placeholder."""
    if template.count(PLACEHOLDER) != 1:
        raise UserError(f"canaries: the template must hold {PLACEHOLDER} exactly once, got {template!r}")
    prefix, suffix = template.split(PLACEHOLDER)
    return prefix, suffix


def render(template: str, secret: str) -> str:
    """The canary sentence: the template with the secret's digits written apart ("4 8 1")."""
    prefix, suffix = split_template(template)
    return prefix + " ".join(secret) + suffix


def secret_spans(template: str, digits: int) -> list[tuple[int, int]]:
    """Character spans (start, end) of the d secret digits in a rendered sentence."""
    start = len(split_template(template)[0])
    return [(start + 2 * i, start + 2 * i + 1) for i in range(digits)]


def check_space(digits: int, needed: int) -> None:
    """Refuse, in one line, `needed` distinct secrets of `digits` digits that do not fit."""
    if not 1 <= digits <= 14:
        raise UserError(f"canaries: digits must lie in 1..14 (exact ranks up to 10^14 secrets), got {digits}")
    if needed > 10**digits:
        raise UserError(f"canaries: {needed} distinct secrets do not fit in the 10^{digits} secrets of {digits} digits")


def _distinct_secrets(rng: np.random.Generator, digits: int, count: int, exclude: set[int]) -> list[int]:
    """`count` distinct secrets (as integers) drawn uniformly from 0..10^d - 1 minus `exclude`."""
    space = 10**digits
    if 2 * (count + len(exclude)) > space:  # a crowded space: a draw without replacement from what is left
        left = np.setdiff1d(np.arange(space), np.fromiter(exclude, dtype=np.int64, count=len(exclude)))
        return [int(v) for v in rng.choice(left, size=count, replace=False)]
    out: list[int] = []
    seen = set(exclude)
    while len(out) < count:
        value = int(rng.integers(0, space))
        if value not in seen:
            seen.add(value)
            out.append(value)
    return out


def canary_plan(
    repetitions: Sequence[int], per_repetition: int, never_inserted: int, population: int
) -> list[tuple[str, int]]:
    """(role, repetitions) of each canary `draw_canaries` draws, in order."""
    counts = [int(r) for r in repetitions]
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise UserError(f"canaries: repetitions must be distinct counts >= 1, got {list(repetitions)}")
    if per_repetition < 1 or never_inserted < 1 or population < 1:
        raise UserError("canaries: per_repetition, never_inserted and population must each be >= 1")
    plan = [("member", r) for r in sorted(counts) for _ in range(per_repetition)]
    return plan + [("nonmember", 0)] * never_inserted + [("population", 0)] * population


def draw_canaries(
    template: str,
    digits: int,
    repetitions: Sequence[int],
    per_repetition: int,
    never_inserted: int,
    population: int,
    seed: int,
) -> pd.DataFrame:
    """The canaries of one study, drawn deterministically from `seed`.

    `per_repetition` distinct canaries for each repetition count (role member, inserted that
    many times), `never_inserted` canaries never inserted (role nonmember, repetitions 0: the
    exposure baseline and the membership non-members) and `population` more never inserted
    (role population: the membership thresholds). All secrets are distinct, uniform over the
    10^d secrets. Columns: canary_id, role, repetitions, secret (d digits, leading zeros kept),
    text (the rendered sentence)."""
    plan = canary_plan(repetitions, per_repetition, never_inserted, population)
    split_template(template)
    check_space(digits, len(plan))
    values = _distinct_secrets(np.random.default_rng([seed, 0]), digits, len(plan), set())
    width = len(str(len(plan) - 1))
    secrets = [f"{v:0{digits}d}" for v in values]
    return pd.DataFrame(
        {
            "canary_id": [f"canary_{i:0{width}d}" for i in range(len(plan))],
            "role": [role for role, _ in plan],
            "repetitions": np.array([r for _, r in plan], dtype=np.int64),
            "secret": secrets,
            "text": [render(template, s) for s in secrets],
        }
    )


def draw_candidates(template: str, digits: int, count: int, exclude: Sequence[str], seed: int) -> pd.DataFrame:
    """`count` distinct candidate secrets, uniform over the 10^d secrets that are not in
    `exclude` (the canaries' own), for the extrapolated exposure. Columns: candidate_id,
    secret, text."""
    if count < 3:
        raise UserError(f"canaries: at least 3 candidates are needed for the skew-normal fit, got {count}")
    taken = {int(s) for s in exclude}
    check_space(digits, count + len(taken))
    values = _distinct_secrets(np.random.default_rng([seed, 1]), digits, count, taken)
    width = len(str(count - 1))
    secrets = [f"{v:0{digits}d}" for v in values]
    return pd.DataFrame(
        {
            "candidate_id": [f"candidate_{i:0{width}d}" for i in range(count)],
            "secret": secrets,
            "text": [render(template, s) for s in secrets],
        }
    )


def insertion_texts(canaries: pd.DataFrame) -> list[str]:
    """Every inserted canary's sentence, repeated its `repetitions` times (never-inserted ones: 0)."""
    return [text for text, r in zip(canaries["text"], canaries["repetitions"]) for _ in range(int(r))]


def training_settings(model: Mapping | None, shape: str, epochs: Sequence[int]) -> dict:
    """The canary target's training settings: those of `model`, the config's entry of the
    model named `shape` (sizes, learning rate, batch size, ...; None when there is none),
    trained from scratch for max(`epochs`) epochs."""
    if model is None:
        raise UserError(f"config key canaries.shape: {shape!r} is not a configured model")
    if "path" in model:
        raise UserError(f"config key canaries.shape: {shape!r} is given by a path; name a model the workflow trains")
    settings = {k: v for k, v in model.items() if k not in NOT_TRAINING_SETTINGS}
    settings["epochs"] = max(int(e) for e in epochs)
    return settings


# --------------------------------------------------------------------------- one token per digit


def _encode_with_offsets(tokenizer, texts: list[str], labels: list[str] | None):
    from mlmia.models.tokenizer import encode_text

    if not getattr(tokenizer, "is_fast", False):
        raise UserError(
            f"canaries: the tokenizer {type(tokenizer).__name__} gives no character offsets (a fast tokenizer is needed)"
        )
    return encode_text(
        tokenizer, texts, labels=labels, return_offsets_mapping=True, return_attention_mask=False, verbose=False
    )


def _refuse(template: str, where: str, k: int, digits: int) -> UserError:
    return UserError(
        f"canaries: {where}: the template {template!r} does not make each secret digit one token of the "
        f"tokenizer (digit {k + 1} of {digits} is split or merged); keep the digits apart from other characters"
    )


def digit_token_ids(tokenizer, template: str, digits: int) -> np.ndarray:
    """The token id of each digit 0..9 as it stands in a secret of the template (shape (10,)).

    Read from the sentences whose secret repeats one digit d times; every secret position
    must be exactly one token (its character span a token's offsets), the same id at every
    position, and the 10 ids distinct and not special; else a one-line UserError."""
    spans = secret_spans(template, digits)
    texts = [render(template, v * digits) for v in DIGITS]
    enc = _encode_with_offsets(tokenizer, texts, [f"digit {v}" for v in DIGITS])
    special = set(tokenizer.all_special_ids)
    ids = []
    for v, row, offsets in zip(DIGITS, enc["input_ids"], enc["offset_mapping"]):
        at = {tuple(o): j for j, o in enumerate(offsets) if o[1] > o[0]}
        found = []
        for k, span in enumerate(spans):
            j = at.get(span)
            if j is None:
                raise _refuse(template, f"digit {v}", k, digits)
            found.append(int(row[j]))
        if len(set(found)) != 1 or found[0] in special:
            raise _refuse(template, f"digit {v}", 0, digits)
        ids.append(found[0])
    if len(set(ids)) != len(DIGITS):
        raise UserError("canaries: the tokenizer gives two digits the same token id")
    return np.array(ids, dtype=np.int64)


def secret_positions(
    tokenizer, texts: Sequence[str], template: str, digits: int, labels: Sequence[str] | None = None
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Token ids of each rendered sentence (special tokens included), the token positions of
    its d secret digits (shape (n, d)) and the digits as symbol indices 0..9 (shape (n, d)).

    Every digit must be exactly one token with the digit's id (`digit_token_ids`); a sentence
    where one is not is refused in one line naming its label (a canary id), never its text."""
    texts = [str(t) for t in texts]
    labels = list(labels) if labels is not None else [f"sentence {i}" for i in range(len(texts))]
    digit_ids = digit_token_ids(tokenizer, template, digits)
    spans = secret_spans(template, digits)
    enc = _encode_with_offsets(tokenizer, texts, labels)
    ids, positions = [], np.zeros((len(texts), digits), dtype=np.int64)
    symbols = np.zeros((len(texts), digits), dtype=np.int64)
    for i, (text, row, offsets) in enumerate(zip(texts, enc["input_ids"], enc["offset_mapping"])):
        at = {tuple(o): j for j, o in enumerate(offsets) if o[1] > o[0]}
        for k, (start, end) in enumerate(spans):
            j = at.get((start, end))
            char = text[start:end]
            if j is None or len(char) != 1 or char not in DIGITS or int(row[j]) != digit_ids[int(char)]:
                raise _refuse(template, labels[i], k, digits)
            positions[i, k] = j
            symbols[i, k] = int(char)
        ids.append(np.asarray(row, dtype=np.int64))
    return ids, positions, symbols


# --------------------------------------------------------------------------- exact exposure


def secret_log_probs(
    model,
    tokenizer,
    texts: Sequence[str],
    template: str,
    digits: int,
    *,
    labels: Sequence[str] | None = None,
    batch_size: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-position digit log-probabilities with ALL d secret positions masked at once.

    For each sentence: its d secret tokens are replaced by the mask token, one forward pass is
    run, and at each secret position the logits of the 10 digit tokens are turned into
    log-probabilities by a log-softmax over those 10 (renormalised over the digits). Returns
    (logp of shape (n, d, 10), the sentences' own digits as symbol indices, shape (n, d)).
    A candidate secret c then scores sum_i logp[i, c_i] (Carlini et al. 2019, read from one
    masked pass: `exact_rank`)."""
    import torch

    from mlmia.models.batching import eval_mode, padded_batch
    from mlmia.models.loading import max_sequence_length

    ids, positions, symbols = secret_positions(tokenizer, texts, template, digits, labels)
    digit_ids = torch.as_tensor(digit_token_ids(tokenizer, template, digits))
    limit = max_sequence_length(model, tokenizer)
    longest = max((len(row) for row in ids), default=0)
    if longest > limit:
        raise UserError(f"canaries: a canary sentence has {longest} tokens, more than the model's {limit}")
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out = np.zeros((len(ids), digits, len(DIGITS)))
    with torch.inference_mode(), eval_mode(model):
        for a in range(0, len(ids), max(1, int(batch_size))):
            rows = ids[a : a + batch_size]
            batch, attention = padded_batch(rows, pad)
            where = torch.from_numpy(positions[a : a + len(rows)])
            batch.scatter_(1, where, tokenizer.mask_token_id)
            logits = model(input_ids=batch.to(device), attention_mask=attention.to(device)).logits
            picked = logits[torch.arange(len(rows), device=device)[:, None], where.to(device)]
            digit_logits = picked[..., digit_ids.to(device)].float()
            out[a : a + len(rows)] = torch.log_softmax(digit_logits, dim=-1).cpu().numpy()
    return out, symbols


def exact_exposures(logp: np.ndarray, symbols: np.ndarray) -> pd.DataFrame:
    """Exact rank and exposure (Carlini et al. 2019, Eq. 1) of each canary among all 10^d
    secrets, from its masked-pass log-probabilities (`secret_log_probs`). Columns: rank (the
    optimistic rank, the canary first among its ties), ties (other secrets tied with it),
    exposure = d log2 10 - log2 rank."""
    logp, symbols = np.asarray(logp, dtype=float), np.asarray(symbols)
    rows = []
    for table, code in zip(logp, symbols):
        rank, ties = exact_rank(table, code, return_ties=True)
        rows.append((rank, ties, exposure(rank, table.shape[1] ** table.shape[0])))
    return pd.DataFrame(rows, columns=["rank", "ties", "exposure"]).astype({"rank": "int64", "ties": "int64"})


# --------------------------------------------------------------------------- extrapolated exposure


def pll_scores(
    model,
    tokenizer,
    sample_ids: Sequence[str],
    texts: Sequence[str],
    *,
    seed: int,
    num_threads: int | None = None,
    batch_size: int | None = None,
) -> np.ndarray:
    """Pseudo-log-likelihood of each sentence: -(normalized energy) x content tokens, the sum
    over positions of log p(token | the rest), each position masked alone (the project's
    scorer, `mlmia.scoring.energy.score_samples`, energy kind "normalized"). Higher = more
    likely."""
    from mlmia.scoring.energy import score_samples

    samples = pd.DataFrame({"sample_id": list(sample_ids), "text": list(texts)})
    scores = score_samples(
        model,
        tokenizer,
        samples,
        energy="normalized",
        patterns=1,
        seed=seed,
        batch_size=batch_size,
        num_threads=num_threads,
        progress_seconds=math.inf,
    )
    return -scores["energy"].to_numpy(dtype=float) * scores["n_tokens"].to_numpy(dtype=float)


def extrapolated_exposures(canary_scores: np.ndarray, candidate_scores: np.ndarray) -> pd.DataFrame:
    """Each canary's exposure extrapolated from the candidates' scores by the skew-normal fit
    of Carlini et al. 2019, Section 4.3 (`skewnorm_exposure`), with the fit's parameters and
    the number of sampled candidates scored above the canary (`sampled_above`)."""
    candidate_scores = np.asarray(candidate_scores, dtype=float)
    rows = []
    for score in np.asarray(canary_scores, dtype=float):
        value, (shape, loc, scale) = skewnorm_exposure(float(score), candidate_scores, return_fit=True)
        rows.append((value, shape, loc, scale, int(np.sum(candidate_scores > score))))
    return pd.DataFrame(rows, columns=["exposure", "skew_shape", "skew_loc", "skew_scale", "sampled_above"])


def checkpoint_exposures(
    model,
    tokenizer,
    canaries: pd.DataFrame,
    candidates: pd.DataFrame,
    template: str,
    digits: int,
    *,
    seed: int,
    num_threads: int | None = None,
) -> pd.DataFrame:
    """Both exposures of every canary under one model: one row per canary with canary_id,
    role, repetitions, exact_rank, exact_ties, exact_exposure, pll (the canary sentence's
    pseudo-log-likelihood), extrapolated_exposure (from the candidates' PLLs), the fit's
    skew_shape, skew_loc, skew_scale and sampled_above, and log2_space = log2 10^d."""
    labels = canaries["canary_id"].astype(str).tolist()
    logp, symbols = secret_log_probs(model, tokenizer, canaries["text"].tolist(), template, digits, labels=labels)
    exact = exact_exposures(logp, symbols)
    secret_positions(tokenizer, candidates["text"].tolist(), template, digits, candidates["candidate_id"].tolist())
    ids = labels + candidates["candidate_id"].astype(str).tolist()
    texts = canaries["text"].tolist() + candidates["text"].tolist()
    pll = pll_scores(model, tokenizer, ids, texts, seed=seed, num_threads=num_threads)
    extrapolated = extrapolated_exposures(pll[: len(canaries)], pll[len(canaries) :])
    return pd.DataFrame(
        {
            "canary_id": labels,
            "role": canaries["role"].to_numpy(),
            "repetitions": canaries["repetitions"].to_numpy(dtype=np.int64),
            "exact_rank": exact["rank"].to_numpy(),
            "exact_ties": exact["ties"].to_numpy(),
            "exact_exposure": exact["exposure"].to_numpy(),
            "pll": pll[: len(canaries)],
            "extrapolated_exposure": extrapolated["exposure"].to_numpy(),
            "skew_shape": extrapolated["skew_shape"].to_numpy(),
            "skew_loc": extrapolated["skew_loc"].to_numpy(),
            "skew_scale": extrapolated["skew_scale"].to_numpy(),
            "sampled_above": extrapolated["sampled_above"].to_numpy(),
            "log2_space": digits * math.log2(10),
        }
    )


# --------------------------------------------------------------------------- the exposure table and figure

SUMMARY_COLUMNS = ["repetitions", "epoch", "estimate", "n_canaries", "mean", "sd", "min", "max", "log2_space"]


def exposure_summary(exposures: pd.DataFrame) -> pd.DataFrame:
    """Mean exposure and its spread over the canaries of each (repetition count, epoch,
    estimate): n_canaries, mean, sd (ddof 1; NaN for one canary), min, max. Repetition count 0
    holds every never-inserted canary (non-members and population)."""
    rows = []
    for (reps, epoch), part in exposures.groupby(["repetitions", "epoch"], sort=True):
        for estimate in ESTIMATES:
            values = part[f"{estimate}_exposure"].to_numpy(dtype=float)
            sd = float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")
            low, high, space = float(values.min()), float(values.max()), float(part["log2_space"].iloc[0])
            rows.append((int(reps), int(epoch), estimate, len(values), float(values.mean()), sd, low, high, space))
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _repetition_label(reps: int) -> str:
    return "0 (never inserted)" if reps == 0 else f"{reps}"


def exposure_markdown(summary: pd.DataFrame, digits: int, template: str) -> str:
    """The exposure table in Markdown: rows repetition counts, columns (epoch, estimate);
    cells the mean exposure over the canaries with its min-max in brackets."""
    log2_space = digits * math.log2(10)
    epochs = sorted(summary["epoch"].unique())
    reps = sorted(summary["repetitions"].unique())
    counts = summary.drop_duplicates("repetitions").set_index("repetitions")["n_canaries"]
    lines = [
        f"# Canary exposure: d = {digits} digits, |R| = 10^{digits}, maximum log2 |R| = {log2_space:.2f}",
        "",
        "Exposure = log2 |R| - log2 rank (Carlini et al., USENIX Security 2019, Eq. 1), from 0 (the least "
        f"likely secret) to {log2_space:.2f} (the most likely). Template: `{template}`. Each cell: the mean "
        "over the canaries of that repetition count, with the min-max over them in brackets. Exact: the "
        "rank among all 10^d secrets from one pass with every secret digit masked (digit probabilities "
        "renormalised over the 10 digits). Extrapolated: the sentence's pseudo-log-likelihood against a "
        "sample of candidate sentences, skew-normal fit (Section 4.3); it is not capped at log2 |R|.",
        "",
    ]
    header = ["repetitions", "canaries"] + [f"{est}, epoch {e}" for e in epochs for est in ESTIMATES]
    cells = summary.set_index(["repetitions", "epoch", "estimate"])
    body = []
    for r in reps:
        row = [_repetition_label(int(r)), str(int(counts[r]))]
        for e in epochs:
            for est in ESTIMATES:
                c = cells.loc[(r, e, est)]
                row.append(f"{c['mean']:.2f} ({c['min']:.2f}-{c['max']:.2f})")
        body.append(row)
    lines.append(markdown_table(header, body))
    return "\n".join(lines) + "\n"


def plot_exposure(summary: pd.DataFrame, path: str | os.PathLike, digits: int, style: Mapping) -> None:
    """Exposure against repetitions, one line per epoch: the exact mean (solid, with its
    min-max band) and the extrapolated mean (dashed), and the maximum log2 |R| (dotted).
    The repetition counts are evenly spaced (0, then the counts in order). Written atomically,
    in the config's `figure_style`."""
    import matplotlib.pyplot as plt

    from mlmia.report.style import apply_style, save_figure

    apply_style(style)
    reps = sorted(summary["repetitions"].unique())
    x = np.arange(len(reps))
    fig, ax = plt.subplots(figsize=(float(style["width"]), float(style["height"])))
    colours = plt.get_cmap("viridis")(np.linspace(0.1, 0.85, max(1, summary["epoch"].nunique())))
    for colour, (epoch, part) in zip(colours, summary.groupby("epoch", sort=True)):
        exact = part[part["estimate"] == "exact"].set_index("repetitions").loc[reps]
        extra = part[part["estimate"] == "extrapolated"].set_index("repetitions").loc[reps]
        ax.plot(x, exact["mean"], marker="o", ms=3, lw=1.4, color=colour, label=f"epoch {epoch}, exact")
        ax.fill_between(x, exact["min"], exact["max"], color=colour, alpha=0.15, lw=0)
        ax.plot(x, extra["mean"], ls="--", lw=1.2, color=colour, label=f"epoch {epoch}, extrapolated")
    log2_space = digits * math.log2(10)
    ax.axhline(log2_space, color="grey", ls=":", lw=1.0, label="log2 |R|")
    ax.set_xticks(x, [str(int(r)) for r in reps])
    ax.set_xlabel("insertions of the canary")
    ax.set_ylabel("exposure (bits)")
    ax.set_title(f"Canary exposure, {digits}-digit secrets", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    save_figure(fig, [path], style)
