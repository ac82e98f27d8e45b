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
from scipy import stats
from training_helpers import DP_AUDIT, dp_entry, model_entry, train_mlm, train_model, training_settings
from workflow_helpers import REPO, copy_workflow, planned_jobs, run_snakemake, write_config

from mlmia.core.errors import UserError
from mlmia.defences.audit import (
    accountant_record,
    attack_audit,
    attack_bounds,
    audit_target,
    check_target,
    one_run_canary_audit,
    utility,
)
from mlmia.defences.clipping import per_unit_loss, pool_by_unit
from mlmia.defences.dp_settings import FAULTS, dp_settings
from mlmia.defences.dp_sgd import group_privacy
from mlmia.defences.gradient_canaries import RECORD_FILE, canary_scores, mechanism_checks, read_record
from mlmia.defences.report import (
    audit_findings,
    bounds_markdown,
    bounds_table,
    checks_table,
    findings_markdown,
    one_run_markdown,
    one_run_table,
)
from mlmia.defences.token_canaries import (
    canary_tokenizer,
    draw_token_canaries,
    token_scores,
    with_included_canaries,
)
from mlmia.models.objectives import MaskedBatch
from mlmia.models.objectives.bert_mlm import BertMLM
from mlmia.models.tokenizer import train_tokenizer
from mlmia.study.plans.dp import audit_plan, dp_audit_outputs, dp_targets, one_run_targets
from mlmia.study.study import Study

