"""Masked diffusion language models in the zoo: SAMA against its authors' definition, the
progressive and ELBO energies, the masked-diffusion objective, and the references trained as the
diffusion target is."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import yaml
from training_helpers import train_model, training_settings
from workflow_helpers import REPO

from mlmia.attacks import get_attack
from mlmia.attacks.sama import sama_score
from mlmia.core.errors import UserError
from mlmia.core.keys import stable_key
from mlmia.data.splits import with_aliases
from mlmia.models.loading import load_mlm
from mlmia.models.objectives import check_dp_objective, make_objective
from mlmia.models.objectives.mdlm import EPS, Mdlm
from mlmia.scoring.energy import score_samples, score_samples_oracle
from mlmia.scoring.masks import mask_patterns
from mlmia.scoring.schedules import (
    check_schedule,
    elbo_patterns,
    elbo_ratios,
    progressive_counts,
    progressive_patterns,
)
from mlmia.scoring.settings import ScoringSettings
from mlmia.study.plans.base import resources as plan_resources
from mlmia.study.study import Study
from mlmia.terms.schema import defaults

SAMA = {"steps": 4, "min_fraction": 0.05, "max_fraction": 0.5}


# ------------------------------------------------------------------ SAMA against its authors' definition


def reference_new_positions(length: int, steps: int, low: float, high: float, rng) -> list[np.ndarray]:
    """The positions each step adds, as Stry233/SAMA's ``_compute_batch_scores`` chooses them for one
    sample (linear schedule): desired_total = max(1, int(round(frac * L))), frac = low + (high - low)
    (step + 1) / (steps + 1); to_add = desired - current, drawn uniformly among the unmasked."""
    masked = np.zeros(length, dtype=bool)
    out = []
    for step in range(steps):
        frac = low + (high - low) * (step + 1) / (steps + 1)
        to_add = max(0, max(1, int(round(frac * length))) - int(masked.sum()))
        candidates = np.flatnonzero(~masked)
        chosen = candidates[rng.permutation(candidates.size)[: min(to_add, candidates.size)]]
        masked[chosen] = True
        out.append(np.sort(chosen))
    return out


def reference_sama(ce_target, ce_reference, new_positions, subset_size, num_subsets, rng) -> float:
    """SAMA's score of one sample, written from Stry233/SAMA ``attack/attacks/sama.py``
    (``_compute_batch_scores`` for a batch of one, ``_subset_binary_comparison_with_metadata``).

    `ce_target[s]`, `ce_reference[s]`: each model's cross-entropy at every position in step s's
    forward pass (the reference's ``ce``, ``ce_r``); `new_positions[s]`: the positions step s adds
    (its ``new_mask``). As there: a step that adds nothing is skipped; the loss buffers keep each
    position's loss from the step that first masked it; each step draws `num_subsets` subsets of
    min(subset_size, m) of the m masked tokens with ``rng.choice(m, size, replace=False)`` and
    scores the share with the reference's summed loss strictly above the target's; the step
    scores are averaged with weights 1/(i + 1), normalised; no step: 0.0. One documented
    difference: the masked tokens are listed by (first step, position), ours's order, where the
    reference lists them by position (``torch.where``)."""
    length = ce_target.shape[1]
    cumulative = np.zeros(length, dtype=bool)
    target_buffer, reference_buffer = np.zeros(length), np.zeros(length)
    first = np.full(length, -1)
    step_scores = []
    for step, new in enumerate(new_positions):
        new_mask = np.zeros(length, dtype=bool)
        new_mask[new] = True
        if not new_mask.any():
            continue
        cumulative |= new_mask
        target_buffer[new_mask] = ce_target[step][new_mask]
        reference_buffer[new_mask] = ce_reference[step][new_mask]
        first[new_mask] = step
        masked = sorted(np.flatnonzero(cumulative), key=lambda p: (first[p], p))
        t_losses, r_losses = target_buffer[masked], reference_buffer[masked]
        m = len(masked)
        s = min(min(subset_size, m), m)
        idx = np.vstack([rng.choice(m, size=s, replace=False) for _ in range(num_subsets)]).astype(np.int64)
        step_scores.append(float((r_losses[idx].sum(axis=1) > t_losses[idx].sum(axis=1)).mean()))
    if not step_scores:
        return 0.0
    weights = 1.0 / (np.arange(len(step_scores)) + 1)
    return float(np.average(step_scores, weights=weights / weights.sum()))


def as_scores(ce, new_positions):
    """What the progressive scorer writes for one model: the log-probabilities of each step's newly
    masked tokens from that step's pass, in step order, and the step sizes (steps adding nothing left out)."""
    kept = [(step, new) for step, new in enumerate(new_positions) if new.size]
    return [float(-ce[step][p]) for step, new in kept for p in new], [int(new.size) for _, new in kept]


@pytest.mark.parametrize("subset_size, num_subsets", [(8, 128), (3, 17)])
def test_sama_is_its_authors_definition_on_fixed_losses_and_masks(subset_size, num_subsets):
    data = np.random.default_rng(7)
    rows = []
    for i, length in enumerate([5, 12, 40, 57, 23]):  # 5 tokens: two of the four steps add nothing
        new = reference_new_positions(length, 4, 0.05, 0.5, data)
        ce_t, ce_r = data.exponential(2.0, (4, length)), data.exponential(2.0, (4, length))
        ce_r[:, data.random(length) < 0.3] *= 0.2  # ties are rare but the sign must vary
        sid = f"p{i}.s{i}"
        expected = reference_sama(
            ce_t, ce_r, new, subset_size, num_subsets, np.random.default_rng([3, stable_key(sid)])
        )
        t_logp, sizes = as_scores(ce_t, new)
        r_logp, _ = as_scores(ce_r, new)
        rows.append({"sample_id": sid, "group_id": f"p{i}", "target_progressive_token_logp": t_logp,
                     "reference_progressive_token_logp": r_logp, "target_progressive_pattern_sizes": sizes,
                     "reference_progressive_pattern_sizes": sizes, "expected": expected})  # fmt: skip
    table = pd.DataFrame(rows)
    attack = get_attack("sama", {"subset_size": subset_size, "num_subsets": num_subsets, "seed": 3})
    got = attack.statistic(table)
    np.testing.assert_allclose(got, table["expected"], rtol=0, atol=1e-9)
    assert not attack.lower_is_member and len(set(np.round(got, 6))) > 2  # higher = member; the scores vary
    # row-local: a sample's score does not depend on the others (the reference's shared generator would)
    np.testing.assert_allclose(attack.statistic(table.iloc[[3, 1]]), got[[3, 1]], atol=0)


def test_sama_by_hand():
    # step 0 masks token 0 (target loss 1, reference 2: the reference is above, 1.0); step 1 adds
    # token 1 (3 and 2): the only subset of size 2 sums 4 against 4, not above (0.0); weights 1, 1/2
    table = pd.DataFrame({
        "sample_id": ["a"], "target_progressive_token_logp": [[-1.0, -3.0]],
        "reference_progressive_token_logp": [[-2.0, -2.0]], "target_progressive_pattern_sizes": [[1, 1]],
        "reference_progressive_pattern_sizes": [[1, 1]],
    })  # fmt: skip
    assert get_attack("sama").statistic(table)[0] == pytest.approx(2 / 3, abs=1e-12)
    assert sama_score(np.array([1.0]), np.array([0.5]), [1], 8, 4, np.random.default_rng(0)) == 0.0


def test_sama_refuses_masks_that_differ_and_losses_that_do_not_fit_in_one_line():
    table = pd.DataFrame({
        "sample_id": ["s0"], "target_progressive_token_logp": [[-1.0, -2.0, -3.0]],
        "reference_progressive_token_logp": [[-1.0, -2.0, -3.0]], "target_progressive_pattern_sizes": [[1, 2]],
        "reference_progressive_pattern_sizes": [[2, 1]],
    })  # fmt: skip
    attack = get_attack("sama")
    for frame, message in (
        (table, "scored under different masking steps"),
        (table.assign(reference_progressive_pattern_sizes=[[1, 1]], target_progressive_pattern_sizes=[[1, 1]]),
         "do not make the masking steps"),
    ):  # fmt: skip
        with pytest.raises(UserError, match=message) as info:
            attack.statistic(frame)
        assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="attacks.sama.subset_size: an integer >= 1"):
        get_attack("sama", {"subset_size": 0}).statistic(table)


