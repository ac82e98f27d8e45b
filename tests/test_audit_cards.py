"""The audit cards: which models are audited and what each card holds, decided by the config; the
strongest attack chosen on one half of the patients and reported on the other; every section rendered
from its study's files, "not run" where the config does not run it; how to read a card (the threat
model, lower bounds, the scale) and what would resolve a number it cannot resolve, against hand
computations; the DP verdict's wording; the ROC figure; which tokens carry the signal, where the
plan gives the card an attack with per-slot scores; the cards of the CI run (with its PHI grep and
the HTML report's section). The bring-your-own cards: tests/test_byo.py."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, copy_workflow, planned_jobs, run_snakemake, write_config

from mlmia.report.card_attacks import REPORT, SELECTION, membership, patient_halves
from mlmia.report.card_reading import resolve_lines, to_resolve
from mlmia.report.cards import dp_lines, dp_verdict, write_card
from mlmia.study.plans.cards import audited_models, card_experiment
from mlmia.study.study import Study
from mlmia.terms.schema import defaults


def study_of(name: str, **audit_cards) -> Study:
    config = yaml.safe_load((REPO / "config" / name).read_text())
    config["audit_cards"] = audit_cards
    return Study.from_config(config, REPO)


# --------------------------------------------------------------------------- what the config decides


def test_the_audited_models_and_each_cards_experiment_and_sections_come_from_the_config(monkeypatch):
    monkeypatch.chdir(REPO)
    study = study_of("ci.yaml")
    targets = list(dict.fromkeys(study.experiments[e].target for e in study.attack_experiments()))
    assert audited_models(study) == targets and "ref_domain" not in targets and "dp_eps8" in targets
    # the experiment with the most attacks, then long samples, then the spec's order
    assert card_experiment(study, "base") == "zoo_long_mimic"
    assert card_experiment(study, "base_pp") == "base_pp_long_mimic"
    cards = study.plan("audit_cards").settings["cards"]
    runs = {model: {key: section["run"] for key, section in card["sections"].items()} for model, card in cards.items()}
    assert runs["base"] == {"extraction": True, "canaries": True, "dp": False, "vocabulary": True}
    assert runs["dp_eps8"] == {"extraction": False, "canaries": False, "dp": True, "vocabulary": True}
    assert runs["large"] == {"extraction": False, "canaries": False, "dp": False, "vocabulary": True}
    assert cards["base"]["baselines"] == ["blind"] and "blind" not in cards["base"]["attacks"]
    assert cards["base"]["sections"]["extraction"] == {"run": True, "target": "base", "reference": "ref_domain",
                                                       "top_k": 10, "sources": ["mimic"]}  # fmt: skip
    # the config moves a section: extraction of large, the card of base says why it is not there
    moved = Study.from_config({**yaml.safe_load((REPO / "config/ci.yaml").read_text()),
                               "extraction": {"target": "large"}}, REPO)  # fmt: skip
    sections = {m: c["sections"]["extraction"] for m, c in moved.plan("audit_cards").settings["cards"].items()}
    assert sections["large"]["run"] and sections["base"] == {
        "run": False, "why": "the extraction study reads back extraction.target (large)"}  # fmt: skip
    chosen = study_of("ci.yaml", models=["large"], experiments={"large": "large_short_mimic"})
    plan = chosen.plan("audit_cards")
    assert plan.settings["models"] == ["large"] and plan.targets == [chosen.path("cards", f"large{e}") for e in
                                                                     (".md", ".json", "_roc.png")]  # fmt: skip
    # the card and its ROC figure in the report's "Audit cards", under the study's one caption
    assert {shown.labels["item"] for shown in plan.report.values()} == {"card", "ROC curves"}
    assert {shown.category for shown in plan.report.values()} == {"Audit cards"}
    assert plan.settings["cards"]["large"]["experiment"]["name"] == "large_short_mimic"
    assert set(plan.files["inputs"]["large"]) == {"attack", "vocabulary"}


def test_a_cards_config_digest_moves_with_what_a_card_is_made_from_only(monkeypatch):
    monkeypatch.chdir(REPO)
    plan = lambda study: study.plan("audit_cards").settings["config_digest"]  # noqa: E731
    before = plan(study_of("ci.yaml"))
    config = yaml.safe_load((REPO / "config" / "ci.yaml").read_text())
    # a figure style, a shadow study's setting, a section no card reads: the same digest
    config["figure_style"]["dpi"] += 1
    config["shadow"]["bootstrap"] += 1
    unread = copy.deepcopy(config)
    assert plan(Study.from_config(unread, REPO)) == before
    # how the jobs run, not what they write: the devices, the scoring batch size (RUN_ONLY_KEYS)
    run_only = copy.deepcopy(config)
    run_only.setdefault("training", {})["device"] = "cuda"
    run_only["scoring"].update(device="cpu", batch_size=8)
    assert plan(Study.from_config(run_only, REPO)) == before
    # the model a card audits, or the patients' resampling: another
    config["models"]["base"]["epochs"] += 1
    assert plan(Study.from_config(config, REPO)) != before


def test_a_bring_your_own_config_audits_its_targets_without_the_worlds_studies(tmp_path, monkeypatch):
    from test_config_checks import byo, write_byo_files

    monkeypatch.chdir(tmp_path)
    write_byo_files(tmp_path)
    config = byo()
    study = Study.from_config(copy.deepcopy(config), REPO)
    card = study.plan("audit_cards").settings["cards"]["target"]
    assert (
        audited_models(study) == ["target"]
        and card["experiment"]["name"] == "target__reference__clinic__all__masked__sample"
    )
    assert {k: s["run"] for k, s in card["sections"].items()} == {
        "extraction": False, "canaries": False, "dp": False, "vocabulary": False}  # fmt: skip
    assert card["origin"] == "given by path (bert-base-uncased)"
    assert card["sections"]["vocabulary"]["why"] == "no identifying values (the embedded world's, or extraction.phi)"
    # with a PHI table, the extraction study's target gets its section and every card the vocabulary check
    config["extraction"] = {"dataset": "notes", "target": "target", "reference": "reference", "sources": ["clinic"],
                            "phi": "phi_no_value.csv"}  # fmt: skip
    sections = Study.from_config(config, REPO).plan("audit_cards").settings["cards"]["target"]["sections"]
    assert sections["extraction"]["run"] and sections["vocabulary"] == {"run": True, "kinds": None,
                                                                        "values": "extraction.phi"}  # fmt: skip


# --------------------------------------------------------------------------- the strongest attack


def attack_table(seed: int = 0) -> pd.DataFrame:
    """40 member and 40 non-member patients of two samples each, 10 population patients. The loss
    (target_energy) separates the members of the selection half perfectly and is noise on the report
    half; the likelihood ratio separates every member a little."""
    rng = np.random.default_rng(seed)
    rows = [(f"{role[0]}{i:02d}-{j}", f"{role[0]}{i:02d}", role, "clinic") for role, n in
            (("member", 40), ("nonmember", 40), ("population", 10)) for i in range(n) for j in range(2)]  # fmt: skip
    table = pd.DataFrame(rows, columns=["sample_id", "group_id", "role", "source"])
    halves = patient_halves(table[table.role != "population"], 0)
    member = (table.role == "member").to_numpy()
    chosen = member & (table.group_id.map(halves) == SELECTION).to_numpy()
    table["target_energy"] = rng.normal(size=len(table)) - 6.0 * chosen
    ratio = rng.normal(size=len(table)) - 1.5 * member
    table["reference_energy"] = table["target_energy"] - ratio
    table["sample_blind_member_probability"] = rng.uniform(size=len(table))
    return table


SETTINGS = {"attacks": ["likelihood_ratio", "loss"], "baselines": ["blind"], "paper_attack": "likelihood_ratio",
            "attack_params": {}, "seed": 0, "fprs": [0.01, 0.1], "bootstrap": 40, "bootstrap_seed": 2}  # fmt: skip


def test_the_halves_are_fixed_by_the_seed_and_balanced_within_each_role_and_source():
    table = attack_table()
    halves = patient_halves(table, 0)
    assert patient_halves(table.sample(frac=1, random_state=1), 0) == halves  # the rows' order does not matter
    assert patient_halves(table, 1) != halves
    for role in ("member", "nonmember", "population"):
        mine = [halves[g] for g in table[table.role == role].group_id.unique()]
        assert abs(mine.count(SELECTION) - mine.count(REPORT)) <= 1


def test_the_strongest_attack_is_chosen_on_one_half_and_reported_on_the_other():
    result = membership(attack_table(), SETTINGS)
    assert result["split"][REPORT]["member"]["patients"] == 20
    for level in ("sample", "patient"):
        found = result["levels"][level]
        # the loss wins on the selection half, where it separates perfectly ...
        assert found["strongest"] == "loss" and found["selection_auc"]["loss"] == 1.0
        # ... and is reported where it is noise: picking the best does not flatter it
        loss, paper = found["attacks"]["loss"]["auc"], found["attacks"]["likelihood_ratio"]["auc"]
        assert loss["value"] < 0.7 < paper["value"]
        assert loss["interval"][0] <= loss["value"] <= loss["interval"][1]
        assert found["difference"]["auc"]["value"] == pytest.approx(loss["value"] - paper["value"])
        assert set(found["attacks"]) == {"likelihood_ratio", "loss", "blind"}
    # TPR at 1% FPR needs 100 non-members; 10% is resolvable with the 40 non-member samples of the report half
    sample = result["levels"]["sample"]
    assert sample["nonmembers"] == 40 and np.isnan(sample["attacks"]["loss"]["tpr@0.01"]["value"])
    assert np.isfinite(sample["attacks"]["loss"]["tpr@0.1"]["value"])


# --------------------------------------------------------------------------- the card's sections


def card_settings(sections: dict) -> dict:
    return {**SETTINGS, "model": "target", "run": "test", "origin": "given by path (models/target)",
            "experiment": {"name": "exp", "dataset": "notes", "reference": "ref", "nonmembers": "clinic",
                           "population": "clinic", "length": None, "energy": "masked"},
            "other_experiments": [], "sections": sections,
            "threat": {"reference": {"name": "ref", "origin": "trained by the workflow on the corpus domain"},
                       "references": None, "neighbours": None},
            "style": {**defaults("figure_style"), "dpi": 40}}  # fmt: skip


def study_files(folder) -> dict[str, str]:
    """Each study's output in its real layout, small."""
    files = {"attack": folder / "attack.parquet", "extraction_rates": folder / "rates.csv",
             "extraction_differences": folder / "differences.csv", "canary_exposure": folder / "exposure.csv",
             "canary_membership": folder / "membership.csv", "dp_record": folder / "record.json",
             "vocabulary": folder / "vocabulary.csv"}  # fmt: skip
    attack_table().to_parquet(files["attack"])
    keys = [(m, r, lv, k) for m, r in (("target", "member"), ("target", "nonmember"), ("ref", "member"))
            for lv in ("sample", "patient") for k in ("top1", "topk")]  # fmt: skip
    pd.DataFrame([{"model": m, "role": r, "kind": "all", "level": lv, "metric": k, "value": 0.25 if r == "member" and
                   m == "target" else 0.0, "ci_low": 0.1, "ci_high": 0.4, "units": 40, "patients": 20}
                  for m, r, lv, k in keys]).to_csv(files["extraction_rates"], index=False)  # fmt: skip
    pd.DataFrame([{"comparison": c, "kind": "all", "level": lv, "metric": k, "first": 0.25, "second": 0.0,
                   "difference": 0.25, "ci_low": 0.1, "ci_high": 0.4, "n": 50}
                  for c in ("members_vs_nonmembers", "target_vs_reference") for lv in ("sample", "patient")
                  for k in ("top1", "topk")]).to_csv(files["extraction_differences"], index=False)  # fmt: skip
    pd.DataFrame([{"repetitions": r, "epoch": 3, "estimate": "exact", "n_canaries": 2, "mean": 1.5 * r, "sd": 0.1,
                   "min": r, "max": 2 * r, "log2_space": 13.3} for r in (0, 1, 4)]).to_csv(files["canary_exposure"],
                                                                                         index=False)  # fmt: skip
    pd.DataFrame([{"metric": "auc", "attack": "likelihood_ratio", "value": 0.75, "ci_low": 0.5, "ci_high": 0.9,
                   "replicate": None, "canaries": "all"}]).to_csv(files["canary_membership"], index=False)  # fmt: skip
    record = {"target": "target", "accountant": {"accountant_epsilon": 7.99, "delta": 1e-3, "unit": "sample"},
              "canary_audits": [{"audit": "white-box", "guesses": 200, "correct": 160, "epsilon_lb": 0.9}],
              "checks": [{"check": "noise", "passed": True}], "failures": [],
              "attacks": [{"attack": "loss", "epsilon_lb": 0.4}, {"attack": "blind", "epsilon_lb": 0.0}]}  # fmt: skip
    files["dp_record"].write_text(json.dumps(record))
    pd.DataFrame([{"model": "target", "tokenizer": "sha256:ab", "vocabulary_size": 400, "kind": "surname",
                   "row": "share", "role": r, "versus": None, "patients": 10, "values": 10, "whole": w,
                   "value": w / 10, "ci_low": 0.0, "ci_high": 1.0, "separated": None, "replicates": 20}
                  for r, w in (("member", 8), ("nonmember", 2))] + [
        {"model": "target", "tokenizer": "sha256:ab", "vocabulary_size": 400, "kind": "surname", "row": "difference",
         "role": "member", "versus": "nonmember", "value": 0.6, "ci_low": 0.3, "ci_high": 0.9, "separated": True,
         "replicates": 20}]).to_csv(files["vocabulary"], index=False)  # fmt: skip
    return {key: str(path) for key, path in files.items()}