TEXTS = [
    f"Patient {i} was started on metoprolol {5 * (i % 7 + 1)} mg PO BID for atrial fibrillation." for i in range(30)
]
TEXTS += [f"VS: T 98.{i % 10} BP 1{i % 9 + 1}0/80 HR {60 + i} RR 16 O2 sat 9{i % 10}% on RA." for i in range(30)]
GROUPS = [f"p{i // 3}" for i in range(len(TEXTS))]  # 20 patients of 3 lines each
#: the white-box audit's score of a config that leaves it out
SCORE = DP_AUDIT["gradient_canaries"]["score"]
TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "batch_size": 10, "lr": 3e-3,
        "epochs": 3, "warmup_ratio": 0.1, "seed": 0, "dropout": 0.0}  # fmt: skip


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tok")
    train_tokenizer(TEXTS, directory, vocab_size=200, min_frequency=1, min_patients=None)
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
    """`init` with dp (the DP targets' recipe): at learning rate 0 the DP-SGD loop saves exactly
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


def test_the_gradient_divisor_is_the_planned_batch_whatever_the_data_length(tok_dir, tmp_path):
    """The noised sum is divided by the config's batch_size, not by Opacus' int(n q): with batch 10
    (q = 1 / ceil(n / 10) = 1/6 for both), 59 lines would give Opacus' 9 and 60 lines its 10; here
    both divide by 10. The sentinels' observed sd is sigma C / 10 (4,000 sentinel coordinates x 6
    steps: the sd is estimated within 0.5%, where a divisor of 9 would make it 11% larger)."""
    for lines in (59, 60):
        config = {**TINY, "epochs": 1, "dp": {"epsilon": 8, "canaries": {"count": 2, "sentinels": 4000}}}
        info = train_model(TEXTS[:lines], tok_dir, tmp_path / str(lines), config=config, device="cpu")
        dp = info["dp"]
        assert dp["gradient_divisor"] == 10.0 and dp["sample_rate"] == pytest.approx(1 / 6), lines
        record = read_record(tmp_path / str(lines), dp, "m")
        sentinels = record["observed"][:, 2:].astype(np.float64)
        expected = dp["noise_multiplier"] * 1.0 / 10.0  # sigma C / B with C = 1
        assert abs(np.sqrt(np.mean(sentinels**2)) / expected - 1) < 0.03, lines


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

    from mlmia.defences.clipping import unregister_head_bias
    from mlmia.defences.dp_sgd import quiet_opacus_warnings

    quiet_opacus_warnings()
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32, max_position_embeddings=40, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0))  # fmt: skip
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    unregister_head_bias(model)
    ids = torch.randint(5, 50, (3, 7))
    attn = torch.ones(3, 7, dtype=torch.long)
    attn[2, 5:] = 0
    labels = torch.full((3, 7), -100)
    labels[:, 2] = ids[:, 2]
    labels[0, 4] = ids[0, 4]
    pos = torch.arange(7).unsqueeze(0).expand(3, 7)
    gsm = GradSampleModule(model, loss_reduction="mean")
    bert = BertMLM(50, 4, model_entry()["mlm_probability"])
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


def test_ghost_clipping_sums_the_same_clipped_gradients_as_per_sample_clipping():
    """With the tied word embeddings frozen, Opacus' ghost clipping (per-row norms from the
    layers' activations, then one backward of the rows' losses times their clipping factors)
    gives the sum of clipped per-row gradients that per-sample clipping forms row by row (each
    row's gradient by autograd here, clipped by hand); the norms are each row's too."""
    from opacus import PrivacyEngine
    from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping
    from transformers import BertConfig, BertForMaskedLM

    from mlmia.defences.clipping import clipping_mode, ghost_clipped_sum, length_chunks, unregister_head_bias
    from mlmia.defences.dp_settings import dp_settings
    from mlmia.models.training import freeze_parts

    def model():
        torch.manual_seed(0)
        bert = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=32, max_position_embeddings=40, hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0))  # fmt: skip
        return freeze_parts(bert, ["word_embeddings"])

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 50, (4, 7), generator=gen)
    attn = torch.ones(4, 7, dtype=torch.long)
    labels = torch.full((4, 7), -100)
    labels[:, 2], labels[1, 5] = ids[:, 2], ids[1, 5]
    pos = torch.arange(7).unsqueeze(0).expand(4, 7).contiguous()
    bert, clip = BertMLM(50, 4, model_entry()["mlm_probability"]), 0.05
    # by hand: each row's gradient alone, clipped to `clip`, summed
    plain = model()
    trained = [(n, p) for n, p in plain.named_parameters() if p.requires_grad]
    expected = {n: torch.zeros_like(p) for n, p in trained}
    norms = []
    for i in range(4):
        row = MaskedBatch(ids[i : i + 1], labels[i : i + 1])
        grads = torch.autograd.grad(per_unit_loss(plain, bert, row, attn[i : i + 1], pos[i : i + 1]).sum(),
                                    [p for _, p in trained], allow_unused=True)  # fmt: skip
        grads = [torch.zeros_like(p) if g is None else g for (_, p), g in zip(trained, grads)]
        norms.append(float(torch.sqrt(sum((g**2).sum() for g in grads))))
        for (n, _), g in zip(trained, grads):
            expected[n] += g * min(1.0, clip / (norms[-1] + 1e-6))
    assert min(norms) > clip  # every row is clipped
    # Opacus' ghost clipping, no noise
    ghost = model()
    assert clipping_mode(dp_settings(dp_entry({"epsilon": 1})), ghost) == "ghost"
    unregister_head_bias(ghost)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(4)), batch_size=4)
    sgd = torch.optim.SGD([p for p in ghost.parameters() if p.requires_grad], lr=0.0)
    gsm, optim, _, _ = PrivacyEngine().make_private(module=ghost, optimizer=sgd, data_loader=loader,
                                                    noise_multiplier=0.0, max_grad_norm=clip, poisson_sampling=False,
                                                    grad_sample_mode="ghost", criterion=torch.nn.CrossEntropyLoss())  # fmt: skip
    rows = per_unit_loss(gsm._module, bert, MaskedBatch(ids, labels), attn, pos)
    DPTensorFastGradientClipping(gsm, optim, rows, "mean").backward()
    assert np.allclose(gsm.per_sample_gradient_norms.detach().numpy(), norms, rtol=1e-4)
    got = dict(gsm._module.named_parameters())  # the head's bias goes by its decoder's name while unregistered

    def ghost_grad(n):
        return got.get(n, got.get(n.replace("predictions.", "predictions.decoder."))).grad

    for n, _ in trained:
        assert torch.allclose(ghost_grad(n), expected[n], atol=1e-7), n
    # the training's path: rows of different lengths in chunks cut to their own longest row (two
    # rows of 7 tokens per chunk here: rows 1 and 3 padded after 5 tokens), the chunks' sums added
    attn[[1, 3], 5:] = 0
    ids[[1, 3], 5:], labels[1, 5] = 0, -100
    expected = {n: torch.zeros_like(p) for n, p in trained}
    for i in range(4):
        width = int(attn[i].sum())
        row = MaskedBatch(ids[i : i + 1, :width], labels[i : i + 1, :width])
        grads = torch.autograd.grad(per_unit_loss(plain, bert, row, attn[i : i + 1, :width], pos[i : i + 1, :width]).sum(),
                                    [p for _, p in trained], allow_unused=True)  # fmt: skip
        grads = [torch.zeros_like(p) if g is None else g for (_, p), g in zip(trained, grads)]
        norm = float(torch.sqrt(sum((g**2).sum() for g in grads)))
        for (n, _), g in zip(trained, grads):
            expected[n] += g * min(1.0, clip / (norm + 1e-6))
    assert [c.tolist() for c in length_chunks(attn.sum(dim=1).numpy(), 14)] == [[0, 2], [1, 3]]
    ghost_trained = [p for p in gsm._module.parameters() if p.requires_grad]
    ghost_clipped_sum(gsm, optim, ghost_trained, bert, MaskedBatch(ids, labels), attn, pos, "cpu", max_tokens=14)
    for n, _ in trained:
        assert torch.allclose(ghost_grad(n), expected[n], atol=1e-7), n
    # the tied word embeddings trained: ghost clipping refused, per-sample clipping chosen
    tied = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=32))  # fmt: skip
    assert clipping_mode(dp_settings(dp_entry({"epsilon": 1})), tied) == "per_sample"
    assert clipping_mode(dp_settings(dp_entry({"epsilon": 1, "unit": "patient"})), model()) == "per_sample"
    with pytest.raises(UserError, match="needs the tied word embeddings frozen"):
        clipping_mode(dp_settings(dp_entry({"epsilon": 1, "clipping": "ghost"})), tied)


class RowWeighted(BertMLM):
    """BERT's masks with a weight per row on each masked position, the loss the weighted sum over a
    row (per row) or over the batch divided by its rows: the shape a masked-diffusion objective's
    1 / t weighting takes, here only to show that neither step of the loop needs a change for it."""

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


def test_a_weighted_objective_runs_in_both_steps_as_they_are(tok_dir, tmp_path):
    """An objective with loss weights (`MaskedBatch.weights`) goes through the plain step's
    flattened loss and DP-SGD's per-row losses alike, and the two agree on a batch."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from mlmia.defences.dp_sgd import DpSgdStep
    from mlmia.models.training import masked_lm_loss

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    objective = RowWeighted(len(tok), tok.mask_token_id, model_entry()["mlm_probability"])
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
    private = train_mlm(TEXTS, tok_dir, tmp_path / "dp", config={**config, "dp": {"epsilon": 8}}, device="cpu",
                        objective=objective, step=DpSgdStep())  # fmt: skip
    assert plain["config"]["objective"] == private["config"]["objective"] == "row_weighted"
    assert math.isfinite(plain["final_loss"]) and math.isfinite(private["final_loss"])


def test_pooling_rows_into_patients():
    rows = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    owner = torch.tensor([0, 0, 1, 0])
    pooled = pool_by_unit(rows, owner, torch.tensor([1 / 3, 1 / 3, 1.0, 1 / 3]), 2)
    assert torch.allclose(pooled[0], rows[[0, 1, 3]].mean(0)) and torch.allclose(pooled[1], rows[2])


def test_dp_settings_are_checked_in_one_line():
    assert training_settings({"dp": {"epsilon": 4}}).dp == {
        "epsilon": 4, "delta": None, "max_grad_norm": 1.0, "accountant": "rdp", "unit": "sample", "fault": None,
        "canaries": None, "clipping": "auto",
    }  # fmt: skip
    assert training_settings({"dp": {"epsilon": 4, "canaries": {"count": 9}}}).dp["canaries"] == {
        "count": 9, "sentinels": 64, "norm": 10.0, "seed": 0
    }  # fmt: skip
    assert training_settings({}).dp is None
    for bad, match in [({"epsilon": 0}, "dp.epsilon"), ({"eps": 1}, "unknown key"), ({"unit": "ward"}, "dp.unit"),
                       ({"max_grad_norm": -1}, "max_grad_norm"), ({"delta": 1.5}, "dp.delta"), (4, "mapping"),
                       ({"epsilon": 1, "fault": "late"}, "dp.fault"), ({"fault": "no_noise"}, "needs an epsilon"),
                       ({"canaries": {"count": 1}}, "at least 2"), ({"canaries": {"size": 3}}, "unknown key"),
                       ({"canaries": {"count": 9, "norm": 0}}, "dp.canaries.norm"), ({"clipping": "fast"}, "dp.clipping"),
                       ({"clipping": "ghost", "unit": "patient"}, "needs unit sample")]:  # fmt: skip
        with pytest.raises(UserError, match=match) as info:
            dp_settings(dp_entry(bad))
        assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="pack: false"):
        train_model(TEXTS, "unused", "unused", config={**TINY, "pack": True, "dp": {"epsilon": 1}})
    with pytest.raises(UserError, match="save_epochs is not offered with dp"):  # before any work
        train_model(TEXTS, "unused", "unused", config={**TINY, "dp": {"epsilon": 1}}, save_epochs=[1])
    with pytest.raises(UserError, match="freeze must be a list of word_embeddings, embeddings"):
        training_settings({"freeze": ["encoder"]})
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
                "masked_column": "target_energy", "normalized_column": "target_normalized_energy",
                "reference_column": "reference_energy"},
}  # fmt: skip
SETTINGS = {
    "confidence": 0.95,
    "seed": 0,
    "fpr": 0.01,
    "bootstrap": 30,
    "bootstrap_seed": 2,
    "check_level": 1e-6,
    "canaries": {"guess_share": 0.2},
    "gradient_canaries": {"guess_share": 0.2, "score": "likelihood_ratio", "runs": 1},
}


def attacked(target, epsilon, gap, aucs, seed=0):
    """The attacks' part of an audit of a synthetic target (`attack_audit`)."""
    table = synthetic_table(gap=gap, seed=seed)
    return attack_audit(PLAN[target], table, synthetic_metrics(["loss", "likelihood_ratio"], aucs),
                        accountant_record(info(epsilon), target), {}, SETTINGS, target)  # fmt: skip


