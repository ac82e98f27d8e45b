"""Canary exposure (Carlini et al., "The Secret Sharer", USENIX Security 2019): the canaries,
their insertion, the exact exposure against brute force, the extrapolated exposure's ordering,
the tables, and `snakemake canaries` end to end on the CI config."""

import math
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from training_helpers import train_mlm
from workflow_helpers import copy_workflow, edit_yaml, planned_jobs, run_snakemake, write_config

from mlmia.attacks.protocols import MetricSettings
from mlmia.core.errors import UserError
from mlmia.memorization.canaries import (
    checkpoint_exposures,
    digit_token_ids,
    draw_canaries,
    draw_candidates,
    exposure_markdown,
    exposure_summary,
    insertion_texts,
    plot_exposure,
    secret_log_probs,
    secret_positions,
    training_settings,
)
from mlmia.memorization.canary_membership import (
    membership_markdown,
    membership_metrics,
    membership_settings,
    membership_table,
)
from mlmia.models.loading import load_mlm
from mlmia.models.tokenizer import train_tokenizer
from mlmia.terms.schema import defaults

TEMPLATE = "Patient MRN is {secret} ."
#: the scorer's seed of the exposures' pseudo-log-likelihoods: the config's `scoring.seed` (the schema's)
SCORING_SEED = defaults("scoring")["seed"]
WORDS = (
    [f"Patient {i} was started on metoprolol {5 * (i % 7 + 1)} mg PO BID for atrial fibrillation." for i in range(30)]
    + [f"VS: T 98.{i % 10} BP 1{i % 9 + 1}0/80 HR {60 + i} RR 16 O2 sat 9{i % 10}% on RA." for i in range(30)]
    + ["Lungs: clear to auscultation bilaterally, no wheezes, rales, rhonchi.", "MRN 0 1 2 3 4 5 6 7 8 9"]
)
TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "batch_size": 16, "lr": 3e-3}
TINY |= {"warmup_ratio": 0.1, "seed": 0, "dropout": 0.0, "crop_prob": 0.0}

#: a full figure_style, as the schema fills it in
STYLE = {"context": "paper", "font_scale": 1.0, "width": 5.0, "height": 3.6, "dpi": 60}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("canary_tokenizer")
    train_tokenizer(WORDS, directory, vocab_size=300, min_frequency=1, min_patients=None)
    return directory


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    from mlmia.models.loading import load_tokenizer

    return load_tokenizer(tokenizer_dir)


# --------------------------------------------------------------------------- canaries


def test_canaries_are_deterministic_distinct_and_one_token_per_digit(tokenizer):
    canaries = draw_canaries(TEMPLATE, 6, [1, 2, 4], 3, 5, 4, seed=7)
    pd.testing.assert_frame_equal(canaries, draw_canaries(TEMPLATE, 6, [1, 2, 4], 3, 5, 4, seed=7))
    assert not canaries["secret"].equals(draw_canaries(TEMPLATE, 6, [1, 2, 4], 3, 5, 4, seed=8)["secret"])
    assert canaries["role"].value_counts().to_dict() == {"member": 9, "nonmember": 5, "population": 4}
    assert canaries.groupby("role")["repetitions"].apply(set).to_dict() == {
        "member": {1, 2, 4},
        "nonmember": {0},
        "population": {0},
    }
    assert (canaries[canaries.role == "member"].repetitions.value_counts() == 3).all()
    assert canaries["secret"].is_unique and canaries["canary_id"].is_unique
    assert canaries["secret"].str.fullmatch(r"\d{6}").all()
    assert canaries["text"].iloc[0] == "Patient MRN is " + " ".join(canaries["secret"].iloc[0]) + " ."
    # each digit is one token, with the digit's own id, at the position `secret_positions` gives
    ids, positions, symbols = secret_positions(tokenizer, canaries["text"], TEMPLATE, 6, canaries["canary_id"])
    digit_ids = digit_token_ids(tokenizer, TEMPLATE, 6)
    assert tokenizer.convert_ids_to_tokens([int(i) for i in digit_ids]) == list("0123456789")
    for row, where, code, secret in zip(ids, positions, symbols, canaries["secret"]):
        assert [int(c) for c in secret] == list(code)
        assert list(row[where]) == list(digit_ids[code])
    # candidates: distinct, never a canary's secret, deterministic
    candidates = draw_candidates(TEMPLATE, 6, 50, canaries["secret"], seed=7)
    assert candidates["secret"].is_unique and not set(candidates["secret"]) & set(canaries["secret"])
    pd.testing.assert_frame_equal(candidates, draw_candidates(TEMPLATE, 6, 50, canaries["secret"], seed=7))
    # a small space is drawn without replacement, also when it is nearly full
    small = draw_canaries(TEMPLATE, 1, [1, 2], 2, 3, 3, seed=0)
    assert sorted(small["secret"]) == list("0123456789")


