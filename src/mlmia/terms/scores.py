"""The score table: one row per (sample, model, energy kind), written by the scorer and by the
importers of published or external scores alike (theirs hold no per-token evidence: empty lists)."""

import pandas as pd

SCORE_COLUMNS = [
    "sample_id", "model", "energy_kind", "energy", "n_tokens", "n_masked", "per_pattern", "patterns", "seed",
    "token_logp", "token_mean", "token_var", "token_top1",
]  # fmt: skip
#: columns renamed, old name -> new: score tables written before the rename still read
#: (`read_score_table`); `patterns` is K, the masking patterns scored, as config and CLI call it
RENAMED_COLUMNS = {"k": "patterns"}
#: the per-token evidence of the scored positions, lists in pattern order (mlmia.scoring.energy)
TOKEN_COLUMNS = ["token_logp", "token_mean", "token_var", "token_top1"]

#: the energy kinds the scorer computes (mlmia.scoring.energy)
ENERGY_KINDS = ("masked", "normalized", "pll_word_l2r", "progressive", "elbo")
#: the kinds whose patterns score different numbers of positions (mlmia.scoring.schedules): their
#: score tables have one more column, `PATTERN_SIZES`, each pattern's scored positions in pattern
#: order (the lengths of the pieces the token lists are made of); their `n_masked` is the total
PATTERN_SIZES = "pattern_sizes"
SIZED_KINDS = ("progressive", "elbo")


def read_score_table(path) -> pd.DataFrame:
    """A score table (Parquet) with its columns under their current names (`RENAMED_COLUMNS`)."""
    return pd.read_parquet(path).rename(columns=RENAMED_COLUMNS)


#: the token kind of a slot whose token lies in no PHI span: the ordinary words (mlmia.memorization.token_kinds)
OTHER_KIND = "other"
#: the unit of an attack's per-slot score, where it is known (an attack not named here: "the attack's score units")
SLOT_UNITS = {"informia": "bits"}