def test_sama_through_both_protocols_keeps_target_and_reference_of_one_sample_together():
    # the published protocol pairs one member's target column with another's reference column; a
    # token list against another sample's has no meaning, so SAMA keeps its matched scores there
    from mlmia.attacks.protocols import MetricSettings, attack_metrics, point_estimates

    data = np.random.default_rng(1)
    roles = ["member"] * 12 + ["nonmember"] * 12 + ["population"] * 6
    rows = []
    for i, role in enumerate(roles):
        sizes = [int(x) for x in data.integers(1, 5, 4)]
        n, member = sum(sizes), role == "member"
        rows.append({"sample_id": f"s{i}", "group_id": f"p{i}", "role": role, "source": "a",
                     "target_progressive_token_logp": list(-data.exponential(1.0 if member else 2.0, n)),
                     "reference_progressive_token_logp": list(-data.exponential(2.0, n)),
                     "target_progressive_pattern_sizes": sizes, "reference_progressive_pattern_sizes": sizes})  # fmt: skip
    table = pd.DataFrame(rows)
    for level in ("sample", "patient"):
        settings = MetricSettings(
            protocols=("published", "corrected"), attacks=("sama",), alphas=(0.1,), thresholds=("population",),
            fprs=(0.1,), draws=3, seed=0, bootstrap=5, level=level, attack_params={"sama": {"num_subsets": 16}},
        )  # fmt: skip
        metrics = point_estimates(attack_metrics(table, settings))
        auc = metrics[metrics.metric == "auc"].set_index("protocol")["value"]
        assert auc["corrected"] > 0.7 and auc["published"] > 0.7, level