@pytest.mark.parametrize("template", ["Patient MRN{secret} .", "Patient MRN is a{secret} ."])
def test_a_template_that_splits_or_merges_digits_is_refused_in_one_line(tokenizer, template):
    canaries = draw_canaries(template, 4, [1], 1, 1, 1, seed=0)
    with pytest.raises(UserError) as error:
        secret_positions(tokenizer, canaries["text"], template, 4, canaries["canary_id"])
    message = str(error.value)
    assert "\n" not in message and "one token" in message
    assert not any(" ".join(s) in message or s in message for s in canaries["secret"])


def test_bad_settings_are_one_line_errors():
    for call, text in [
        (lambda: draw_canaries("no placeholder", 4, [1], 1, 1, 1, 0), "exactly once"),
        (lambda: draw_canaries(TEMPLATE, 1, [1, 2], 3, 3, 3, 0), "do not fit"),
        (lambda: draw_canaries(TEMPLATE, 15, [1], 1, 1, 1, 0), "1..14"),
        (lambda: draw_canaries(TEMPLATE, 4, [2, 2], 1, 1, 1, 0), "distinct"),
        (lambda: training_settings(None, "nope", [3]), "not a configured model"),
    ]:
        with pytest.raises(UserError, match=text) as error:
            call()
        assert "\n" not in str(error.value)


def test_insertion_counts_and_training_settings():
    canaries = draw_canaries(TEMPLATE, 5, [1, 4, 16], 2, 3, 2, seed=1)
    inserted = pd.Series(insertion_texts(canaries)).value_counts()
    expected = canaries.set_index("text")["repetitions"]
    assert inserted.to_dict() == expected[expected > 0].to_dict()
    assert len(inserted) == 6 and inserted.sum() == 2 * (1 + 4 + 16)
    base = {"corpus": "target", "hidden_size": 32, "epochs": 60, "lr": 0.002}
    assert training_settings(base, "base", [1, 3, 2]) == {"hidden_size": 32, "epochs": 3, "lr": 0.002}
    with pytest.raises(UserError, match="path"):
        training_settings({"path": "somewhere"}, "hub", [1])


# --------------------------------------------------------------------------- checkpoints


def test_train_mlm_saves_checkpoints_without_changing_the_model(tokenizer_dir, tmp_path, one_torch_thread):
    texts = WORDS[:24]
    config = TINY | {"epochs": 3}
    plain = train_mlm(texts, tokenizer_dir, tmp_path / "plain", config=config)
    info = train_mlm(texts, tokenizer_dir, tmp_path / "saved", config=config, save_epochs=[1, 3])
    assert "checkpoints" not in plain and sorted(info["checkpoints"]) == [1, 3]
    final = {k: v for k, v in load_mlm(tmp_path / "plain", "cpu")[0].state_dict().items()}
    for name in ("saved", "saved/epoch_3"):
        state = load_mlm(tmp_path / name, "cpu")[0].state_dict()
        assert all(torch.equal(state[k], final[k]) for k in final)
    first = load_mlm(tmp_path / "saved/epoch_1", "cpu")[0].state_dict()
    assert not all(torch.equal(first[k], final[k]) for k in final)
    with pytest.raises(UserError, match="save_epochs"):
        train_mlm(texts, tokenizer_dir, tmp_path / "bad", config=config, save_epochs=[4])


# --------------------------------------------------------------------------- exposure


