"""How the neighbourhood attack's power depends on how its neighbours are made and scored (issue
23): each variant's AUC and TPR at 1% FPR on Base's zoo experiments, with the paired difference
to the run's own neighbours (the configured `neighbours:` setting).

A variant makes neighbour texts for the audited samples of a finished zoo run (members, held-in
members, non-members; `mlmia.terms.manifest.NEIGHBOUR_ROLES`) and scores them and the samples with
the target, each neighbour under its sample's masking patterns (`mask_id`), then builds the
attack table and metrics as the zoo does (`mlmia.attacks.table.build_attack_table`,
`mlmia.attacks.protocols.attack_metrics`, the experiment's settings). Every variant is measured
on the same patient-bootstrap replicates, so a difference per replicate is a paired bootstrap of
the difference (`reference_pools.compare`). Variants:

- `configured`: the run's neighbour texts and scores (what `table_zoo_full` reports);
- `pll_word_l2r`: the same neighbour texts, sample and neighbours scored with the PLL-word-l2r
  energy (every token masked once) instead of the masked energy (K random patterns);
- `candidates=5`, `candidates=1`: Mattern et al.'s best-scored swaps with 5 candidates per position
  (their code) or one (the 25 neighbours then swap 25 different positions); `candidates=1, <model>`:
  the same with another replacement model; `..., 50 neighbours`: 50 instead of the config's count;
- `random position`: the generator the workflow had before issue 23 (10 neighbours, each a
  random content position masked and replaced by the replacement model's most probable other
  token of the same kind), the "shared masks alone" of the issue.

    .venv/bin/python bench/neighbour_variants.py --run results/default --out docs/neighbour_variants.md \\
        --baseline-name 'configured (candidates=5)'

About 30 CPU-minutes on the default world (each variant's texts and their scoring; the PLL
energy the most); `--variant NAME` (repeatable) runs some of them; `--save DIR` keeps each
variant's metrics and reads those already there, `--load DIR` renders them.

Chosen without the audited model's labels: `--as-target pool_ref_0` lets a pool reference play the
target, its own training split the membership (`as_reference_target`), as RMIA's `a` is tuned; the
variants are then compared on a model whose membership the attacker knows.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from reference_pools import compare

from mlmia.attacks.protocols import MetricSettings, attack_metrics, sample_universe
from mlmia.attacks.table import build_attack_table
from mlmia.models.loading import load_mlm
from mlmia.report.markdown import markdown_table
from mlmia.scoring import neighbours as made
from mlmia.scoring.energy import score_samples
from mlmia.scoring.settings import ScoringSettings
from mlmia.study.study import Study
from mlmia.terms.manifest import NEIGHBOUR_ROLES
from mlmia.terms.schema import load_yaml

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = ("zoo_long_mimic", "zoo_long_i2b2", "zoo_short_mimic", "zoo_short_i2b2")
METRICS = (("auc", None), ("tpr_at_fpr", 0.01))
#: variant name: (replacement model, or None for the run's texts; candidates, or "random"; energy;
#: neighbours per sample, or None for the config's count)
VARIANTS = {
    "configured": (None, None, "masked", None),
    "pll_word_l2r": (None, None, "pll_word_l2r", None),
    "candidates=5": ("ref_general", 5, "masked", None),
    "candidates=1": ("ref_general", 1, "masked", None),
    "candidates=1, ref_domain": ("ref_domain", 1, "masked", None),
    "candidates=1, 50 neighbours": ("ref_general", 1, "masked", 50),
    "candidates=1, ref_domain, 50 neighbours": ("ref_domain", 1, "masked", 50),
    "random position": ("ref_general", "random", "masked", None),
}
RANDOM_COUNT = 10
#: the generator before issue 23, scored under its sample's masks: "shared masks alone"
SHARED_MASKS_ALONE = "random position"


def random_position_neighbours(model, tokenizer, samples: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """`n` neighbours of each sample: a random content position masked, its most probable other
    token of the same piece kind (`mlmia.scoring.neighbours`' rules), the text kept outside it;
    a swap that does not re-tokenize to exactly that change, or repeats a neighbour, is drawn again
    (at most 20 n draws)."""
    banned_start, banned_continuation, continuation = made._banned(tokenizer, model.config.vocab_size)
    prepared = made._prepare(tokenizer, samples["sample_id"].astype(str).tolist(), samples["text"].tolist(), 512)
    rows = []
    for i, sample in enumerate(prepared):
        rng, texts = np.random.default_rng([seed, i]), []
        for _ in range(20 * n):
            if len(texts) == n:
                break
            k = int(rng.integers(sample.content_pos.size))
            ids = torch.tensor(sample.model_ids[None])
            ids[0, sample.content_pos[k]] = tokenizer.mask_token_id
            with torch.inference_mode():
                logits = model(input_ids=ids).logits[0, sample.content_pos[k]].numpy().copy()
            original = int(sample.full_ids[k])
            logits[banned_continuation if continuation[original] else banned_start] = -np.inf
            logits[original] = -np.inf
            token = int(np.argmax(logits))
            text = made._candidate_text(tokenizer, sample, k, token)
            if text is None or text in texts or not made._accepts(tokenizer, sample, k, token, text):
                continue
            texts.append(text)
        rows += [
            {
                "sample_id": made.neighbour_id(sample.sid, j),
                "text": t,
                "neighbour_of": sample.sid,
                "mask_id": sample.sid,
            }
            for j, t in enumerate(texts)
        ]
    return pd.DataFrame(rows)


def as_reference_target(manifest: pd.DataFrame, splits: pd.DataFrame, reference: str) -> pd.DataFrame:
    """The sample table relabelled so that `reference` plays the target, its own training split the
    membership (RMIA's tuning of `a`, Zarifzadeh et al. 2024, done for the neighbours' settings):
    a MIMIC sample of the audited pool (members and non-members) that the reference trained on is a
    member, one it did not is a non-member, as is every non-member of another source it did not
    train on; the rest (its other i2b2 training samples, the held-in members) leaves the table, the
    population stays. No label of the audited model is read."""
    trained = splits.loc[splits["reference"] == reference].set_index("sample_id")["in"].astype(bool)
    if trained.empty:
        raise SystemExit(f"the splits table has no reference {reference!r}")
    pool = manifest["role"].isin(["member", "nonmember"])
    inside = manifest["sample_id"].map(trained).fillna(False).astype(bool)
    mimic = manifest["source"] == "mimic"
    role = manifest["role"].where(~pool, np.where(inside, "member", "nonmember"))
    keep = (manifest["role"] == "population") | (pool & (~inside | mimic))
    return manifest.assign(role=role)[keep].reset_index(drop=True)


def variant_metrics(
    run: Path, study: Study, name: str, threads: int, target: str | None = None
) -> dict[str, pd.DataFrame]:
    """The neighbourhood attack's metrics of each experiment under variant `name`; `target` a pool
    reference that plays the target (`as_reference_target`), or None for the experiments' own."""
    replacement, candidates, energy, count = VARIANTS[name]
    config = study.config
    manifest = pd.read_parquet(run / "samples" / "clinical.parquet")
    scored = target is None  # the run scored the experiments' own target only
    if target is not None:
        manifest = as_reference_target(manifest, pd.read_parquet(run / "references" / "splits.parquet"), target)
    target = target or study.experiments[EXPERIMENTS[0]].target
    audited = manifest[manifest["role"].isin(NEIGHBOUR_ROLES)]
    if replacement is None:
        neighbours = pd.read_parquet(run / "samples" / "clinical~neighbours.parquet")
        neighbours = neighbours[neighbours["neighbour_of"].isin(audited["sample_id"])]
    else:
        swapper, swap_tokenizer = load_mlm(run / "models" / replacement, "cpu", tokenizer=run / "models" / "tokenizer")
        seed = int(config["neighbours"]["seed"])
        with torch.inference_mode():
            torch.set_num_threads(threads)
            if candidates == "random":
                neighbours = random_position_neighbours(swapper, swap_tokenizer, audited, RANDOM_COUNT, seed)
            else:
                count = int(count or config["neighbours"]["count"])
                dropout = float(config["neighbours"]["dropout"])
                neighbours = made.neighbour_samples(
                    swapper, swap_tokenizer, audited, n=count, seed=seed, candidates=candidates, dropout=dropout
                )
    if replacement is None and energy == "masked" and scored:
        sample_scores = pd.read_parquet(run / "scores" / "clinical" / f"{target}.masked.parquet")
        neighbour_scores = pd.read_parquet(run / "scores" / "clinical~neighbours" / f"{target}.masked.parquet")
    else:
        model, tokenizer = load_mlm(run / "models" / target, "cpu", tokenizer=run / "models" / "tokenizer")
        settings = ScoringSettings.from_config(config["scoring"], energy).score_arguments()
        score = dict(energy=energy, num_threads=threads, **settings)
        sample_scores = score_samples(model, tokenizer, audited, **score)
        neighbour_scores = score_samples(model, tokenizer, neighbours[["sample_id", "text", "mask_id"]], **score)
    universe = sample_universe(manifest[["role", "source", "group_id"]])
    out = {}
    for experiment in EXPERIMENTS:
        spec = study.experiments[experiment]
        table = build_attack_table(
            audited,
            {("target", energy): sample_scores, ("neighbours", energy): neighbour_scores},
            {"target": target, "neighbours": target},
            {"target": ["energy"], "neighbours": ["energy"]},
            energy=energy,
            neighbours=neighbours,
            where=f"{run}: {name}: {experiment}",
            **spec.selection(),
        )
        metric = study.metric_settings(experiment)
        metric = {
            **metric,
            "attacks": ["neighbourhood"],
            "attack_params": {"neighbourhood": {}},
            "thresholds": [],
            "protocols": ["corrected"],
        }
        out[experiment] = attack_metrics(table, MetricSettings.from_params(metric), universe=universe)
    return out


def render(results: dict[str, dict[str, pd.DataFrame]], baseline_name: str) -> str:
    """Per metric a table, a row per variant (the first, `configured`, named `baseline_name`),
    a column per experiment; then each variant's AUC minus the random-position generator's."""
    shown = {"configured": baseline_name}
    out = []
    for metric, fpr in METRICS:
        label = "AUC" if metric == "auc" else f"TPR at {fpr:.0%} FPR (%)"
        spec = ".3f" if metric == "auc" else ".1f"
        body = []
        for name, metrics in results.items():
            cells = []
            for experiment in EXPERIMENTS:
                r = compare(metrics[experiment], results["configured"][experiment], "neighbourhood", metric, fpr)
                text = format(r["value"], spec) if r["resolvable"] else "n.r."
                if r["resolvable"] and name != "configured" and not np.isnan(r["low"]):
                    d, lo, hi = (format(v, "+" + spec) for v in (r["difference"], r["low"], r["high"]))
                    text += f"; Δ {d} [{lo}, {hi}]"
                cells.append(text)
            body.append([shown.get(name, name), *cells])
        out += [f"### {label}", "", markdown_table(["neighbours", *EXPERIMENTS], body), ""]
    if SHARED_MASKS_ALONE in results:  # what Mattern et al.'s neighbours add over it, paired
        body = []
        for name, metrics in results.items():
            if name == SHARED_MASKS_ALONE or VARIANTS[name][2] != "masked":
                continue
            cells = []
            for experiment in EXPERIMENTS:
                r = compare(metrics[experiment], results[SHARED_MASKS_ALONE][experiment], "neighbourhood", "auc", None)
                cells.append(f"{r['difference']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]")
            body.append([shown.get(name, name), *cells])
        out += [
            f"### AUC: each minus `{SHARED_MASKS_ALONE}`",
            "",
            markdown_table(["neighbours", *EXPERIMENTS], body),
            "",
        ]
    return "\n".join(out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a finished zoo run's results folder")
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--variant", action="append", choices=list(VARIANTS), help="default: all")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--as-target",
        metavar="REFERENCE",
        help="a pool reference (e.g. pool_ref_0) plays the target, its own training split the membership: "
        "the variants compared without the audited model's labels",
    )
    parser.add_argument("--baseline-name", default="configured", help="the first row's label (the run's own setting)")
    parser.add_argument(
        "--save", type=Path, help="a folder for each variant's metrics (Parquet); variants already there are read"
    )
    parser.add_argument("--load", type=Path, help="render from a --save folder instead of computing")
    parser.add_argument("--out", type=Path, help="Markdown file (default: print)")
    args = parser.parse_args(argv)
    study = Study.from_config(load_yaml(args.config), REPO, [args.config])
    names = ["configured", *[v for v in (args.variant or VARIANTS) if v != "configured"]]
    results = {}
    for name in names:
        path = (args.load or args.save or Path()) / f"{name}.parquet"
        if args.load or (args.save and path.exists()):
            frame = pd.read_parquet(path)
            results[name] = {e: frame[frame["experiment"] == e] for e in EXPERIMENTS}
            continue
        results[name] = variant_metrics(args.run, study, name, args.threads, args.as_target)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            pd.concat([m.assign(experiment=e) for e, m in results[name].items()]).to_parquet(path)
    text = render(results, args.baseline_name)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