def test_lower_bound_table_on_a_synthetic_case():
    leaky, private = synthetic_table(gap=3.0), synthetic_table(gap=0.0, seed=1)
    bounds = attack_bounds(leaky, {"loss": None, "likelihood_ratio": None}, 1e-3, 0.95, 0, "leaky")
    assert list(bounds["attack"]) == ["loss", "likelihood_ratio"]
    assert (bounds["confidence"] == 0.975).all() and (bounds["members"] == 200).all()  # Bonferroni over 2
    assert bounds.set_index("attack").loc["loss", "epsilon_lb"] > 1.0  # well separated: a clear bound
    audits = [audit_target("leaky", info(None), SETTINGS, attacks=attacked("leaky", None, 3.0, [0.95, 0.9])),
              audit_target("private", info(8.0), SETTINGS,
                           attacks=attacked("private", 8.0, 0.0, [0.5, 0.52], seed=1))]  # fmt: skip
    assert [a["failures"] for a in audits] == [[], []]  # no DP: no claim to break; 8: far below
    summary = bounds_table(audits)
    assert list(summary["target"]) == ["leaky", "private"] and list(summary["verdict"]) == ["passes", "passes"]
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
    # the gain over the reference: its mean masked energy on the same non-members less the target's,
    # the interval from the same replicates for both (paired)
    assert row.loc["private", "reference_mlm_loss"] == pytest.approx(part["reference_energy"].mean())
    gain = part["reference_energy"].mean() - part["target_energy"].mean()
    assert row.loc["private", "mlm_loss_gain"] == pytest.approx(gain)
    assert row.loc["private", "mlm_loss_gain_ci_low"] < gain < row.loc["private", "mlm_loss_gain_ci_high"]
    assert math.isnan(row.loc["leaky", "mlm_loss_gain"])  # its plan names no reference column
    markdown = bounds_markdown(summary, 0.01, 0.95)
    assert f"| {gain:.3f} [" in markdown and f"(of {part['reference_energy'].mean():.3f}) |" in markdown
    assert "| leaky | no DP | none | n.a. | n.a. | n.a. |" in markdown
    assert "| private | 8.00 (0.001) | none | 32.00 (0.5) |" in markdown


def test_a_bound_above_the_accountant_epsilon_fails_loudly():
    audit = audit_target("leaky", info(0.5), SETTINGS, attacks=attacked("leaky", 0.5, 3.0, [0.95, 0.9]))
    assert audit["failures"] and audit["failures"][0].startswith("attack 'loss': empirical lower bound eps >= ")
    with pytest.raises(UserError) as failure:
        check_target(audit)
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith("DP audit: target 'leaky' (accountant's eps = 0.5000 at delta 0.001) fails 2 check(s): ")
    assert "attack 'loss': empirical lower bound eps >= " in message and "not a result" in message
    check_target(audit_target("leaky", info(None), SETTINGS, attacks=attacked("leaky", None, 3.0, [0.95, 0.9])))
    with pytest.raises(UserError, match="no dp record"):
        audit_target("leaky", None, SETTINGS)
    with pytest.raises(UserError, match="lacks column 'target_normalized_energy'"):
        utility(synthetic_table().drop(columns="target_normalized_energy"), "target_energy", "target_normalized_energy")


def test_one_run_canary_audit():
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    perfect = one_run_canary_audit(included + rng.normal(0, 0.01, 1000), included, guess_share=0.2)
    assert perfect["guesses"] == 200 and perfect["correct"] == 200 and perfect["epsilon_lb"] > 2.0
    # both at the whole beta: all 200 right, delta 0: Steinke et al.'s closed form at 0.05,
    # P(Binomial(200, q) = 200) = q^200 = beta; the bound is the f-DP analysis', at least as tight
    q = 0.05 ** (1 / 200)
    assert perfect["steinke_lb"] == pytest.approx(math.log(q / (1 - q)), abs=1e-6)
    assert perfect["epsilon_lb"] == perfect["fdp_lb"] >= perfect["steinke_lb"] - 1e-6
    blind = one_run_canary_audit(rng.normal(size=1000), included, guess_share=0.2)
    assert blind["epsilon_lb"] < 0.5 and blind["inserted"] == int(included.sum())
    with pytest.raises(UserError, match="guess_share"):
        one_run_canary_audit(rng.normal(size=10), included[:10], guess_share=0)


def test_the_canary_bound_takes_the_whole_confidence_of_its_family():
    """The CI world's eps = 8 target: 161 of 200 guesses right among 500 canaries at delta = 1/293,
    its family at beta = 0.05 / 3. The f-DP bound at that beta is positive; at half of it (the
    share it would keep if Steinke et al.'s bound, 0 here by its 2 m delta term, were maxed in)
    it is 0: the audit would have certified nothing (hand-checked cliff of the recursion: at beta
    / 2 the correct guesses' mass beta v / m = 0.0027 lies below delta = 0.0034, so the inverse
    blow-up never lifts it)."""
    from mlmia.metrics.privacy_bounds import fdp_one_run_epsilon, one_run_epsilon

    beta, delta = 0.05 / 3, 1 / 293
    included = np.arange(500) < 250
    found = one_run_canary_audit(np.arange(500.0)[::-1], included, 0.4, delta, beta)  # top 100 in, bottom 100 out
    assert found["guesses"] == 200 and found["correct"] == 200 and found["beta"] == beta
    assert found["epsilon_lb"] == found["fdp_lb"] == fdp_one_run_epsilon(500, 200, 200, delta, beta)
    assert fdp_one_run_epsilon(500, 200, 161, delta, beta) > 0.3
    assert fdp_one_run_epsilon(500, 200, 161, delta, beta / 2) == 0.0
    assert one_run_epsilon(500, 200, 161, delta, beta) == 0.0


def test_a_black_box_canary_bound_above_the_accountant_fails():
    rng = np.random.default_rng(1)
    included = rng.random(1000) < 0.5
    leaky, blind = (included + rng.normal(0, 0.01, 1000), included), (rng.normal(size=1000), included)
    settings = {**SETTINGS, "canaries": {"guess_share": 0.2}}
    passing = audit_target("private", {"dp": {"epsilon": 8.0, "delta": 1e-3}}, settings, blackbox=blind)
    assert passing["failures"] == [] and passing["canary_audits"][0]["audit"] == "black-box"
    audit = audit_target("leaky", {"dp": {"epsilon": 1.0, "delta": 1e-3}}, settings, blackbox=leaky)
    assert audit["canary_audits"][0]["correct"] == 200
    with pytest.raises(UserError, match=r"target 'leaky' .* the black-box one-run bound eps >= \d\.\d+ \(f-DP;"):
        check_target(audit)
    table = one_run_table([passing, audit])
    assert list(table["target"]) == ["private", "leaky"] and table["ratio"].iloc[1] > 3
    settings = {**SETTINGS, "gradient_canaries": {**SETTINGS["gradient_canaries"], "count": 500, "norm": 10}}
    markdown = one_run_markdown(table, checks_table([passing, audit]), settings)
    assert "| leaky | black-box (token log-probability) | 1.00 (0.001) | none | 1000 (" in markdown


# ------------------------------------------------------------------ white-box canaries and mechanism checks


def simulated_record(sigma=1.0, q=0.1, steps=20, units=300, count=500, sentinels=64, seed=0, signal=1.0,
                     noise=None, rate=None):  # fmt: skip
    """The observations of a DP-SGD run as `read_record` gives them, simulated: each included
    canary joins a step with probability `rate` (default q) and then adds `signal` (1: clipped to C);
    every coordinate gets N(0, noise^2) (default sigma); C = 1, expected batch 1."""
    rng = np.random.default_rng(seed)
    included = rng.random(count) < 0.5
    joined = (rng.random((steps, count)) < (q if rate is None else rate)) & included
    noise = sigma if noise is None else noise
    observed = np.hstack([signal * joined + noise * rng.normal(size=(steps, count)),
                          noise * rng.normal(size=(steps, sentinels))]).astype(np.float32)  # fmt: skip
    batch = rng.binomial(units, q if rate is None else rate, size=steps)
    return {"observed": observed, "included": included, "data_batch": batch, "canary_batch": joined.sum(1),
            "count": count, "unit": 1.0, "sigma": sigma, "sample_rate": q, "units": units, "divisor": 1.0,
            "steps": steps}  # fmt: skip


