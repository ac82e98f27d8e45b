"""DP-SGD targets and the DP audit (mlmia.defences, `snakemake dp`): the training on a tiny model,
the lower-bound table on a synthetic case, the loud failure of a bound above epsilon, and the
group run on the CI config."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from workflow_helpers import REPO, copy_workflow, planned_jobs, run_snakemake, write_config

from mlmia.core.errors import UserError
from mlmia.defences.audit import (
    attack_bounds,
    bounds_markdown,
    check_bounds,
    one_run_audits,
    one_run_canary_audit,
    one_run_markdown,
    run_audit,
    utility,
)
from mlmia.defences.dp_sgd import dp_settings, group_privacy, per_unit_loss, pool_by_unit
from mlmia.defences.workflow import audit_plan
from mlmia.models.objectives import MaskedBatch
from mlmia.models.objectives.bert_mlm import BertMLM
from mlmia.models.tokenizer import train_tokenizer
from mlmia.models.training import train_mlm
from mlmia.study.study import Study
from mlmia.training_job import train_model, training_settings

TEXTS = [
    f"Patient {i} was started on metoprolol {5 * (i % 7 + 1)} mg PO BID for atrial fibrillation." for i in range(30)
]
TEXTS += [f"VS: T 98.{i % 10} BP 1{i % 9 + 1}0/80 HR {60 + i} RR 16 O2 sat 9{i % 10}% on RA." for i in range(30)]
GROUPS = [f"p{i // 3}" for i in range(len(TEXTS))]  # 20 patients of 3 lines each
TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "batch_size": 10, "lr": 3e-3,
        "epochs": 3, "warmup_ratio": 0.1, "seed": 0, "dropout": 0.0}  # fmt: skip


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tok")
    train_tokenizer(TEXTS, directory, vocab_size=200, min_frequency=1)
    return directory


# ------------------------------------------------------------------ DP-SGD training


def test_dp_training_meets_the_target_epsilon_and_clips(tok_dir, tmp_path):
    from transformers import BertForMaskedLM

    config = {**TINY, "dp": {"epsilon": 4, "max_grad_norm": 0.1}}
    info = train_model(TEXTS, tok_dir, tmp_path / "m", config=config, threads=1, device="cpu", groups=GROUPS)
    dp = json.loads((tmp_path / "m" / "train_info.json").read_text())["dp"]
    assert dp == info["dp"]
    # the accountant's epsilon after every planned step: within the target, and close to it
    assert 0.9 * 4 < dp["epsilon"] <= 4 + 1e-6 and dp["accountant"] == "rdp"
    assert dp["delta"] == pytest.approx(1 / len(TEXTS)) and dp["units"] == len(TEXTS)
    assert dp["steps"] == info["steps"] == 3 * math.ceil(len(TEXTS) / 10) and dp["sample_rate"] == pytest.approx(1 / 6)
    assert dp["noise_multiplier"] > 0.3 and dp["poisson_sampling"] and not dp["secure_rng"]
    assert dp["clipped_share"] > 0.5  # C = 0.1: clipping is active
    # the patient-level guarantee by group privacy over the 3 lines of a patient
    patient = dp["patient_level"]
    assert patient["k"] == 3 and patient["patients"] == 20
    assert patient["epsilon"] == pytest.approx(3 * dp["epsilon"])
    assert patient["delta"] == pytest.approx(3 * math.exp(2 * dp["epsilon"]) * dp["delta"]) and patient["vacuous"]
    model = BertForMaskedLM.from_pretrained(str(tmp_path / "m"))
    assert model.config.hidden_size == 32 and (tmp_path / "m" / "train_log.csv").exists()


def test_dp_fine_tuning_starts_from_the_init_model(tok_dir, tmp_path):
    """`init` with dp (config/dp_recipes.yaml): at learning rate 0 the DP-SGD loop saves exactly
    the model it started from, and from scratch it does not (so the init was really loaded)."""
    from transformers import BertForMaskedLM

    train_mlm(TEXTS, tok_dir, tmp_path / "base", config={**TINY, "epochs": 1}, threads=1, device="cpu")
    frozen = {**TINY, "epochs": 1, "lr": 0.0, "seed": 5, "dp": {"epsilon": 8}}
    train_model(TEXTS, tok_dir, tmp_path / "ft", config=frozen, init_dir=tmp_path / "base", threads=1, device="cpu")
    train_model(TEXTS, tok_dir, tmp_path / "new", config=frozen, threads=1, device="cpu")
    base, tuned, new = (
        BertForMaskedLM.from_pretrained(str(tmp_path / name)).state_dict() for name in ("base", "ft", "new")
    )
    assert base.keys() == tuned.keys() and all(torch.equal(base[key], tuned[key]) for key in base)
    assert not torch.equal(
        base["bert.embeddings.word_embeddings.weight"], new["bert.embeddings.word_embeddings.weight"]
    )


def test_patient_level_dp_and_the_non_private_loop(tok_dir, tmp_path):
    config = {**TINY, "batch_size": 5, "dp": {"epsilon": 2, "unit": "patient"}}
    info = train_model(TEXTS, tok_dir, tmp_path / "p", config=config, threads=1, device="cpu", groups=GROUPS)
    dp = info["dp"]
    assert dp["unit"] == "patient" and dp["units"] == 20 and dp["delta"] == pytest.approx(1 / 20)
    assert 0.9 * 2 < dp["epsilon"] <= 2 + 1e-6
    assert dp["patient_level"]["epsilon"] == dp["epsilon"] and dp["patient_level"]["how"] == "patient-level DP-SGD"
    with pytest.raises(UserError, match="group_id"):
        train_model(TEXTS, tok_dir, tmp_path / "x", config=config, threads=1, device="cpu")
    # epsilon null: the same loop without clipping or noise
    none = train_model(TEXTS, tok_dir, tmp_path / "n", config={**TINY, "dp": {"epsilon": None}}, device="cpu")
    assert none["dp"]["epsilon"] is None and none["dp"]["noise_multiplier"] == 0 and none["dp"]["clipped_share"] == 0


def test_empty_poisson_batches_still_take_a_noisy_step(tok_dir, tmp_path):
    config = {**TINY, "batch_size": 1, "epochs": 1, "dp": {"epsilon": 8}}
    info = train_model(TEXTS, tok_dir, tmp_path / "e", config=config, threads=1, device="cpu", groups=GROUPS)
    assert info["dp"]["empty_batches"] > 0 and info["steps"] == len(TEXTS)  # q = 1/60: some batches are empty
    assert info["dp"]["epsilon"] <= 8 + 1e-6


def test_per_sample_gradients_of_bert_with_tied_weights():
    """Opacus' per-sample gradients of the whole BERT MLM (word embeddings tied to the output
    projection, the head's bias tied to the decoder's) equal the gradients of each row alone."""
    from opacus import GradSampleModule
    from transformers import BertConfig, BertForMaskedLM

    from mlmia.defences.dp_sgd import _prepare_opacus

    _prepare_opacus()
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32, max_position_embeddings=40, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0))  # fmt: skip
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    ids = torch.randint(5, 50, (3, 7))
    attn = torch.ones(3, 7, dtype=torch.long)
    attn[2, 5:] = 0
    labels = torch.full((3, 7), -100)
    labels[:, 2] = ids[:, 2]
    labels[0, 4] = ids[0, 4]
    pos = torch.arange(7).unsqueeze(0).expand(3, 7)
    gsm = GradSampleModule(model, loss_reduction="mean")
    bert = BertMLM(50, 4)
    per_unit_loss(model, bert, MaskedBatch(ids, labels), attn, pos).mean().backward()
    samples = {name: p.grad_sample.clone() for name, p in model.named_parameters()}
    gsm.disable_hooks()
    for i in range(3):
        row = MaskedBatch(ids[i : i + 1], labels[i : i + 1])
        loss = per_unit_loss(model, bert, row, attn[i : i + 1], pos[i : i + 1]).mean()
        grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
        for (name, p), g in zip(model.named_parameters(), grads):
            expected = torch.zeros_like(p) if g is None else g
            assert torch.allclose(samples[name][i], expected, atol=1e-5), (name, i)


class RowWeighted(BertMLM):
    """BERT's masks with a weight per row on each masked position, the loss the weighted sum over a
    row (per row) or over the batch divided by its rows: the shape a masked-diffusion objective's
    1 / t weighting takes, here only to show that the loops need no change for it."""

    name = "row_weighted"

    def mask(self, input_ids, special_mask, generator):
        batch = super().mask(input_ids, special_mask, generator)
        per_row = (torch.arange(len(input_ids)) % 3 + 1).float() / (batch.labels != -100).sum(dim=1)
        return MaskedBatch(batch.input_ids, batch.labels, per_row[:, None].expand(batch.labels.shape).contiguous())

    def loss(self, logits, labels, weights, rows):
        return (torch.nn.functional.cross_entropy(logits, labels, reduction="none") * weights).sum() / rows

    def row_loss(self, logits, labels, weights):
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none", ignore_index=-100)
        return (ce * weights).sum(dim=1)


def test_a_weighted_objective_runs_in_both_loops_as_they_are(tok_dir, tmp_path):
    """An objective with loss weights (`MaskedBatch.weights`) goes through the plain loop's
    flattened loss and DP-SGD's per-row losses alike, and the two agree on a batch."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from mlmia.defences.dp_sgd import train_mlm_dp
    from mlmia.models.training import masked_lm_loss

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    objective = RowWeighted(len(tok), tok.mask_token_id)
    enc = tok(TEXTS[:12], padding=True, return_tensors="pt")
    batch = objective.mask(enc["input_ids"], torch.isin(enc["input_ids"], torch.tensor(tok.all_special_ids)),
                           torch.Generator().manual_seed(0))  # fmt: skip
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32)).eval()  # fmt: skip
    positions = torch.arange(batch.input_ids.shape[1]).expand(batch.input_ids.shape)
    with torch.no_grad():
        flat = masked_lm_loss(model, objective, batch, enc["attention_mask"], position_ids=positions)
        rows = per_unit_loss(model, objective, batch, enc["attention_mask"], positions)
    assert float(flat) == pytest.approx(float(rows.mean()), rel=1e-5) and not torch.allclose(rows, rows.mean())
    config = {**TINY, "epochs": 1}
    plain = train_mlm(TEXTS, tok_dir, tmp_path / "plain", config=config, device="cpu", objective=objective)
    private = train_mlm_dp(TEXTS, tok_dir, tmp_path / "dp", config={**config, "dp": {"epsilon": 8}}, device="cpu",
                           objective=objective)  # fmt: skip
    assert plain["config"]["objective"] == private["config"]["objective"] == "row_weighted"
    assert math.isfinite(plain["final_loss"]) and math.isfinite(private["final_loss"])


