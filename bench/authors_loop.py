"""The original authors' per-sample scoring loop, reimplemented for the benchmark's ratios.

As issue 14 describes it: one sample and one mask at a time (batch of 1), two fp32 forward passes
per mask, gradients recorded (no `no_grad`); the energy is the mean masked-token cross-entropy,
averaged over K = 20 masks. As a process (`bench/run_benchmarks.py` times it the way it times
`mlmia score`):

    .venv/bin/python bench/authors_loop.py MODEL_DIR SAMPLES.parquet OUT.parquet
"""

from __future__ import annotations

import sys

import numpy as np

K = 20  # masks per sample, as in the authors' code


def authors_loop(model, tok, texts: list[str], k: int = K, seed: int = 0) -> list[float]:
    """The authors' per-sample loop as issue 14 describes it: one sample and one mask at a time
    (batch of 1), two fp32 forward passes per mask, gradients recorded (no `no_grad`); the energy
    is the mean masked-token cross-entropy over the K masks."""
    import torch
    import torch.nn.functional as F

    from mlmia.scoring.masks import n_masked

    rng = np.random.default_rng(seed)
    energies = []
    for text in texts:
        ids = torch.tensor([tok(text)["input_ids"]])
        t = ids.shape[1] - 2
        values = []
        for _ in range(k):
            pos = torch.from_numpy(1 + rng.choice(t, n_masked(t, "ceil"), replace=False))
            masked = ids.clone()
            masked[0, pos] = tok.mask_token_id
            model(masked)  # the first pass
            logits = model(masked).logits[0]  # the second
            values.append(float(F.cross_entropy(logits[pos], ids[0, pos])))
        energies.append(float(np.mean(values)))
    return energies


if __name__ == "__main__":
    import pandas as pd
    from transformers import BertForMaskedLM, BertTokenizerFast

    model = BertForMaskedLM.from_pretrained(sys.argv[1]).eval()
    tok = BertTokenizerFast.from_pretrained(sys.argv[1])
    df = pd.read_parquet(sys.argv[2])
    pd.DataFrame({"sample_id": df.sample_id, "energy": authors_loop(model, tok, df.text.tolist())}).to_parquet(
        sys.argv[3]
    )