def test_mechanism_checks_pass_a_correct_run_and_fail_each_fault():
    checks = {row["check"]: row for row in mechanism_checks(simulated_record(), level=DP_AUDIT["check_level"])}
    assert checks["Poisson batch"]["passed"] and checks["noise"]["passed"]
    assert checks["noise"]["expected"] == 1.0 and abs(checks["noise"]["observed"] - 1) < 0.05
    assert checks["Poisson batch"]["expected"] == pytest.approx(30.0)
    for record, failing in [(simulated_record(noise=0.0), "noise"), (simulated_record(noise=0.1), "noise"),
                            (simulated_record(noise=1.2, steps=200), "noise"),
                            (simulated_record(rate=1.0), "Poisson batch"),
                            (simulated_record(rate=0.12, steps=200), "Poisson batch")]:  # fmt: skip
        found = {row["check"]: row["passed"] for row in mechanism_checks(record, level=DP_AUDIT["check_level"])}
        assert found == {"Poisson batch": failing != "Poisson batch", "noise": failing != "noise",
                         "noise by batch": True}, failing  # fmt: skip
    # a trainer dividing the noised sum by the sampled batch (fault sampled_batch_size): each step's
    # observations scaled by (expected batch) / (units drawn); the log-sd slope on log batch is -1
    for units, q, steps in [(411, 1 / 13, 26), (6446, 1 / 7, 35)]:  # the CI and default DP targets' shapes
        record = simulated_record(units=units, q=q, steps=steps)
        assert {row["check"]: row["passed"] for row in mechanism_checks(record, level=DP_AUDIT["check_level"])}[
            "noise by batch"
        ]
        scale = units * q / np.maximum(record["data_batch"], 1)
        record["observed"] = (record["observed"] * scale[:, None]).astype(np.float32)
        check = {row["check"]: row for row in mechanism_checks(record, level=DP_AUDIT["check_level"])}["noise by batch"]
        assert not check["passed"] and abs(check["observed"] + 1) < 0.3, check
    # a correct mechanism trips it at about its level: 200 simulated runs at the 5% level (a binomial margin)
    p_values = [{row["check"]: row["p_value"] for row in mechanism_checks(simulated_record(seed=s), level=DP_AUDIT["check_level"])}["noise by batch"]
                for s in range(200)]  # fmt: skip
    assert np.sum(np.array(p_values) < 0.05) <= int(stats.binom.ppf(0.999, 200, 0.05))
    # no noise claimed (the non-private loop): the sentinels must be exactly 0
    assert all(
        row["passed"] for row in mechanism_checks(simulated_record(sigma=0.0, noise=0.0), level=DP_AUDIT["check_level"])
    )


def test_white_box_audit_stays_below_the_accountant_and_catches_faults():
    """The white-box one-run audit of simulated DP-SGD with known sigma, q, T: under the accountant's
    epsilon in at least 95% of runs (each bound holds with 95%), clearly positive at epsilon 8; a run
    without clipping or noise is caught by its bound."""
    from opacus.accountants.utils import get_noise_multiplier

    from mlmia.defences.dp_sgd import accountant_epsilon

    q, steps, delta = 0.1, 20, 1e-3
    results = {}
    for eps in (8.0, 2.0):
        sigma = get_noise_multiplier(target_epsilon=eps, target_delta=delta, sample_rate=q, steps=steps)
        claimed = accountant_epsilon("rdp", sigma, q, steps, delta)
        bounds = []
        for seed in range(40):
            record = simulated_record(sigma=sigma, q=q, steps=steps, seed=seed)
            found = one_run_canary_audit(canary_scores(record, score=SCORE), record["included"], 0.4, delta)
            bounds.append(found["epsilon_lb"])
        results[eps] = (claimed, np.array(bounds))
        assert np.sum(np.array(bounds) > claimed) <= int(stats.binom.ppf(0.999, 40, 0.05))
    assert results[8.0][1].mean() > 1.0 and results[8.0][1].mean() > results[2.0][1].mean()
    sigma = get_noise_multiplier(target_epsilon=1.0, target_delta=delta, sample_rate=q, steps=steps)
    for fault in ({"noise": 0.0}, {"signal": 10.0}):  # no noise; no clipping (a canary of norm 10 C passes)
        record = simulated_record(sigma=sigma, q=q, steps=steps, **fault)
        audit = audit_target(
            "t",
            {"dp": {"epsilon": 1.0, "delta": delta}},
            {**SETTINGS, "gradient_canaries": {"guess_share": 0.4, "score": "likelihood_ratio"}},
            whitebox=record,
        )
        assert any(f.startswith("the white-box one-run bound eps >= ") for f in audit["failures"]), fault
    # the summed alignment ranks the canaries too, with less power than the likelihood ratio
    record = simulated_record(sigma=0.6)
    aligned = one_run_canary_audit(canary_scores(record, score="alignment"), record["included"], 0.4, delta)
    assert 0 < aligned["correct"] and aligned["correct"] <= one_run_canary_audit(
        canary_scores(record, score=SCORE), record["included"], 0.4, delta)["correct"] + 10  # fmt: skip


def canaries_config(eps, fault=None, count=500, clipping="per_sample", seed=0):
    """A tiny DP model with gradient canaries (its training and its canaries seeded `seed`); ghost
    clipping trains it with its word embeddings frozen."""
    frozen = {"freeze": ["word_embeddings"]} if clipping == "ghost" else {}
    return {**TINY, **frozen, "seed": seed, "dp": {"epsilon": eps, "delta": 1e-5, "fault": fault,
                                                   "canaries": {"count": count, "seed": seed}, "clipping": clipping}}  # fmt: skip


def test_gradient_canaries_are_recorded_and_leave_the_model_alone(tok_dir, tmp_path):
    """The canaries' observations: one row per step (empty batches too); without noise the model
    trained with them is the model trained without them, up to float rounding (the summation
    order differs with the canaries' parameter group: bit for bit on one CPU, 1e-7 apart on
    another); a canary's gradient reaching the model (norm 10 against C = 1) would move it by far
    more."""
    from transformers import BertForMaskedLM

    with_canaries = train_model(TEXTS, tok_dir, tmp_path / "c", config={**TINY, "dp": {"epsilon": None,
                                "canaries": {"count": 50}}}, device="cpu", groups=GROUPS)  # fmt: skip
    train_model(TEXTS, tok_dir, tmp_path / "n", config={**TINY, "dp": {"epsilon": None}}, device="cpu", groups=GROUPS)
    a, b = (BertForMaskedLM.from_pretrained(str(tmp_path / name)).state_dict() for name in ("c", "n"))
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-5, msg=key)
    dp = with_canaries["dp"]
    assert dp["canaries"] == {"count": 50, "sentinels": 64, "norm": 10.0, "seed": 0, "included": dp["canaries"][
        "included"], "unit": 1.0, "file": RECORD_FILE}  # fmt: skip
    record = read_record(tmp_path / "c", dp, "c")
    assert record["observed"].shape == (dp["steps"], 114) and record["data_batch"].sum() > 0
    # no noise, no clipping: an included canary adds 10 C / B each time it joins, the others nothing
    z = record["observed"][:, :50] * record["divisor"]
    joined = np.round(z / 10).astype(int)
    assert np.allclose(z, 10 * joined, atol=1e-4) and not joined[:, ~record["included"]].any()
    assert joined.sum() == record["canary_batch"].sum() > 0 and not record["observed"][:, 50:].any()
    with pytest.raises(UserError, match="trained without gradient canaries"):
        read_record(tmp_path / "n", {**dp, "canaries": None}, "n")


