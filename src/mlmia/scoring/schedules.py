"""Masking patterns of every energy kind, and the schedules whose patterns differ in size.

`content_patterns` gives the patterns of one sample for any energy kind, as `mlmia.scoring.masks`
keys them: a pure function of (seed, mask key, content tokens, settings), so a target and its
reference score a sample under the same patterns (common random numbers), whatever the shard,
the batch or the device. Positions are 0-based indices into the sample's content tokens.

Two kinds mask a different number of tokens in each pattern (their score tables say how many a
pattern scores: `mlmia.terms.scores.PATTERN_SIZES`):

- ``progressive`` (SAMA: Stry233/SAMA, ``attack/attacks/sama.py``, its linear schedule): steps
  s = 0..S-1 mask the fraction f_s = min + (max - min)(s + 1)/(S + 1) of the T content tokens,
  c_s = max(1, round(f_s T)) tokens (Python's round, half to even, as the reference's
  ``int(round(frac * L))``), nested: one random order of the positions per sample, step s masks
  its first c_s. A step scores only the c_s - c_{s-1} tokens it masks first (the earlier ones are
  masked, not scored: SAMA keeps each token's loss from the step that first masked it); a step
  that masks no new token is left out, as the reference skips it. The reference counts the
  special tokens in T and may mask them; here T counts content tokens only, as every energy does.
- ``elbo`` (the masked-diffusion ELBO under a fixed schedule; MDLM, Sahoo et al. 2024; LLaDA, Nie
  et al. 2025): R ratios at the midpoints t_i = (i - 1/2)/R, i = 1..R (the midpoint rule for the
  ELBO's integral over t in (0, 1), with no pattern masking every token), P patterns per ratio,
  each masking exactly l_i = max(1, round(t_i T)) positions drawn uniformly (each pattern on its
  own generator, so two may repeat when few exist). Exactly l_i rather than each token with
  probability t_i: LLaDA's low-variance likelihood estimate masks exactly l tokens, and no pattern
  is empty. A pattern's value, (sum of the masked cross-entropies / t) / T with t = l_i / T the
  ratio it realises, is their mean (the scorer's `mean` reduction; `sum`: times T, the sequence's).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mlmia.core.errors import UserError
from mlmia.core.keys import stable_key
from mlmia.scoring.masks import mask_patterns, single_position_patterns

#: the energy kinds with a schedule and its settings: the config's `scoring.progressive` and
#: `scoring.elbo`, whose defaults validation writes (a schedule is always given whole)
SCHEDULE_KEYS: dict[str, tuple[str, ...]] = {
    "progressive": ("steps", "min_fraction", "max_fraction"),
    "elbo": ("ratios", "patterns"),
}
#: generator streams of the schedules: (seed, key, stream, ...) never meets masks' (seed, key, j < K)
PROGRESSIVE_STREAM = 0x53414D41
ELBO_STREAM = 0x454C424F


def check_schedule(energy: str, schedule: Mapping | None) -> dict | None:
    """The schedule of energy kind `energy`, every key given, checked (None for a kind without
    one, which refuses a schedule); an unknown key, a missing one or a wrong value is a UserError."""
    if energy not in SCHEDULE_KEYS:
        if schedule:
            raise UserError(f"energy {energy}: takes no schedule (only {', '.join(SCHEDULE_KEYS)} do)")
        return None
    keys = SCHEDULE_KEYS[energy]
    given = dict(schedule or {})
    unknown = sorted(set(given) - set(keys))
    if unknown:
        raise UserError(f"config key scoring.{energy}: unknown key(s) {', '.join(unknown)} (known: {', '.join(keys)})")
    missing = [key for key in keys if key not in given]
    if missing:
        raise UserError(f"config key scoring.{energy}: missing key(s) {', '.join(missing)}")
    out = {key: given[key] for key in keys}
    for key in ("steps", "ratios", "patterns"):
        if key in out and not (isinstance(out[key], int | np.integer) and out[key] >= 1):
            raise UserError(f"config key scoring.{energy}.{key}: a positive integer is needed, got {out[key]!r}")
    if energy == "progressive":
        low, high = out["min_fraction"], out["max_fraction"]
        if not 0 <= low <= high <= 1:
            raise UserError(
                f"config key scoring.progressive: 0 <= min_fraction <= max_fraction <= 1 is needed, got {low!r}, {high!r}"
            )
    return out


def progressive_counts(n_tokens: int, steps: int, min_fraction: float, max_fraction: float) -> list[int]:
    """c_s, the tokens masked at each step s = 0..steps-1 (cumulative; see the module docstring)."""
    out = []
    for step in range(int(steps)):
        fraction = min_fraction + (max_fraction - min_fraction) * (step + 1) / (steps + 1)
        out.append(min(int(n_tokens), max(1, int(round(fraction * n_tokens)))))
    return out


def progressive_patterns(seed: int, key: str, n_tokens: int, schedule: Mapping) -> tuple[list, list]:
    """(scored, masked before) per kept step: the positions a step masks first (sorted), and those
    earlier steps masked (masked too, not scored)."""
    order = np.random.default_rng([int(seed), stable_key(key), PROGRESSIVE_STREAM]).permutation(int(n_tokens))
    scored, before, done = [], [], 0
    for count in progressive_counts(n_tokens, schedule["steps"], schedule["min_fraction"], schedule["max_fraction"]):
        if count > done:
            scored.append(np.sort(order[done:count]))
            before.append(np.sort(order[:done]))
            done = count
    return scored, before


def elbo_ratios(ratios: int) -> np.ndarray:
    """t_i = (i - 1/2) / R, i = 1..R."""
    return (np.arange(int(ratios)) + 0.5) / int(ratios)


def elbo_patterns(seed: int, key: str, n_tokens: int, schedule: Mapping) -> list[np.ndarray]:
    """P patterns per ratio, ratio by ratio: pattern j of ratio i holds l_i positions (sorted)
    drawn by ``numpy.random.default_rng([seed, sha256(key), ELBO_STREAM, i, j])``."""
    n_tokens, out = int(n_tokens), []
    for i, ratio in enumerate(elbo_ratios(schedule["ratios"])):
        size = min(n_tokens, max(1, int(round(ratio * n_tokens))))
        for j in range(int(schedule["patterns"])):
            rng = np.random.default_rng([int(seed), stable_key(key), ELBO_STREAM, i, j])
            out.append(np.sort(rng.choice(n_tokens, size=size, replace=False)))
    return out


def content_patterns(
    energy: str, seed: int, key: str, n_tokens: int, patterns: int, mask_count: str, schedule: Mapping | None
) -> tuple[np.ndarray | list[np.ndarray], list[np.ndarray] | None]:
    """(scored positions of each pattern, positions each pattern masks without scoring them, or
    None) of one sample: an array (K, l) where every pattern scores as many positions, else a list
    of arrays. PLL-word-l2r's unscored positions (the rest of a word) come from the tokenizer."""
    if energy == "masked":
        return mask_patterns(seed, key, n_tokens, patterns, mask_count), None
    if energy == "progressive":
        return progressive_patterns(seed, key, n_tokens, schedule)
    if energy == "elbo":
        return elbo_patterns(seed, key, n_tokens, schedule), None
    return single_position_patterns(n_tokens), None