def test_a_card_holds_every_section_the_config_runs_and_says_why_not_for_the_others(tmp_path):
    files = study_files(tmp_path)
    every = {"extraction": {"run": True, "target": "target", "reference": "ref", "top_k": 5, "sources": ["clinic"]},
             "canaries": {"run": True, "shape": "target", "digits": 4, "epochs": 3, "repetitions": [1, 4],
                          "reference": "ref"},
             "dp": {"run": True, "claimed": 8.0, "fpr": 0.01, "confidence": 0.95},
             "vocabulary": {"run": True, "kinds": None, "values": "extraction.phi"}}  # fmt: skip
    outputs = {"card": tmp_path / "card.md", "numbers": tmp_path / "card.json", "roc": tmp_path / "card_roc.png"}
    write_card(card_settings(every), files, outputs, "cfg123", "code456")
    text = outputs["card"].read_text()
    for heading in ("# Audit card: target", "## Membership inference", "## PHI extraction", "## Canary exposure",
                    "## Differential privacy", "## Vocabulary check", "## Provenance"):  # fmt: skip
        assert f"\n{heading}\n" in f"\n{text}", heading
    assert "Every section ran for this model." in text and "Not run:" not in text
    assert "not resolvable with 40 non-members" in text  # TPR at 1% FPR with 40 non-member samples
    assert (
        "| sample | top-1 | 25.0 [10.0, 40.0] | 0 of 40 | 0 of 40 | +25.0 [10.0, 40.0] | +25.0 [10.0, 40.0] |" in text
    )
    verdict = "the claimed ε = 8 was not refuted by these audits (largest lower bound 0.900, 0.11 of ε, by the "
    assert "ε ≥ 0.900" in text and "ε ≥ 0.400 ((A) loss (`loss`))" in text
    assert f"verdict (confidence 0.95): {verdict}white-box one-run audit)." in text and "passes" not in text
    assert f"- DP audit: {verdict}" in text  # the summary says it in the same words
    # how to read it: the first section, with the threat model, lower bounds and the scale
    assert text.index("## How to read this card") < text.index("## Summary") < text.index("## Membership inference")
    assert text.split("\n## ")[1].startswith("How to read this card")
    reading = text[text.index("## How to read this card") : text.index("## Summary")]
    for words in ("Anyone who can query this model for its masked-token probabilities", "holds its weights",
                  "- (B) likelihood ratio (`likelihood_ratio`), the paper's attack: this model's masked-token "
                  "probabilities; a reference model's, `ref`, trained by the workflow on the corpus domain.",
                  "- (A) loss (`loss`), the strongest at the sample and patient levels: this model's masked-token "
                  "probabilities.", "- blind (bag of words) (`blind`), a baseline: the note's text; no model",
                  "**Each number is a lower bound**", "a low one is not proof of safety", "0.5 is chance",
                  "at 10% FPR, 1 in 10; at 1% FPR, 1 in 100", "at 1% almost no non-member is accused",
                  "the number for the most exposed patients", "n × (half-width / |AUC − 0.5|)²",
                  "shrinks like 1/√n", "at least 1 / f non-members", "not on this model itself"):  # fmt: skip
        assert words in reading, words
    # what would resolve the report half's unresolved numbers: n (half-width / |AUC - 0.5|)^2 from the JSON's
    numbers = json.loads(outputs["numbers"].read_text())
    for level, found in numbers["membership"]["levels"].items():
        for name, measures in found["attacks"].items():
            (low, high), value = measures["auc"]["interval"], measures["auc"]["value"]
            line = f"- {level} level, `{name}`: its AUC interval holds 0.5; about "
            if low <= 0.5 <= high:
                n = math.ceil(40 * ((high - low) / 2 / abs(value - 0.5)) ** 2 - 1e-9)  # 20 + 20 report patients
                assert f"{line}{n:,} patients on the report half would tell it from chance" in text, (level, name)
            else:
                assert line not in text
    assert "- sample level, TPR at 1% FPR: not resolvable; at least 100 non-member samples on the report half " \
           "would resolve it (it has 40)." in text  # fmt: skip
    assert "- patient level, TPR at 1% FPR: not resolvable; at least 100 non-member patients" in text
    assert "TPR at 10% FPR: not resolvable" not in text
    # the canaries: on a model of this one's shape, not on this model
    assert "## Canary exposure\n\n**Measured on a canary target, not on this model:** a model the workflow trained " \
           "in this model's shape and settings (canaries.shape: `target`)" in text  # fmt: skip
    # the ROC figure beside the card, linked by its name
    assert "](card_roc.png)" in text and outputs["roc"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        "| surname | 8 / 10 (80.0% [0.0, 100.0]) | 2 / 10 (20.0% [0.0, 100.0]) | +60.0 [30.0, 90.0], separated |"
        in text
    )
    assert "Config digest cfg123" in text and "code digest code456" in text
    assert numbers["membership"]["levels"]["sample"]["strongest"] == "loss"
    assert numbers["membership"]["to_resolve"]["sample"]["tpr@0.01"] == 100
    assert set(numbers["provenance"]["inputs"]) == set(files) and numbers["dp"]["failures"] == []
    # what the card holds is the config's to say: the same files, no section run
    none = {key: {"run": False, "why": f"no {key} here"} for key in every}
    write_card(card_settings(none), files, outputs, "cfg123", "code456")
    text = outputs["card"].read_text()
    for key in every:
        assert f"Not run: no {key} here." in text
    assert "## Not run\n\nPHI extraction: no extraction here; Canary exposure: no canaries here;" in text
    assert json.loads(outputs["numbers"].read_text())["dp"] == "not run"


