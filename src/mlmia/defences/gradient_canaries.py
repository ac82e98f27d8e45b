"""White-box gradient canaries of DP-SGD, and what the auditor reads from them: the canaries'
scores for the one-run audit and two checks of the mechanism that need no statistics of privacy.

The canaries (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini and Terzis, "Tight
auditing of differentially private machine learning", USENIX Security 2023; in one run:
Steinke, Nasr and Jagielski, NeurIPS 2023). m canaries, each included with probability 1/2
(seeded, independent of everything else). An included canary is one more training unit whose
gradient is a fixed direction of norm `norm` x C (C the clipping norm): a one-hot vector on a
coordinate of its own. The coordinates live in an auxiliary parameter of m + e entries that the
forward pass never reads (`GradientCanaries.param`), added to the DP optimizer as a parameter
group of its own (learning rate 0), so that Opacus clips, noises and scales it with the model's
parameters, by the same code, with the same noise generator:

- sampling: at each step each included canary joins the batch with the training's Poisson rate
  q (a generator of its own), as a data unit would;
- clipping: a joining canary is one more row of every parameter's per-sample gradients (zeros
  on the model's parameters, its direction on the auxiliary one), so Opacus clips it to C like
  any unit; a data unit's row is zero on the auxiliary parameter, so its clipping is unchanged;
- noise: Opacus adds N(0, sigma^2 C^2) to every coordinate of the auxiliary parameter as to the
  model's and divides by its expected batch size (Opacus' `expected_batch_size`, which counts
  the data units only: the canaries change neither the normalisation nor the accounting);
- observation: after the noise and before AdamW (Opacus' step hook, after the accountant's),
  the auxiliary parameter's privatised gradient is recorded at every step, empty batches
  included: T x (m + e) numbers, `RECORD_FILE` in the model's directory.

The e canary-free coordinates (sentinels) receive noise only. The model's weights never see the
auxiliary parameter: AdamW acts per coordinate and the loss does not read it. The noise of the
model's parameters comes from the same generator, drawn before the canaries' at each step, so
the weights of a noisy run differ from a run without canaries by the generator's stream only
(without noise they are the same, bit for bit; tests/test_dp.py).

What the auditor reads (`canary_scores`, `mechanism_checks`): each coordinate's observation
in units of the clipped canary, z_t = x_t (expected batch) / C, which is b_t + sigma N(0, 1) for
a canary that joined step t (b_t = 1) or not (b_t = 0). Scores: `alignment`, the summed
alignment sum_t z_t; `likelihood_ratio`, the Neyman-Pearson statistic of the accounted
mechanism, sum_t log(1 - q + q exp((2 z_t - 1) / (2 sigma^2))) with the accountant's sigma and
q (the claim; a wrong claim only costs power, never validity: any score computed from the
released gradients and public facts is a valid audit). The mechanism checks compare the
observed Poisson batches with q n and the sentinels' spread with sigma C / (expected batch).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy import special, stats

from mlmia.core.errors import UserError
from mlmia.defences.dp_settings import canary_settings

SCORES = ("likelihood_ratio", "alignment")
#: the observations in a trained model's directory
RECORD_FILE = "gradient_canaries.npz"


def inclusion_bits(count: int, seed: int) -> np.ndarray:
    """Which of the `count` canaries are included: independent fair coins from `seed`."""
    return np.random.default_rng([seed, 24]).random(count) < 0.5


class GradientCanaries:
    """The canaries of one DP-SGD run (module docstring): `attach` once to the DP optimizer, then
    `add_rows` before every optimiser step, empty batches included; `save` after the run.

    `clip`: the clipping norm C the canaries are scaled by (the setting's, also when the run does
    not clip); `sample_rate`: the Poisson rate the training samples its units with."""

    def __init__(self, settings: dict, clip: float, sample_rate: float, device=None) -> None:
        import torch

        self.settings = canary_settings(settings)
        self.count, self.sentinels = self.settings["count"], self.settings["sentinels"]
        self.clip = float(clip)
        self.rate = float(sample_rate)
        self.included = inclusion_bits(self.count, self.settings["seed"])
        self._members = np.nonzero(self.included)[0]
        self._sampler = np.random.default_rng([self.settings["seed"], 25])
        self.param = torch.nn.Parameter(torch.zeros(self.count + self.sentinels, device=device))
        self.observed: list[np.ndarray] = []
        self.data_batches: list[int] = []
        self.canary_batches: list[int] = []
        self._optim = None

    def attach(self, optim) -> None:
        """Add the auxiliary parameter to the DP optimizer (a group of its own, lr 0, no decay)
        and record its privatised gradient after every step's noise, after the accountant."""
        optim.original_optimizer.add_param_group({"params": [self.param], "lr": 0.0, "weight_decay": 0.0})
        accountant = optim.step_hook

        def hook(opt) -> None:
            if accountant is not None:
                accountant(opt)
            self.observed.append(self.param.grad.detach().to("cpu", dtype=self.param.dtype).numpy().copy())

        optim.attach_step_hook(hook)
        self._optim = optim

    def add_rows(self, data_units: int) -> int:
        """Draw this step's canaries (each included one with probability q) and give the DP
        optimizer their clipped sum on the auxiliary parameter, before it clips and sums the
        step's `data_units` data units (none for an empty batch) and adds the noise. A canary's
        row touches no data unit's coordinates, so its clipping is its own: per-sample clipping
        gets the auxiliary parameter's data rows (zeros) and, as the sum the optimizer adds their
        clipped rows to (`summed_grad`), the canaries' rows clipped as it clips a row, in its
        dtype (what it would compute from the canaries as rows of every parameter's per-sample
        gradients, without copying those for every step); ghost clipping, which forms no rows,
        gets the sum as the parameter's gradient. Returns how many canaries joined."""
        import torch
        from opacus.optimizers import DPOptimizerFastGradientClipping

        if self._optim is None:
            raise RuntimeError("GradientCanaries.add_rows before attach")
        drawn = self._members[self._sampler.random(len(self._members)) < self.rate]
        joined = len(drawn)
        self.data_batches.append(int(data_units))
        self.canary_batches.append(joined)
        p = self.param
        # each joining canary's row (norm: the unit) clipped as the optimizer clips a row, Opacus'
        # factor max_grad_norm / (norm + 1e-6) at most 1, in the parameter's dtype; summed
        norms = torch.full((joined,), self.settings["norm"] * self.clip, dtype=p.dtype, device=p.device)
        clipped = torch.zeros_like(p)
        clipped[torch.as_tensor(drawn, dtype=torch.long, device=p.device)] = (
            self._optim.max_grad_norm / (norms + 1e-6)
        ).clamp(max=1.0) * norms
        if isinstance(self._optim, DPOptimizerFastGradientClipping):
            p.grad = clipped  # ghost clipping forms no rows: the clipped sum is the gradient
        else:
            p.grad_sample = torch.zeros((data_units, p.numel()), dtype=p.dtype, device=p.device)
            p.summed_grad = clipped  # the optimizer adds the data units' clipped rows (zeros here) to it
        return joined

    def facts(self) -> dict:
        """What train_info.json records of the canaries."""
        return {**self.settings, "included": int(self.included.sum()), "unit": self.clip, "file": RECORD_FILE}

    def save(self, out_dir: str | Path) -> None:
        """The observations (`RECORD_FILE`): observed (steps, m + e) float32, included (m),
        data_batch and canary_batch (steps)."""
        observed = np.stack(self.observed) if self.observed else np.zeros((0, self.count + self.sentinels), np.float32)
        np.savez_compressed(Path(out_dir) / RECORD_FILE, observed=observed.astype(np.float32), included=self.included,
                            data_batch=np.asarray(self.data_batches, dtype=np.int64),
                            canary_batch=np.asarray(self.canary_batches, dtype=np.int64))  # fmt: skip