def test_sama_degenerates_on_short_samples():
    # SAMA's default schedule: at most 8 tokens masked up to 20 tokens (every subset is the whole
    # mask), a real choice of subsets from the second step at 40 tokens
    assert max(progressive_counts(20, **SAMA)) == 8 and progressive_counts(10, **SAMA) == [1, 2, 3, 4]
    assert progressive_counts(40, **SAMA) == [6, 9, 13, 16] and progressive_counts(60, **SAMA) == [8, 14, 19, 25]


# ------------------------------------------------------------------ the schedules


def test_progressive_masks_are_nested_keyed_and_skip_empty_steps():
    for length in (5, 12, 40):
        scored, before = progressive_patterns(0, "s1", length, SAMA)
        counts = sorted(set(progressive_counts(length, **SAMA)))
        assert [len(p) for p in scored] == np.diff([0, *counts]).tolist()  # steps adding nothing are left out
        for step, (new, old) in enumerate(zip(scored, before)):
            assert set(old) == {int(p) for q in scored[:step] for p in q} and not set(new) & set(old)
        assert len(set(np.concatenate(scored).tolist())) == counts[-1] <= length
    # Python's round, half to even: 0.14 * 25 = 3.5 -> 4, 0.23 * 50 = 11.5 -> 12; fractions at (s + 1) / (steps + 1)
    assert progressive_counts(25, **SAMA)[0] == 4 and progressive_counts(50, **SAMA)[1] == 12
    first = progressive_patterns(0, "s1", 40, SAMA)
    assert all(np.array_equal(a, b) for a, b in zip(first[0], progressive_patterns(0, "s1", 40, SAMA)[0]))
    other = progressive_patterns(1, "s1", 40, SAMA)[0]
    assert not all(np.array_equal(a, b) for a, b in zip(first[0], other))
    # a stream of its own: the masked energy's patterns are what they were
    assert mask_patterns(0, "s1", 40, 3, "ceil").tolist() != [sorted(first[0][0].tolist())] * 3


