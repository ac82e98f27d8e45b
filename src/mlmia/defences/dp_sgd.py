"""DP-SGD training of BERT masked language models with Opacus: `DpSgdStep`, the step that the
one masked-LM training loop (`mlmia.models.training.train_mlm`) is given for a model with a `dp`
setting (`mlmia.training_job` composes the two). The loop does what every run does (settings,
seeds, tokenizer, model, the lines, AdamW and its schedule, the batch builder, the epochs, the
record, the save); the step draws the batches and takes each private step.

DP-SGD (Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar and Zhang, "Deep learning with
differential privacy", CCS 2016): every step draws a batch by Poisson sampling (each unit in
with probability q = 1 / batches per epoch), computes each unit's gradient, clips it to L2 norm
at most C (`max_grad_norm`), sums, adds Gaussian noise N(0, sigma^2 C^2 I) and divides by the
planned expected batch size, the config's `batch_size`: a constant of the config, not of the data
(Opacus divides by its `expected_batch_size`, the data set's length times q rounded down, so that
one line more or less can change the divisor and the update leaks the data set's size; Opacus
issue #571). sigma (`noise_multiplier`) is the smallest that keeps the whole run,
epochs / q steps, within the target epsilon at delta by the accountant: Renyi DP by default
(Mironov, "Renyi differential privacy", CSF 2017; Mironov, Talwar and Zhang, "Renyi
differential privacy of the sampled Gaussian mechanism", 2019), Opacus' `rdp` accountant;
`prv` and `gdp` are Opacus' others. The epsilon reported is the accountant's for the steps
actually run, at delta = 1 / n (n: training units) unless `delta` is given.

The unit of privacy (`unit`):

- ``sample`` (what Opacus gives): a unit is one training line. A patient with k lines is then
  protected by group privacy only: (k eps, k e^((k-1) eps) delta)-DP (Dwork and Roth, "The
  algorithmic foundations of differential privacy", 2014, Theorem 2.2, and its approximate-DP
  form, e.g. Vadhan, "The complexity of differential privacy", 2017, Lemma 2.2); `group_privacy`.
- ``patient``: a unit is one patient (the training table's `group_id`). Poisson sampling draws
  patients; all lines of a drawn patient enter the batch; the per-line gradients are averaged
  over the patient's lines before clipping, so that each patient's contribution has norm at
  most C, and the accountant's (eps, delta) holds per patient directly (delta = 1 / patients).
  `batch_size` then counts patients.

The loss per unit is the objective's loss of each line alone (`mlmia.models.objectives`; by
default the mean cross-entropy over its masked positions), then the mean over a patient's lines,
so that no unit's gradient depends on another unit's data (a batch-wide mean over masked tokens
would make it do so, and break the sensitivity argument).
The LM head runs on each row's masked positions, gathered per row (per-sample gradients need
the rows to stay the batch dimension; the plain step flattens them instead). The batches are
built as the plain step's (`mlmia.models.training_batches.BatchBuilder`: crop, pad, mask, offset).
Position ids are passed per row (Opacus needs a batch dimension on every embedding input).
BERT ties the output projection to the word embeddings: Opacus adds both uses' per-sample
gradients; the LM head's own `bias` is the decoder's bias, accounted for by the decoder's hook
alone (`unregister_head_bias`).

How each unit's gradient is clipped (`clipping`): per-sample gradients or ghost clipping
(`mlmia.defences.clipping`).

Gradient canaries (`canaries`, `mlmia.defences.gradient_canaries`): m extra units on
coordinates the forward pass never reads, clipped and noised by the same optimizer, whose
privatised gradient is recorded at every step for the white-box audit.

Faults (`fault`), trainers the audit must catch: the training does the faulty thing while the
accountant reports the intended epsilon, and train_info.json records the fault. ``no_noise``:
sigma 0 in the optimizer; ``noise_tenth``, ``noise_half``: sigma / 10, sigma / 2; ``no_clipping``:
the optimizer's clipping norm 1e20, its noise multiplier scaled so that the noise stays sigma C;
``clipping_double``: the clipping norm 2 C, the noise kept at sigma C the same way;
``wrong_sampling_rate``, ``sampling_rate_double``: the accountant is told q / 10, q / 2 (sigma is
chosen for it, and the epsilon reported is for it) while the batches are drawn with q;
``sampled_batch_size``: the noised sum divided by the number of units
the step drew (at least 1), a common hand-written variant, instead of the planned expected batch,
so that the noise's scale tells the batch's size.

`epsilon: null` trains with the same step (Poisson sampling, per-unit loss) without
clipping or noise: the non-private baseline that differs from the private targets only in the
privacy mechanism. Randomness: the loop's streams (`mlmia.models.training`), the Poisson
batches from Opacus' data loader seeded `seed` + 2, the noise from a generator seeded `seed` + 3
(Opacus' `secure_mode` is off, so the noise is not cryptographically secure, as usual for
research). The tokenizer is not trained privately: the guarantee is for the weights given
the tokenizer (docs/dp.md).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.defences.clipping import (
    clipping_mode,
    ghost_clipped_sum,
    per_unit_loss,
    pool_by_unit,
    unit_norms,
    unregister_head_bias,
)
from mlmia.defences.dp_settings import check_dp_model
from mlmia.defences.gradient_canaries import GradientCanaries
from mlmia.models.objectives import Objective, check_dp_objective

log = get_logger(__name__)

#: the clipping norm standing in for "no clipping" when epsilon is null (noise 0 x C stays 0)
NO_CLIP = 1e20


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(eps, delta)-DP for one unit gives (k eps, k e^((k-1) eps) delta)-DP for any k units
    (group privacy: Dwork and Roth 2014, Theorem 2.2 for delta = 0; Vadhan 2017, Lemma 2.2).
    The delta may exceed 1 (the guarantee is then vacuous); it is returned as computed (inf on overflow)."""
    if int(k) != k or k < 1:
        raise UserError(f"group_privacy: k must be an integer >= 1, got {k!r}")
    k = int(k)
    if not math.isfinite(epsilon):
        return math.inf, math.inf
    exponent = (k - 1) * epsilon
    grown = math.inf if exponent > 700 else k * math.exp(exponent) * delta
    return k * epsilon, grown