# --------------------------------------------------------------------------- which tokens carry the signal


def test_a_card_with_token_kinds_holds_the_part_in_its_membership_section_and_only_then(tmp_path, monkeypatch):
    """The plan: the default world's Base card reads zoo_long_mimic's summary by token kind (InfoRMIA
    gives per-slot scores), the file rule token_kinds writes; base_pp's experiment has no reference pool,
    so no per-slot attack, and its card neither reads nor mentions one."""
    from mlmia.study.plans.tokens import token_experiments, token_outputs

    monkeypatch.chdir(REPO)
    study = study_of("config.yaml")
    plan = study.plan("audit_cards")
    cards, inputs = plan.settings["cards"], plan.files["inputs"]
    assert cards["base"]["experiment"]["name"] == "zoo_long_mimic" and "zoo_long_mimic" in token_experiments(study)
    assert inputs["base"]["token_kinds"] == token_outputs(study, "zoo_long_mimic")["kinds"]
    assert inputs["base"]["token_kinds"] == "results/default/attack/zoo_long_mimic.token_kinds.csv"
    assert cards["base"]["token_kinds"] == {"attacks": ["informia"]}
    experiment = cards["base_pp"]["experiment"]["name"]
    assert experiment == "base_pp_long_mimic" and experiment not in token_experiments(study)
    assert "token_kinds" not in inputs["base_pp"] and cards["base_pp"]["token_kinds"] is None