def test_pooling_rows_into_patients():
    rows = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    owner = torch.tensor([0, 0, 1, 0])
    pooled = pool_by_unit(rows, owner, torch.tensor([1 / 3, 1 / 3, 1.0, 1 / 3]), 2)
    assert torch.allclose(pooled[0], rows[[0, 1, 3]].mean(0)) and torch.allclose(pooled[1], rows[2])


def test_dp_settings_are_checked_in_one_line():
    assert training_settings({"dp": {"epsilon": 4}})["dp"] == {
        "epsilon": 4, "delta": None, "max_grad_norm": 1.0, "accountant": "rdp", "unit": "sample"
    }  # fmt: skip
    assert training_settings({})["dp"] is None
    for bad, match in [({"epsilon": 0}, "dp.epsilon"), ({"eps": 1}, "unknown key"), ({"unit": "ward"}, "dp.unit"),
                       ({"max_grad_norm": -1}, "max_grad_norm"), ({"delta": 1.5}, "dp.delta"), (4, "mapping")]:  # fmt: skip
        with pytest.raises(UserError, match=match) as info:
            dp_settings(bad)
        assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="pack: false"):
        train_model(TEXTS, "unused", "unused", config={**TINY, "pack": True, "dp": {"epsilon": 1}})
    with pytest.raises(UserError, match="mlmia.training_job"):  # the plain loop never drops the DP asked for
        train_mlm(TEXTS, "unused", "unused", config={**TINY, "dp": {"epsilon": 1}})
    assert group_privacy(1.0, 1e-5, 1) == (1.0, 1e-5)
    eps, delta = group_privacy(0.5, 1e-5, 4)
    assert eps == 2.0 and delta == pytest.approx(4 * math.exp(1.5) * 1e-5)