# ----------------------------------------------------------------------------------- the auditor's side


def read_record(model_dir: str | Path, dp: dict, target: str) -> dict:
    """A target's canary observations and the facts they are read with: the accountant's claim
    (sigma, q, training units) and the run's expected batch and canary unit, from its
    train_info.json `dp` record."""
    canaries = dp.get("canaries")
    path = Path(model_dir) / RECORD_FILE
    if not canaries or not path.is_file():
        raise UserError(f"DP audit: target {target!r}: trained without gradient canaries ({RECORD_FILE} missing); "
                        "retrain it with dp_audit.gradient_canaries.count > 0")  # fmt: skip
    with np.load(path) as data:
        record = {key: data[key] for key in data.files}
    steps = int(dp["steps"])
    if record["observed"].shape != (steps, canaries["count"] + canaries["sentinels"]):
        raise UserError(f"DP audit: target {target!r}: {RECORD_FILE} holds {record['observed'].shape} observations, "
                        f"not {steps} steps x {canaries['count'] + canaries['sentinels']} coordinates")  # fmt: skip
    return {**record, "count": canaries["count"], "unit": float(canaries["unit"]),
            "sigma": float(dp["noise_multiplier"]), "sample_rate": float(dp["sample_rate"]),
            "units": int(dp["units"]), "divisor": float(dp["gradient_divisor"]), "steps": steps}  # fmt: skip


