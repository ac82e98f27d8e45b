"""Defences against membership inference, and audits of the guarantees they claim.

- `dp_sgd`: DP-SGD training of the masked language models (Abadi, Chu, Goodfellow, McMahan,
  Mironov, Talwar and Zhang, "Deep learning with differential privacy", CCS 2016) with Opacus:
  per-sample (or per-patient) gradient clipping, Poisson sampling, Gaussian noise calibrated
  to a target epsilon by the Renyi-DP accountant (Mironov, "Renyi differential privacy", CSF
  2017); the patient-level guarantee that group privacy gives a sample-level model; faulty
  trainers (`fault`) that the audit must catch.
- `gradient_canaries`: white-box gradient canaries inside the DP optimizer, observed after the
  noise at every step, their scores, and the mechanism checks (Poisson batches, noise).
- `token_canaries`: black-box canaries of new tokens (Panda et al., ICLR 2025) and their scores.
- `audit`: the audit of one DP target: the one-run bounds of both kinds of canaries (Steinke,
  Nasr and Jagielski, NeurIPS 2023; the f-DP analysis of Mahloujifar, Melis and Chaudhuri, ICML
  2025), the mechanism checks, every attack's empirical lower bound (Jagielski, Ullman and
  Oprea, NeurIPS 2020; Nasr, Song, Thakurta, Papernot and Carlini, IEEE S&P 2021) with the
  target's utility, and the rule that fails a target whose DP claim they refute.
- `fault_simulation`: faulty DP-SGD trainers simulated without training, and each check of the
  audit as a rule that flags a record or not (what bench/dp_power.py measures power with).
- `report`: the tables and findings over all targets.
- `figure`: the privacy-utility figure.
- `workflow`: what `snakemake dp` attacks for each DP target (no Snakemake here).

The bounds themselves are `mlmia.metrics.privacy_bounds`. `docs/dp.md` says what each number
means.
"""