# ------------------------------------------------------------------ the audit on a synthetic case


def synthetic_table(n_members=200, n_nonmembers=200, gap=3.0, seed=0) -> pd.DataFrame:
    """An attack table: the target's loss is `gap` lower on members; the reference sees no difference."""
    rng = np.random.default_rng(seed)
    n = n_members + n_nonmembers
    role = ["member"] * n_members + ["nonmember"] * n_nonmembers
    target = rng.normal(5.0, 1.0, n) - gap * (np.arange(n) < n_members)
    return pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(n)], "group_id": [f"g{i // 2}" for i in range(n)], "role": role,
        "source": "mimic", "n_tokens": rng.integers(20, 60, n), "target_energy": target,
        "reference_energy": rng.normal(5.0, 1.0, n), "target_normalized_energy": target / 2,
    })  # fmt: skip


def synthetic_metrics(attacks, aucs) -> pd.DataFrame:
    rows = []
    for attack, auc in zip(attacks, aucs):
        rows.append({"metric": "auc", "attack": attack, "fpr": np.nan, "value": auc, "ci_low": auc - 0.05,
                     "ci_high": auc + 0.05, "protocol": "corrected", "replicate": pd.NA})  # fmt: skip
        rows.append({"metric": "tpr_at_fpr", "attack": attack, "fpr": 0.01, "value": 10 * auc, "ci_low": 5.0,
                     "ci_high": 15.0, "protocol": "corrected", "replicate": pd.NA})  # fmt: skip
    return pd.DataFrame(rows).astype({"replicate": "Int64"})