def test_elbo_ratios_are_midpoints_and_patterns_mask_exactly_round_t_T():
    np.testing.assert_allclose(elbo_ratios(5), [0.1, 0.3, 0.5, 0.7, 0.9])
    patterns = elbo_patterns(0, "s1", 12, {"ratios": 5, "patterns": 2})
    assert [len(p) for p in patterns] == [1, 1, 4, 4, 6, 6, 8, 8, 11, 11]
    assert all(len(set(p.tolist())) == len(p) and p.max() < 12 for p in patterns)
    assert not np.array_equal(patterns[8], patterns[9])  # the two patterns of a ratio are drawn apart
    with pytest.raises(UserError, match="scoring.elbo: unknown key"):
        check_schedule("elbo", {"ratio": 3})
    with pytest.raises(UserError, match="min_fraction <= max_fraction"):
        check_schedule("progressive", {**defaults("scoring", "progressive"), "min_fraction": 0.6})
    with pytest.raises(UserError, match="scoring.progressive: missing key"):  # a schedule is given whole
        check_schedule("progressive", {"min_fraction": 0.05})
    with pytest.raises(UserError, match="takes no schedule"):
        check_schedule("masked", {"steps": 2})


def test_only_the_new_kinds_carry_a_schedule_in_their_params():
    # a validated section: every key given (the schema's defaults filled in)
    scoring = {**defaults("scoring"), "patterns": 4, "seed": 0}
    scoring["progressive"]["steps"] = 3
    # the other kinds' params hold no schedule key; the device and the batch size are the rule's
    # resources, not params (changing them reruns nothing)
    assert ScoringSettings.from_config(scoring, "normalized").as_params() == {
        "patterns": 1, "seed": 0, "reduction": "mean", "mask_count": "ceil", "precision": "auto", "truncate": False,
    }  # fmt: skip
    assert "schedule" not in ScoringSettings.from_config(scoring).as_params()
    progressive = ScoringSettings.from_config(scoring, "progressive")
    assert progressive.as_params()["schedule"] == {"steps": 3, "min_fraction": 0.05, "max_fraction": 0.5}
    assert progressive.score_arguments()["schedule"]["steps"] == 3 and progressive.patterns == 1
    # the rule's params and resources give the settings back whole (a kind without a schedule: None,
    # passed as such; the automatic batch size, null, is the resource "auto")
    job = plan_resources({"scoring": scoring}, "scoring")  # what the rule passes as its resources
    assert (job.device, job.batch_size) == ("auto", "auto")
    assert ScoringSettings.from_params(progressive.as_params(), job) == progressive
    normalized = ScoringSettings.from_config(scoring, "normalized")
    assert ScoringSettings.from_params(normalized.as_params(), job).score_arguments()["schedule"] is None
    # a set batch size and device come back as they were set, with the same params as before
    on_cuda = {**scoring, "device": "cuda", "batch_size": 16}
    cuda, job = ScoringSettings.from_config(on_cuda), plan_resources({"scoring": on_cuda}, "scoring")
    assert (job.device, job.batch_size) == ("cuda", 16)
    assert cuda.as_params() == ScoringSettings.from_config(scoring).as_params()
    assert ScoringSettings.from_params(cuda.as_params(), job) == cuda and cuda.score_arguments()["batch_size"] == 16
    assert ScoringSettings.from_config(scoring, "elbo").schedule == {"ratios": 5, "patterns": 2}


# ------------------------------------------------------------------ the scorer


TEXTS = ["patient admitted with chest pain and shortness of breath history hypertension diabetes",
         "denies fever cough nausea", "aspirin daily oral tablet given", "the a"]  # fmt: skip


@pytest.fixture(scope="module")
def tiny(tiny_bert_dir):
    model, tokenizer = load_mlm(str(tiny_bert_dir), "cpu")
    return model, tokenizer, pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(TEXTS))], "text": TEXTS})


