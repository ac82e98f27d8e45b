"""DP fine-tuning recipes: how much of the public-to-private gap each closes (issue 27, item 1) and
how much membership each leaks (issue 43).

Each recipe is a model setting (`models:` keys: init, freeze, epochs, batch_size, lr, dp) trained
on the DP private text with a given number of extra patients (`mlmia.world.dp_corpus`, from the
run's world and target text), then scored the way the DP audit measures utility: the held-out
masked-LM loss, the mean masked energy (K = 10, seed 0) over the long MIMIC non-member notes of
the DP experiments. A recipe's gap closed is (public - recipe) / (public - ceiling), the public
model being the init the recipes start from (scored alike) and the ceiling the recipe named by
`--ceiling` (the same fine-tuning without DP). Training CPU seconds are the training process's.

Leakage (issue 43): the audited samples of the DP experiments (`config/tables.yaml`,
`dp_*_long_mimic`: dataset clinical, nonmembers mimic, length long), i.e. the long members and the
long MIMIC non-members of `samples/clinical.parquet` (held-in members are not audited), are scored
(same masked energy) under each trained recipe and under the DP experiments' reference, the init
(`ref_general`). The library's attacks give two AUCs (scikit-learn's `roc_auc_score`): the loss
attack (A), -E(target), and the paper's likelihood-ratio attack (B), E(reference) - E(target).
The held-out loss is the mean over those rows' non-members, as before. The init's scores are cached
in `--work` (`_scores_<init>.parquet`), so that runs side by side share them. `--patients 0` trains
on Base's training text alone.

    .venv/bin/python bench/dp_recipes.py --run results/default --patients 1500 --out docs/dp_recipes.md \\
        --recipe 'none=init: ref_general, freeze: [word_embeddings], epochs: 5, batch_size: 1024, lr: 0.003, dp: {epsilon: null}' \\
        --recipe 'eps8=init: ref_general, freeze: [word_embeddings], epochs: 5, batch_size: 1024, lr: 0.003, dp: {epsilon: 8}' \\
        --ceiling none
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import yaml
from sklearn.metrics import roc_auc_score

from mlmia.attacks.base import get_attack
from mlmia.models.loading import load_mlm
from mlmia.report.markdown import markdown_table
from mlmia.scoring.energy import score_samples
from mlmia.study.resolve import resolved_settings
from mlmia.terms.manifest import taken
from mlmia.training_job import train_model
from mlmia.world.dp_corpus import dp_private_text


def audited(run: Path) -> pd.DataFrame:
    """The DP experiments' audited rows: the long members and long MIMIC non-members of the run's
    samples (`taken(..., "mimic", None, "long")` less the held-in members, which no metric reads)."""
    samples = pd.read_parquet(run / "samples" / "clinical.parquet")
    keep = taken(samples, "mimic", None, "long") & samples["role"].isin(["member", "nonmember"])
    return samples[keep].reset_index(drop=True)


def held_out(run: Path) -> pd.DataFrame:
    """The DP experiments' non-members: the long MIMIC non-member notes of the run's samples."""
    samples = audited(run)
    return samples[samples["role"] == "nonmember"].reset_index(drop=True)


def energies(model_dir: Path, samples: pd.DataFrame, threads: int) -> pd.Series:
    """Masked energy (K = 10, seed 0) of each sample under the model, indexed by sample_id."""
    model, tokenizer = load_mlm(model_dir, device="cpu")
    scores = score_samples(
        model, tokenizer, samples, energy="masked", patterns=10, seed=0, device="cpu", num_threads=threads
    )
    return scores.set_index("sample_id")["energy"].reindex(samples["sample_id"])


def held_out_loss(model_dir: Path, samples: pd.DataFrame, threads: int) -> float:
    """Mean masked energy (K = 10, seed 0) of the samples under the model."""
    return float(energies(model_dir, samples, threads).mean())


def cached_energies(model_dir: Path, samples: pd.DataFrame, threads: int, work: Path) -> pd.Series:
    """`energies`, read from / written to `work` (keyed by the model's folder name)."""
    path = work / f"_scores_{model_dir.name}.parquet"
    if path.exists():
        cached = pd.read_parquet(path)["energy"]
        if set(samples["sample_id"]) <= set(cached.index):
            return cached.reindex(samples["sample_id"])
    out = energies(model_dir, samples, threads)
    work.mkdir(parents=True, exist_ok=True)
    out.to_frame("energy").to_parquet(path)
    return out


def leakage(samples: pd.DataFrame, target: pd.Series, reference: pd.Series | None) -> dict:
    """AUC of the loss attack and, with a reference, of the likelihood-ratio attack on `samples`
    (members: role member) from the target's and the reference's energies (aligned on samples)."""
    table = pd.DataFrame({"role": samples["role"].to_numpy(), "target_energy": target.to_numpy()})
    labels = (table["role"] == "member").to_numpy()
    out = {"auc_loss": float(roc_auc_score(labels, get_attack("loss").member_score(table)))}
    if reference is not None:
        table["reference_energy"] = reference.to_numpy()
        out["auc_lr"] = float(roc_auc_score(labels, get_attack("likelihood_ratio").member_score(table)))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a default run's results folder")
    parser.add_argument("--patients", type=int, action="append", required=True, help="extra patients (repeatable)")
    parser.add_argument("--recipe", action="append", required=True, help="NAME=YAML mapping of model settings")
    parser.add_argument("--ceiling", required=True, help="the recipe without DP that the gap is measured to")
    parser.add_argument("--work", type=Path, default=Path("dp_recipes"), help="where the models are trained")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="Markdown file (default: print)")
    args = parser.parse_args(argv)
    recipes = {name: yaml.safe_load("{" + spec + "}") for name, _, spec in (r.partition("=") for r in args.recipe)}
    samples = audited(args.run)
    nonmember = (samples["role"] == "nonmember").to_numpy()
    target = pd.read_parquet(args.run / "corpus" / "train_target.parquet")
    world = pd.read_parquet(args.run / "corpus" / "world.parquet")
    tokenizer_dir = args.run / "models" / "tokenizer"
    rows, public, reference = [], {}, {}
    for patients in args.patients:
        text = dp_private_text(target, world, {}, {"patients": patients})
        losses = {}
        for name, recipe in recipes.items():
            recipe = dict(recipe)
            init = args.run / "models" / recipe.pop("init") if recipe.get("init") else None
            if init is not None and init not in public:
                reference[init] = cached_energies(init, samples, args.threads, args.work)
                public[init] = float(reference[init][nonmember].mean())
            out = args.work / f"{name}_p{patients}"
            cpu = time.process_time()
            info = train_model(text["text"].tolist(), tokenizer_dir, out, config=resolved_settings(recipe, "fp32"), init_dir=init,
                               threads=args.threads, device="cpu", groups=text["group_id"].tolist(), name=name)  # fmt: skip
            cpu = time.process_time() - cpu
            scores = energies(out, samples, args.threads)
            losses[name] = float(scores[nonmember].mean())
            dp = info.get("dp") or {}
            rows.append({"recipe": name, "patients": patients, "lines": len(text), "init": init, "steps": info["steps"],
                         "epsilon": dp.get("epsilon"), "sigma": dp.get("noise_multiplier"), "cpu_s": cpu,
                         "loss": losses[name], "auc_lr": None,
                         **leakage(samples, scores, reference.get(init))})  # fmt: skip
            print({k: v for k, v in rows[-1].items() if k != "init"}, flush=True)
        for row in rows[-len(recipes) :]:
            base = public.get(row["init"])
            gap = None if base is None else base - losses[args.ceiling]
            row["public_loss"] = base
            row["gap_closed"] = None if not gap else (base - row["loss"]) / gap
    table = markdown_table(
        ["recipe", "extra patients (lines)", "steps", "accountant ε (σ)", "training CPU-s", "held-out MLM loss",
         "public model's", "gap closed", "LR attack AUC", "loss attack AUC"],
        [[r["recipe"], f"{r['patients']} ({r['lines']})", r["steps"],
          "no DP" if r["epsilon"] is None else f"{r['epsilon']:.2f} ({r['sigma']:.3f})", f"{r['cpu_s']:.0f}",
          f"{r['loss']:.3f}", "-" if r["public_loss"] is None else f"{r['public_loss']:.3f}",
          "-" if r["gap_closed"] is None else f"{r['gap_closed']:.0%}",
          "-" if r["auc_lr"] is None else f"{r['auc_lr']:.3f}", f"{r['auc_loss']:.3f}"] for r in rows],
    )  # fmt: skip
    if args.out:
        args.out.write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