def normalised(record: dict) -> np.ndarray:
    """Each observation in units of the clipped canary: z = x (expected batch) / C."""
    return record["observed"].astype(np.float64) * record["divisor"] / record["unit"]


def free_coordinates(record: dict) -> np.ndarray:
    """The columns of `observed` free of an inserted canary: the canaries not included, then the
    sentinels (pure noise under the claim; the noise-by-batch check and the mechanism fit read them)."""
    excluded = np.nonzero(~np.asarray(record["included"]).astype(bool))[0]
    return np.concatenate([excluded, np.arange(record["count"], record["observed"].shape[1])])


def canary_scores(record: dict, *, score: str) -> np.ndarray:
    """Each canary's score (higher: included), one of `SCORES` (module docstring); without noise
    (sigma 0) the likelihood ratio is the alignment."""
    return _scores(normalised(record)[:, : record["count"]], record, score)


def sentinel_scores(record: dict, *, score: str) -> np.ndarray:
    """The same score of each canary-free coordinate (sentinel): excluded canaries by construction,
    the null distribution of `canary_scores` (the Gaussian analysis' check)."""
    return _scores(normalised(record)[:, record["count"] :], record, score)


def simulated_record(sigma: float, rate: float, steps: int, count: int, rng: np.random.Generator,
                     sentinels: int = 0, noise_scale: float = 1.0, amplitude: float = 1.0,
                     join_rate: float | None = None, units: int | None = None, divisor: float = 1.0,
                     unit: float = 1.0, used_divisor: float | str | None = None) -> dict:  # fmt: skip
    """A record (`read_record`'s keys that the scores read) of the mechanism the accountant claims,
    simulated without training: each of `count` canaries included with probability 1/2, each
    included one joining each of `steps` steps with probability `rate`, z_t = b_t + sigma N(0, 1)
    (`noise_scale` x sigma: a faulty mechanism whose claim stays sigma); `sentinels` canary-free
    coordinates after the canaries. Other faults whose claim stays (sigma, rate): a joining canary
    adding `amplitude` (10: not clipped), joins at `join_rate` (default `rate`).

    As a trainer writes it (`mlmia.defences.fault_simulation` models faulty trainers with it): with
    `units` n the record carries what `mechanism_checks` reads too, `units`, each step's Poisson
    batch of data units `data_batch` ~ Binomial(n, the join rate: data units and canaries are
    sampled alike) and `canary_batch`, drawn after everything else (the observations are those of
    the same call without `units`); `divisor` and `unit` are what the trainer records (the planned
    batch D and the clipping norm C, which the auditor normalises by, z = x D / C) and
    `used_divisor` what it divides the noised sum by (default `divisor`; "sampled": each step's
    data batch, at least 1, which needs `units`), so that `observed` is x = z C / (used divisor).
    The defaults (D = C = 1) give z itself, as before."""
    included = rng.integers(0, 2, count).astype(bool)
    join = rate if join_rate is None else join_rate
    joined = (rng.random((steps, count)) < join) & included
    observed = amplitude * joined + noise_scale * sigma * rng.standard_normal((steps, count))
    if sentinels:  # drawn after the canaries' noise, which is then the same with or without them
        observed = np.concatenate([observed, noise_scale * sigma * rng.standard_normal((steps, sentinels))], axis=1)
    record = {"included": included, "divisor": float(divisor), "unit": float(unit), "count": count,
              "sigma": float(sigma), "sample_rate": float(rate), "steps": int(steps)}  # fmt: skip
    if units is not None:
        batch = rng.binomial(int(units), join, steps)
        record |= {"units": int(units), "data_batch": batch, "canary_batch": joined.sum(axis=1)}
    if isinstance(used_divisor, str):
        if used_divisor != "sampled" or units is None:
            raise UserError(f"simulated_record: used_divisor {used_divisor!r}: only 'sampled', with units, is known")
        used = np.maximum(record["data_batch"], 1).astype(np.float64)[:, None]
    else:
        used = float(divisor if used_divisor is None else used_divisor)
    return record | {"observed": observed * float(unit) / used}


def _scores(z: np.ndarray, record: dict, score: str) -> np.ndarray:
    if score not in SCORES:
        raise UserError(f"dp_audit.gradient_canaries.score must be one of {', '.join(SCORES)}, got {score!r}")
    sigma, q = record["sigma"], record["sample_rate"]
    if score == "alignment" or sigma == 0:
        return z.sum(axis=0)
    log_ratio = np.logaddexp(math.log1p(-q), math.log(q) + (2.0 * z - 1.0) / (2.0 * sigma**2))
    return log_ratio.sum(axis=0)


