"""The white-box audit's design for a DP target: how many gradient canaries, how many guesses.

The one-run audit's bound depends on the canary count m and the share of them guessed on
(`dp_audit.gradient_canaries.count`, `guess_share`), and what suits one recipe does not suit
another: few steps at a high sampling rate leave each canary fewer observations, and m delta
weighs on the f-DP bound. Both must be fixed before the scores are seen, so they are chosen
here from the claim alone (sigma, q, T, delta from a trained target's train_info.json, or given):
for each (m, share) the mechanism the accountant claims is simulated (each included canary joins
each step with probability q, z_t = b_t + sigma N(0, 1), numpy, no training), scored with the
audit's own statistic (`canary_scores`) and bounded with its own guesses
(`one_run_canary_audit`) at the audit's confidence, over `--reps` seeds.

    .venv/bin/python bench/canary_design.py --target results/default/models/dp_eps8 \\
        --target results/default/models/dp_eps4 --target results/default/models/dp_eps1 \\
        --counts 500 2000 3000 5000 8000 --shares 0.02 0.03 0.05 0.1 0.2 --reps 40 \\
        --out docs/dp_canary_design.md

Each row also gives the Gaussian analysis of the same simulated runs (`gaussian_one_run`: mu-GDP
from the standardized difference of the included and excluded canaries' scores, an ESTIMATE under
the Gaussian assumption, and its lower confidence limit at the same beta): the mean estimate and
its ratio to the accountant's epsilon, the mean lower limit, and in how many runs the lower limit
exceeds the accountant's epsilon (a correct mechanism's false alarms). Without trained targets,
`--claim EPS` takes the default targets' recipe (q = 1/7, T = 35, delta = 1/6446) with sigma
found for EPS by Opacus' RDP accountant; `--runs k` pools k simulated runs of one target (k m
canaries, each run's inclusion bits independent: k trainings; the guess share divided by k, so that
the guesses stay as many), for what k buys; `--score alignment` scores with the summed alignment.

    .venv/bin/python bench/canary_design.py --claim 8 --claim 4 --claim 1 --counts 8000 \
        --shares 0.03 --runs 1 2 4 --reps 10 --out results/gauss.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.defences.audit import one_run_canary_audit, pooled_record
from mlmia.defences.gradient_canaries import canary_scores, simulated_record
from mlmia.defences.mechanism_fit import fit_mechanism
from mlmia.metrics.gaussian_audit import gaussian_one_run
from mlmia.report.markdown import markdown_table

#: the default targets' recipe (docs/dp.md): Poisson rate, steps and delta
DEFAULT_RECIPE = {"rate": 1 / 7, "steps": 35, "delta": 1 / 6446}  # the default targets' recipe until 2026-11-27


def claim(model_dir: Path) -> dict:
    """What the accountant claims of a trained DP target (its train_info.json `dp` record)."""
    dp = json.loads((model_dir / "train_info.json").read_text())["dp"]
    return {"target": model_dir.name, "epsilon": float(dp["epsilon"]), "sigma": float(dp["noise_multiplier"]),
            "rate": float(dp["sample_rate"]), "steps": int(dp["steps"]), "delta": float(dp["delta"])}  # fmt: skip


def claim_for(epsilon: float) -> dict:
    """The default recipe with sigma for `epsilon` (Opacus' RDP accountant), and its PRV epsilon."""
    from opacus.accountants.utils import get_noise_multiplier

    from mlmia.defences.dp_sgd import accountant_epsilon

    r = DEFAULT_RECIPE
    sigma = get_noise_multiplier(target_epsilon=epsilon, target_delta=r["delta"], sample_rate=r["rate"],
                                 steps=r["steps"], accountant="rdp")  # fmt: skip
    return {"target": f"claim eps {epsilon:g}", "epsilon": accountant_epsilon("rdp", sigma, r["rate"], r["steps"],
            r["delta"]), "sigma": sigma, "prv": accountant_epsilon("prv", sigma, r["rate"], r["steps"], r["delta"]),
            **r}  # fmt: skip


def simulated_audit(
    facts: dict,
    count: int,
    share: float,
    beta: float,
    rng: np.random.Generator,
    runs: int = 1,
    score: str = "likelihood_ratio",
) -> dict:
    """One white-box audit of the claimed mechanism with `count` canaries in each of `runs` runs
    (pooled), guessing on `share`: the f-DP audit and the Gaussian analysis of the same scores, and
    the mechanism fit of the same observations (`mlmia.defences.mechanism_fit`, a parameter check
    at level `beta`)."""
    pooled = pooled_record(
        [simulated_record(facts["sigma"], facts["rate"], facts["steps"], count, rng) for _ in range(runs)]
    )
    scores, included = canary_scores(pooled, score=score), pooled["included"]
    found = one_run_canary_audit(scores, included, share, facts["delta"], beta)
    fit = fit_mechanism(pooled, beta, beta)
    return found | gaussian_one_run(scores[included], scores[~included], facts["delta"], beta) | fit


def design_table(claims: list[dict], counts: list[int], shares: list[float], reps: int, beta: float,
                 runs: tuple[int, ...] = (1,), score: str = "likelihood_ratio") -> pd.DataFrame:  # fmt: skip
    rows = []
    for facts in claims:
        eps = facts["epsilon"]
        for count in counts:
            for share in shares:
                for k in runs:
                    seed = [count, round(share * 1000), 7] + ([k] if k > 1 else [])
                    rng = np.random.default_rng(seed)
                    audits = [simulated_audit(facts, count, share / k, beta, rng, k, score) for _ in range(reps)]
                    bounds = np.array([audit["epsilon_lb"] for audit in audits])
                    estimate = np.array([audit["gauss_estimate"] for audit in audits])
                    lower = np.array([audit["gauss_lcl"] for audit in audits])
                    fitted = np.array([audit["mech_noise_multiplier"] for audit in audits])
                    fit_trips = sum(not audit["mech_passed"] for audit in audits)
                    rows.append({"target": facts["target"], "ε": f"{eps:.2f}", "σ": f"{facts['sigma']:.3f}",
                                 "q": f"{facts['rate']:.4f}", "T": facts["steps"], "canaries": count,
                                 **({"runs": k} if len(runs) > 1 else {}), "guesses": audits[0]["guesses"],
                                 "mean bound": f"{bounds.mean():.2f}", "sd": f"{bounds.std(ddof=1):.2f}",
                                 "lowest": f"{bounds.min():.2f}", "share of ε": f"{bounds.mean() / eps:.2f}",
                                 "Gaussian estimate (sd)": f"{estimate.mean():.2f} ({estimate.std(ddof=1):.2f})",
                                 "estimate / ε": f"{estimate.mean() / eps:.2f}",
                                 "PRV ε (estimate / it)": f"{facts['prv']:.2f} ({estimate.mean() / facts['prv']:.2f})"
                                 if "prv" in facts else "n.a.",
                                 "lower limit": f"{lower.mean():.2f}", "lower limit / ε": f"{lower.mean() / eps:.2f}",
                                 "lower limit > ε": f"{int(np.sum(lower > eps))} of {reps}",
                                 "fitted noise multiplier (sd; no signal)": f"{np.nanmean(fitted):.2f} "
                                 f"({np.nanstd(fitted, ddof=1):.2f}; {int(np.isnan(fitted).sum())})"
                                 if np.isfinite(fitted).sum() > 1 else "n.a.",
                                 "fit's check p < beta": f"{fit_trips} of {reps}"})  # fmt: skip
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", action="append", type=Path, default=[], help="a trained DP target's directory")
    parser.add_argument(
        "--claim",
        action="append",
        type=float,
        default=[],
        help="an epsilon of the default recipe (q = 1/7, T = 35, delta = 1/6446), sigma by RDP",
    )
    parser.add_argument("--runs", nargs="+", type=int, default=[1], help="runs pooled per audit (k trainings)")
    parser.add_argument("--counts", nargs="+", type=int, default=[500, 1000, 2000, 3000, 5000])
    parser.add_argument("--shares", nargs="+", type=float, default=[0.03, 0.05, 0.1, 0.2])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--score", choices=["likelihood_ratio", "alignment"], default="likelihood_ratio")
    parser.add_argument("--beta", type=float, default=0.05 / 3, help="the white-box family's share of 1 - confidence")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    claims = [claim(t) for t in args.target] + [claim_for(eps) for eps in args.claim]
    if not claims:
        parser.error("give --target or --claim")
    table = design_table(claims, args.counts, args.shares, args.reps, args.beta, tuple(args.runs), args.score)
    args.out.write_text(
        "# The white-box audit's design (bench/canary_design.py)\n\n"
        f"Simulated one-run audits of each target's claimed mechanism, {args.reps} seeds per row, "
        f"beta = {args.beta:.4g}, score {args.score}.\n\n"
        + markdown_table(list(table.columns), table.itertuples(index=False))
        + "\n"
    )
    print(args.out.read_text())


if __name__ == "__main__":
    main()