def brute_force(model, tokenizer, text, masked, scored):
    """Cross-entropies at `scored` content positions with `masked` content positions masked, one full forward."""
    ids = tokenizer(text, return_tensors="pt")["input_ids"][0]
    x = ids.clone()
    x[torch.as_tensor(masked, dtype=torch.long) + 1] = tokenizer.mask_token_id  # content starts after [CLS]
    with torch.no_grad():
        logits = model(x[None]).logits[0].float()
    pos = torch.as_tensor(scored, dtype=torch.long) + 1
    return F.cross_entropy(logits[pos], ids[pos], reduction="none").numpy()


def test_progressive_scores_are_samas_first_masked_losses(tiny):
    model, tokenizer, samples = tiny
    scores = score_samples(model, tokenizer, samples, energy="progressive", seed=0, token_budget=64)
    oracle = score_samples_oracle(model, tokenizer, samples, energy="progressive", seed=0)
    for sid, text, row, slow in zip(samples.sample_id, samples.text, scores.itertuples(), oracle.itertuples()):
        scored, before = progressive_patterns(0, sid, row.n_tokens, SAMA)
        expected = np.concatenate([brute_force(model, tokenizer, text, np.r_[old, new], new)
                                   for new, old in zip(scored, before)])  # fmt: skip
        np.testing.assert_allclose(-np.asarray(row.token_logp), expected, atol=2e-5)
        assert row.pattern_sizes == [len(p) for p in scored] and row.patterns == len(scored)
        assert row.n_masked == sum(row.pattern_sizes) == len(row.token_logp)
        np.testing.assert_allclose(row.per_pattern, [ce.mean() for ce in np.split(expected, np.cumsum(
            row.pattern_sizes)[:-1])], atol=2e-5)  # fmt: skip
        np.testing.assert_allclose(row.energy, slow.energy, atol=1e-5)
    assert list(scores.columns[-1:]) == ["pattern_sizes"]


def test_elbo_energy_is_the_masked_cross_entropy_over_t_per_token(tiny):
    model, tokenizer, samples = tiny
    schedule = {"ratios": 3, "patterns": 2}
    mean = score_samples(model, tokenizer, samples, energy="elbo", schedule=schedule, token_budget=64)
    total = score_samples_oracle(model, tokenizer, samples, energy="elbo", schedule=schedule, reduction="sum")
    for sid, text, row, per_sequence in zip(samples.sample_id, samples.text, mean.itertuples(), total.itertuples()):
        values = []
        for pattern in elbo_patterns(0, sid, row.n_tokens, schedule):
            t = len(pattern) / row.n_tokens  # the ratio the pattern realises
            values.append(brute_force(model, tokenizer, text, pattern, pattern).sum() / t / row.n_tokens)
        np.testing.assert_allclose(row.per_pattern, values, atol=2e-5)
        assert row.energy == pytest.approx(np.mean(values), abs=2e-5) and row.patterns == 6
        np.testing.assert_allclose(per_sequence.per_pattern, np.asarray(values) * row.n_tokens, rtol=2e-5)


# ------------------------------------------------------------------ the masked-diffusion objective