def test_gradient_canaries_under_ghost_clipping_are_observed_as_under_per_sample_clipping(tok_dir, tmp_path):
    """Ghost clipping forms no rows, so a joining canary's clipped row is added to the auxiliary
    parameter's sum directly: with the same noise generator the observations equal per-sample
    clipping's (the clipped canaries, C each, plus the same noise), and the model barely differs
    (the two clippings' float rounding); clipping at C' = C / 4 shows the canaries are clipped."""
    from transformers import BertForMaskedLM

    runs = {}
    for clipping in ("per_sample", "ghost"):
        config = canaries_config(8.0, count=40, clipping=clipping)
        config = {**config, "freeze": ["word_embeddings"], "dp": {**config["dp"], "max_grad_norm": 0.25}}
        runs[clipping] = train_model(TEXTS, tok_dir, tmp_path / clipping, config=config, device="cpu", groups=GROUPS)
    assert runs["ghost"]["dp"]["clipping"] == "ghost" and runs["per_sample"]["dp"]["clipping"] == "per_sample"
    a, b = (read_record(tmp_path / c, runs[c]["dp"], c) for c in ("per_sample", "ghost"))
    assert np.array_equal(a["canary_batch"], b["canary_batch"]) and a["canary_batch"].sum() > 0
    assert np.array_equal(a["observed"], b["observed"])  # one computation of the clipped canaries, one noise
    # without noise (fault no_noise): each joining canary adds its row clipped to C = 0.25 (its norm is 10 C)
    config = canaries_config(8.0, fault="no_noise", count=40, clipping="ghost")
    config = {**config, "dp": {**config["dp"], "max_grad_norm": 0.25}}
    quiet = train_model(TEXTS, tok_dir, tmp_path / "quiet", config=config, device="cpu", groups=GROUPS)
    record = read_record(tmp_path / "quiet", quiet["dp"], "quiet")
    joined = record["observed"][:, :40] * record["divisor"] / 0.25
    assert (
        np.allclose(joined, np.round(joined), atol=1e-4) and np.round(joined).sum() == record["canary_batch"].sum() > 0
    )
    assert not joined[:, ~record["included"]].any() and runs["ghost"]["dp"]["noise_multiplier"] > 0
    pa, pb = (BertForMaskedLM.from_pretrained(str(tmp_path / c)).state_dict() for c in ("per_sample", "ghost"))
    assert all(torch.allclose(pa[k], pb[k], atol=1e-4) for k in pa)
    assert torch.equal(pa["bert.embeddings.word_embeddings.weight"], pb["bert.embeddings.word_embeddings.weight"])


#: the faults trained at a claimed epsilon of 8 rather than 1: the milder ones, which the tiny
#: shape's checks catch at 8 (bench/dp_power.py's simulation at this shape, 100 of 100 runs) and
#: at 1 only in part (noise x 0.5: the noise check alone; clipping x 2: in 21 to 38 of 100)
MILD = ("noise_half", "clipping_double", "sampling_rate_double")
#: which checks catch each fault on the tiny model, by simulation at its shape (60 units, q = 1/6,
#: 18 steps, 500 canaries, guess share 0.4; `fault_simulation.flag_counts`, 100 runs per fault):
#: (those that flagged at least 99 of the 100 runs, those that flagged some); a real training must
#: fail by all of the first and by none outside both
CAUGHT_BY = {
    None: (set(), {"gauss"}),  # 1 of 100 at epsilon 1, none at 8
    "no_noise": ({"noise", "bound", "gauss", "fit"}, set()),
    "noise_tenth": ({"noise", "bound", "gauss", "fit"}, set()),
    "noise_half": ({"noise", "fit"}, {"gauss"}),  # 1 of 100
    "no_clipping": ({"bound", "gauss", "fit"}, set()),
    "clipping_double": ({"fit"}, {"gauss"}),  # 7 of 100
    "wrong_sampling_rate": ({"batch", "gauss", "fit"}, {"bound"}),  # the Gaussian analysis 99, the bound 3
    "sampling_rate_double": ({"batch", "fit"}, set()),
    # dividing by batches of Binomial(60, 1/6) units also inflates the noise's sd by about
    # E[(10 / n_t)^2]^(1/2) = 1.19, which the noise check over 18 x 64 sentinel values sees in 69 of 100
    "sampled_batch_size": ({"by batch"}, {"noise"}),
}
FAILURE_STARTS = {"noise": "the noise check", "batch": "the Poisson batch check", "by batch": "the noise by batch check",
                  "bound": "the white-box one-run bound", "fit": "the white-box mechanism fit",
                  "gauss": "the white-box Gaussian lower limit"}  # fmt: skip


def tiny_audit(tok_dir, tmp_path, eps, fault=None, clipping="ghost", seed=0):
    """Train a tiny DP model with 500 gradient canaries and audit it: (its train_info.json, its
    audit, the checks that failed it by `FAILURE_STARTS`' names)."""
    info = train_model(TEXTS, tok_dir, tmp_path / "m", device="cpu", groups=GROUPS,
                       config=canaries_config(eps, fault, clipping=clipping, seed=seed))  # fmt: skip
    settings = {**SETTINGS, "gradient_canaries": {"guess_share": 0.4, "score": "likelihood_ratio"}}
    audit = audit_target("m", info, settings, whitebox=read_record(tmp_path / "m", info["dp"], "m"))
    found = {k for k, v in FAILURE_STARTS.items() if any(f.startswith(v) for f in audit["failures"])}
    return info, audit, found


@pytest.mark.parametrize(
    ("fault", "clipping"),
    [(None, "ghost"), *((fault, "ghost") for fault in FAULTS), (None, "per_sample"), ("no_clipping", "per_sample")],
)
def test_each_faulty_trainer_is_caught_and_a_correct_one_passes(tok_dir, tmp_path, fault, clipping):
    """A tiny DP-SGD run at a claimed epsilon of 1 (8 for the milder faults; delta 1e-5) with 500
    gradient canaries: the correct trainer passes its audit; each fault fails it, caught by the
    checks that catch it in simulation (`CAUGHT_BY`); with ghost clipping (the DP targets' path) and, for the
    clipping fault, per-sample clipping too."""
    eps = 8.0 if fault in MILD else 1.0
    info, audit, found = tiny_audit(tok_dir, tmp_path, eps, fault, clipping)
    assert info["dp"]["clipping"] == clipping
    assert info["dp"]["fault"] == fault and 0.9 * eps < info["dp"]["epsilon"] <= eps + 1e-6  # the intended claim
    required, possible = CAUGHT_BY[fault]
    assert required <= found <= required | possible, found
    if fault is None:
        check_target(audit)
    else:
        with pytest.raises(UserError, match=f"target 'm' \\(accountant's eps = {eps - 1:.0f}\\.9\\d+ at delta 1e-05; "
                                            f"train_info.json records fault '{fault}'\\) fails"):  # fmt: skip
            check_target(audit)
    claimed = {"wrong_sampling_rate": 1 / 60, "sampling_rate_double": 1 / 12}.get(fault, 1 / 6)
    assert info["dp"]["sample_rate"] == pytest.approx(claimed)  # the accountant was told it, sigma chosen for it


