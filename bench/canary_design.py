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
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from mlmia.defences.audit import one_run_canary_audit
from mlmia.defences.gradient_canaries import canary_scores
from mlmia.report.markdown import markdown_table


def claim(model_dir: Path) -> dict:
    """What the accountant claims of a trained DP target (its train_info.json `dp` record)."""
    dp = json.loads((model_dir / "train_info.json").read_text())["dp"]
    return {"target": model_dir.name, "epsilon": float(dp["epsilon"]), "sigma": float(dp["noise_multiplier"]),
            "rate": float(dp["sample_rate"]), "steps": int(dp["steps"]), "delta": float(dp["delta"])}  # fmt: skip


def simulated_audit(facts: dict, count: int, share: float, beta: float, rng: np.random.Generator) -> dict:
    """One white-box audit of the claimed mechanism with `count` canaries, guessing on `share`."""
    included = rng.integers(0, 2, count).astype(bool)
    joined = (rng.random((facts["steps"], count)) < facts["rate"]) & included
    observed = joined + facts["sigma"] * rng.standard_normal((facts["steps"], count))
    record = {"observed": observed, "divisor": 1.0, "unit": 1.0, "count": count,
              "sigma": facts["sigma"], "sample_rate": facts["rate"]}  # fmt: skip
    return one_run_canary_audit(canary_scores(record), included, share, facts["delta"], beta)


def design_table(claims: list[dict], counts: list[int], shares: list[float], reps: int, beta: float) -> pd.DataFrame:
    rows = []
    for facts in claims:
        for count in counts:
            for share in shares:
                rng = np.random.default_rng([count, round(share * 1000), 7])
                audits = [simulated_audit(facts, count, share, beta, rng) for _ in range(reps)]
                bounds = np.array([audit["epsilon_lb"] for audit in audits])
                rows.append({"target": facts["target"], "ε": f"{facts['epsilon']:.2f}", "σ": f"{facts['sigma']:.3f}",
                             "q": f"{facts['rate']:.4f}", "T": facts["steps"], "canaries": count,
                             "guesses": audits[0]["guesses"],
                             "mean bound": f"{bounds.mean():.2f}", "sd": f"{bounds.std(ddof=1):.2f}",
                             "lowest": f"{bounds.min():.2f}", "share of ε": f"{bounds.mean() / facts['epsilon']:.2f}"})  # fmt: skip
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", action="append", type=Path, required=True, help="a trained DP target's directory")
    parser.add_argument("--counts", nargs="+", type=int, default=[500, 1000, 2000, 3000, 5000])
    parser.add_argument("--shares", nargs="+", type=float, default=[0.03, 0.05, 0.1, 0.2])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--beta", type=float, default=0.05 / 3, help="the white-box family's share of 1 - confidence")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    table = design_table([claim(t) for t in args.target], args.counts, args.shares, args.reps, args.beta)
    args.out.write_text(
        "# The white-box audit's design (bench/canary_design.py)\n\n"
        f"Simulated one-run audits of each target's claimed mechanism, {args.reps} seeds per row, "
        f"beta = {args.beta:.4g}.\n\n" + markdown_table(list(table.columns), table.itertuples(index=False)) + "\n"
    )
    print(args.out.read_text())


if __name__ == "__main__":
    main()