def quiet_opacus_warnings() -> None:
    """Two of Opacus' warnings silenced: the insecure RNG (train_info.json records
    `secure_rng: false`) and PyTorch's note that the first layer's inputs need no gradient (they
    are token ids)."""
    warnings.filterwarnings("ignore", message="Secure RNG turned off", category=UserWarning)
    warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)


def _empty_batch(optimizer, mode: str) -> None:
    """An empty Poisson batch: no per-sample gradient (per_sample) or a zero clipped sum (ghost),
    and the step still adds the noise, as the accountant assumes; skipping it would make the
    release depend on the batch being empty."""
    import torch

    for p in optimizer.params:
        if mode == "ghost":
            p.grad = torch.zeros_like(p)
        else:
            p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)


def _apply_fault(optim, gsm, fault: str | None, mode: str) -> None:
    """Make the DP optimizer do the faulty thing (module docstring); the accountant is not told.
    With ghost clipping the module clips (`gsm.max_grad_norm`), so no_clipping lifts its norm too."""
    if fault == "no_noise":
        optim.noise_multiplier = 0.0
    elif fault in ("noise_tenth", "noise_half"):
        optim.noise_multiplier = optim.noise_multiplier / (10.0 if fault == "noise_tenth" else 2.0)
    elif fault in ("no_clipping", "clipping_double"):
        clip = NO_CLIP if fault == "no_clipping" else 2.0 * optim.max_grad_norm
        # the noise's standard deviation, noise_multiplier x max_grad_norm, stays sigma C
        optim.noise_multiplier = optim.noise_multiplier * optim.max_grad_norm / clip
        optim.max_grad_norm = clip
        if mode == "ghost":
            gsm.max_grad_norm = clip


def accountant_epsilon(accountant: str, sigma: float, sample_rate: float, steps: int, delta: float) -> float:
    """The accountant's epsilon at `delta` for `steps` steps of the sampled Gaussian mechanism with
    noise multiplier `sigma` and Poisson rate `sample_rate` (Opacus' accountant of that name; what
    its step hook would have recorded for a run that did what it claims)."""
    from opacus.accountants import create_accountant

    found = create_accountant(mechanism=accountant)
    found.history = [(float(sigma), float(sample_rate), int(steps))] if steps else []
    return float(found.get_epsilon(delta)) if steps else 0.0


