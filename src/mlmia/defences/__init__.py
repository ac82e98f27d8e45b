"""Defences against membership inference, and how far they are measured to hold.

- `dp_sgd`: DP-SGD training of the masked language models (Abadi, Chu, Goodfellow, McMahan,
  Mironov, Talwar and Zhang, "Deep learning with differential privacy", CCS 2016) with Opacus:
  per-sample (or per-patient) gradient clipping, Poisson sampling, Gaussian noise calibrated
  to a target epsilon by the Renyi-DP accountant (Mironov, "Renyi differential privacy", CSF
  2017); the patient-level guarantee that group privacy gives a sample-level model.
- `audit`: empirical lower bounds on epsilon from the attacks' scores, a threshold chosen on
  one half and the bound computed on the other (Jagielski, Ullman and Oprea, NeurIPS 2020;
  Nasr, Song, Thakurta, Papernot and Carlini, IEEE S&P 2021), checked against the accountant's
  epsilon; the utility of each target (held-out masked-LM loss, pseudo-perplexity); the
  one-run audit of Steinke, Nasr and Jagielski (NeurIPS 2023) on canaries inserted with
  probability 1/2.
- `figure`: the privacy-utility figure.
- `workflow`: what `snakemake dp` reads for each DP target (no Snakemake here).

The bounds themselves are `mlmia.metrics.privacy_bounds`. `docs/dp.md` says what each number
means.
"""