def test_exact_exposure_equals_brute_force_enumeration(tiny_bert_dir, one_torch_thread):
    """d = 3: every one of the 1000 candidate sentences is scored with its own masked forward
    pass (all three digits masked), the canary ranked among them by counting, and the rank
    compared with `exact_rank` on the per-position digit log-probabilities."""
    model, tokenizer = load_mlm(tiny_bert_dir, "cpu")
    template = "patient mrn is {secret} ."
    canaries = draw_canaries(template, 3, [1, 2], 3, 3, 2, seed=3)
    logp, symbols = secret_log_probs(model, tokenizer, canaries["text"], template, 3)
    assert logp.shape == (len(canaries), 3, 10)
    assert np.allclose(np.exp(logp).sum(axis=2), 1.0)  # renormalised over the 10 digits
    got = checkpoint_exposures(
        model, tokenizer, canaries, draw_candidates(template, 3, 50, canaries.secret, 0), template, 3, seed=SCORING_SEED
    )

    secrets = [f"{v:03d}" for v in range(1000)]
    texts = [template.replace("{secret}", " ".join(s)) for s in secrets]
    prefix = len(tokenizer.tokenize("patient mrn is"))
    where = torch.tensor([1 + prefix, 2 + prefix, 3 + prefix])
    digit_ids = torch.tensor(tokenizer.convert_tokens_to_ids(list("0123456789")))
    enc = tokenizer(texts, return_tensors="pt")
    assert (enc["input_ids"][:, where] == digit_ids[torch.tensor([[int(c) for c in s] for s in secrets])]).all()
    masked = enc["input_ids"].clone()
    masked[:, where] = tokenizer.mask_token_id
    with torch.no_grad():
        logits = model(input_ids=masked, attention_mask=enc["attention_mask"]).logits[:, where][..., digit_ids]
    per_position = torch.log_softmax(logits.double(), dim=-1).numpy()  # (1000, 3, 10)
    brute = np.array([sum(per_position[n, i, int(c)] for i, c in enumerate(s)) for n, s in enumerate(secrets)])
    for (_, canary), rank, exposure in zip(canaries.iterrows(), got["exact_rank"], got["exact_exposure"]):
        score = brute[int(canary["secret"])]
        expected = 1 + int(np.sum(brute > score + 1e-9))
        assert rank == expected
        assert exposure == pytest.approx(math.log2(1000) - math.log2(expected))
    assert (got["exact_ties"] == 0).all()


def test_extrapolated_exposure_orders_canaries_as_the_exact_one(tokenizer_dir, tmp_path, one_torch_thread):
    """A tiny model trained with canaries inserted 0, 1, 8 and 32 times: the skew-normal
    estimate from sampled candidates ranks the canaries as the exact exposure does, and both
    put the most repeated canaries on top."""
    from mlmia.models.loading import load_tokenizer

    canaries = draw_canaries(TEMPLATE, 3, [1, 8, 32], 2, 4, 2, seed=5)
    train_mlm(WORDS + insertion_texts(canaries), tokenizer_dir, tmp_path / "m", config=TINY | {"epochs": 25})
    model, tokenizer = load_mlm(tmp_path / "m", "cpu")
    assert load_tokenizer(tokenizer_dir).vocab == tokenizer.vocab
    candidates = draw_candidates(TEMPLATE, 3, 300, canaries["secret"], seed=5)
    got = checkpoint_exposures(model, tokenizer, canaries, candidates, TEMPLATE, 3, seed=SCORING_SEED)
    rho = stats.spearmanr(got["exact_exposure"], got["extrapolated_exposure"]).statistic
    assert rho > 0.6, rho
    means = got.groupby("repetitions")[["exact_exposure", "extrapolated_exposure"]].mean()
    assert (means.loc[32] > means.loc[0] + 2).all(), means
    assert means.loc[32, "exact_exposure"] <= math.log2(1000) + 1e-9


# --------------------------------------------------------------------------- tables


def _exposures():
    rng = np.random.default_rng(0)
    canaries = draw_canaries(TEMPLATE, 6, [1, 4], 3, 4, 3, seed=0)
    frames = []
    for epoch in (2, 5):
        exact = np.clip(rng.uniform(0, 2, len(canaries)) + canaries["repetitions"] * epoch / 3, 0, 6 * math.log2(10))
        frames.append(
            canaries[["canary_id", "role", "repetitions"]].assign(
                epoch=epoch,
                exact_exposure=exact,
                extrapolated_exposure=exact + 0.5,
                log2_space=6 * math.log2(10),
            )
        )
    return canaries, pd.concat(frames, ignore_index=True)