def test_snakemake_audit_cards_plans_the_token_kinds_its_cards_read(tmp_path, monkeypatch):
    """A dry run on the CI world: the cards' per-slot files are rule token_kinds's jobs, one per card
    experiment with InfoRMIA (base's zoo_long_mimic, the DP targets'), none for the others."""
    from mlmia.study.plans.tokens import token_attacks

    monkeypatch.chdir(REPO)
    copy_workflow(tmp_path)
    config = write_config(tmp_path, "ci.yaml")
    study = study_of("ci.yaml")
    experiments = {card_experiment(study, model) for model in audited_models(study)}
    expected = sorted(name for name in experiments if token_attacks(study, name))
    assert "zoo_long_mimic" in expected and "dp_eps8_long_mimic" in expected and "large_long_mimic" in experiments
    jobs = planned_jobs(tmp_path, "audit_cards", "--configfile", str(config))
    planned = [out for rule, outputs in jobs if rule == "token_kinds" for out in outputs.split(", ")
               if out.endswith(".token_kinds.csv")]  # fmt: skip
    assert sorted(planned) == [f"results/ci/attack/{name}.token_kinds.csv" for name in expected]


#: a summary by token kind as `kind_summary` writes it, in its order (the PHI kinds, then other); kind,
#: slots, difference, interval, members' and non-members' top-slot share
NAN3 = (np.nan, np.nan, np.nan)
# kind, slots, difference [interval], less other's [paired interval], top-slot shares. surname's own interval
# overlaps other's, but its paired difference is separated: the card reads the paired one
KINDS = [("surname", 300, 1.84, 0.10, 3.50, (1.62, 0.05, 3.20), 0.20, 0.10),
         ("physician", 1200, 5.21, 3.99, 6.85, (4.99, 3.80, 6.60), 0.30, 0.05),
         ("state", 80, 0.10, -0.50, 0.70, (-0.12, -0.70, 0.50), 0.02, 0.03),
         ("date", 500, -0.30, -0.60, -0.05, (-0.52, -0.80, -0.30), 0.05, 0.12),
         ("drug", 400, 2.04, 1.00, 3.10, (1.82, 0.80, 2.90), 0.13, 0.05), ("dose", 3, *NAN3, NAN3, 0.0, 0.0),
         ("other", 20000, 0.22, 0.17, 0.27, NAN3, 0.30, 0.65)]  # fmt: skip


