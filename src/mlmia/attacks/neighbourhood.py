"""The neighbourhood attack: the target's energy relative to its energy on neighbour texts."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlmia.attacks.base import Attack
from mlmia.attacks.shared import row_ids
from mlmia.core.errors import UserError
from mlmia.terms.manifest import NEIGHBOUR_ROLES


class Neighbourhood(Attack):
    """E(s; θ) − mean_j E(s̃_j; θ): the target's energy of a sample minus the mean of its
    energies of the sample's neighbours s̃_1, ..., s̃_n.

    Mattern, Mireshghallah, Jin, Schölkopf, Sachan and Berg-Kirkpatrick, "Membership
    Inference Attacks against Language Models via Neighbourhood Comparison", Findings of ACL
    2023: a member sits in a dip of the model's loss, so its loss is lower than that of
    slightly changed copies, while a non-member's is about the same. The neighbours are the
    sample's best-scored single-token swaps proposed by a masked language model
    (`mlmia.scoring.neighbours.neighbour_samples`), scored by the target like any sample
    (`neighbours_energy`: one energy per neighbour, each scored under the sample's own masking
    patterns, so that the difference carries no masking noise of its own). No reference
    model is needed. A population sample has no statistic (NaN): its neighbours are not
    scored; nor has an audited sample outside the configured subsample
    (`neighbours.subsample`, `mlmia.terms.manifest.neighbour_subsample`), whose
    ``neighbours_energy`` the attack table leaves empty (None): the metrics compute this
    attack on the rows that have neighbour energies (`scored`). Lower means "member". Its test (`tests/test_attack_zoo.py`, reference
    definitions) follows MIMIR's neighbourhood attack (iamgroot42/mimir,
    ``mimir/attacks/neighborhood.py``: the text's loss minus the mean of its neighbours'
    losses), the losses being masked energies (see `mlmia.attacks.loss`); how the neighbours
    are made follows Mattern et al.'s code (`mlmia.scoring.neighbours`)."""

    name = "neighbourhood"
    label = "neighbourhood"
    inputs = {"target": ("energy",), "neighbours": ("energy",)}
    lower_is_member = True
    aggregates = True
    # population samples' neighbours are not scored (`mlmia.terms.manifest.NEIGHBOUR_ROLES`): no
    # statistic (NaN) and so no population threshold for this attack
    scored_roles = NEIGHBOUR_ROLES

    def scored(self, table: pd.DataFrame) -> np.ndarray:
        """The audited rows that have neighbour energies: a sample outside the neighbour
        subsample has None (an empty list is an error of the statistic)."""
        scored = table["role"].isin(self.scored_roles).to_numpy() if "role" in table else np.ones(len(table), bool)
        if "neighbours_energy" not in table:
            return scored
        return scored & np.array([values is not None for values in table["neighbours_energy"].tolist()], dtype=bool)

    def statistic(self, table: pd.DataFrame) -> np.ndarray:
        energy = table["target_energy"].to_numpy(dtype=float)
        out = np.full(len(table), np.nan)
        ids = row_ids(table)
        scored = self.scored(table)
        for i, values in enumerate(table["neighbours_energy"].tolist()):
            if not scored[i]:
                continue
            values = np.asarray(values, dtype=float).reshape(-1)
            if values.size == 0:
                raise UserError(f"attack neighbourhood: sample {ids[i]} has no neighbour energies")
            if not np.isfinite(values).all():
                raise UserError(f"attack neighbourhood: sample {ids[i]}: a neighbour energy is not a finite number")
            out[i] = energy[i] - values.mean()
        return out