class DpSgdStep:
    """DP-SGD as the step of the masked-LM training loop (`mlmia.models.training.train_mlm`, a
    `TrainingStep`; module docstring): the units (lines, or patients), Opacus' Poisson batches of
    them (its data loader, seeded `seed` + 2), each unit's loss on its own rows, its gradient
    clipped (per-sample gradients, pooled per patient, or ghost clipping), the noise (a generator
    seeded `seed` + 3), the fault, the gradient canaries, and the `dp` record of train_info.json
    (the accountant's epsilon and delta, sigma, C, q, steps, the share of unit gradients that were
    clipped, and the patient-level guarantee). Every batch has position ids per row (Opacus needs
    a batch dimension on every embedding input); checkpoints are not offered (one accountant per
    run). One object per run."""

    row_positions = True
    checkpoints = False

    def settings(self, cfg: dict, groups) -> dict:
        dp = cfg["dp"]  # checked once, where the job starts (mlmia.training_job.training_settings)
        check_dp_model(cfg)
        if dp["unit"] == "patient" and groups is None:
            raise UserError("model config: dp.unit patient needs the training table's group_id column (the patients)")
        quiet_opacus_warnings()
        self.cfg, self.dp = cfg, dp
        return cfg

    def check(self, objective: Objective) -> None:
        check_dp_objective(objective)

    def plan(self, seqs: list[np.ndarray], groups: list[str] | None, tokenizer) -> int:  # noqa: ARG002
        """The units (each line, or each patient's lines) and Opacus' data loader of their indices."""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        self.seqs = seqs
        if groups is not None:
            self.patients, line_patient = np.unique(np.asarray(groups, dtype=object), return_inverse=True)
            self.per_patient = np.bincount(line_patient)
            self.k_max = int(self.per_patient.max())
        else:
            self.patients, line_patient, self.per_patient, self.k_max = None, None, None, None
        self.unit_lines = None
        if self.dp["unit"] == "patient":
            self.unit_lines = [np.nonzero(line_patient == u)[0] for u in range(len(self.patients))]
        self.n_units = len(self.unit_lines) if self.unit_lines is not None else len(seqs)
        self.delta = float(self.dp["delta"]) if self.dp["delta"] is not None else 1.0 / self.n_units
        self.loader = DataLoader(TensorDataset(torch.arange(self.n_units)), batch_size=int(self.cfg["batch_size"]),
                                 generator=torch.Generator().manual_seed(int(self.cfg["seed"]) + 2))  # fmt: skip
        return len(self.loader)

    def start(self, model, optimizer, scheduler, build, device) -> None:
        """Make the model, optimizer and loader private (Opacus), with the fault and the canaries."""
        import torch
        from opacus import PrivacyEngine

        dp = self.dp
        engine = PrivacyEngine(accountant=dp["accountant"])
        noise_gen = torch.Generator(device=device).manual_seed(int(self.cfg["seed"]) + 3)
        common = {"module": model, "optimizer": optimizer, "data_loader": self.loader, "poisson_sampling": True,
                  "loss_reduction": "mean", "noise_generator": noise_gen}  # fmt: skip
        self.private = dp["epsilon"] is not None
        clip = float(dp["max_grad_norm"]) if self.private else NO_CLIP
        self.sample_rate = 1.0 / len(self.loader)  # what the batches are drawn with (Opacus' Poisson sampler)
        # the rate the accountant is told: the training's, but for the faults that tell it q / 10 or q / 2
        self.claimed_rate = self.sample_rate / {"wrong_sampling_rate": 10.0, "sampling_rate_double": 2.0}.get(
            dp["fault"], 1.0
        )
        self.sigma = self._noise_multiplier() if self.private else 0.0
        self.mode = clipping_mode(dp, model)
        self.restore_head_bias = unregister_head_bias(model)
        if self.mode == "ghost":  # the criterion Opacus asks for is never called: the loss is per_unit_loss's rows
            self.gsm, self.optim, _, self.loader = engine.make_private(
                **common, noise_multiplier=self.sigma, max_grad_norm=clip, grad_sample_mode="ghost",
                criterion=torch.nn.CrossEntropyLoss())  # fmt: skip
        else:
            self.gsm, self.optim, self.loader = engine.make_private(**common, noise_multiplier=self.sigma,
                                                                    max_grad_norm=clip)  # fmt: skip
        # the divisor: the config's planned expected batch, not Opacus' int(n q) (module docstring)
        self.optim.expected_batch_size = int(self.cfg["batch_size"])
        self.divisor = float(self.cfg["batch_size"])
        _apply_fault(self.optim, self.gsm, dp["fault"], self.mode)
        self.canaries = None
        if dp["canaries"] is not None:
            self.canaries = GradientCanaries(dp["canaries"], float(dp["max_grad_norm"]), self.sample_rate, device)
            self.canaries.attach(self.optim)
            # the schedule again, now over the canaries' group too (its rate is 0 whatever the factor)
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, [*scheduler.lr_lambdas, scheduler.lr_lambdas[0]])
        self.scheduler, self.build, self.device = scheduler, build, device
        self.trained_params = [p for p in self.gsm._module.parameters() if p.requires_grad]  # not the canaries'
        self.clipped, self.seen, self.empty = 0, 0, 0
        log.info("DP-SGD (%s): %d %s units, expected batch %d, target eps %s at delta %.3g, sigma %.4g, C %g, "
                 "%s gradient canaries, fault %s", dp["accountant"], self.n_units, dp["unit"], self.cfg["batch_size"],
                 dp["epsilon"], self.delta, self.sigma, clip, self.canaries.count if self.canaries else "no",
                 dp["fault"] or "none")  # fmt: skip

    def _noise_multiplier(self) -> float:
        """sigma as Opacus' make_private_with_epsilon finds it, for the claimed rate over the planned steps."""
        from opacus.accountants.utils import get_noise_multiplier

        try:
            return get_noise_multiplier(target_epsilon=float(self.dp["epsilon"]), target_delta=self.delta,
                                        sample_rate=self.claimed_rate,
                                        steps=int(int(self.cfg["epochs"]) / self.sample_rate),
                                        accountant=self.dp["accountant"])  # fmt: skip
        except ValueError as exc:  # Opacus: "The privacy budget is too low."
            raise UserError(
                f"model config: dp.epsilon {self.dp['epsilon']}: no noise level reaches it ({exc})"
            ) from None

    def epoch(self, rng):  # noqa: ARG002 (the Poisson batches come from the loader's own generator)
        """The epoch's Poisson batches: (units drawn, their lines, and for patient units each line's
        unit in the batch and its weight, 1 / the patient's lines)."""
        import torch

        for (drawn,) in self.loader:
            units = drawn.tolist()
            if self.unit_lines is None:
                yield len(units), np.asarray(units, dtype=np.int64), None, None
                continue
            lines = np.concatenate([self.unit_lines[u] for u in units]) if units else np.zeros(0, dtype=np.int64)
            owner = torch.from_numpy(np.repeat(np.arange(len(units)), [len(self.unit_lines[u]) for u in units]))
            weights = 1.0 / torch.from_numpy(self.per_patient[np.asarray(units, dtype=np.int64)][owner.numpy()])
            yield len(units), lines, owner, weights

    def __call__(self, drawn) -> float | None:
        """One DP-SGD step: the clipped sum of the units' gradients (none for an empty batch), the
        canaries' rows, then the optimizer's noise, scaling, step hook (accountant, canaries) and
        AdamW. Returns the batch's mean unit loss (None for an empty batch)."""
        units, lines, owner, weights = drawn
        self.optim.zero_grad(set_to_none=True)
        loss = None
        if len(lines) == 0:
            _empty_batch(self.optim, self.mode)
            self.empty += 1
        else:
            loss = self._clipped_sum([self.seqs[i] for i in lines], owner, weights, units)
        if self.canaries is not None:
            self.canaries.add_rows(units)
        if self.dp["fault"] == "sampled_batch_size":  # divide by the units drawn (module docstring)
            self.optim.expected_batch_size = max(units, 1)
        self.optim.step()
        self.scheduler.step()
        return loss

    def _clipped_sum(self, rows: list[np.ndarray], owner, weights, units: int) -> float:
        """Each unit's gradient (ghost clipping: the sum of clipped ones), counted where the
        optimizer clips it; returns the batch's mean unit loss."""
        import torch

        batch, attn, pos = self.build(rows)
        dev, objective = self.device, self.build.objective
        if self.mode == "ghost":
            loss, norms = ghost_clipped_sum(self.gsm, self.optim, self.trained_params, objective, batch, attn, pos, dev)
        else:
            loss = per_unit_loss(self.gsm._module, objective, batch.to(dev), attn.to(dev), pos.to(dev)).mean()
            loss.backward()
            if owner is not None:  # the patient's gradient: the mean of its lines'
                for p in self.trained_params:
                    p.grad_sample = pool_by_unit(p.grad_sample, owner.to(dev), weights.to(dev), units)
            with torch.no_grad():
                norms = unit_norms(self.trained_params)
        self.clipped += int((norms > self.optim.max_grad_norm).sum())  # what the optimizer clips
        self.seen += len(norms)
        return float(loss.detach())

    def trained(self, model):
        """The trained model without Opacus' hooks, its head's bias named again."""
        model = self.gsm.to_standard_module()
        self.restore_head_bias(model)
        return model

    def record(self, out_dir: Path, steps: int) -> dict:
        """The canaries' observations saved; train_info.json's `dp`: the accountant's epsilon for
        the claim (sigma, the claimed rate, the steps run: for a run without fault what Opacus'
        step hook records, for a faulty one what it would claim) and the run's facts."""
        dp = self.dp
        epsilon = (accountant_epsilon(dp["accountant"], self.sigma, self.claimed_rate, steps, self.delta)
                   if self.private else math.inf)  # fmt: skip
        if self.canaries is not None:
            self.canaries.save(out_dir)
        info_dp = {
            "unit": dp["unit"],
            "target_epsilon": dp["epsilon"],
            "epsilon": epsilon if self.private else None,
            "delta": self.delta,
            "accountant": dp["accountant"],
            "noise_multiplier": self.sigma,
            "max_grad_norm": float(dp["max_grad_norm"]) if self.private else None,
            "sample_rate": self.claimed_rate,
            "expected_batch_size": self.n_units * self.claimed_rate,
            "gradient_divisor": self.divisor,
            "fault": dp["fault"],
            "canaries": self.canaries.facts() if self.canaries is not None else None,
            "units": self.n_units,
            "steps": steps,
            "empty_batches": self.empty,
            "clipped_share": self.clipped / self.seen if self.seen else None,
            "clipping": self.mode,
            "poisson_sampling": True,
            "secure_rng": False,
        }
        info_dp["patient_level"] = _patient_level(info_dp, self.k_max, self.patients)
        log.info("DP-SGD: accountant eps %.3f at delta %.3g (sigma %.4g, %d steps, %.0f%% of unit gradients clipped, "
                 "%d empty batches)", epsilon, self.delta, self.sigma, steps,
                 100 * (info_dp["clipped_share"] or 0.0), self.empty)  # fmt: skip
        return {"dp": info_dp}


def _patient_level(info_dp: dict, k_max: int | None, patients) -> dict:
    """The guarantee per patient: the accountant's own for unit patient; for unit sample, group
    privacy over the most lines any training patient has (k)."""
    if info_dp["epsilon"] is None:
        return {"epsilon": None, "delta": None, "k": k_max, "how": "no DP"}
    if info_dp["unit"] == "patient":
        return {"epsilon": info_dp["epsilon"], "delta": info_dp["delta"], "k": k_max, "how": "patient-level DP-SGD"}
    if k_max is None:
        return {"epsilon": None, "delta": None, "k": None,
                "how": "unknown: the training table has no group_id (patients)"}  # fmt: skip
    eps_k, delta_k = group_privacy(info_dp["epsilon"], info_dp["delta"], k_max)
    return {
        "epsilon": eps_k,
        "delta": delta_k if math.isfinite(delta_k) else None,  # None: beyond any float, vacuous
        "k": k_max,
        "patients": len(patients),
        "vacuous": not delta_k < 1,
        "how": f"group privacy over the k = {k_max} training lines of the patient with the most: (k eps, k e^((k-1) eps) delta)",
    }