def _two_sided(low_tail: float, high_tail: float) -> float:
    return float(min(1.0, 2.0 * min(low_tail, high_tail)))


def _noise_by_batch(record: dict) -> dict:
    """The ``noise by batch`` check of `mechanism_checks` (its docstring)."""
    free = free_coordinates(record)
    squares = np.sum(record["observed"][:, free].astype(np.float64) ** 2, axis=1)
    logs = np.log(np.maximum(record["data_batch"].astype(np.float64), 1.0))
    centred = logs - logs.mean()
    spread = float(np.sum(centred**2))
    if len(free) == 0 or len(logs) == 0 or np.ptp(logs) == 0 or np.any(squares <= 0):
        slope, p_value, why = 0.0, 1.0, "nothing to test (no noise, or every batch alike)"
    else:
        slope = float(np.sum(centred * np.log(squares)) / spread)
        z = slope / math.sqrt(float(special.polygamma(1, len(free) / 2.0)) / spread)
        p_value = float(min(1.0, 2.0 * stats.norm.sf(abs(z))))
        why = f"z = {z:.2f}"
    return {"check": "noise by batch", "observed": slope / 2.0, "expected": 0.0, "p_value": p_value,
            "detail": f"noise sd proportional to batch^{slope / 2.0:.3f} over {len(squares)} steps on {len(free)} "
                      f"coordinates free of an inserted canary, against batch^0 ({why})"}  # fmt: skip


def mechanism_checks(record: dict, *, level: float) -> list[dict]:
    """Three checks of the mechanism against the accountant's claim, each failing (passed False)
    when its two-sided p-value is below `level`:

    - ``Poisson batch``: the data units of all T batches, a Binomial(n T, q) count under Poisson
      sampling at the accounted rate q (n training units): observed mean batch against q n;
    - ``noise``: the e sentinel coordinates' T e observations, each N(0, s^2) with
      s = sigma C / (expected batch): sum of squares / s^2 against chi-square(T e); observed
      standard deviation against s. With sigma 0 every observation must be 0.
    - ``noise by batch``: the noise must not scale with the step's batch (the divisor is a
      constant; a trainer dividing by the sampled batch makes each step's noise sd proportional to
      1 / its batch). On the f coordinates free of an inserted canary (the sentinels and the
      canaries not included), the step's sum of squares S_t is s^2 chi-square(f) whatever the
      batch, so log S_t = log s^2 + log chi-square(f) has variance trigamma(f / 2) exactly; the
      least-squares slope b of log S_t on the centred log of the step's data units (at least 1)
      has variance trigamma(f / 2) / sum c_t^2, and z = b / its sd is about N(0, 1) (a sum over
      T steps of near-normal terms for f in the hundreds). Observed: the slope of log sd on log
      batch (b / 2), expected 0 (the fault gives -1). Without noise, or with every batch alike, it
      tests nothing and passes.

    Each row: check, observed, expected, p_value, level, passed, detail (a phrase for messages)."""
    steps, n, q = record["steps"], record["units"], record["sample_rate"]
    total = int(record["data_batch"].sum())
    trials = n * steps
    p_batch = _two_sided(stats.binom.cdf(total, trials, q), stats.binom.sf(total - 1, trials, q))
    rows = [{"check": "Poisson batch", "observed": total / steps, "expected": q * n, "p_value": p_batch,
             "detail": f"mean batch {total / steps:.2f} over {steps} steps against q n = {q * n:.2f}"}]  # fmt: skip
    sentinels = record["observed"][:, record["count"] :].astype(np.float64)
    expected = record["sigma"] * record["unit"] / record["divisor"]
    values = sentinels.size
    observed = float(np.sqrt(np.mean(sentinels**2))) if values else math.nan
    if not values:
        p_noise = 1.0
    elif expected == 0:
        p_noise = 1.0 if observed == 0 else 0.0
    else:
        statistic = float(np.sum(sentinels**2)) / expected**2
        p_noise = _two_sided(special.chdtr(values, statistic), special.chdtrc(values, statistic))
    rows.append({"check": "noise", "observed": observed, "expected": expected, "p_value": p_noise,
                 "detail": f"sd {observed:.4g} on {values} sentinel values against sigma C / B = {expected:.4g}"})  # fmt: skip
    rows.append(_noise_by_batch(record))
    for row in rows:
        row |= {"level": level, "passed": bool(row["p_value"] >= level)}
    return rows