def token_summary(kinds=KINDS, phi_from="the world's PHI") -> pd.DataFrame:
    rows = [{"attack": "informia", "kind": k, "slots": n, "samples": n // 3, "member_mean": d / 2,
             "nonmember_mean": -d / 2, "difference": d, "ci_low": lo, "ci_high": hi, "minus_other": paired[0],
             "minus_other_low": paired[1], "minus_other_high": paired[2], "member_top_share": mt,
             "nonmember_top_share": nt, "members": 40, "nonmembers": 30, "phi_from": phi_from}
            for k, n, d, lo, hi, paired, mt, nt in kinds]  # fmt: skip
    # an attack the card's plan does not name is not shown
    return pd.DataFrame([*rows, {**rows[0], "attack": "not_planned", "kind": "surname", "difference": 99.0}])


def test_which_tokens_carry_the_signal_ordered_by_difference_with_separated_marks(tmp_path):
    files = study_files(tmp_path)
    files["token_kinds"] = str(tmp_path / "zoo_long_mimic.token_kinds.csv")
    token_summary().to_csv(files["token_kinds"], index=False)
    sections = {key: {"run": False, "why": f"no {key} here"} for key in ("extraction", "canaries", "dp", "vocabulary")}
    settings = {**card_settings(sections), "token_kinds": {"attacks": ["informia"]}}
    outputs = {"card": tmp_path / "card.md", "numbers": tmp_path / "card.json", "roc": tmp_path / "card_roc.png"}
    write_card(settings, files, outputs, "cfg123", "code456")
    text = outputs["card"].read_text()
    membership = text.split("## Membership inference\n")[1].split("\n## ")[0]
    part = membership.split("### Which tokens carry the signal\n\n")[1]
    assert part.startswith("Which kinds of token carry the signal of InfoRMIA (`informia`), per slot")
    assert "(bits; higher: more member-like)" in part and "PHI kinds from the world's PHI" in part
    assert "over all 40 member and 30 non-member samples" in part
    # largest difference first, the kind without one last; separated where the interval excludes 0
    rows = [line for line in part.splitlines() if line.startswith("| ") and not line.startswith("| kind")]
    assert [row.split(" | ")[0][2:] for row in rows] == ["physician", "drug", "surname", "other", "state", "date",
                                                          "dose"]  # fmt: skip
    assert rows[0] == "| physician | 1,200 | +5.21 [3.99, 6.85] | separated | +4.99 [3.80, 6.60] | 30.0% | 5.0% |"
    assert rows[3] == "| other | 20,000 | +0.22 [0.17, 0.27] | separated | – | 30.0% | 65.0% |"
    assert rows[4] == "| state | 80 | +0.10 [-0.50, 0.70] | not separated | -0.12 [-0.70, 0.50] | 2.0% | 3.0% |"
    assert rows[5] == "| date | 500 | -0.30 [-0.60, -0.05] | separated | -0.52 [-0.80, -0.30] | 5.0% | 12.0% |"
    assert rows[6] == "| dose | 3 | n.a. | not separated | n.a. | 0.0% | 0.0% |"
    # against the ordinary words: the paired interval (surname's own overlaps other's, its paired one lies above 0)
    assert ("Separated from 0: members' slots score higher for physician, drug, surname, other; lower for date. "
            "Against the ordinary words (other, +0.22 [0.17, 0.27]), each kind's difference less other's, its "
            "interval from the same patient resamples (paired): separated above for physician, drug, surname, below "
            "for date, not separated for state, dose.") in part  # fmt: skip
    assert "not_planned" not in text and "99.0" not in text
    assert text.index("### Which tokens carry the signal") < text.index("## Differential privacy")
    # the JSON holds the same numbers, in the card's order
    numbers = json.loads(outputs["numbers"].read_text())
    found = numbers["membership"]["token_kinds"]
    assert found["phi_from"] == "the world's PHI" and list(found["attacks"]) == ["informia"]
    informia = found["attacks"]["informia"]
    assert [r["kind"] for r in informia["kinds"]][:3] == ["physician", "drug", "surname"]
    assert informia["kinds"][0] == {"kind": "physician", "slots": 1200, "samples": 400, "member_mean": 2.605,
                                    "nonmember_mean": -2.605, "difference": 5.21, "ci_low": 3.99, "ci_high": 6.85,
                                    "minus_other": 4.99, "minus_other_low": 3.8, "minus_other_high": 6.6,
                                    "member_top_share": 0.3, "nonmember_top_share": 0.05, "separated": True}  # fmt: skip
    assert informia["kinds"][-1]["difference"] is None and informia["kinds"][-1]["separated"] is False
    assert (informia["separated_above"], informia["separated_below"]) == (["physician", "drug", "surname", "other"],
                                                                          ["date"])  # fmt: skip
    assert (informia["above_other"], informia["below_other"], informia["not_separated_from_other"]) == (
        ["physician", "drug", "surname"], ["date"], ["state", "dose"])  # fmt: skip
    assert numbers["provenance"]["inputs"]["token_kinds"]["path"] == files["token_kinds"]
    # without PHI every slot is other: nothing to compare with the ordinary words
    none = "none: no PHI table (extraction.phi), every slot is other"
    token_summary([KINDS[-1]], none).to_csv(files["token_kinds"], index=False)
    write_card(settings, files, outputs, "cfg123", "code456")
    text = outputs["card"].read_text()
    assert f"Every slot is other (PHI kinds from {none}): no kind to tell apart from the ordinary words." in text
    # the plan names no per-slot attack: no part, though the file lies there
    write_card({**settings, "token_kinds": None}, files, outputs, "cfg123", "code456")
    text = outputs["card"].read_text()
    assert "Which tokens" not in text and "informia" not in text
    assert "token_kinds" not in json.loads(outputs["numbers"].read_text())["membership"]