@pytest.mark.parametrize("eps", [1.0, 8.0])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_correct_trainers_of_other_seeds_pass(tok_dir, tmp_path, seed, eps):
    """The false positives of real trainings: a correct trainer with other seeds (its Poisson
    batches, noise, canaries' inclusion and joins) at a claimed epsilon of 1 and 8 passes its
    audit: with seed 0 (above) 8 correct trainings. Each check runs at a nominal level of at most
    0.05 / 3 (the bound's share; 1e-6 for the mechanism checks and the fit), and in simulation at
    this shape any check flags 1 of 100 correct runs (docs/dp_power.md gives the rates); 8 runs
    cannot measure such rates, they catch a trainer or audit that flags correct runs often."""
    info, audit, found = tiny_audit(tok_dir, tmp_path, eps, seed=seed)
    assert info["dp"]["canaries"]["seed"] == seed and found == set(), audit["failures"]
    check_target(audit)


def test_the_audit_record_renders_as_tables_and_findings():
    audits = []
    for target, eps, fault, noise in [("ok", 8.0, None, None), ("broken", 1.0, "no_noise", 0.0)]:
        record = simulated_record(sigma=0.6, seed=3, noise=noise)
        audits.append(audit_target(target, {"dp": {"epsilon": eps, "delta": 1e-3, "fault": fault}},
                                   {**SETTINGS, "gradient_canaries": {"guess_share": 0.4, "score": "alignment"}},
                                   whitebox=record))  # fmt: skip
    assert not audits[0]["failures"] and audits[1]["failures"]
    table = bounds_table(audits)
    assert list(table["verdict"]) == ["passes", "fails"] and table["whitebox_ratio"].iloc[0] < 1
    assert table["checks"].iloc[1] == "failed: noise" and list(table["fault"].fillna("none")) == ["none", "no_noise"]
    markdown = bounds_markdown(table, 0.01, 0.95)
    assert "| broken | 1.00 (0.001) | no_noise |" in markdown and "**FAILS**" in markdown
    findings = audit_findings(audits, 0.95)
    by_name = {(f.finding, f.scope): f for f in findings}
    assert by_name[("correct_passes", "ok")].holds and by_name[("faulty_caught", "broken")].holds
    assert "caught by: the noise check" in by_name[("faulty_caught", "broken")].note
    assert not by_name[("check_noise", "broken")].holds and by_name[("check_noise", "ok")].holds
    assert not by_name[("white-box_within_claim", "broken")].holds
    text = findings_markdown(findings, 0.95)
    assert text.startswith("# Findings of the DP audit") and "A faulty trainer fails its audit" in text


# ------------------------------------------------------------------ black-box canaries of new tokens


def test_token_canaries_join_the_vocabulary_and_the_text_once(tok_dir, tmp_path):
    from transformers import AutoTokenizer

    canaries = draw_token_canaries("Patient MRN is {secret} .", 60, 2, seed=1)
    pd.testing.assert_frame_equal(canaries, draw_token_canaries("Patient MRN is {secret} .", 60, 2, seed=1))
    assert canaries["canary_id"].is_unique and 15 < canaries["included"].sum() < 45
    assert canaries["text"].iloc[7] == "Patient MRN is canarytok07x0 canarytok07x1 ."
    text = pd.DataFrame({"sample_id": ["a", "b"], "group_id": ["p", "p"], "text": TEXTS[:2]})
    joined = with_included_canaries(text, canaries)
    assert len(joined) == 2 + canaries["included"].sum() and joined["group_id"].iloc[2].startswith("one_run_")
    base = AutoTokenizer.from_pretrained(str(tok_dir))
    extended = canary_tokenizer(AutoTokenizer.from_pretrained(str(tok_dir)), canaries)
    assert len(extended) == len(base) + 120  # every canary's tokens, included or not
    assert extended.tokenize(TEXTS[0]) == base.tokenize(TEXTS[0])  # ordinary text as before
    assert extended.tokenize(canaries["text"].iloc[3])[-3:] == ["canarytok03x0", "canarytok03x1", "."]
    with pytest.raises(UserError, match="already holds 120"):
        canary_tokenizer(extended, canaries)
    with pytest.raises(UserError, match="canary one_run_00: its tokens are not in the model's vocabulary"):
        token_scores(None, base, canaries)
    with pytest.raises(UserError, match="at least 1 new token"):
        draw_token_canaries("x {secret}", 5, 0, seed=1)


def test_token_canaries_in_copies_score_each_copy_masked_in_turn(tok_dir):
    """With copies, a canary's score is the sum over its copies of its tokens' log-probabilities
    with that copy masked and the others visible: computed here one canary and one copy at a time
    from the model's logits, against token_scores' batches (a batch of 4 splits canaries' copies)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    canaries = draw_token_canaries("Patient MRN is {secret} .", 6, 2, seed=1, repeat=3)
    assert canaries["text"].iloc[4] == "Patient MRN is " + " ".join(["canarytok4x0 canarytok4x1"] * 3) + " ."
    assert canaries["tokens"].iloc[4] == "canarytok4x0 canarytok4x1"
    tokenizer = canary_tokenizer(AutoTokenizer.from_pretrained(str(tok_dir)), canaries)
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=32)).eval()  # fmt: skip
    expected = []
    for text, tokens in zip(canaries["text"], canaries["tokens"]):
        ids = tokenizer(text, return_tensors="pt")["input_ids"][0]
        new = tokenizer.convert_tokens_to_ids(tokens.split())
        at = [i for i, t in enumerate(ids.tolist()) if t in new]
        assert len(at) == 6
        total = 0.0
        for copy in (at[0:2], at[2:4], at[4:6]):
            masked = ids.clone()
            masked[copy] = tokenizer.mask_token_id
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=masked[None]).logits[0], dim=-1)
            total += sum(float(logp[i, ids[i]]) for i in copy)
        expected.append(total)
    got = token_scores(model, tokenizer, canaries, batch_size=4)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # one copy: every canary token masked at once, one pass
    single = draw_token_canaries("Patient MRN is {secret} .", 6, 2, seed=1)
    ids = tokenizer(single["text"].iloc[0], return_tensors="pt")["input_ids"][0]
    masked = ids.masked_fill(torch.isin(ids, torch.tensor(tokenizer.convert_tokens_to_ids(["canarytok0x0", "canarytok0x1"]))),
                             tokenizer.mask_token_id)  # fmt: skip
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=masked[None]).logits[0], dim=-1)
    hand = sum(float(logp[i, ids[i]]) for i in range(len(ids)) if masked[i] == tokenizer.mask_token_id)
    assert token_scores(model, tokenizer, single)[0] == pytest.approx(hand, rel=1e-5)
    with pytest.raises(UserError, match="at least 1 copy"):
        draw_token_canaries("x {secret}", 5, 1, seed=1, repeat=0)


@pytest.mark.parametrize("repeat", [1, 3])
def test_token_canaries_trained_on_score_above_the_others(tok_dir, tmp_path, repeat):
    """A model trained (without DP) on text holding the included canaries gives their tokens a
    higher log-probability than the excluded canaries' tokens, which it never saw."""
    from transformers import AutoTokenizer, BertForMaskedLM

    canaries = draw_token_canaries("Patient MRN is {secret} .", 20, 1, seed=2, repeat=repeat)
    canary_tokenizer(AutoTokenizer.from_pretrained(str(tok_dir)), canaries).save_pretrained(tmp_path / "tok")
    lines = with_included_canaries(pd.DataFrame({"sample_id": range(60), "group_id": 0, "text": TEXTS}), canaries)
    train_mlm(lines["text"].tolist() * 3, tmp_path / "tok", tmp_path / "m", config={**TINY, "epochs": 20},
              device="cpu")  # fmt: skip
    scores = token_scores(BertForMaskedLM.from_pretrained(str(tmp_path / "m")),
                          AutoTokenizer.from_pretrained(str(tmp_path / "m")), canaries)  # fmt: skip
    included = canaries["included"].to_numpy()
    assert scores.shape == (20,) and scores[included].min() > scores[~included].max()