def test_mdlm_masks_at_one_ratio_per_row_and_weights_by_one_over_t_n():
    objective = Mdlm(mask_token_id=4)
    ids = torch.randint(5, 50, (4000, 30))
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    special[:2000, 20:] = True  # padding: half the rows have 18 tokens, half 28
    batch = objective.mask(ids, special, torch.Generator().manual_seed(0))
    chosen = batch.labels != -100
    assert not (chosen & special).any() and (batch.input_ids[chosen] == 4).all()
    assert torch.equal(batch.input_ids[~chosen], ids[~chosen]) and torch.equal(batch.labels[chosen], ids[chosen])
    n = (~special).sum(1, keepdim=True).float()
    t = 1.0 / (batch.weights * n)  # each masked position carries 1 / (t n), the same t along the row
    rows = chosen.any(1)
    per_row = torch.where(chosen, t, torch.nan)
    spread = (per_row.nan_to_num(0).amax(1) - per_row.nan_to_num(1e9).amin(1))[rows]
    assert float(spread.abs().max()) < 1e-3 and (batch.weights[~chosen] == 0).all()
    ratio = torch.nanmean(per_row, 1)[rows]
    assert EPS <= float(ratio.min()) and float(ratio.max()) < 1 and abs(float(ratio.mean()) - 0.5) < 0.02
    # the masked share follows t: E[share | t] = t
    share = (chosen.sum(1) / n[:, 0])[rows]
    assert abs(float((share - ratio).mean())) < 0.01
    # the loss: the weighted cross-entropy summed per row, the rows' mean; DP's per-row losses agree
    logits = torch.randn(int(chosen.sum()), 50)
    loss = objective.loss(logits, batch.labels[chosen], batch.weights[chosen], rows=len(ids))
    ce = F.cross_entropy(logits, batch.labels[chosen], reduction="none")
    assert float(loss) == pytest.approx(float((ce * batch.weights[chosen]).sum() / len(ids)), rel=1e-6)
    padded = torch.full((len(ids), 30, 50), 0.0)
    padded[chosen] = logits
    assert float(objective.row_loss(padded, batch.labels, batch.weights).mean()) == pytest.approx(float(loss), rel=1e-5)


def test_dp_with_the_masked_diffusion_objective_is_refused_in_one_line(tmp_path):
    for call in (
        lambda: training_settings({"objective": "mdlm", "dp": {"epsilon": 8}}),
        lambda: train_model(["a b c"], tmp_path, tmp_path / "m", config={"objective": "mdlm", "dp": {"epsilon": 8}}),
        lambda: check_dp_objective("mdlm"),
    ):
        with pytest.raises(UserError, match="dp is not offered with objective mdlm yet") as info:
            call()
        assert "\n" not in str(info.value)
    check_dp_objective("bert_mlm")  # the default objective trains with DP as before
    assert training_settings({"objective": "mdlm"}).objective == "mdlm"


def test_a_masked_diffusion_model_trains_and_loads_as_a_masked_lm(tmp_path):
    from mlmia.models.tokenizer import train_tokenizer

    texts = [f"patient {i} was given {i % 7} mg of drug {i % 5} daily" for i in range(40)]
    train_tokenizer(texts, tmp_path / "tok", vocab_size=120, min_frequency=1, min_patients=None)
    config = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32, "epochs": 2,
              "batch_size": 8, "objective": "mdlm"}  # fmt: skip
    info = train_model(texts, tmp_path / "tok", tmp_path / "m", config=config, threads=1, device="cpu")
    assert info["config"]["objective"] == "mdlm" and np.isfinite(info["final_loss"]) and info["steps"] == 10
    model, tokenizer = load_mlm(str(tmp_path / "m"), "cpu")  # bring your own: any masked LM checkpoint
    assert make_objective({"objective": "mdlm"}, tokenizer).mask_token_id == tokenizer.mask_token_id
    scores = score_samples(model, tokenizer, pd.DataFrame({"sample_id": ["a"], "text": texts[:1]}), energy="elbo")
    assert np.isfinite(scores.energy).all()


# ------------------------------------------------------------------ the study: references trained as the target