# --------------------------------------------------------------------------- what would resolve it


def test_what_would_resolve_a_cards_numbers_in_its_words():
    result = {"split": {REPORT: {"member": {"patients": 10, "samples": 12}, "nonmember": {"patients": 8, "samples": 9}}},
              "levels": {"sample": {"nonmembers": 9, "attacks": {
                  "loss": {"auc": {"value": 0.5, "interval": (0.3, 0.7)}},
                  "likelihood_ratio": {"auc": {"value": 0.6, "interval": (0.4, 0.9)}},
                  "rmia": {"auc": {"value": 0.8, "interval": (0.7, 0.9)}},
                  "blind": {"auc": {"value": 0.6, "interval": (float("nan"), float("nan"))}}}}}}  # fmt: skip
    needed = to_resolve(result, [0.2, 0.01, 0.001])
    assert needed == {"sample": {"patients": 18, "nonmembers": 9, "auc": {"loss": None, "likelihood_ratio": 113},
                                 "tpr@0.01": 100, "tpr@0.001": 1000}}  # fmt: skip
    text = "\n".join(resolve_lines(needed, [0.2, 0.01, 0.001]))
    assert (
        "- sample level, `loss`: its AUC interval holds 0.5; no number of patients: the estimate sits at chance."
        in text
    )
    assert ("- sample level, `likelihood_ratio`: its AUC interval holds 0.5; about 113 patients on the report half "
            "would tell it from chance if the estimate held (it has 18).") in text  # fmt: skip
    assert ("- sample level, TPR at 0.1% FPR: not resolvable; at least 1,000 non-member samples on the report half "
            "would resolve it (it has 9).") in text  # fmt: skip
    assert "an approximation since the half-width shrinks like 1/√n" in text
    assert "rmia" not in text and "blind" not in text and "20% FPR" not in text
    # a report half where everything is resolved says nothing
    assert resolve_lines({"sample": {"patients": 400, "nonmembers": 200, "auc": {}}}, [0.01]) == []