def info(epsilon):
    return {"dp": {"epsilon": epsilon, "target_epsilon": epsilon, "delta": 1e-3, "unit": "sample", "units": 1000,
                   "noise_multiplier": 1.0, "max_grad_norm": 1.0, "clipped_share": 0.9,
                   "patient_level": {"epsilon": None if epsilon is None else 4 * epsilon, "delta": 0.5, "k": 4}}}  # fmt: skip


PLAN = {
    "leaky": {"experiment": "e_leaky", "attacks": {"loss": None, "likelihood_ratio": None},
              "masked_column": "target_energy", "normalized_column": "target_normalized_energy"},
    "private": {"experiment": "e_private", "attacks": {"loss": None, "likelihood_ratio": None},
                "masked_column": "target_energy", "normalized_column": "target_normalized_energy"},
}  # fmt: skip
SETTINGS = {"confidence": 0.95, "seed": 0, "fpr": 0.01, "bootstrap": 30, "bootstrap_seed": 2}


def test_lower_bound_table_on_a_synthetic_case():
    leaky, private = synthetic_table(gap=3.0), synthetic_table(gap=0.0, seed=1)
    bounds = attack_bounds(leaky, {"loss": None, "likelihood_ratio": None}, 1e-3, 0.95, 0, "leaky")
    assert list(bounds["attack"]) == ["loss", "likelihood_ratio"]
    assert (bounds["confidence"] == 0.975).all() and (bounds["members"] == 200).all()  # Bonferroni over 2
    assert bounds.set_index("attack").loc["loss", "epsilon_lb"] > 1.0  # well separated: a clear bound
    summary, by_attack = run_audit(
        PLAN, {"leaky": leaky, "private": private},
        {"leaky": synthetic_metrics(["loss", "likelihood_ratio"], [0.95, 0.9]),
         "private": synthetic_metrics(["loss", "likelihood_ratio"], [0.5, 0.52])},
        {"leaky": info(None), "private": info(8.0)}, {}, SETTINGS,
    )  # fmt: skip
    assert len(by_attack) == 4 and list(summary["target"]) == ["leaky", "private"]
    row = summary.set_index("target")
    assert math.isinf(row.loc["leaky", "accountant_epsilon"]) and row.loc["private", "accountant_epsilon"] == 8.0
    assert row.loc["leaky", "bound_attack"] == "loss" and row.loc["leaky", "epsilon_lb"] > 1.0
    assert row.loc["private", "epsilon_lb"] < 0.5  # no signal: no bound to speak of
    assert (
        row.loc["leaky", "strongest_attack"] == "loss" and row.loc["private", "strongest_attack"] == "likelihood_ratio"
    )
    # utility: the mean masked energy and exp of the token-weighted normalized energy of the non-members
    part = private[private["role"] == "nonmember"]
    assert row.loc["private", "mlm_loss"] == pytest.approx(part["target_energy"].mean())
    weighted = np.sum(part["n_tokens"] * part["target_normalized_energy"]) / part["n_tokens"].sum()
    assert row.loc["private", "pseudo_perplexity"] == pytest.approx(math.exp(weighted))
    assert (
        row.loc["private", "mlm_loss_ci_low"] < row.loc["private", "mlm_loss"] < row.loc["private", "mlm_loss_ci_high"]
    )
    markdown = bounds_markdown(summary, 0.01, 0.95)
    assert "| leaky | no DP |" in markdown and "| private | 8.00 (0.001) | 32.00 (0.5) |" in markdown


