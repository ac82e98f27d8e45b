"""DP-SGD training of BERT masked language models with Opacus.

DP-SGD (Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar and Zhang, "Deep learning with
differential privacy", CCS 2016): every step draws a batch by Poisson sampling (each unit in
with probability q = 1 / batches per epoch), computes each unit's gradient, clips it to L2 norm
at most C (`max_grad_norm`), sums, adds Gaussian noise N(0, sigma^2 C^2 I) and divides by the
expected batch size. sigma (`noise_multiplier`) is the smallest that keeps the whole run,
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
the rows to stay the batch dimension; the non-private loop flattens them instead).
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
sigma 0 in the optimizer; ``noise_tenth``: sigma / 10; ``no_clipping``: the optimizer's clipping
norm 1e20, its noise multiplier scaled so that the noise stays sigma C; ``wrong_sampling_rate``:
the accountant is told q / 10 (sigma is chosen for it, and the epsilon reported is for it) while
the batches are drawn with q.

`epsilon: null` trains in the same loop (Poisson sampling, per-unit loss) without
clipping or noise: the non-private baseline that differs from the private targets only in the
privacy mechanism. Randomness: batches from a seeded generator, noise from another (seeded;
Opacus' `secure_mode` is off, so the noise is not cryptographically secure, as usual for
research). The tokenizer is not trained privately: the guarantee is for the weights given
the tokenizer (docs/dp.md).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger
from mlmia.defences.clipping import (
    CLIPPINGS,
    clipping_mode,
    ghost_clipped_sum,
    per_unit_loss,
    pool_by_unit,
    unit_norms,
    unregister_head_bias,
)
from mlmia.defences.gradient_canaries import GradientCanaries, canary_settings
from mlmia.models.loading import load_tokenizer, resolve_device
from mlmia.models.objectives import Objective, check_dp_objective, make_objective
from mlmia.models.optimizer import adamw_with_schedule
from mlmia.models.run_record import RunRecord
from mlmia.models.training import initial_model, model_settings, save_model
from mlmia.vocabulary.schema import defaults

log = get_logger(__name__)

ACCOUNTANTS = ("rdp", "prv", "gdp")
UNITS = ("sample", "patient")
#: faulty trainers the audit must catch (module docstring)
FAULTS = ("no_noise", "no_clipping", "noise_tenth", "wrong_sampling_rate")
#: the clipping norm standing in for "no clipping" when epsilon is null (noise 0 x C stays 0)
NO_CLIP = 1e20


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def dp_settings(value) -> dict:
    """A model's `dp:` setting with the config schema's defaults filled in
    (`mlmia.vocabulary.schema.defaults`); a wrong key or value is a UserError (one line)."""
    if not isinstance(value, dict):
        raise UserError(f"model config: dp must be a mapping such as {{epsilon: 4, max_grad_norm: 1.0}}, got {value!r}")
    out = defaults("models", "*", "dp")  # every key of the setting has one
    unknown = sorted(set(value) - set(out))
    if unknown:
        raise UserError(f"model config: dp: unknown key(s) {', '.join(unknown)} (known: {', '.join(out)})")
    out.update(value)
    if out["epsilon"] is not None and not (_number(out["epsilon"]) and out["epsilon"] > 0):
        raise UserError(f"model config: dp.epsilon must be a number > 0 or null (no DP), got {out['epsilon']!r}")
    if out["delta"] is not None and not (_number(out["delta"]) and 0 < out["delta"] < 1):
        raise UserError(
            f"model config: dp.delta must lie in (0, 1) or be null (1 / training units), got {out['delta']!r}"
        )
    if not (_number(out["max_grad_norm"]) and out["max_grad_norm"] > 0):
        raise UserError(f"model config: dp.max_grad_norm must be a number > 0, got {out['max_grad_norm']!r}")
    if out["accountant"] not in ACCOUNTANTS:
        raise UserError(
            f"model config: dp.accountant must be one of {', '.join(ACCOUNTANTS)}, got {out['accountant']!r}"
        )
    if out["unit"] not in UNITS:
        raise UserError(f"model config: dp.unit must be one of {', '.join(UNITS)}, got {out['unit']!r}")
    if out["clipping"] not in ("auto", *CLIPPINGS):
        raise UserError(
            f"model config: dp.clipping must be one of auto, {', '.join(CLIPPINGS)}, got {out['clipping']!r}"
        )
    if out["clipping"] == "ghost" and out["unit"] == "patient":
        raise UserError("model config: dp.clipping ghost needs unit sample (a patient's gradient is the mean of its "
                        "lines' per-sample gradients, which ghost clipping never forms)")  # fmt: skip
    if out["fault"] is not None:
        if out["fault"] not in FAULTS:
            raise UserError(f"model config: dp.fault must be one of {', '.join(FAULTS)}, got {out['fault']!r}")
        if out["epsilon"] is None:
            raise UserError("model config: dp.fault needs an epsilon (a claim the fault breaks)")
    out["canaries"] = canary_settings(out["canaries"])
    return out


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
    elif fault == "noise_tenth":
        optim.noise_multiplier = optim.noise_multiplier / 10.0
    elif fault == "no_clipping":  # the noise's standard deviation, noise_multiplier x max_grad_norm, stays sigma C
        optim.noise_multiplier = optim.noise_multiplier * optim.max_grad_norm / NO_CLIP
        optim.max_grad_norm = NO_CLIP
        if mode == "ghost":
            gsm.max_grad_norm = NO_CLIP


def accountant_epsilon(accountant: str, sigma: float, sample_rate: float, steps: int, delta: float) -> float:
    """The accountant's epsilon at `delta` for `steps` steps of the sampled Gaussian mechanism with
    noise multiplier `sigma` and Poisson rate `sample_rate` (Opacus' accountant of that name; what
    its step hook would have recorded for a run that did what it claims)."""
    from opacus.accountants import create_accountant

    found = create_accountant(mechanism=accountant)
    found.history = [(float(sigma), float(sample_rate), int(steps))] if steps else []
    return float(found.get_epsilon(delta)) if steps else 0.0


def train_mlm_dp(
    texts: Sequence[str],
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    config: dict | None = None,
    init_dir: str | os.PathLike | None = None,
    threads: int = 1,
    device: str | None = "auto",
    max_steps: int | None = None,
    log_every: int = 20,
    name: str | None = None,
    groups: Sequence | None = None,
    objective: Objective | None = None,
) -> dict:
    """Train a BertForMaskedLM on `texts` with DP-SGD (the model setting `dp`; module docstring)
    and save it as `mlmia.models.training.train_mlm` does (model, tokenizer, train_log.csv,
    train_curve.png, train_info.json); train_info.json also holds `dp`: the accountant's
    epsilon and delta, sigma, C, q, steps, the share of unit gradients that were clipped, and
    the patient-level guarantee. `groups`: each text's patient (`group_id`), for the
    patient-level guarantee (unit sample) or the patient units (unit patient). `objective`: as
    for `train_mlm` (its `row_loss` gives each row's loss)."""
    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    cfg = model_settings(config)
    dp = dp_settings(cfg["dp"])
    cfg["dp"] = dp  # train_info.json records the setting with its defaults
    if cfg["pack"]:
        raise UserError("model config: dp needs pack: false (a packed block mixes lines, so no line is one unit)")
    torch.set_num_threads(max(1, int(threads)))
    dev = resolve_device(device)
    seed = int(cfg["seed"])
    torch.manual_seed(seed)
    if groups is not None and len(groups) != len(texts):
        raise UserError(f"train_mlm: {len(groups)} patient ids for {len(texts)} texts")
    keep = [i for i, t in enumerate(texts) if str(t).strip()]
    texts = [str(texts[i]) for i in keep]
    if not texts:
        raise UserError("train_mlm: no training text")
    group_ids = None if groups is None else np.asarray([str(groups[i]) for i in keep], dtype=object)
    if dp["unit"] == "patient" and group_ids is None:
        raise UserError("model config: dp.unit patient needs the training table's group_id column (the patients)")
    tokenizer = load_tokenizer(tokenizer_dir)
    if objective is None:
        objective = make_objective(cfg, tokenizer)
    check_dp_objective(objective)
    cfg["objective"] = objective.name
    out_dir = Path(out_dir)
    record = RunRecord(name or out_dir.name, log_every)
    quiet_opacus_warnings()
    model = initial_model(cfg, tokenizer, init_dir)
    model.to(dev)
    model.train()

    enc = tokenizer(
        texts,
        truncation=True,
        max_length=int(cfg["max_length"]),
        add_special_tokens=True,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    seqs = [np.asarray(x, dtype=np.int64) for x in enc["input_ids"]]
    n_tokens = int(sum(len(s) for s in seqs))
    special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)))
    pad_id = tokenizer.pad_token_id

    # the units and, per unit, its lines
    if group_ids is not None:
        patients, line_patient = np.unique(group_ids, return_inverse=True)
        per_patient = np.bincount(line_patient)
        k_max = int(per_patient.max())
    else:
        patients, line_patient, per_patient, k_max = None, None, None, None
    if dp["unit"] == "patient":
        unit_lines = [np.nonzero(line_patient == u)[0] for u in range(len(patients))]
    else:
        unit_lines = None
    n_units = len(unit_lines) if unit_lines is not None else len(seqs)
    delta = float(dp["delta"]) if dp["delta"] is not None else 1.0 / n_units

    batch_size = int(cfg["batch_size"])
    epochs = int(cfg["epochs"])
    loader = DataLoader(
        TensorDataset(torch.arange(n_units)), batch_size=batch_size, generator=torch.Generator().manual_seed(seed + 2)
    )
    steps_per_epoch = len(loader)
    total_steps = steps_per_epoch * epochs
    if max_steps is not None:
        total_steps = min(total_steps, int(max_steps))
    base_optim, sched = adamw_with_schedule(
        model, lr=cfg["lr"], weight_decay=cfg["weight_decay"], warmup_ratio=cfg["warmup_ratio"], total_steps=total_steps
    )
    engine = PrivacyEngine(accountant=dp["accountant"])
    noise_gen = torch.Generator(device=dev).manual_seed(seed + 3)
    common = {"module": model, "optimizer": base_optim, "data_loader": loader, "poisson_sampling": True,
              "loss_reduction": "mean", "noise_generator": noise_gen}  # fmt: skip
    private = dp["epsilon"] is not None
    clip = float(dp["max_grad_norm"]) if private else NO_CLIP
    sample_rate = 1.0 / steps_per_epoch  # what the batches are drawn with (Opacus' Poisson sampler)
    # the rate the accountant is told: the training's, but for the fault that tells it q / 10
    claimed_rate = sample_rate / 10.0 if dp["fault"] == "wrong_sampling_rate" else sample_rate
    sigma = 0.0
    if private:  # as Opacus' make_private_with_epsilon, for the claimed rate over the planned steps
        from opacus.accountants.utils import get_noise_multiplier

        try:
            sigma = get_noise_multiplier(target_epsilon=float(dp["epsilon"]), target_delta=delta,
                                         sample_rate=claimed_rate, steps=int(epochs / sample_rate),
                                         accountant=dp["accountant"])  # fmt: skip
        except ValueError as exc:  # Opacus: "The privacy budget is too low."
            raise UserError(f"model config: dp.epsilon {dp['epsilon']}: no noise level reaches it ({exc})") from None
    mode = clipping_mode(dp, model)
    restore_head_bias = unregister_head_bias(model)
    if mode == "ghost":  # the criterion Opacus asks for is never called: the loss is per_unit_loss's rows
        gsm, optim, _, loader = engine.make_private(**common, noise_multiplier=sigma, max_grad_norm=clip,
                                                    grad_sample_mode="ghost", criterion=torch.nn.CrossEntropyLoss())  # fmt: skip
    else:
        gsm, optim, loader = engine.make_private(**common, noise_multiplier=sigma, max_grad_norm=clip)
    divisor = float(optim.expected_batch_size)
    _apply_fault(optim, gsm, dp["fault"], mode)
    canaries = None
    if dp["canaries"] is not None:
        canaries = GradientCanaries(dp["canaries"], float(dp["max_grad_norm"]), sample_rate, dev)
        canaries.attach(optim)
        # the schedule again, now over the canaries' group too (its rate is 0 whatever the factor)
        sched = torch.optim.lr_scheduler.LambdaLR(base_optim, [*sched.lr_lambdas, sched.lr_lambdas[0]])
    net = gsm._module
    trained = [p for p in net.parameters() if p.requires_grad]  # the model's (not the canaries')

    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    max_offset = int(cfg["position_offset"])
    crop_prob, crop_max = float(cfg["crop_prob"]), max(1, int(cfg["crop_max"]))
    log.info(
        "%s: DP-SGD (%s), %d texts in %d %s units, %d tokens, %d epochs, %d steps, expected batch %d, lr %g, "
        "target eps %s at delta %.3g, sigma %.4g, C %g, %s gradient canaries, fault %s, %d thread(s), device %s",
        record.name, dp["accountant"], len(seqs), n_units, dp["unit"], n_tokens, epochs, total_steps,
        batch_size, cfg["lr"], dp["epsilon"], delta, sigma, clip, canaries.count if canaries else "no",
        dp["fault"] or "none", threads, dev,
    )  # fmt: skip

    step = 0
    clipped, seen, empty = 0, 0, 0
    record.start(total_steps)
    done = False
    epoch = 0
    for epoch in range(1, epochs + 1):
        for (drawn,) in loader:
            units = drawn.tolist()
            if unit_lines is not None:
                lines = np.concatenate([unit_lines[u] for u in units]) if units else np.zeros(0, dtype=np.int64)
                owner = torch.from_numpy(np.repeat(np.arange(len(units)), [len(unit_lines[u]) for u in units]))
                weights = 1.0 / torch.from_numpy(per_patient[np.asarray(units, dtype=np.int64)][owner.numpy()])
            else:
                lines = np.asarray(units, dtype=np.int64)
            optim.zero_grad(set_to_none=True)
            if len(lines) == 0:
                _empty_batch(optim, mode)
                empty += 1
            else:
                rows_ids = [seqs[i] for i in lines]
                if crop_prob > 0:  # random left crop, as in train_mlm
                    cut = rng.integers(1, crop_max + 1, size=len(rows_ids))
                    use = rng.random(len(rows_ids)) < crop_prob
                    rows_ids = [
                        np.concatenate([u[:1], u[1 + min(c, max(0, len(u) - 5)) :]]) if k else u
                        for u, c, k in zip(rows_ids, cut, use)
                    ]
                width = max(len(u) for u in rows_ids)
                ids = torch.full((len(rows_ids), width), pad_id, dtype=torch.long)
                for r, u in enumerate(rows_ids):
                    ids[r, : len(u)] = torch.from_numpy(u)
                attn = (ids != pad_id).long()
                batch = objective.mask(ids, torch.isin(ids, special_ids), gen)
                off = (
                    torch.randint(0, max_offset + 1, (len(rows_ids), 1), generator=gen)
                    if max_offset
                    else torch.zeros((len(rows_ids), 1), dtype=torch.long)
                )
                pos = torch.arange(width).unsqueeze(0) + off
                if mode == "ghost":
                    loss, norms = ghost_clipped_sum(gsm, optim, trained, objective, batch, attn, pos, dev)
                else:
                    loss = per_unit_loss(net, objective, batch.to(dev), attn.to(dev), pos.to(dev)).mean()
                    loss.backward()
                    if unit_lines is not None:  # the patient's gradient: the mean of its lines'
                        for p in trained:
                            p.grad_sample = pool_by_unit(p.grad_sample, owner.to(dev), weights.to(dev), len(units))
                    with torch.no_grad():
                        norms = unit_norms(trained)
                clipped += int((norms > optim.max_grad_norm).sum())  # what the optimizer clips
                seen += len(norms)
                record.add_loss(float(loss.detach()))
            if canaries is not None:
                canaries.add_rows(len(units))
            optim.step()  # clip, noise, scale; the step hook (accountant, canaries); AdamW
            sched.step()
            step += 1
            record.end_step(epoch, step, base_optim.param_groups[0]["lr"])
            if step >= total_steps:
                done = True
                break
        if done:
            break
    record.finish(epoch, step, base_optim.param_groups[0]["lr"])

    # the accountant's epsilon for the claim (sigma, the claimed rate, the steps run): for a run
    # without fault the same as Opacus' step hook records, for a faulty one what it would claim
    epsilon = accountant_epsilon(dp["accountant"], sigma, claimed_rate, step, delta) if private else math.inf
    model = gsm.to_standard_module()
    restore_head_bias(model)
    model.eval()
    save_model(model, tokenizer, out_dir)
    if canaries is not None:
        canaries.save(out_dir)
    info_dp = {
        "unit": dp["unit"],
        "target_epsilon": dp["epsilon"],
        "epsilon": epsilon if private else None,
        "delta": delta,
        "accountant": dp["accountant"],
        "noise_multiplier": sigma,
        "max_grad_norm": float(dp["max_grad_norm"]) if private else None,
        "sample_rate": claimed_rate,
        "expected_batch_size": n_units * claimed_rate,
        "gradient_divisor": divisor,
        "fault": dp["fault"],
        "canaries": canaries.facts() if canaries is not None else None,
        "units": n_units,
        "steps": step,
        "empty_batches": empty,
        "clipped_share": clipped / seen if seen else None,
        "clipping": mode,
        "poisson_sampling": True,
        "secure_rng": False,
    }
    info_dp["patient_level"] = _patient_level(info_dp, k_max, patients)
    info = record.write(out_dir, config=cfg, init_from=init_dir, n_texts=len(seqs), n_tokens=n_tokens, steps=step,
                        epochs_run=epoch, steps_per_epoch=steps_per_epoch, threads=threads, device=dev, model=model,
                        extra={"dp": info_dp})  # fmt: skip
    log.info(
        "%s: done in %.1f s, final loss %.3f; accountant eps %.3f at delta %.3g (sigma %.4g, %d steps, %.0f%% of "
        "unit gradients clipped, %d empty batches)",
        info["name"], record.train_seconds, info["final_loss"], epsilon, delta, sigma, step,
        100 * (info_dp["clipped_share"] or 0.0), empty,
    )  # fmt: skip
    return info


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