def test_the_dp_verdict_says_whether_the_audits_refuted_the_claim_never_that_it_passes():
    record = {"accountant": {"accountant_epsilon": 7.99}, "failures": [],
              "canary_audits": [{"audit": "white-box", "epsilon_lb": 0.9}, {"audit": "black-box", "epsilon_lb": None}],
              "attacks": [{"attack": "loss", "epsilon_lb": 0.4}]}  # fmt: skip
    claimed = {"claimed": 8.0}
    assert dp_verdict(record, claimed) == ("the claimed ε = 8 was not refuted by these audits (largest lower bound "
                                           "0.900, 0.11 of ε, by the white-box one-run audit)")  # fmt: skip
    refuted = {**record, "attacks": [{"attack": "loss", "epsilon_lb": 9.5}],
               "failures": ["attack 'loss': empirical lower bound eps >= 9.5000"]}  # fmt: skip
    assert dp_verdict(refuted, claimed) == ("refuted: the claimed ε = 8 does not hold: attack 'loss': empirical lower "
                                            "bound eps >= 9.5000 (largest lower bound 9.500, 1.19 of ε, by attack "
                                            "`loss`)")  # fmt: skip
    baseline = {**record, "accountant": {"accountant_epsilon": float("inf")}}
    assert dp_verdict(baseline, {"claimed": None}) == ("no ε is claimed (no DP), so there is nothing to refute "
                                                       "(largest lower bound 0.900, by the white-box one-run audit)")  # fmt: skip
    for verdict in (dp_verdict(record, claimed), dp_verdict(refuted, claimed), dp_verdict(baseline, {"claimed": None})):
        assert "pass" not in verdict and "safe" not in verdict


def test_the_dp_section_gives_the_mechanism_fit_and_the_simulated_power():
    """A DP target's section: the mechanism fit as a check of the claim's parameters (n.a. and not
    identified where the fit has no estimate or no finite interval), and the simulated power at the
    target's shape (the record's `power`), or that it was not measured."""
    fit = {"mech_noise_multiplier": 1.36, "mech_noise_multiplier_low": 1.115, "mech_noise_multiplier_high": 1.723,
           "mech_claimed_noise_multiplier": 1.2854, "mech_rate": 0.1958, "mech_rate_low": 0.1553,
           "mech_rate_high": 0.2518, "mech_claimed_rate": 0.2, "mech_p_value": 0.0253, "mech_passed": True,
           "mech_level": 1e-6}  # fmt: skip
    power = {"runs": 50, "power": 0.8, "level": 1e-6, "false_positive": 0.02,
             "mildest": {"noise multiplier": {"size": "× 0.9", "power": 0.86, "checks": ["noise"]},
                         "clipping norm": None,
                         "sampling rate": {"size": "× 1.05", "power": 1.0, "checks": ["Poisson batch"]}},
             "ladder": {"noise multiplier": ["× 0.95", "× 0.9"], "clipping norm": ["× 1.5", "× 4"],
                        "sampling rate": ["× 1.05"]}}  # fmt: skip
    record = {"target": "dp_eps8", "failures": [], "checks": [], "attacks": [], "power": power,
              "accountant": {"accountant_epsilon": 7.99, "delta": 1e-3, "unit": "sample"},
              "canary_audits": [{"audit": "white-box", "guesses": 200, "correct": 194, "epsilon_lb": 2.5, **fit}]}  # fmt: skip
    section = {"claimed": 8.0, "fpr": 0.01, "confidence": 0.95}
    text = "\n".join(dp_lines(record, section))
    assert (
        "- mechanism fit (a check of the claim's parameters, not a bound): noise multiplier 1.36 [1.11, 1.72] "
        "against σ = 1.285; rate 0.196 [0.155, 0.252] against q = 0.2; p = 0.025, passed (level 1e-06)."
    ) in text
    assert ("- simulated power at this target's shape (50 simulated runs per fault, one training run's record, each "
            "check at its level): the checks together flag noise multiplier × 0.9 (not × 0.95), no clipping norm "
            "fault up to × 4, sampling rate × 1.05 in at least 0.8 of the runs; nothing milder than noise multiplier "
            "× 0.95, clipping norm × 1.5, sampling rate × 1.05 was simulated; a simulated correct trainer is flagged "
            "in 1 of 50 runs.") in text  # fmt: skip
    failed = {**fit, "mech_noise_multiplier": float("nan"), "mech_noise_multiplier_high": float("inf"),
              "mech_p_value": float("nan"), "mech_passed": False}  # fmt: skip
    unmeasured = {**record, "power": {"runs": 0}, "canary_audits": [{**record["canary_audits"][0], **failed}]}
    text = "\n".join(dp_lines(unmeasured, section))
    assert "noise multiplier n.a. (interval not identified) against σ = 1.285" in text
    assert "p = n.a., FAILS (level 1e-06)." in text
    assert "- simulated power at this target's shape: not measured (dp_audit.power_runs: 0)." in text
    # no DP: neither line
    baseline = {**record, "accountant": {**record["accountant"], "accountant_epsilon": float("inf")}}
    text = "\n".join(dp_lines(baseline, {**section, "claimed": None}))
    assert "mechanism fit" not in text and "simulated power" not in text