def load(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


def test_a_diffusion_target_reads_a_pool_trained_with_its_objective_on_the_same_splits(monkeypatch):
    monkeypatch.chdir(REPO)
    s = Study.from_config(load("ci.yaml"), REPO)
    own = [f"pool_ref_{i}" for i in range(4)]
    mdlm = [f"pool_ref_mdlm_{i}" for i in range(4)]
    assert s.reference_pool() == own and s.reference_models() == own + mdlm
    assert s.experiment_models("zoo_long_mimic")["references"] == own
    assert s.experiment_models("zoo_mdlm_long_mimic")["references"] == mdlm
    assert s.experiment_models("dp_eps8_long_mimic")["references"] == own
    spec, base = s.training_spec("pool_ref_mdlm_2"), s.training_spec("pool_ref_2")
    assert spec["text"] == base["text"] == "results/ci/references/pool_ref_2.text.parquet"
    assert spec["settings"] == {**base["settings"], "objective": "mdlm"} and base["settings"]["objective"] == "bert_mlm"
    assert set(s.trained_models()) >= {"base_mdlm", "ref_domain_mdlm", *mdlm}
    assert s.score_inputs("zoo_mdlm_long_mimic")["target__progressive"] == ("clinical", "base_mdlm", "progressive")
    assert s.score_inputs("zoo_mdlm_long_mimic")["references.3__masked"] == ("clinical", "pool_ref_mdlm_3", "masked")
    splits = pd.DataFrame({"sample_id": ["a", "a", "b"], "reference": ["pool_ref_0", "pool_ref_1", "pool_ref_0"],
                           "in": [True, False, False]})  # fmt: skip
    aliased = with_aliases(splits, {"pool_ref_mdlm_0": "pool_ref_0"})
    assert aliased[aliased.reference == "pool_ref_mdlm_0"][["sample_id", "in"]].values.tolist() == [
        ["a", True],
        ["b", False],
    ]


def test_the_zoo_table_and_findings_read_both_targets_and_a_setup_without_one_leaves_it_out(monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)
    s = Study.from_config(load("config.yaml"), REPO)
    columns = [c["experiment"] for c in s.tables["table_zoo_full"]["columns"]]
    assert columns[:4] == ["zoo_long_mimic", "zoo_long_i2b2", "zoo_short_mimic", "zoo_short_i2b2"]
    assert columns[4:] == [c.replace("zoo_", "zoo_mdlm_") for c in columns[:4]]
    rows = s.rows("table_zoo_full")
    assert rows[: len(s.row_sets["zoo_full"])] == s.row_sets["zoo_full"]  # the row set named among the rows
    assert {r["attack"] for r in rows} >= {"sama", "likelihood_ratio_elbo"}
    assert all(r.get("versus") == "likelihood_ratio" for r in rows if r["attack"] in ("sama", "likelihood_ratio_elbo"))
    assert "sama" not in {r["attack"] for r in s.rows("table_dp")}  # the DP table keeps its rows
    checks = s.finding_checks("zoo")
    lost = [c for c in checks if c["finding"] == "sama_loses_power_on_mdlm"]
    assert [(c["compare"]["experiment"], c["against"]["experiment"]) for c in lost] == [
        ("zoo_long_mimic", "zoo_mdlm_long_mimic"), ("zoo_long_i2b2", "zoo_mdlm_long_i2b2")
    ]  # fmt: skip
    assert lost[0]["scope"] == "zoo_long_mimic vs zoo_mdlm_long_mimic" and lost[0]["kind"] == "comparison"
    assert sum(c["kind"] == "comparison" for c in checks) == 16 * 2  # every attack but blind, on 2 long columns
    assert sum(c["finding"] == "sama_beats_likelihood_ratio" for c in checks) == 4
    # a setup without the diffusion target (the paper's models) leaves its columns, panels and findings out
    config = load("config.yaml")
    for name in ("base_mdlm", "ref_domain_mdlm"):
        del config["models"][name]
    without = Study.from_config(copy.deepcopy(config), REPO)
    assert [c["experiment"] for c in without.tables["table_zoo_full"]["columns"]] == columns[:4]
    assert "fig_zoo_mdlm" not in without.figures and "zoo_mdlm_long_mimic" not in without.experiments
    assert not [c for c in without.finding_checks("zoo") if "mdlm" in str(c["scope"])]
    assert without.reference_models() == [f"pool_ref_{i}" for i in range(8)]
    spec = yaml.safe_load((REPO / "config" / "tables.yaml").read_text())
    spec["experiments"]["zoo_mdlm_long_mimic"]["optional"] = False  # not optional: refused as before
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(UserError, match="target 'base_mdlm' is not a configured model"):
        Study.from_config({**copy.deepcopy(config), "tables_spec": str(tmp_path / "spec.yaml")}, REPO)