def test_a_bound_above_the_accountant_epsilon_fails_loudly():
    leaky = synthetic_table(gap=3.0)
    metrics = synthetic_metrics(["loss", "likelihood_ratio"], [0.95, 0.9])
    with pytest.raises(UserError) as failure:
        run_audit({"leaky": PLAN["leaky"]}, {"leaky": leaky}, {"leaky": metrics}, {"leaky": info(0.5)}, {}, SETTINGS)
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith("DP audit: target 'leaky', attack 'loss': empirical lower bound eps >= ")
    assert "exceeds the accountant's eps = 0.5000" in message
    bounds = pd.DataFrame({"target": ["t"], "attack": ["a"], "epsilon_lb": [1.0]})
    check_bounds(bounds, {"t": 1.0})  # equal is fine
    check_bounds(bounds, {"t": math.inf})  # no DP: nothing to check
    with pytest.raises(UserError, match="no dp record"):
        run_audit({"leaky": PLAN["leaky"]}, {"leaky": leaky}, {"leaky": metrics}, {"leaky": None}, {}, SETTINGS)
    with pytest.raises(UserError, match="lacks column 'target_normalized_energy'"):
        utility(leaky.drop(columns="target_normalized_energy"), "target_energy", "target_normalized_energy")


def test_one_run_canary_audit():
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    perfect = one_run_canary_audit(included + rng.normal(0, 0.01, 1000), included, guess_share=0.2)
    assert perfect["guesses"] == 200 and perfect["correct"] == 200 and perfect["epsilon_lb"] > 2.0
    blind = one_run_canary_audit(rng.normal(size=1000), included, guess_share=0.2)
    assert blind["epsilon_lb"] < 0.5 and blind["inserted"] == int(included.sum())
    with pytest.raises(UserError, match="guess_share"):
        one_run_canary_audit(rng.normal(size=10), included[:10], guess_share=0)