def test_a_card_says_a_public_tokenizer_is_public(tmp_path):
    """A tokenizer the config marks public (models.<name>.public_tokenizer): the vocabulary section and
    the summary say so, no shares (nothing learnt from the owner's notes to count)."""
    from mlmia.memorization.vocabulary_check import public_check
    from mlmia.report.vocabulary import PUBLIC

    files = study_files(tmp_path)
    public_check("target", "bert-base-uncased (hub)").to_csv(files["vocabulary"], index=False)
    sections = {key: {"run": False, "why": f"no {key} here"} for key in ("extraction", "canaries", "dp")}
    sections["vocabulary"] = {"run": True, "kinds": None, "values": "extraction.phi"}
    outputs = {"card": tmp_path / "card.md", "numbers": tmp_path / "card.json", "roc": tmp_path / "card_roc.png"}
    write_card(card_settings(sections), files, outputs, "cfg123", "code456")
    text = outputs["card"].read_text()
    assert f"- vocabulary: the tokenizer is {PUBLIC}." in text
    section = text.split("## Vocabulary check\n\n")[1].split("\n## ")[0]
    assert section.startswith(f"Tokenizer bert-base-uncased (hub): {PUBLIC}") and "|" not in section
    assert json.loads(outputs["numbers"].read_text())["vocabulary"][0]["row"] == "public"


# --------------------------------------------------------------------------- the cards of the CI run


@pytest.mark.slow  # dp_eps8's card reads its DP audit: run alone, this builds it (tests/test_dp.py shares it)
def test_snakemake_audit_cards_on_the_ci_world_and_in_the_report(ci_run):
    from test_extraction import assert_no_phi, world_phi_pattern

    overlay = ci_run / "cards.yaml"
    overlay.write_text(yaml.safe_dump({"audit_cards": {"models": ["large", "dp_eps8"]}}))
    args = ("--configfile", "test_config.yaml", str(overlay))
    # base's vocabulary check beside the cards': every model of the world ships one tokenizer
    run_snakemake(ci_run, "audit_cards", "results/ci/extraction/vocabulary/base.csv", *args)
    run_snakemake(ci_run, "audit_cards", "--report", "results/ci/cards.html", *args)
    run = ci_run / "results/ci"
    assert sorted(p.name for p in (run / "cards").iterdir()) == [
        "dp_eps8.json", "dp_eps8.md", "dp_eps8_roc.png", "large.json", "large.md", "large_roc.png"]  # fmt: skip
    for model in ("dp_eps8", "large"):  # each card links its ROC figure, which lies beside it
        assert f"]({model}_roc.png)" in (run / f"cards/{model}.md").read_text()
        assert (run / f"cards/{model}_roc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dp = (run / "cards/dp_eps8.md").read_text()
    assert "## Differential privacy\n\n- claimed ε (models.dp_eps8.dp.epsilon): 8" in dp
    assert "- verdict (confidence 0.95): the claimed ε = 8 was not refuted by these audits (largest lower bound" in dp
    assert "## How to read this card" in dp and "a reference model's, `ref_general`" in dp
    assert "Experiment `dp_eps8_long_mimic`" in dp and "| surname |" in dp
    assert "Not run: the extraction study reads back extraction.target (base)." in dp
    # dp_eps8's experiment has InfoRMIA: which tokens carry its signal; large's has no per-slot attack
    assert "### Which tokens carry the signal\n\nWhich kinds of token carry the signal of InfoRMIA (`informia`)" in dp
    assert "Which tokens" not in (run / "cards/large.md").read_text()
    large = json.loads((run / "cards/large.json").read_text())
    assert large["dp"] == "not run" and set(large["membership"]["levels"]) == {"sample", "patient"}
    vocabulary = pd.DataFrame(large["vocabulary"])
    base = pd.read_csv(run / "extraction/vocabulary/base.csv")
    assert (vocabulary.whole.fillna(-1).to_numpy() == base.whole.fillna(-1).to_numpy()).all()
    report = (run / "cards.html").read_text()
    assert "Audit cards" in report and "dp_eps8" in report and "dp_eps8_roc.png" in report
    files = [
        *(run / "cards").glob("*"),
        *(run / "logs/audit_cards").glob("*"),
        *(run / "extraction/vocabulary").glob("*"),
        *(run / "attack").glob("*.token_kinds.csv"),
    ]
    assert assert_no_phi(run, files, world_phi_pattern()) >= 8
