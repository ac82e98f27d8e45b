"""SAMA, the Subset-Aggregated Membership Attack: sign tests of the reference's loss against the
target's on random subsets of progressively masked tokens."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import row_ids, token_lists
from mlmia.core.errors import UserError
from mlmia.core.keys import stable_key

KIND = "progressive"


def sama_score(
    target_loss: np.ndarray,
    reference_loss: np.ndarray,
    sizes,
    subset_size: int,
    num_subsets: int,
    rng: np.random.Generator,
) -> float:
    """One sample's SAMA score from the losses of its masked tokens in the order they were masked
    (`sizes[s]`: the tokens step s masked first): at step s the m tokens masked so far, each with
    its loss from the step that masked it; `num_subsets` subsets of min(`subset_size`, m) of them,
    each drawn by ``rng.choice(m, size, replace=False)``; the step's score is the share of subsets
    whose reference loss sum exceeds the target's; the steps are averaged with weights 1/(s + 1),
    normalised."""
    scores = []
    for m in np.cumsum(sizes):
        size = min(int(subset_size), int(m))
        subsets = np.vstack([rng.choice(int(m), size=size, replace=False) for _ in range(int(num_subsets))])
        scores.append(float(np.mean(reference_loss[subsets].sum(axis=1) > target_loss[subsets].sum(axis=1))))
    if not scores:
        return 0.0
    weights = 1.0 / (np.arange(len(scores)) + 1)
    return float(np.average(scores, weights=weights / weights.sum()))


class Sama(Attack):
    """The share of random token subsets on which the reference's loss exceeds the target's,
    averaged over progressively larger masks with weights favouring the first.

    Chen, Zhang, Du, Stoppa, Fleming, Kundu, Ribeiro and Li, "Membership Inference Attacks
    Against Fine-tuned Diffusion Language Models", ICLR 2026 (arXiv 2601.20125): SAMA (Subset-Aggregated Membership Attack). The sample is masked in
    `steps` nested steps of growing size (energy kind ``progressive``, `mlmia.scoring.schedules`:
    the reference's linear schedule from ``min_mask_frac`` to ``max_mask_frac``, config
    ``scoring.progressive``), target and reference under the same masks; each token's loss
    (cross-entropy) is the one of the step that first masked it. At each step, `num_subsets`
    random subsets of `subset_size` of the masked tokens (all of them when fewer are masked)
    each cast a vote, "the reference's summed loss is above the target's"; the step's score is
    the share of votes; the steps are averaged with weights 1/(s + 1). A member's loss under the
    target is low against the reference's on most subsets, so higher means "member"; a vote on a
    subset rather than one sum over all masked tokens keeps a few outlying tokens from deciding.

    Its test (`tests/test_attack_zoo.py`) follows the authors' implementation (Stry233/SAMA,
    ``attack/attacks/sama.py``, ``SamaAttack._compute_batch_scores`` and
    ``_subset_binary_comparison_with_metadata``; defaults from ``attack/configs/config_all.yaml``:
    steps 4, subset_size 8, num_subsets 128, linear schedule 0.05 to 0.50) on fixed losses and
    masks. Differences, all of bookkeeping: each sample draws its subsets from its own generator,
    ``numpy.random.default_rng([seed, sha256(sample_id)])`` (the reference's one generator runs
    across the samples in batch order, so a sample's score depends on the others); the masked
    tokens are indexed in the order they were masked (step, then position) where the reference
    indexes them by position (a uniformly drawn subset is uniform either way); the masks cover
    content tokens only and a step that masks no new token is left out for that sample (the
    reference's batch skips a step only when no sample of the batch masks a new token).

    On short samples the test degenerates: with T content tokens step s masks
    max(1, round(f_s T)) of them (f = 0.14, 0.23, 0.32, 0.41 with the defaults), so a sample of
    20 or fewer tokens never masks more than `subset_size` = 8 and every subset is the whole
    mask: each step casts one vote, 128 times."""

    name = "sama"
    label = "SAMA"
    inputs = {
        "target": (f"token_logp@{KIND}", f"pattern_sizes@{KIND}"),
        "reference": (f"token_logp@{KIND}", f"pattern_sizes@{KIND}"),
    }
    lower_is_member = False
    aggregates = True
    parameters = {"subset_size": 8, "num_subsets": 128, "seed": 0}

    def check_params(self) -> None:
        self._checked()

    def _checked(self) -> tuple[int, int, int]:
        out = []
        for key in ("subset_size", "num_subsets", "seed"):
            value = self.params[key]
            least = 0 if key == "seed" else 1
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
                raise UserError(f"config key attacks.{self.name}.{key}: an integer >= {least} is needed, got {value!r}")
            out.append(int(value))
        return tuple(out)

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        subset_size, num_subsets, seed = self._checked()
        target = token_lists(table, f"target_{KIND}_token_logp", self.name)
        reference = token_lists(table, f"reference_{KIND}_token_logp", self.name)
        keys = table["sample_id"].astype(str).tolist() if "sample_id" in table.columns else list(map(str, table.index))
        out = np.empty(len(table), dtype=float)
        rows = zip(
            row_ids(table), keys, target, reference,
            table[f"target_{KIND}_pattern_sizes"].tolist(), table[f"reference_{KIND}_pattern_sizes"].tolist(),
        )  # fmt: skip
        for i, (sid, key, lt, lr, sizes, reference_sizes) in enumerate(rows):
            sizes = np.asarray(sizes if sizes is not None else [], dtype=np.int64).reshape(-1)
            if not np.array_equal(sizes, np.asarray(reference_sizes, dtype=np.int64).reshape(-1)):
                raise UserError(
                    f"attack {self.name}: sample {sid}: target and reference were scored under different masking "
                    "steps (their progressive scores need the same scoring settings)"
                )
            if int(sizes.sum()) != lt.size or lt.size != lr.size or (sizes < 1).any():
                raise UserError(
                    f"attack {self.name}: sample {sid}: the token losses do not make the masking steps "
                    f"({lt.size} and {lr.size} losses, steps of {sizes.tolist()})"
                )
            rng = np.random.default_rng([seed, stable_key(key)])
            out[i] = sama_score(-lt, -lr, sizes, subset_size, num_subsets, rng)
        return out
