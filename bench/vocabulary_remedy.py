"""The vocabulary check's remedy measured (docs/vocabulary_check.md, "The remedy"): a run with
`tokenizer.min_patients` set against the default run, on the same world and the same samples.

    .venv/bin/python bench/vocabulary_remedy.py results/default results/min_patients [results/min_patients_10 ...]

Each run must have built `snakemake table2 extraction`. For each run after the first, against the first:

- that the two runs score the same samples (sample table: ids, patients, text, roles, sources,
  length buckets), so that the patient bootstrap draws the same patients in each replicate and a
  difference of replicate values is a paired bootstrap of the difference;
- the vocabulary check of the extraction target (`extraction/vocabulary.csv`): per kind, members −
  non-members and members − population in points with their 95% intervals;
- Table 2's (B) AUC (the likelihood ratio with the domain reference, corrected protocol) in each
  column, with the paired difference: the replicate values of `metrics/<experiment>.parquet`,
  replicate by replicate (`mlmia.metrics.bootstrap`: replicate b draws the same patients in
  every experiment on the same sample table, `mlmia.attacks.protocols.sample_universe`);
- Base's held-out masked-LM loss on the long non-members of each Table 2 sample column (the DP
  study's utility: the mean masked energy of the attack table's non-member rows,
  `mlmia.defences.audit.utility`), per token and per word (masked energy x tokens / words: the
  two vocabularies cut the same words into different numbers of tokens, so a loss per token is
  not the same unit in both), with the paired difference (`PatientResampler` with the metrics'
  seed, replicates and universe);
- before any model, from the first run's corpora: the share of members' and non-members' surnames
  that at least k training patients write (what a vocabulary of the words k patients share can
  keep whole: docs/vocabulary_check.md, "Choosing k").

Prints Markdown."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from mlmia.attacks.protocols import sample_universe
from mlmia.metrics.bootstrap import PatientResampler
from mlmia.metrics.intervals import percentile_interval
from mlmia.models.tokenizer import bert_normalizer
from mlmia.report.markdown import markdown_table

#: Table 2's columns: (header, experiment, level)
COLUMNS = [("Sample MIMIC", "base_long_mimic"), ("Sample i2b2", "base_long_i2b2"),
           ("Patient MIMIC", "base_long_mimic_patient"), ("Patient i2b2", "base_long_i2b2_patient")]  # fmt: skip
SAMPLE_COLUMNS = ["sample_id", "group_id", "text", "role", "source", "length"]
ATTACK = "likelihood_ratio"


def interval(value: float, low: float, high: float, digits: int = 3, signed: bool = False) -> str:
    sign = "+" if signed else ""
    return f"{value:{sign}.{digits}f} [{low:{sign}.{digits}f}, {high:{sign}.{digits}f}]"


def same_samples(first: Path, other: Path) -> bool:
    for name in ("clinical", "clinical_named"):
        a = pd.read_parquet(first / "samples" / f"{name}.parquet")[SAMPLE_COLUMNS]
        b = pd.read_parquet(other / "samples" / f"{name}.parquet")[SAMPLE_COLUMNS]
        if not a.equals(b):
            return False
    return True


def auc_replicates(run: Path, experiment: str) -> tuple[float, pd.Series]:
    metrics = pd.read_parquet(run / "metrics" / f"{experiment}.parquet")
    auc = metrics[(metrics["metric"] == "auc") & (metrics["attack"] == ATTACK) & (metrics["protocol"] == "corrected")]
    point = float(auc[auc["replicate"].isna()]["value"].iloc[0])
    replicates = auc[auc["replicate"].notna()].set_index(auc[auc["replicate"].notna()]["replicate"].astype(int))
    return point, replicates["value"].astype(float)


def word_count(texts) -> np.ndarray:
    from tokenizers import pre_tokenizers

    normalizer, pre_tokenizer = bert_normalizer(), pre_tokenizers.BertPreTokenizer()
    return np.array([len(pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(str(t)))) for t in texts], dtype=float)


class Loss:
    """Base's held-out loss on an attack table's non-member rows: per token (mean masked energy) and
    per word, at the point and on each replicate of the metrics' patient bootstrap."""

    def __init__(self, run: Path, experiment: str, seed: int, bootstrap: int) -> None:
        table = pd.read_parquet(run / "attack" / f"{experiment}.parquet")
        samples = pd.read_parquet(run / "samples" / "clinical.parquet")
        part = table[table["role"].astype(str) == "nonmember"].reset_index(drop=True)
        texts = samples.set_index("sample_id").loc[part["sample_id"], "text"]
        self.ids = part["sample_id"].tolist()
        self.energy = part["target_energy"].to_numpy(dtype=float)
        self.tokens = part["n_tokens"].to_numpy(dtype=float)
        self.words = word_count(texts)
        strata = list(zip(part["role"].astype(str), part["source"].astype(str)))
        resampler = PatientResampler(strata, part["group_id"].to_numpy(), seed, sample_universe(samples))
        self.rows = [resampler.rows(b) for b in range(bootstrap)]

    def values(self, rows: np.ndarray) -> tuple[float, float]:
        e, t, w = self.energy[rows], self.tokens[rows], self.words[rows]
        return float(e.mean()), float(np.sum(e * t) / np.sum(w))

    def point(self) -> tuple[float, float]:
        return self.values(np.arange(len(self.energy)))

    def replicates(self) -> np.ndarray:
        return np.array([self.values(rows) for rows in self.rows if len(rows)])