# ------------------------------------------------------------------ the study and the workflow


def load(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


def test_the_dp_group_needs_dp_audit(monkeypatch):
    monkeypatch.chdir(REPO)
    ci = Study.from_config(load("ci.yaml"), REPO)
    assert "dp" in ci.groups() and "table_dp" in ci.tables
    dp_outputs = set(ci.plan("dp").paths())
    assert dp_outputs <= set(ci.targets("dp")) and not dp_outputs & set(ci.targets())
    plan = audit_plan(ci)
    assert list(plan) == ["dp_none_ft", "dp_eps8", "dp_eps4", "dp_eps1"]
    assert plan["dp_eps1"]["experiment"] == "dp_eps1_long_mimic" and "min_k" in plan["dp_eps1"]["attacks"]
    assert plan["dp_eps8"]["reference_column"] == "reference_energy"  # the public model's masked energy
    # every DP model is audited, trained with the gradient canaries and the canaries' tokenizer; its
    # check job's mark is what `snakemake dp` asks for; the other models train as before
    assert dp_targets(ci) == ["dp_none_ft", "dp_eps8", "dp_eps4", "dp_eps1"] == one_run_targets(ci)
    assert {dp_audit_outputs(ci, t)["passed"] for t in dp_targets(ci)} <= set(ci.targets("dp"))
    assert ci.training_spec("dp_eps8")["settings"]["dp"]["canaries"] == {"count": 500, "sentinels": 64, "norm": 10.0,
                                                                         "seed": 0}  # fmt: skip
    assert ci.training_tokenizer("dp_eps8") == "results/ci/models/tokenizer_canaries"
    assert (
        ci.training_spec("base")["settings"]["dp"] is None
        and ci.training_tokenizer("base") == "results/ci/models/tokenizer"
    )
    # the faults overlay adds one faulty target of each kind, the milder at a claimed epsilon of 8, the others at 1,
    # audited but not attacked
    faulty = Study.from_config({**load("ci.yaml"), "models": {**load("ci.yaml")["models"],
                                                              **load("dp_faults.yaml")["models"]}}, REPO)  # fmt: skip
    added = [t for t in dp_targets(faulty) if t not in dp_targets(ci)]
    assert sorted(faulty.models[t]["dp"]["fault"] for t in added) == sorted(FAULTS)
    assert all(faulty.models[t]["dp"]["epsilon"] == (8 if faulty.models[t]["dp"]["fault"] in MILD else 1)
               for t in added) and list(audit_plan(faulty)) == list(plan)  # fmt: skip
    # without dp_audit (e.g. config/paper.yaml) the group and the experiments only it reads are left out
    config = load("ci.yaml")
    del config["dp_audit"]
    plain = Study.from_config(config, REPO)
    assert "dp" not in plain.groups() and "table_dp" not in plain.tables and dp_targets(plain) == []
    assert not [e for e in plain.experiments if e.startswith("dp_")] and "base_long_mimic" in plain.experiments


def test_snakemake_dp_plans_the_group_on_the_ci_config(tmp_path):
    workdir = copy_workflow(tmp_path)
    config = write_config(workdir, "ci.yaml")
    jobs = planned_jobs(workdir, "dp", "--configfile", str(config))
    outputs = " ".join(out for _, out in jobs)
    for name in ("dp/bounds.csv", "dp/bounds.md", "dp/bounds_by_attack.csv", "dp/privacy_utility.png",
                 "tables/table_dp.md", "findings_dp.md", "models/dp_eps1", "models/dp_none_ft", "dp/one_run.md",
                 "dp/findings.md", "dp/checks.csv", "dp/audit/dp_eps8.json", "dp/audit/dp_none_ft.passed",
                 "corpus/train_dp_private.parquet", "models/tokenizer_canaries"):  # fmt: skip
        assert f"results/ci/{name}" in outputs, name
    assert not any(rule == "train_model" and "models/base" in out for rule, out in jobs)


def test_the_default_dp_targets_fine_tune_the_public_reference_on_the_dp_private_text(tmp_path):
    """The default config's DP targets (docs/dp.md) start from the general reference and train on
    the DP private text (the target's text, dp_corpus.patients more patients, the canaries): the
    dry run's train_model jobs take both as inputs."""
    workdir = copy_workflow(tmp_path)
    names = ["dp_none_ft", "dp_eps8", "dp_eps4", "dp_eps1"]
    targets = [f"results/default/models/{name}" for name in names]
    dry = run_snakemake(workdir, "-n", "--configfile", "config/config.yaml", "--", *targets)
    inputs = {}  # output -> input line of each planned train_model job
    for block in dry.stdout.split("rule train_model:")[1:]:
        fields = dict(line.strip().split(": ", 1) for line in block.splitlines()[1:4] if ": " in line)
        inputs[fields["output"]] = fields["input"].split(", ")
    for target in targets:
        assert "results/default/models/ref_general" in inputs[target]
        assert "results/default/corpus/train_dp_private.parquet" in inputs[target]
    assert "rule dp_private_text:" in dry.stdout and "rule one_run_canaries:" in dry.stdout


@pytest.mark.slow
@pytest.mark.workflow
def test_snakemake_dp_on_the_ci_config_and_its_faults(ci_run):
    """`snakemake dp --keep-going` on config/ci.yaml with config/dp_faults.yaml: every faulty target's
    check job fails in one line naming it, what caught it and its accountant epsilon; the correct
    targets pass, their bounds below their accountant epsilon, the white-box bound at epsilon 8
    positive; the tables list every target with its recorded fault. (The no_noise target is the
    check that config/ci.yaml alone fails a no_noise model at epsilon 1: the overlay adds models
    only, and its white-box bound certifies more than 1.) It runs in the session's CI run, whose
    world, references and scores it reads as a user's `snakemake dp` after `snakemake` would; the
    reference pool and neighbour texts it builds serve the zoo's test after it, and the default
    targets stay up to date (checked at the end)."""
    workdir = ci_run
    config = ci_run / "test_config.yaml"
    faults = [
        "dp_fault_no_noise",
        "dp_fault_no_clipping",
        "dp_fault_noise_tenth",
        "dp_fault_wrong_sampling_rate",
        "dp_fault_sampled_batch_size",
        "dp_fault_noise_half",
        "dp_fault_clipping_double",
        "dp_fault_sampling_rate_double",
    ]
    result = run_snakemake(workdir, "--keep-going", "dp", "--configfile", str(config), "config/dp_faults.yaml",
                           check=False, timeout=3600)  # fmt: skip
    output = result.stdout + result.stderr
    # each check job's one line; with two jobs at once another job's output may precede it on its line
    errors = [line[line.index("mlmia: error:") :] for line in output.splitlines() if "mlmia: error:" in line]
    assert result.returncode != 0 and len(errors) == len(faults), output[-3000:]
    by_target = {name: [line for line in errors if f"target '{name}' " in line] for name in faults}
    assert all(len(lines) == 1 for lines in by_target.values()), errors
    for name, check in [("dp_fault_no_noise", "the noise check"), ("dp_fault_noise_tenth", "the noise check"),
                        ("dp_fault_no_clipping", "the white-box one-run bound"),
                        ("dp_fault_wrong_sampling_rate", "the Poisson batch check"),
                        ("dp_fault_sampled_batch_size", "the noise by batch check"),
                        # the milder faults, claimed at epsilon 8: what catches them in every one of 100
                        # simulated runs at this shape (q = 1/13, 26 steps, 500 canaries; bench/dp_power.py)
                        ("dp_fault_noise_half", "the noise check"), ("dp_fault_noise_half", "the white-box mechanism fit"),
                        ("dp_fault_clipping_double", "the white-box mechanism fit"),
                        ("dp_fault_sampling_rate_double", "the Poisson batch check"),
                        ("dp_fault_sampling_rate_double", "the white-box mechanism fit")]:  # fmt: skip
        line = by_target[name][0]
        claim = "(accountant's eps = 7.9" if name.endswith(("_half", "_double")) else "(accountant's eps = 0.9"
        assert check in line and claim in line and f"fault '{name[9:]}'" in line, line
    no_noise = by_target["dp_fault_no_noise"][0]
    assert "the white-box one-run bound eps >= " in no_noise
    assert float(no_noise.split("the white-box one-run bound eps >= ")[1].split()[0]) > 1.0
    run = workdir / "results" / "ci"
    correct = ["dp_none_ft", "dp_eps8", "dp_eps4", "dp_eps1"]
    for name in correct:
        assert (run / "dp" / "audit" / f"{name}.passed").exists(), name
    assert not any((run / "dp" / "audit" / f"{name}.passed").exists() for name in faults)
    summary = pd.read_csv(run / "dp" / "bounds.csv")
    assert list(summary["target"]) == [*correct, *faults]
    assert list(summary["verdict"]) == ["passes"] * 4 + ["fails"] * len(faults)
    assert list(summary["fault"].fillna("none")) == ["none"] * 4 + [name[9:] for name in faults]
    private = summary[summary["target"].isin(correct[1:])]
    assert np.allclose(private["accountant_epsilon"], [8, 4, 1], rtol=0.02)
    for column in ("epsilon_lb", "whitebox_lb", "blackbox_lb"):
        assert (private[column] <= private["accountant_epsilon"]).all(), column
    eps8 = summary.set_index("target").loc["dp_eps8"]
    assert 0 < eps8["whitebox_lb"] < 8 and eps8["checks"] == "passed"
    assert (summary.loc[summary["target"].isin(correct), "pseudo_perplexity"] > 1).all()
    by_attack = pd.read_csv(run / "dp" / "bounds_by_attack.csv")
    assert len(by_attack) == 4 * 15  # every attack of the zoo against every attacked target
    assert {"lira_online", "rmia", "neighbourhood", "pll_word_l2r", "blind"} <= set(by_attack["attack"])
    # the one-run audits: white-box and black-box for each target; 40 token canaries, the included ones
    # in every DP target's training text once each, the tokens of all 40 in its vocabulary
    one_run = pd.read_csv(run / "dp" / "one_run.csv")
    assert sorted(one_run["audit"].unique()) == ["black-box", "white-box"] and len(one_run) == 2 * (4 + len(faults))
    black = one_run[one_run["audit"] == "black-box"]
    trained = pd.read_parquet(run / "corpus" / "train_dp_private.parquet")
    assert (black.canaries == 40).all() and (black.inserted == trained.group_id.str.startswith("one_run_").sum()).all()
    assert (one_run[one_run["audit"] == "white-box"].guesses == 200).all()
    info = json.loads((run / "models" / "dp_eps8" / "train_info.json").read_text())
    assert info["dp"]["canaries"]["count"] == 500 and info["dp"]["fault"] is None
    faulty = json.loads((run / "models" / "dp_fault_no_clipping" / "train_info.json").read_text())
    assert faulty["dp"]["fault"] == "no_clipping" and 0.98 < faulty["dp"]["epsilon"] <= 1.0 + 1e-6
    checks = pd.read_csv(run / "dp" / "checks.csv")
    assert len(checks) == 3 * (4 + len(faults)) and not checks.set_index("target").loc["dp_fault_no_noise"].query("check == 'noise'")[
        "passed"].any()  # fmt: skip
    for name in ("dp/bounds.md", "dp/one_run.md", "dp/findings.md", "dp/privacy_utility.png", "tables/table_dp.md",
                 "findings_dp.md"):  # fmt: skip
        assert (run / name).stat().st_size > 0, name
    findings = pd.read_csv(run / "dp" / "findings.csv")
    caught = findings[findings["finding"] == "faulty_caught"]
    assert sorted(caught["scope"]) == sorted(faults) and caught["holds"].all()
    assert findings.loc[findings["finding"] == "correct_passes", "holds"].all()
    # a bound above the accountant's epsilon fails the run, in one line naming the target, the bound and
    # its numbers: dp_eps8's white-box bound (0.4 here) against an accountant's epsilon forged to 0.01.
    # (An attack bound cannot fire at this size: 12 members against 8 non-members in the bound's half,
    # at confidence 1 - 0.05 / 3 / 12, certify nothing even when separated perfectly; the attack path of
    # the failure rule is tested on a synthetic table, test_a_bound_above_the_accountant_epsilon_fails_loudly.)
    train_info = run / "models" / "dp_eps8" / "train_info.json"
    original = train_info.read_text()
    facts = json.loads(original)
    facts["dp"]["epsilon"] = 0.01
    train_info.write_text(json.dumps(facts))
    try:
        result = run_snakemake(workdir, "--configfile", str(config), "--forcerun", "dp_audit", "--",
                               "results/ci/dp/audit/dp_eps8.passed", check=False)  # fmt: skip
    finally:
        # the session's run is shared with later tests (the audit cards read dp_eps8's audit): the true
        # train_info.json back, and its audit made again from it (the model's directory, the audit's
        # input, keeps its time when a file in it is rewritten, so nothing would rerun it)
        train_info.write_text(original)
        run_snakemake(workdir, "--configfile", str(config), "--forcerun", "dp_audit", "--",
                      "results/ci/dp/audit/dp_eps8.passed")  # fmt: skip
    assert result.returncode != 0
    errors = [line[line.index("mlmia: error:") :] for line in (result.stdout + result.stderr).splitlines()
              if "mlmia: error:" in line]  # fmt: skip
    assert len(errors) == 1 and errors[0].startswith(
        "mlmia: error: DP audit: target 'dp_eps8' (accountant's eps = 0.0100"
    )
    assert f"the white-box one-run bound eps >= {eps8['whitebox_lb']:.4f} (f-DP; " in errors[0]
    # the DP group and its overlay added to the run; the default targets stay up to date
    assert not planned_jobs(workdir, "--configfile", str(config))


def test_the_families_of_bounds_share_the_confidence():
    # three families (white-box, black-box, attacks) each at 1 - 0.05 / 3 hold together at 0.95
    from mlmia.defences.audit import joint_confidence

    assert joint_confidence(0.95, 3) == pytest.approx(1 - 0.05 / 3)
    assert joint_confidence(0.95, 1) == pytest.approx(0.95) and joint_confidence(0.95, 0) == pytest.approx(0.95)


def test_ghost_clipping_needs_the_tied_word_embeddings_frozen_by_any_part_that_freezes_them():
    """check_dp_model (the trainer's and the config checks' rule): word_embeddings, embeddings and
    weights (every matrix, BitFit) each freeze BERT's word embeddings; nothing frozen does not."""
    from mlmia.defences.dp_settings import check_dp_model, dp_settings
    from mlmia.models.settings import TrainingSettings

    def cfg(freeze):
        out = TrainingSettings.from_entry(model_entry({"freeze": freeze, "dp": {"epsilon": 8, "clipping": "ghost"}}))
        return {**out.as_dict(), "dp": dp_settings(out.dp)}

    for freeze in (["word_embeddings"], ["embeddings"], ["weights"]):
        check_dp_model(cfg(freeze))
    with pytest.raises(UserError, match="ghost needs the tied word embeddings frozen"):
        check_dp_model(cfg([]))