def test_exposure_table_and_figure(tmp_path):
    _, exposures = _exposures()
    summary = exposure_summary(exposures)
    assert set(summary["repetitions"]) == {0, 1, 4} and set(summary["estimate"]) == {"exact", "extrapolated"}
    row = summary[(summary.repetitions == 0) & (summary.epoch == 5) & (summary.estimate == "exact")].iloc[0]
    assert row["n_canaries"] == 7 and row["min"] <= row["mean"] <= row["max"]
    markdown = exposure_markdown(summary, 6, TEMPLATE)
    assert "maximum log2 |R| = 19.93" in markdown.splitlines()[0]
    assert "| repetitions | canaries | exact, epoch 2 | extrapolated, epoch 2 | exact, epoch 5 |" in markdown
    assert "min-max" in markdown and "| 0 (never inserted) | 7 |" in markdown
    for suffix in ("png", "pdf"):
        plot_exposure(summary, tmp_path / f"exposure.{suffix}", 6, STYLE)
    assert matplotlib.image.imread(tmp_path / "exposure.png").std() > 0.01
    assert (tmp_path / "exposure.pdf").read_bytes().startswith(b"%PDF")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exposure.pdf", "exposure.png"]  # no temporary left


def test_membership_on_the_canaries():
    canaries, exposures = _exposures()
    member = (canaries["role"] == "member").to_numpy()
    target = pd.DataFrame({"sample_id": canaries["canary_id"], "energy": np.where(member, 1.0, 3.0)})
    target["energy"] += np.linspace(0, 0.5, len(target))
    reference = target.assign(energy=2.0)
    table = membership_table(canaries, target, reference)
    assert list(table["role"]) == list(canaries["role"]) and (table["group_id"] == table["sample_id"]).all()
    settings = membership_settings(0.1, {"draws": 2, "seed": 0, "bootstrap": 5}, {})
    metrics = membership_metrics(table, MetricSettings.from_params(settings))
    auc = metrics[(metrics.metric == "auc") & metrics.replicate.isna()]
    assert set(auc["canaries"]) == {"all", "1", "4"} and (auc["value"] == 1.0).all()
    markdown = membership_markdown(metrics, exposures, epoch=5, reference="ref_domain", energy="masked", alpha=0.1)
    assert "| x4 | 3 |" in markdown and "| never inserted | 0 |" in markdown and "1.000 [" in markdown
    with pytest.raises(UserError, match="lack canary"):
        membership_table(canaries, target.iloc[1:], reference)


# --------------------------------------------------------------------------- the workflow


@pytest.mark.workflow
def test_snakemake_canaries_on_the_ci_config(tmp_path):
    copy_workflow(tmp_path)
    config = write_config(tmp_path, "ci.yaml")
    run_snakemake(tmp_path, "canaries", "--configfile", str(config))
    out = tmp_path / "results/ci/canaries"
    canaries = pd.read_parquet(out / "canaries.parquet")
    assert len(canaries) == 3 * 2 + 4 + 4 and canaries["secret"].str.fullmatch(r"\d{4}").all()
    assert sorted(p.name for p in (out / "target").glob("epoch_*")) == ["epoch_1", "epoch_2"]
    exposures = pd.read_parquet(out / "exposure.parquet")
    assert len(exposures) == 2 * len(canaries)
    assert exposures["exact_exposure"].between(0, 4 * math.log2(10) + 1e-9).all()
    assert np.isfinite(exposures["extrapolated_exposure"]).all()
    table = pd.read_csv(out / "exposure_table.csv")
    assert set(table["repetitions"]) == {0, 1, 4, 16} and set(table["epoch"]) == {1, 2}
    assert "maximum log2 |R| = 13.29" in (out / "exposure_table.md").read_text()
    assert matplotlib.image.imread(out / "exposure.png").std() > 0.01
    assert (out / "exposure.pdf").read_bytes().startswith(b"%PDF")
    membership = (out / "membership.md").read_text()
    assert "| all | 6 |" in membership and "AUC (B) likelihood ratio" in membership
    metrics = pd.read_csv(out / "membership.csv")
    assert set(metrics.dropna(subset=["attack"])["attack"]) == {"loss", "likelihood_ratio"}
    # ids, not text: no canary's digits in any log
    logs = "\n".join(p.read_text() for p in Path(tmp_path / "results/ci/logs").rglob("*.log"))
    assert "canary" in logs
    assert not any(" ".join(secret) in logs for secret in canaries["secret"])
    assert planned_jobs(tmp_path, "canaries", "--configfile", str(config)) == []  # up to date
    # the scoring settings reach canary scoring as they reach the paper's: truncation replans it
    truncating = tmp_path / "truncate.yaml"
    truncating.write_text(config.read_text())
    edit_yaml(truncating, scoring__truncate=True)
    replanned = {rule for rule, _ in planned_jobs(tmp_path, "canaries", "--configfile", str(truncating))}
    assert "canary_membership_scores" in replanned
