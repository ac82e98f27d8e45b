import json

import pandas as pd
import torch

from mlmia.attacks.protocols import sample_universe
from mlmia.core.errors import UserError
from mlmia.core.io import write_text
from mlmia.core.logs import get_logger
from mlmia.core.runner import run_step
from mlmia.defences.audit import accountant_record, attack_audit, audit_target, joint_confidence, read_train_info
from mlmia.defences.fault_simulation import audit_power
from mlmia.defences.gradient_canaries import read_record
from mlmia.defences.mechanism_fit import describe_fit
from mlmia.defences.token_canaries import token_scores
from mlmia.models.loading import load_mlm

log = get_logger("dp_audit")


def replica_dp(model_dir, target: str) -> dict:
    """An audit replica's dp record (its train_info.json), which must claim what its target's does."""
    dp = (read_train_info(model_dir) or {}).get("dp")
    if not dp:
        raise UserError(
            f"DP audit: target {target!r}: its audit replica {model_dir} has no dp record in train_info.json"
        )
    return dp


def main(snakemake):
    inputs, params = snakemake.input, snakemake.params
    target = snakemake.wildcards.target
    torch.set_num_threads(max(1, int(snakemake.threads)))
    settings = {**params.settings, "bootstrap": params.bootstrap["bootstrap"],
                "bootstrap_seed": params.bootstrap["seed"]}  # fmt: skip
    info = read_train_info(params.model_dir)
    record = accountant_record(info, target)
    whitebox = read_record(params.model_dir, info["dp"], target) if settings["gradient_canaries"]["count"] else None
    if whitebox is not None and "replicas" in inputs.keys():  # runs 2 .. k of the target, pooled by the audit
        whitebox = [whitebox] + [read_record(path, replica_dp(path, target), f"{target} (run {run})")
                                 for run, path in enumerate(inputs.replicas, start=2)]  # fmt: skip
    # every family of bounds of this target shares the confidence: together they hold at dp_audit.confidence
    families = (whitebox is not None) + ("canaries" in inputs.keys()) + (params.plan is not None)
    settings["confidence"] = joint_confidence(settings["confidence"], families)
    blackbox = None
    if "canaries" in inputs.keys():
        canaries = pd.read_parquet(inputs.canaries)
        model, tokenizer = load_mlm(params.model_dir, snakemake.resources.device)
        blackbox = (token_scores(model, tokenizer, canaries), canaries["included"].to_numpy())
    attacks = None
    if params.plan is not None:
        samples = pd.read_parquet(inputs.samples, columns=["role", "source", "group_id"])
        attacks = attack_audit(params.plan, pd.read_parquet(inputs.attack), pd.read_parquet(inputs.metrics), record,
                               sample_universe(samples), settings, target)  # fmt: skip
    audit = audit_target(target, info, settings, whitebox=whitebox, blackbox=blackbox, attacks=attacks)
    # how mild a fault the checks catch at this target's shape, simulated (the config's own confidence: the
    # claim shares it among the families itself)
    audit["power"] = audit_power(info, params.settings, families)
    if audit["power"] and audit["power"]["runs"]:
        log.info("%s: simulated power (%d runs per fault): mildest caught %s; correct trainer flagged in %.2f",
                 target, audit["power"]["runs"], {k: v and v["size"] for k, v in audit["power"]["mildest"].items()},
                 audit["power"]["false_positive"])  # fmt: skip
    for row in audit["canary_audits"]:
        log.info("%s: %s one-run audit: %d of %d guesses right on %d canaries of %d run(s), eps >= %.3f "
                 "(Steinke et al. %.3f, f-DP %.3f)", target, row["audit"], row["correct"], row["guesses"],
                 row["canaries"], row.get("runs", 1), row["epsilon_lb"], row["steinke_lb"], row["fdp_lb"])  # fmt: skip
        if "mech_p_value" in row:
            log.info("%s: %s mechanism fit (parameter check): %s; p = %.3g; model-based lower limit (PRV, rests on the Gaussian model) %.3f",
                     target, row["audit"], describe_fit(row), row["mech_p_value"], row["mech_epsilon_lcl"])  # fmt: skip
    for row in audit["checks"]:
        log.info("%s: %s check: %s, p = %.3g", target, row["check"], row["detail"], row["p_value"])
    for row in audit["attacks"]:
        log.info("%s / %s: eps >= %.4f", target, row["attack"], row["epsilon_lb"])
    log.info("%s: accountant eps %s; %s", target, record["accountant_epsilon"],
             "; ".join(audit["failures"]) or "nothing fails")  # fmt: skip
    write_text(json.dumps(audit, indent=1, default=float) + "\n", snakemake.output[0])


run_step(snakemake, main)