def vocabulary_rows(run: Path, model: str) -> pd.DataFrame:
    table = pd.read_csv(run / "extraction" / "vocabulary.csv")
    return table[table["model"] == model]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="results/<run> folders, the first the baseline")
    parser.add_argument(
        "--config", type=Path, default=Path("config/config.yaml"), help="the metrics' seed and replicates"
    )
    args = parser.parse_args(argv)
    from mlmia.terms.schema import schema_path, validate

    # validated: every default written in, as the workflow's jobs get it (the world's settings whole)
    config = validate(yaml.safe_load(args.config.read_text()), schema_path("config"))
    seed, bootstrap = int(config["metrics"]["seed"]), int(config["metrics"]["bootstrap"])
    target = config["extraction"]["target"]
    first, others = args.runs[0], args.runs[1:]
    names = [run.name for run in args.runs]

    print("## Same samples\n")
    for other in others:
        print(f"- {other.name}: {'the same' if same_samples(first, other) else 'OTHER'} samples as {first.name}")

    print("\n## Tokenizers\n")
    rows = []
    for run in args.runs:
        samples = pd.read_parquet(run / "samples" / "clinical.parquet")
        vocab = json.loads((run / "models" / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
        rows.append([run.name, len(vocab), f"{samples['n_tokens'].mean():.2f}"])
    print(markdown_table(["run", "entries", "mean tokens per scored sample (clinical)"], rows))

    print(f"\n## Vocabulary check ({target}): differences in points\n")
    table = []
    for run in args.runs:
        rows = vocabulary_rows(run, target)
        shares = rows[rows["row"] == "share"].set_index(["kind", "role"])
        for kind in dict.fromkeys(rows["kind"]):
            cells = []
            for versus in ("nonmember", "population"):
                d = rows[(rows["row"] == "difference") & (rows["kind"] == kind) & (rows["versus"] == versus)].iloc[0]
                mark = ", separated" if str(d["separated"]) == "True" else ""
                cells.append(interval(100 * d["value"], 100 * d["ci_low"], 100 * d["ci_high"], 1, True) + mark)
            member, nonmember = shares.loc[(kind, "member")], shares.loc[(kind, "nonmember")]
            table.append([run.name, f"{kind} ({int(member['whole'])}/{int(member['values'])} vs "
                         f"{int(nonmember['whole'])}/{int(nonmember['values'])})", *cells])  # fmt: skip
    print(markdown_table(["run", "kind", "members − non-members", "members − population"], table))

    print(f"\n## Table 2, AUC (B), and the paired difference against {first.name}\n")
    differences = [f"{n} − {first.name}" for n in names[1:]]
    rows = []
    for header, experiment in COLUMNS:
        found = [auc_replicates(run, experiment) for run in args.runs]
        cells = []
        for point, reps in found:
            cells.append(interval(point, *percentile_interval(reps.to_numpy())))
        for point, reps in found[1:]:
            shared = reps.index.intersection(found[0][1].index)
            paired = (reps.loc[shared] - found[0][1].loc[shared]).to_numpy()
            cells.append(interval(point - found[0][0], *percentile_interval(paired), signed=True)
                         + f" ({len(shared)} replicates)")  # fmt: skip
        rows.append([header, *cells])
    print(markdown_table(["column", *names, *differences], rows))

    print(f"\n## Base's held-out masked-LM loss (nats), and the paired difference against {first.name}\n")
    rows = []
    for header, experiment in COLUMNS[:2]:
        losses = [Loss(run, experiment, seed, bootstrap) for run in args.runs]
        if any(loss.ids != losses[0].ids for loss in losses):
            raise SystemExit(f"{experiment}: the runs' non-member rows differ")
        for i, unit in enumerate(("per token", "per word")):
            cells = []
            for loss in losses:
                cells.append(interval(loss.point()[i], *percentile_interval(loss.replicates()[:, i])))
            for loss in losses[1:]:
                paired = loss.replicates()[:, i] - losses[0].replicates()[:, i]
                cells.append(
                    interval(loss.point()[i] - losses[0].point()[i], *percentile_interval(paired), signed=True)
                )
            rows.append([f"{header} ({len(losses[0].ids)} samples)", unit, *cells])
    print(markdown_table(["non-members", "unit", *names, *differences], rows))

    print("\n## Before any model: surnames written by at least k training patients (the member itself among them)\n")
    holders = surname_holders(first, config)
    rows = []
    for k in (2, 3, 5, 10):
        shares = {role: 100 * float((part >= k).mean()) for role, part in holders.groupby(level=0)}
        rows.append([k, f"{shares['member']:.1f}%", f"{shares['nonmember']:.1f}%",
                     f"{shares['member'] - shares['nonmember']:.1f}"])  # fmt: skip
    print(markdown_table(["k", "members", "non-members", "difference (points)"], rows))
    return 0


def surname_holders(run: Path, config: dict) -> pd.Series:
    """How many distinct training patients (group_id over the world's training corpora) write each
    patient's surname, indexed by (role, group_id): a count of the world's text, no model read."""
    from mlmia.models.tokenizer import word_counts
    from mlmia.terms.layout import CORPORA
    from mlmia.world.corpus import build_world
    from mlmia.world.patient_phi import identifying_values

    world = build_world(dict(config["corpus"]))
    values = identifying_values(world["samples"], world["phi"])
    surnames = values[values["kind"] == "surname"]
    holders: dict[str, set] = {}
    for corpus in CORPORA:
        table = pd.read_parquet(run / "corpus" / f"train_{corpus}.parquet")
        for group, text in zip(table["group_id"], table["text"]):
            for word in word_counts([text]):
                holders.setdefault(word, set()).add(group)
    counts = [len(holders.get(next(iter(word_counts([v])), ""), ())) for v in surnames["value"]]
    return pd.Series(counts, index=pd.MultiIndex.from_arrays([surnames["role"], surnames["group_id"]]))


if __name__ == "__main__":
    raise SystemExit(main())