def test_one_run_audits_per_target_and_a_bound_above_the_accountant_fails():
    rng = np.random.default_rng(1)
    included = rng.random(1000) < 0.5
    scores = {"leaky": included + rng.normal(0, 0.01, 1000), "private": rng.normal(size=1000)}
    infos = {target: {"dp": {"epsilon": 8.0, "delta": 1e-3}} for target in scores}
    table = one_run_audits(scores, included, infos, guess_share=0.2, confidence=0.95)
    assert table.target.tolist() == ["leaky", "private"]
    for row in table.itertuples():
        expected = one_run_canary_audit(scores[row.target], included, 0.2, delta=1e-3, beta=0.05)
        assert row.epsilon_lb == pytest.approx(expected["epsilon_lb"]) and row.correct == expected["correct"]
    # 200 guesses all right vs a coin: a clear bound against next to none (at delta 1e-3)
    assert table.epsilon_lb.iloc[0] > 1.0 and table.epsilon_lb.iloc[1] < 0.5
    assert "| leaky | 8.00 (0.001) | 1000 (" in one_run_markdown(table, "MRN {secret} .", 6)
    # the leaky target with an accountant epsilon of 1: its bound above it fails in one line
    infos["leaky"]["dp"]["epsilon"] = 1.0
    with pytest.raises(UserError, match="target 'leaky', attack 'one-run canaries': .* exceeds the accountant's eps"):
        one_run_audits(scores, included, infos, guess_share=0.2)


# ------------------------------------------------------------------ the study and the workflow


