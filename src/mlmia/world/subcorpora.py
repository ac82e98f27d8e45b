"""The embedded world's registers as the subcorpora of the shadow-model protocol (Hisamoto et
al. 2020): sentences with their patient (or document) and the register they are written in,
and the registers outside the clinical world (`mlmia.world.registers.wikipedia`: Wikipedia articles)."""

from __future__ import annotations

import pandas as pd

#: register of a corpus table row, by the prefix of its group id (mlmia.world.corpus)
REGISTERS = {"mimic": "mimic", "i2b2": "i2b2", "domain": "case_reports", "abstract": "abstracts",
             "general": "news", "encyclopedic": "encyclopedic", "wikipedia": "wikipedia"}  # fmt: skip
SUBCORPUS_COLUMNS = ["sample_id", "group_id", "text", "subcorpus"]


def subcorpora(world: pd.DataFrame, *tables: pd.DataFrame) -> pd.DataFrame:
    """Every sentence of the world's plain samples and of the other corpus tables (domain,
    general, the Wikipedia register), each with its register: MIMIC and i2b2 notes, case reports,
    abstracts, news, encyclopedic prose in the case-report register (near-domain) and Wikipedia
    articles. A sentence that two tables share is kept once."""
    plain = world[world["variant"] == "plain"][["sample_id", "group_id", "text"]]
    rows = pd.concat([plain, *(t[["sample_id", "group_id", "text"]] for t in tables)], ignore_index=True)
    rows = rows.drop_duplicates("sample_id").reset_index(drop=True)
    prefix = rows["group_id"].astype(str).str.split("-").str[0]
    rows["subcorpus"] = prefix.map(REGISTERS)
    return rows[rows["subcorpus"].notna()][SUBCORPUS_COLUMNS].reset_index(drop=True)