def load(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


def test_the_dp_group_needs_dp_audit(monkeypatch):
    monkeypatch.chdir(REPO)
    ci = Study.from_config(load("ci.yaml"), REPO)
    assert "dp" in ci.groups() and "table_dp" in ci.tables
    assert set(ci.dp_outputs().values()) <= set(ci.targets("dp")) and not set(ci.dp_outputs().values()) & set(
        ci.targets()
    )
    plan = audit_plan(ci)
    assert list(plan) == ["dp_none", "dp_eps8", "dp_eps4", "dp_eps1"]
    assert plan["dp_eps1"]["experiment"] == "dp_eps1_long_mimic" and "min_k" in plan["dp_eps1"]["attacks"]
    # without dp_audit (e.g. config/paper.yaml) the group and the experiments only it reads are left out
    config = load("ci.yaml")
    del config["dp_audit"]
    plain = Study.from_config(config, REPO)
    assert "dp" not in plain.groups() and "table_dp" not in plain.tables
    assert not [e for e in plain.experiments if e.startswith("dp_")] and "base_long_mimic" in plain.experiments


def test_snakemake_dp_plans_the_group_on_the_ci_config(tmp_path):
    workdir = copy_workflow(tmp_path)
    config = write_config(workdir, "ci.yaml")
    jobs = planned_jobs(workdir, "dp", "--configfile", str(config))
    outputs = " ".join(out for _, out in jobs)
    for name in ("dp/bounds.csv", "dp/bounds.md", "dp/bounds_by_attack.csv", "dp/privacy_utility.png",
                 "tables/table_dp.md", "findings_dp.md", "models/dp_eps1", "models/dp_none", "dp/one_run.md",
                 "corpus/train_target_canaries.parquet"):  # fmt: skip
        assert f"results/ci/{name}" in outputs, name
    assert not any(rule == "train_model" and "models/base" in out for rule, out in jobs)


def test_the_recipes_overlay_trains_its_models_from_the_public_reference(tmp_path):
    """config/dp_recipes.yaml (docs/dp.md) passes the schema over the default config and plans
    its four DP models; the public-init ones take the general reference as an input."""
    workdir = copy_workflow(tmp_path)
    names = ["dp_eps8_batch256", "dp_eps8_public", "dp_eps8_public_batch512", "dp_eps8_public_lr2e4"]
    targets = [f"results/default/models/{name}" for name in names]
    dry = run_snakemake(workdir, "-n", "--configfile", "config/config.yaml", "config/dp_recipes.yaml", "--", *targets)
    inputs = {}  # output -> input line of each planned train_model job
    for block in dry.stdout.split("rule train_model:")[1:]:
        fields = dict(line.strip().split(": ", 1) for line in block.splitlines()[1:4] if ": " in line)
        inputs[fields["output"]] = fields["input"]
    assert sorted(inputs) == sorted([*targets, "results/default/models/ref_general"])
    public = {
        name
        for name in names
        if "results/default/models/ref_general" in inputs[f"results/default/models/{name}"].split(", ")
    }
    assert public == {"dp_eps8_public", "dp_eps8_public_batch512", "dp_eps8_public_lr2e4"}


@pytest.mark.slow
@pytest.mark.workflow
def test_snakemake_dp_on_the_ci_config(tmp_path):
    workdir = copy_workflow(tmp_path)
    config = write_config(workdir, "ci.yaml")
    run_snakemake(workdir, "dp", "--configfile", str(config))
    run = workdir / "results" / "ci"
    summary = pd.read_csv(run / "dp" / "bounds.csv")
    assert list(summary["target"]) == ["dp_none", "dp_eps8", "dp_eps4", "dp_eps1"]
    private = summary[summary["target"] != "dp_none"]
    assert np.allclose(private["accountant_epsilon"], [8, 4, 1], rtol=0.02)
    assert (private["epsilon_lb"] <= private["accountant_epsilon"]).all()
    assert (summary["pseudo_perplexity"] > 1).all() and (summary["mlm_loss"] > 0).all()
    by_attack = pd.read_csv(run / "dp" / "bounds_by_attack.csv")
    assert len(by_attack) == 4 * 12  # every attack of the zoo against every target
    assert {"lira_online", "rmia", "neighbourhood", "pll_word_l2r", "blind"} <= set(by_attack["attack"])
    # the one-run audit: 40 canaries, the included ones in every DP target's training text once each
    one_run = pd.read_csv(run / "dp" / "one_run.csv")
    trained = pd.read_parquet(run / "corpus" / "train_target_canaries.parquet")
    assert list(one_run["target"]) == ["dp_none", "dp_eps8", "dp_eps4", "dp_eps1"] and (one_run.canaries == 40).all()
    assert (one_run.inserted == trained.group_id.str.startswith("one_run_").sum()).all()
    assert (one_run.epsilon_lb.iloc[1:] <= one_run.accountant_epsilon.iloc[1:]).all()
    for name in ("dp/bounds.md", "dp/privacy_utility.png", "dp/privacy_utility.pdf", "tables/table_dp.md",
                 "findings_dp.md"):  # fmt: skip
        assert (run / name).stat().st_size > 0, name
    # a bound above the accountant's epsilon fails the run, in one line naming target, attack and numbers
    table_path = run / "attack" / "dp_eps1_long_mimic.parquet"
    table = pd.read_parquet(table_path)
    table["target_energy"] = np.where(table["role"].isin(["member", "member_heldin"]), 0.0, 10.0)
    table.to_parquet(table_path)
    train_info = run / "models" / "dp_eps1" / "train_info.json"
    facts = json.loads(train_info.read_text())
    facts["dp"]["epsilon"] = 0.01
    train_info.write_text(json.dumps(facts))
    result = run_snakemake(workdir, "dp", "--configfile", str(config), "--forcerun", "dp_bounds", check=False)
    assert result.returncode != 0
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("mlmia: error:")]
    assert errors and errors[0].startswith("mlmia: error: DP audit: target 'dp_eps1', attack '")
    assert "exceeds the accountant's eps = 0.0100" in errors[0]
