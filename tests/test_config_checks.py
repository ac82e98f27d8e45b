"""The whole config checked before any job (issue 40, item 2): each mistake below is refused by
`Study.from_config`, in one line naming the config key the user wrote, with nothing written, and a
few of them end to end through `snakemake -n` (one `mlmia: error:` line, a non-zero exit, no
traceback, no results/ folder). Each check also passes a config just inside its limit, so that
a check that refused everything would fail here. docs/bad_inputs.md lists the same case ids.

The cases are data (`CASES`): an id, the shipped config it edits, the edits (dotted keys, a list
index as a number; `DROP` removes a key) and the fragments the message must hold."""

from __future__ import annotations

import copy
import re
import runpy
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, copy_workflow, paper_scores_root, run_snakemake

from mlmia.core.errors import UserError
from mlmia.study.study import Study
from mlmia.terms.schema import defaults

DROP = object()
#: a model given by a hub id (no file needed: the study only checks that it looks like one)
HUB = {"path": "bert-base-uncased"}


def load(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / name).read_text())


def edited(config: dict, edits: dict) -> dict:
    """`config` with `edits` ({"a.b.0.c": value}) applied; DROP removes the key."""
    config = copy.deepcopy(config)
    for dotted, value in edits.items():
        *parents, last = [int(p) if p.isdigit() else p for p in dotted.split(".")]
        node = config
        for part in parents:
            node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
        if value is DROP:
            del node[last]
        else:
            node[last] = copy.deepcopy(value)
    return config


def byo() -> dict:
    """A bring-your-own config (no embedded world) on a small dataset file, notes.csv, that
    `write_byo_files` writes into the working directory."""
    return {
        "run": "byo_checks",
        "datasets": {"notes": {"files": [{"path": "notes.csv", "role": "member", "source": "clinic"},
                                         {"path": "notes.csv", "role": "nonmember", "source": "clinic"},
                                         {"path": "notes.csv", "role": "population", "source": "clinic"}],
                               "columns": {"text": "text", "group": "group_id"}}},
        "models": {"target": dict(HUB), "reference": {"path": "distilbert-base-uncased"}},
        "audit": {"dataset": "notes", "targets": ["target"], "references": ["reference"], "nonmembers": ["clinic"],
                  "population": "clinic"},
    }  # fmt: skip


#: a reference pool for `byo()`: 4 references fine-tuned from a local model directory (`write_byo_files`) on
#: the patients of pool.csv, disjoint from the audit's
POOL = {"count": 4, "pool": "pool.csv", "dataset": "notes", "init": "public", "settings": {"epochs": 1}, "online": True}
PUBLIC = {"models.public": {"path": "ckpt"}}


def write_byo_files(folder) -> None:
    pd.DataFrame({"text": ["a b c", "d e f"], "group_id": ["p0", "p1"]}).to_csv(folder / "notes.csv", index=False)
    # checkpoints and tokenizers as files: 200 vocabulary rows with their own 200 tokens, with 5
    # (a stale cache entry), or a tokenizer of 72 (128 rows fewer: what padding explains); a copy of
    # ckpt's tokenizer, and 200 other tokens (a checkpoint that tokenizes otherwise)
    for name, rows, tokens, prefix in (("ckpt", 200, 200, "t"), ("ckpt_tok5", 200, 5, "t"), ("tok5", None, 5, "t"),
                                       ("tok72", None, 72, "t"), ("ckpt_copy", 200, 200, "t"),
                                       ("ckpt_other", 200, 200, "u")):  # fmt: skip
        (folder / name).mkdir()
        if rows:
            (folder / name / "config.json").write_text(f'{{"vocab_size": {rows}}}')
        (folder / name / "vocab.txt").write_text("".join(f"{prefix}{i}\n" for i in range(tokens)))
    pd.DataFrame({"group_id": ["p0"], "kind": ["name"]}).to_csv(folder / "phi_no_value.csv", index=False)
    pd.DataFrame({"sample_id": ["q0"], "group_id": ["q"], "text": ["g h i"]}).to_csv(folder / "pool.csv", index=False)


# (id, base config, edits, fragments of the one-line message)
CASES = [
    # 1. the run's folder: its own, directly inside results/
    ("run-dot", "ci.yaml", {"run": "."}, ["config key run: '.'", "results/"]),
    ("run-dotdot", "ci.yaml", {"run": ".."}, ["config key run: '..'", "results/"]),
    # 2. names that point at a model exist and are of the right kind
    ("canaries-reference-unknown", "ci.yaml", {"canaries.reference": "nope"},
     ["config key canaries.reference: 'nope' is not a configured model (models: base,"]),
    ("canaries-shape-unknown", "ci.yaml", {"canaries.shape": "nope"},
     ["config key canaries.shape: 'nope' is not a configured model"]),
    ("canaries-shape-by-path", "ci.yaml", {"models.given": HUB, "canaries.shape": "given"},
     ["config key canaries.shape: 'given' is given by a path"]),
    ("shadow-alice-unknown", "ci.yaml", {"shadow.alice": "nope"},
     ["config key shadow.alice: 'nope' is not a configured model"]),
    ("shadow-bob-unknown", "ci.yaml", {"shadow.bob": "nope"}, ["config key shadow.bob: 'nope' is not a configured"]),
    ("shadow-alice-by-path", "ci.yaml", {"models.given": HUB, "shadow.alice": "given"},
     ["config key shadow.alice: 'given' is given by a path"]),
    ("references-shape-by-path", "config.yaml",
     {"models.given": HUB, "references.shape": "given", "references.settings": DROP},
     ["config key references.shape: 'given' is given by a path"]),
    ("extraction-target-unknown", "ci.yaml", {"extraction.target": "nope"},
     ["config key extraction.target: 'nope' is not a configured model"]),
    ("neighbours-model-unknown", "ci.yaml", {"neighbours.model": "nope"},
     ["config key neighbours.model: 'nope' is not a configured model"]),
    ("exposure-embedding-unknown", "ci.yaml", {"exposure.embedding_model": "nope"},
     ["config key exposure.embedding_model: 'nope' is not a configured model"]),
    ("model-init-unknown", "ci.yaml", {"models.base_pp.init": "nope"},
     ["config key models.base_pp.init: 'nope' is not another configured model"]),
    ("model-without-corpus-or-path", "ci.yaml", {"models.extra": {"epochs": 1}},
     ["config key models.extra: gives neither corpus"]),
    ("model-corpus-and-path", "ci.yaml", {"models.base.path": "bert-base-uncased"},
     ["config key models.base: gives both corpus (a world corpus to train on) and path"]),
    ("tokenizer-of-a-trained-model", "ci.yaml", {"models.base.tokenizer": "bert-base-uncased"},
     ["config key models.base: unknown key(s) tokenizer"]),
    ("public-tokenizer-of-a-world-model", "ci.yaml", {"models.base.public_tokenizer": True},
     ["config key models.base.public_tokenizer: 'base' is trained by the workflow with the world's tokenizer, learnt "
      "on the world's corpora (private); leave public_tokenizer out"]),
    ("public-tokenizer-against-its-init", "ci.yaml",
     {"models.given": {**HUB, "public_tokenizer": True},
      "models.tuned": {"corpus": "target", "init": "given", "public_tokenizer": False}},
     ["config key models.tuned.public_tokenizer: 'tuned' is trained by the workflow with the tokenizer of 'given', "
      "which it continues (public)"]),
    ("training-setting-of-a-given-model", "ci.yaml", {"models.given": {**HUB, "epochs": 3}},
     ["config key models.given.epochs: 'given' is given by path: the workflow does not train it"]),
    ("architecture-of-a-continued-model", "ci.yaml", {"models.base_pp.dropout": 0},
     ["config key models.base_pp.dropout: 'base_pp' continues 'base' and keeps its architecture"]),
    ("attacks-unknown", "ci.yaml", {"attacks": {"min_kk": {}}}, ["config key attacks.min_kk: unknown attack 'min_kk'"]),
    ("attacks-unknown-parameter", "ci.yaml", {"attacks": {"min_k": {"kk": 0.2}}},
     ["config key attacks.min_k: unknown parameter(s) kk (known: fraction)"]),
    # an attack's parameter values, checked by the code the attack job runs (Attack.check_params)
    ("attacks-min-k-fraction-over-one", "ci.yaml", {"attacks": {"min_k": {"fraction": 1.5}}},
     ["config key attacks.min_k.fraction: a fraction in (0, 1] is needed, got 1.5"]),
    ("attacks-min-k-plus-plus-fraction-zero", "ci.yaml", {"attacks": {"min_k_plus_plus": {"fraction": 0}}},
     ["config key attacks.min_k_plus_plus.fraction: a fraction in (0, 1] is needed, got 0"]),
    ("attacks-rmia-gamma-negative", "ci.yaml", {"attacks": {"rmia": {"gamma": -1}}},
     ["config key attacks.rmia.gamma: a positive number is needed, got -1"]),
    ("attacks-blind-one-fold", "ci.yaml", {"attacks": {"blind": {"folds": 1}}},
     ["config key attacks.blind.folds: an integer >= 2 is needed, got 1"]),
    ("attacks-sama-empty-subsets", "ci.yaml", {"attacks": {"sama": {"subset_size": 0}}},
     ["config key attacks.sama.subset_size: an integer >= 1 is needed, got 0"]),
    ("attacks-lira-variance-unknown", "ci.yaml", {"attacks": {"lira_offline": {"variance": "pooled"}}},
     ["config key attacks.lira_offline.variance: use one of per_sample, global, got 'pooled'"]),
    ("references-dataset-unknown", "ci.yaml", {"references.dataset": "nope"},
     ["config key references.dataset: 'nope' is not a scored sample table"]),
    ("extraction-dataset-unknown", "ci.yaml", {"extraction.dataset": "nope"},
     ["config key extraction.dataset: 'nope' is not a scored sample table"]),
    # 2, 9. registers, subcorpora, sources, classes
    ("shadow-shared-unknown-register", "ci.yaml", {"shadow.shared.1": "nope"},
     ["config key shadow.shared[1]: 'nope' is not a register of the world (registers: mimic,"]),
    ("shadow-ood-unknown-register", "ci.yaml", {"shadow.ood": ["newz"]},
     ["config key shadow.ood[0]: 'newz' is not a register"]),
    ("shadow-in-house-unknown-register", "ci.yaml", {"shadow.in_house": "nope"},
     ["config key shadow.in_house: 'nope' is not a register"]),
    ("shadow-register-twice", "ci.yaml", {"shadow.ood.0": "mimic"},
     ["config key shadow.ood[0]: 'mimic' is also in shadow.shared"]),
    ("shadow-mt-shared-unknown", "ci.yaml", {"shadow_mt.shared": ["discharge", "nope"]},
     ["config key shadow_mt.shared[1]: 'nope' is not a subcorpus of shadow_mt.corpus.documents"]),
    ("shadow-mt-ood-without-documents", "ci.yaml", {"shadow_mt.corpus.documents.news": 0},
     ["config key shadow_mt.ood[1]: 'news' has no documents (shadow_mt.corpus.documents.news: 0)"]),
    ("extraction-sources-unknown", "ci.yaml", {"extraction.sources": ["mimic", "nope"]},
     ["config key extraction.sources[1]: 'nope' is not a non-member source of sample table 'clinical' (sources: i2b2, "
      "mimic)"]),
    ("samples-source-without-the-role", "ci.yaml", {"samples.counts.member.i2b2": 5},
     ["config key samples.counts.member.i2b2: the world has no member patients of source 'i2b2'"]),
    ("canaries-energy-unknown", "ci.yaml", {"canaries.energy": "nope"}, ["config key canaries.energy: 'nope' is not"]),
    ("dexposure-entity-of-an-unmeasured-class", "ci.yaml", {"dexposure.entities": {"DATE": "Monday"}},
     ["config key dexposure.entities.DATE: DATE is not one of dexposure.classes"]),
    # 3. a reference is not its own target, and never saw the patients
    ("extraction-reference-is-target", "ci.yaml", {"extraction.reference": "base"},
     ["config key extraction.reference: 'base' is also extraction.target"]),
    ("extraction-reference-saw-the-patients", "ci.yaml", {"extraction.reference": "large"},
     ["config key extraction.reference: 'large' trained on the audited patients (corpus target)"]),
    # the experiments whose token kinds the extraction sets beside its rates: its target, data and sources
    ("extraction-token-kinds-unknown", "ci.yaml", {"extraction.token_kinds": ["zoo_long_mimc"]},
     ["config key extraction.token_kinds[0]: 'zoo_long_mimc' is not an experiment of the tables spec"]),
    ("extraction-token-kinds-other-target", "ci.yaml", {"extraction.target": "large"},
     ["config key extraction.token_kinds[0]: experiment 'zoo_long_mimic' has target 'base', not extraction.target 'large'"]),
    ("extraction-token-kinds-other-sources", "ci.yaml", {"extraction.token_kinds": ["zoo_long_mimic", "zoo_long_i2b2"]},
     ["config key extraction.token_kinds[1]: experiment 'zoo_long_i2b2' compares non-members of 'i2b2', not of "
      "extraction.sources (mimic)"]),
    ("extraction-token-kinds-no-slot-attack", "ci.yaml", {"extraction.token_kinds": ["base_long_mimic"]},
     ["config key extraction.token_kinds[0]: experiment 'base_long_mimic' has no attack with per-slot scores"]),
    ("extraction-token-kinds-no-extraction", "paper_scores.yaml", {"extraction.token_kinds": ["any"]},
     ["config key extraction.token_kinds[0]: the extraction study does not run"]),
    # 4. a model's dp fits its objective, unit, clipping and origin
    ("dp-with-mdlm", "ci.yaml", {"models.dp_eps8.objective": "mdlm"},
     ["config key models.dp_eps8.dp: dp is not offered with objective mdlm"]),
    ("dp-patient-ghost", "ci.yaml", {"models.dp_eps8.dp.unit": "patient", "models.dp_eps8.dp.clipping": "ghost"},
     ["config key models.dp_eps8.dp.clipping: ghost needs unit sample"]),
    ("dp-ghost-unfrozen", "ci.yaml", {"models.dp_eps8.freeze": [], "models.dp_eps8.dp.clipping": "ghost"},
     ["config key models.dp_eps8.dp.clipping: ghost needs the tied word embeddings frozen"]),
    ("dp-packed", "ci.yaml", {"models.dp_eps8.pack": True}, ["config key models.dp_eps8.pack: dp needs pack: false"]),
    ("dp-bf16", "ci.yaml", {"models.dp_eps8.precision": "bf16"},
     ["config key models.dp_eps8.precision: bf16 is not offered with dp"]),
    ("dp-fault-without-epsilon", "ci.yaml", {"models.dp_none_ft.dp.fault": "no_noise"},
     ["config key models.dp_none_ft.dp.fault: needs an epsilon"]),
    ("dp-unknown-key", "ci.yaml", {"models.dp_eps8.dp.epsilom": 3},
     ["config key models.dp_eps8.dp: Additional properties are not allowed ('epsilom'"]),
    ("dp-on-a-path", "ci.yaml", {"models.given": {**HUB, "dp": {"epsilon": 8}}},
     ["config key models.given.dp: a model given by path cannot be trained with DP"]),
    ("dp-canaries-replaced", "ci.yaml", {"models.dp_eps8.dp.canaries": {"count": 10}},
     ["config key models.dp_eps8.dp.canaries: set by the workflow from dp_audit.gradient_canaries"]),
    # 5. counts against their minimums, under the key written
    ("gradient-canaries-count-one", "ci.yaml", {"dp_audit.gradient_canaries.count": 1},
     ["config key dp_audit.gradient_canaries.count: must be at least 2, got 1"]),
    ("gradient-canaries-runs-zero", "ci.yaml", {"dp_audit.gradient_canaries.runs": 0},
     ["config key dp_audit.gradient_canaries.runs: 0 is less than the minimum of 1"]),
    ("gradient-canaries-runs-fraction", "ci.yaml", {"dp_audit.gradient_canaries.runs": 1.5},
     ["config key dp_audit.gradient_canaries.runs: 1.5 is not of type 'integer'"]),
    ("gradient-canaries-runs-float", "ci.yaml", {"dp_audit.gradient_canaries.runs": 2.0},
     ["config key dp_audit.gradient_canaries.runs: 2.0 is not a whole number of runs, at least 1"]),
    ("gradient-canaries-runs-without-canaries", "ci.yaml",
     {"dp_audit.gradient_canaries.runs": 2, "dp_audit.gradient_canaries.count": 0},
     ["config key dp_audit.gradient_canaries.runs: 2 runs pool the gradient canaries, but "
      "dp_audit.gradient_canaries.count is 0"]),
    ("one-run-canaries-count-one", "ci.yaml", {"dp_audit.canaries.count": 1},
     ["config key dp_audit.canaries.count: 1", "dp_private"]),
    ("canaries-digits-too-few", "ci.yaml", {"canaries.digits": 1},
     ["config key canaries.digits: 14 distinct secrets do not fit in the 10^1 secrets"]),
    ("canaries-candidates-too-many", "ci.yaml", {"canaries.digits": 2, "canaries.candidates": 87},
     ["config key canaries.candidates: 101 distinct secrets do not fit in the 10^2 secrets"]),
    ("model-heads", "ci.yaml", {"models.base.num_heads": 3},
     ["config key models.base.hidden_size: 32 is not a multiple of num_heads 3"]),
    ("dexposure-model-heads", "ci.yaml", {"dexposure.model.num_heads": 3},
     ["config key dexposure.model: hidden_size 32 is not a multiple of num_heads 3"]),
    ("shadow-mt-model-heads", "ci.yaml", {"shadow_mt.model.attention_heads": 3},
     ["config key shadow_mt.model.d_model: 32 is not a multiple of attention_heads 3"]),
    ("shadow-mt-odd-shadows", "ci.yaml", {"shadow_mt.shadows": 3},
     ["config key shadow_mt.shadows: shadows come in pairs", "got 3"]),
    ("shadow-slices-overfull", "ci.yaml", {"shadow.shadows": 4, "shadow.slice_share": 0.3},
     ["config key shadow.slice_share: slice_share 0.3 with 2 pairs of shadows: the 4 slices must fit"]),
    # 6. templates and phrases hold their slot once
    ("canaries-template-twice", "ci.yaml", {"canaries.template": "MRN {secret} and {secret} ."},
     ["config key canaries.template: must hold {secret} exactly once"]),
    ("dexposure-phrase-without-slot", "ci.yaml", {"dexposure.phrase": "The patient talks ."},
     ["config key dexposure.phrase: needs exactly one {slot}"]),
    ("dexposure-phrase-slot-twice", "ci.yaml", {"dexposure.phrase": "{slot} talks about {slot} ."},
     ["config key dexposure.phrase: needs exactly one {slot}"]),
    ("dexposure-phrase-slot-glued", "ci.yaml", {"dexposure.phrase": "The patient talks about {slot}."},
     ["config key dexposure.phrase: needs exactly one {slot} as a word of its own"]),
    ("imported-files-unknown-slot", "paper_scores.yaml", {"imported.datasets.long.files": "{root}/{modle}__{set}.txt"},
     ["config key imported.datasets.long.files: unknown slot {modle} (use {root}, {model}, {set})"]),
    ("imported-files-without-set", "paper_scores.yaml", {"imported.datasets.long.files": "{root}/long/{model}.txt"},
     ["config key imported.datasets.long.files: needs {set}: without it every set would read one file"]),
    # the audit cards: models and experiments the tables spec audits, kinds the world gives its patients
    ("audit-cards-model-not-audited", "ci.yaml", {"audit_cards.models": ["base", "ref_domain"]},
     ["config key audit_cards.models: 'ref_domain' is not an audited model", "(a configured model an experiment"]),
    ("audit-cards-experiment-of-another-target", "ci.yaml", {"audit_cards.experiments": {"base": "large_long_mimic"}},
     ["config key audit_cards.experiments.base: 'large_long_mimic' is not an experiment of the tables spec that "
      "targets 'base'"]),
    ("audit-cards-experiments-not-audited", "ci.yaml", {"audit_cards.experiments": {"ref_domain": "base_long_mimic"}},
     ["config key audit_cards.experiments.ref_domain: not an audited model"]),
    ("audit-cards-vocabulary-kind-unknown", "ci.yaml", {"audit_cards.vocabulary_kinds": ["surname", "nope"]},
     ["config key audit_cards.vocabulary_kinds[1]: 'nope' is not a kind the embedded world gives its patients "
      "(first_name, surname, physician, state)"]),
    # 7. the names the studies give their own models are reserved
    ("reserved-pool-reference", "ci.yaml", {"models.pool_ref_0": {"corpus": "domain"}},
     ["config key models.pool_ref_0: a name the workflow gives its own models (pool_ref_*"]),
    ("reserved-shadow-alice", "ci.yaml", {"models.shadow_alice": {"corpus": "target"}},
     ["config key models.shadow_alice: a name the workflow gives its own models"]),
    ("reserved-shadow-mt", "ci.yaml", {"models.shadow_mt_bob_0": {"corpus": "target"}},
     ["config key models.shadow_mt_bob_0: a name the workflow gives its own models"]),
    ("reserved-tokenizer", "ci.yaml", {"models.tokenizer": {"corpus": "target"}},
     ["config key models.tokenizer: a name the workflow gives its own models"]),
    ("reserved-world-dataset", "ci.yaml",
     {"datasets": {"clinical": {"files": [{"path": "notes.csv"}], "columns": {"text": "text", "group": "group_id"}}}},
     ["config key datasets.clinical: a name the embedded world gives its own sample table"]),
    # 8. sizes against the data the config determines (derived from the config, not built)
    ("shadow-group-size-over-the-probes", "ci.yaml", {"shadow.group_size": 9},
     ["config key shadow.group_size: 9 is more than the 8 in-probes of Alice's (shadow.probes 4 x 2 shared"]),
    ("shadow-probes-over-the-documents", "ci.yaml", {"shadow.probes": 100},
     ["config key shadow.probes: 100 probes per side", "register 'case_reports'", "at most 40 documents"]),
    ("shadow-ood-probes-over-the-documents", "ci.yaml", {"shadow.ood": ["abstracts"], "shadow.probes": 13},
     ["config key shadow.probes: 13 probes", "need 7 documents of register 'abstracts'", "at most 6 documents"]),
    ("shadow-bob-too-few-documents", "ci.yaml", {"shadow.shared": ["mimic"], "shadow.bob_share": 0.1},
     ["config key shadow.slice_share: Bob's 'mimic' data holds at most 12 documents"]),
    ("shadow-group-size-over-bob", "ci.yaml", {"shadow.probes": 60, "shadow.probe_sentences": 4,
                                               "shadow.shared": ["mimic"], "shadow.group_size": 31},
     ["config key shadow.group_size: 31 is more than the at most 30 sentences per side of Bob:valid"]),
    ("shadow-mt-group-size-over-the-probes", "ci.yaml", {"shadow_mt.group_size": 9},
     ["config key shadow_mt.group_size: 9 is more than the 8 in-probes"]),
    ("shadow-mt-probes-over-the-documents", "ci.yaml", {"shadow_mt.probes": 40},
     ["config key shadow_mt.probes: 40 probes per side", "subcorpus 'discharge'", "20 documents"]),
    ("shadow-mt-news-over-the-corpus", "ci.yaml", {"shadow_mt.corpus.documents.news": 100000},
     ["config key shadow_mt.corpus.documents.news: 100000 documents asked, the news corpus holds"]),
    ("samples-over-the-world", "ci.yaml", {"samples.counts.member.mimic": {"short": 125, "long": 126}},
     ["config key samples.counts.member.mimic: 251 samples asked for (short, long)", "at most 250 sentences"]),
    ("neighbours-subsample-over-the-samples", "ci.yaml", {"neighbours.subsample": {"nonmember": {"mimic": {"long": 17}}}},
     ["config key neighbours.subsample.nonmember.mimic: 17 long samples asked for, samples.counts.nonmember.mimic gives 16"]),
    ("neighbours-subsample-negative", "ci.yaml", {"neighbours.subsample": {"nonmember": {"mimic": -1}}},
     ["config key neighbours.subsample.nonmember.mimic: -1 is less than the minimum of 1"]),
    ("neighbours-subsample-unknown-role", "ci.yaml", {"neighbours.subsample": {"population": {"mimic": 4}}},
     ["config key neighbours.subsample.population: not an audited role (use member, member_heldin, nonmember"]),
    ("neighbours-subsample-unknown-source", "ci.yaml", {"neighbours.subsample": {"member": {"i2b2": 4}}},
     ["config key neighbours.subsample.member.i2b2: samples.counts.member has no source 'i2b2'"]),
    # 11. nothing silently dropped or replaced
    ("training-text-of-a-trained-model", "ci.yaml", {"models.base.training_text": "text.csv"},
     ["config key models.base.training_text: 'base' is trained on corpus target"]),
    ("dp-audit-without-dp-models", "byo", {"dp_audit": {}},
     ["config key dp_audit: no model the workflow trains has a dp setting"]),
    ("references-read-by-no-experiment", "byo",
     {"references": {"count": 2, "pool": "notes.csv", "dataset": "notes", "init": "reference", "settings": {"epochs": 1}},
      "audit.attacks": ["loss", "likelihood_ratio"]},
     ["config key references: no experiment of config key audit reads the reference pool"]),
    # an audit's attacks: each one the config can give its inputs (a pool, the paper's attack among them)
    ("audit-attack-needs-a-pool", "byo", {"audit.attacks": ["loss", "likelihood_ratio", "rmia"]},
     ["config key audit.attacks[2]: 'rmia' needs a reference pool (a references: section), which this config lacks"]),
    ("audit-attack-unknown", "byo", {"audit.attacks": ["likelihood_ratio", "lira"]},
     ["config key audit.attacks[1]: unknown attack 'lira' (known: blind, informia, likelihood_ratio,"]),
    ("audit-attack-online-only", "byo", {**PUBLIC, "references": dict(POOL, online=False),
                                         "audit.attacks": ["likelihood_ratio", "lira_offline", "lira_online"]},
     ["config key audit.attacks[2]: 'lira_online' needs reference models trained on half of the audited patients "
      "(references.online: true)"]),
    ("audit-attack-rmia-tuned-on-two", "byo", {**PUBLIC, "references": dict(POOL, count=2), "audit.attacks": ["likelihood_ratio", "rmia"]},
     ["config key audit.attacks[1]: 'rmia' needs at least 3 reference models trained on half of the audited patients "
      "to tune a: auto (references.online: true, references.count >= 3; here online is true, count 2), or a fixed "
      "attacks.rmia.a"]),
    ("audit-attack-tokenizes-otherwise", "byo", {**PUBLIC, "models.target": {"path": "ckpt_other"}, "references": POOL,
                                                 "audit.attacks": ["likelihood_ratio", "lira_offline", "informia"]},
     ["config key audit.attacks[2]: 'informia' needs a pool that tokenizes each sample as the target",
      "the tokenizer of the pool's init 'public' (references.init) is not the one of target 'target' (their "
      "vocabularies differ)"]),
    ("audit-attacks-without-the-papers", "byo", {"audit.attacks": ["loss", "zlib"]},
     ["config key audit.attacks: leaves out likelihood_ratio, the paper's attack that every audit card reports"]),
    ("audit-dataset-imported", "paper_scores.yaml",
     {"models": {"base": HUB, "pubmed": HUB},
      "audit": {"dataset": "long", "targets": ["base"], "references": ["pubmed"], "nonmembers": ["mimic"], "population": "i2b2"}},
     ["config key audit.dataset: 'long' is an imported score set (imported.datasets); an audit scores the text of a "
      "dataset of sample files"]),
    ("audit-pool-of-another-dataset", "byo", {"datasets.other": {"files": [{"path": "notes.csv"}], "columns": {"text": "text", "group": "group_id"}},
                                              **PUBLIC, "references": dict(POOL, dataset="other")},
     ["config key references.dataset: 'other' is not the audit's dataset 'notes' (audit.dataset)"]),
    ("audit-pool-continues-a-target", "byo", {**PUBLIC, "references": dict(POOL, init="target")},
     ["config key references.init: 'target' is an audited target (audit.targets)"]),
    ("references-without-init-or-the-world", "byo", {"references": {"count": 4, "pool": "pool.csv", "dataset": "notes",
                                                                    "settings": {"epochs": 1}}},
     ["config key references.init: needed without the embedded world (a corpus: section)"]),
    ("references-world-pool-without-the-world", "byo", {**PUBLIC, "references": dict(POOL, pool="domain")},
     ["config key references.pool: 'domain' is a corpus of the embedded world (a corpus: section), which this config "
      "lacks"]),
    ("training-text-missing", "byo", {"models.target.training_text": "gone.csv"},
     ["config key models.target.training_text: file not found: gone.csv"]),
    ("tokenizer-missing", "byo", {"models.target.tokenizer": "data/tokenizers/gone"},
     ["config key models.target.tokenizer: no such file or directory: data/tokenizers/gone"]),
    # a tokenizer that is not the checkpoint's own, from their files (`write_byo_files`), before any job
    ("tokenizer-not-the-checkpoints", "byo", {"models.target": {"path": "ckpt", "tokenizer": "tok5"}},
     ["config key models.target.tokenizer: the tokenizer tok5 has 5 tokens but the checkpoint ckpt has 200 "
      "vocabulary rows, more than padding explains: it is not the checkpoint's own tokenizer"]),
    ("dataset-tokenizer-not-its-checkpoints", "byo", {"datasets.notes.tokenizer": "ckpt_tok5"},
     ["config key datasets.notes.tokenizer: the tokenizer ckpt_tok5 has 5 tokens but the checkpoint ckpt_tok5 "
      "has 200 vocabulary rows, more than padding explains"]),
    ("shadow-without-the-world", "byo", {"shadow": {"shared": ["mimic"], "in_house": "i2b2", "ood": [],
                                                    "alice": "target", "bob": "target"}},
     ["config key shadow: needs the embedded world (a corpus: section)"]),
    ("shadow-mt-without-the-world", "byo", {"shadow_mt": {"probes": 4}},
     ["config key shadow_mt: needs the embedded world (a corpus: section)"]),
    ("dp-corpus-without-the-world", "byo", {"dp_corpus": {"patients": 3}},
     ["config key dp_corpus: needs the embedded world (a corpus: section)"]),
    ("model-corpus-without-the-world", "byo", {"models.extra": {"corpus": "target"}},
     ["config key models.extra.corpus: 'target' needs the embedded world (a corpus: section)"]),
]  # fmt: skip

#: configs just inside a limit: each passes (so that its check can fail)
PASSES = [
    ("run-dots-in-a-name", "ci.yaml", {"run": "ci.v2"}),
    ("tokenizer-the-checkpoints-own", "byo", {"models.target": {"path": "ckpt"}, "datasets.notes.tokenizer": "ckpt"}),
    ("tokenizer-within-padding", "byo", {"models.target": {"path": "ckpt", "tokenizer": "tok72"}}),
    ("shadow-group-size-at-the-probes", "ci.yaml", {"shadow.group_size": 8}),
    ("shadow-mt-group-size-at-the-probes", "ci.yaml", {"shadow_mt.group_size": 8}),
    ("shadow-ood-probes-at-the-documents", "ci.yaml", {"shadow.ood": ["abstracts"], "shadow.probes": 12}),
    ("shadow-bob-at-enough-documents", "ci.yaml", {"shadow.shared": ["mimic"], "shadow.bob_share": 0.107}),
    ("shadow-group-size-at-bob", "ci.yaml", {"shadow.probes": 60, "shadow.probe_sentences": 4,
                                             "shadow.shared": ["mimic"], "shadow.group_size": 30}),
    ("reserved-like-but-not-reserved", "ci.yaml", {"models.pool_reference": {"corpus": "domain"},
                                                   "models.shadowy": {"corpus": "domain"}}),
    ("canaries-digits-at-the-space", "ci.yaml", {"canaries.digits": 2, "canaries.candidates": 86}),
    ("gradient-canaries-count-two", "ci.yaml", {"dp_audit.gradient_canaries.count": 2}),
    ("gradient-canaries-off", "ci.yaml", {"dp_audit.gradient_canaries.count": 0}),
    ("gradient-canaries-runs-two", "ci.yaml", {"dp_audit.gradient_canaries.runs": 2}),
    ("gradient-canaries-one-run-without-canaries", "ci.yaml",
     {"dp_audit.gradient_canaries.runs": 1, "dp_audit.gradient_canaries.count": 0}),
    ("dp-patient-per-sample", "ci.yaml", {"models.dp_eps8.dp.unit": "patient", "models.dp_eps8.dp.clipping": "auto"}),
    ("extraction-reference-never-saw", "ci.yaml", {"extraction.reference": "ref_general"}),
    ("shadow-slices-full", "ci.yaml", {"shadow.shadows": 4, "shadow.slice_share": 0.25}),
    ("samples-at-the-world", "ci.yaml", {"samples.counts.member.mimic": {"short": 125, "long": 125}}),
    ("neighbours-subsample-at-the-samples", "ci.yaml", {"neighbours.subsample": {"nonmember": {"mimic": {"short": 2, "long": 16}}}}),
    ("dexposure-entity-of-a-measured-class", "ci.yaml", {"dexposure.entities": {"PERSON": "Ann"}}),
    ("audit-with-a-pool", "byo", {**PUBLIC, "references": POOL}),
    ("audit-rmia-fixed-a-offline", "byo", {**PUBLIC, "references": dict(POOL, online=False, count=2),
                                           "attacks": {"rmia": {"a": 0.5}}, "audit.attacks": ["likelihood_ratio", "rmia"]}),
    ("audit-slot-attacks-same-tokenizer", "byo", {**PUBLIC, "models.target": {"path": "ckpt_copy"}, "references": POOL,
                                                  "audit.attacks": ["likelihood_ratio", "informia",
                                                                    "lira_multivariate_online"]}),
    ("audit-rmia-tuned-on-three", "byo", {**PUBLIC, "references": dict(POOL, count=3), "audit.attacks": ["likelihood_ratio", "rmia"]}),
    ("public-tokenizer-as-inherited", "ci.yaml", {"models.base.public_tokenizer": False,
                                                  "models.given": {**HUB, "public_tokenizer": True},
                                                  "models.tuned": {"corpus": "target", "init": "given",
                                                                   "public_tokenizer": True}}),
    ("extraction-token-kinds-short-and-long", "ci.yaml", {"extraction.token_kinds": ["zoo_long_mimic", "zoo_short_mimic"]}),
    ("audit-cards-chosen", "ci.yaml", {"audit_cards.models": ["large"], "audit_cards.experiments": {"base": "base_long_i2b2"},
                                       "audit_cards.vocabulary_kinds": ["surname"]}),
]  # fmt: skip


def case_config(base: str, edits: dict) -> dict:
    config = byo() if base == "byo" else load(base)
    if base == "paper_scores.yaml":
        config["imported"]["root"] = str(paper_scores_root())
    return edited(config, edits)


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory of its own, with the bring-your-own files: whatever a check wrote
    would land here (results/ must stay absent)."""
    monkeypatch.chdir(tmp_path)
    write_byo_files(tmp_path)
    return tmp_path


@pytest.mark.parametrize("case_id, base, edits, fragments", CASES, ids=[c[0] for c in CASES])
def test_a_config_mistake_is_refused_in_one_line(case_id, base, edits, fragments, elsewhere):
    with pytest.raises(UserError) as info:
        Study.from_config(case_config(base, edits), REPO).plans()
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith("config key "), message
    for fragment in fragments:
        assert fragment in message, message
    assert not (elsewhere / "results").exists()
    # docs/bad_inputs.md prints the code's own message for the case (`<dir>`: the test's folder)
    documented = re.search(rf"^\| `{case_id}` \|.*\| `mlmia: error: (.*)` \|$", BAD_INPUTS, flags=re.M)
    assert documented and documented.group(1) == message.replace(str(elsewhere), "<dir>"), message


@pytest.mark.parametrize("case_id, base, edits", PASSES, ids=[c[0] for c in PASSES])
def test_a_config_just_inside_a_limit_passes(case_id, base, edits, elsewhere):
    Study.from_config(case_config(base, edits), REPO).plans()
    assert not (elsewhere / "results").exists()


def test_the_shipped_configs_pass(elsewhere):
    """Every config the project ships passes the checks (the paper's with stand-ins for its
    credentialed files, bring-your-own's with stand-ins for the default run's outputs)."""
    from test_study import with_fake_files

    for name in ("config.yaml", "ci.yaml"):
        Study.from_config(load(name), REPO).plans()
    faults = load("ci.yaml")
    faults["models"] |= load("dp_faults.yaml")["models"]
    Study.from_config(faults, REPO).plans()
    Study.from_config(case_config("paper_scores.yaml", {}), REPO).plans()
    for names in (["paper.yaml"], ["paper.yaml", "paper_raw.yaml"]):
        config = {key: value for name in names for key, value in load(name).items()}
        Study.from_config(with_fake_files(elsewhere, config), REPO).plans()
    byo_config = load("byo_example.yaml")
    for spec in byo_config["models"].values():
        (elsewhere / spec["path"]).mkdir(parents=True)
    table = elsewhere / byo_config["datasets"]["notes"]["files"][0]["path"]
    table.parent.mkdir(parents=True)
    pd.DataFrame(
        {"sample_id": ["s"], "group_id": ["p"], "text": ["a b"], "role": ["member"], "source": ["mimic"]}
    ).to_parquet(table)
    Study.from_config(byo_config, REPO).plans()
    shutil.rmtree(elsewhere / "results")  # the stand-ins; nothing else is written there


def test_the_derived_sizes_are_the_built_worlds():
    """The sizes the checks derive from the config (nothing built) are those of the world and the
    parallel corpus config/ci.yaml builds: the documents of every register and subcorpus (at most,
    where `exact` is not claimed), their sentences at most `most`, the patients by role and source."""
    from mlmia.terms.schema import schema_path, validate
    from mlmia.world.corpus import build_world, corpus_settings, world_patients
    from mlmia.world.parallel import build_parallel_corpus, subcorpus_documents
    from mlmia.world.subcorpora import register_documents, subcorpora

    config = validate(load("ci.yaml"), schema_path("config"))  # resolved, as the jobs get it
    world = build_world(config["corpus"])
    built = {"world": subcorpora(world["samples"], world["domain"], world["general"]),
             "parallel": build_parallel_corpus(config["shadow_mt"]["corpus"], config["corpus"]["seed"])}  # fmt: skip
    derived = {
        "world": register_documents(config["corpus"]),
        "parallel": subcorpus_documents(config["shadow_mt"]["corpus"]),
    }
    for corpus, table in built.items():
        sentences = table.groupby(["subcorpus", "group_id"]).size()
        for name, size in derived[corpus].items():
            if size is None:  # the Wikipedia register: not sized by the settings
                continue
            documents = sentences[name] if name in sentences.index.get_level_values(0) else pd.Series(dtype=int)
            assert (len(documents) == size.count) if size.exact else (len(documents) <= size.count), (corpus, name)
            assert documents.max() <= size.most, (corpus, name)
    assert derived["world"]["encyclopedic"].count > 0 and sorted(derived["world"]) == sorted(
        set(built["world"]["subcorpus"]) | {"wikipedia"}
    )
    plain = world["samples"][world["samples"]["variant"] == "plain"]
    patients = plain.groupby(["role", "source"])["group_id"].nunique().to_dict()
    assert {key: n for key, n in world_patients(corpus_settings(config["corpus"])).items() if n} == patients


# --------------------------------------------------------------------------------------------
# a user's file: checked by the first job that reads it, naming the file and the config key


class Namespace(SimpleNamespace):
    """A rule's `input`, `params` or `output` as a script reads them (attributes, `get`)."""

    def get(self, key, default=None):
        return getattr(self, key, default)


def fails_as_its_rule_runs_it(script: str, capsys, **parts) -> str:
    """The one error line of workflow/scripts/`script` run as its rule runs it (the `snakemake`
    object: `parts`), which must fail."""
    snakemake = SimpleNamespace(log=[], **{key: Namespace(**value) if isinstance(value, dict) else value
                                           for key, value in parts.items()})  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(REPO / "workflow" / "scripts" / script), init_globals={"snakemake": snakemake})
    assert exit_.value.code == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mlmia: error:")]
    assert len(lines) == 1
    return lines[0]


FILE_CASES = [
    "file-extraction-phi-without-value",
    "file-extraction-phi-unknown-sample",
    "file-reference-pool-without-text",
    "file-raw-noteevents-without-text",
    "file-dataset-patient-in-two-sources",
    "file-raw-names-first-name-only",
]


@pytest.mark.parametrize("case_id", FILE_CASES)
def test_a_users_file_is_named_by_file_and_key(case_id, elsewhere, capsys):
    out = elsewhere / "out.parquet"
    if case_id == "file-extraction-phi-without-value":
        line = fails_as_its_rule_runs_it("extraction_values.py", capsys, params={"phi": "phi_no_value.csv", "corpus": None},
                                         input={"phi": "phi_no_value.csv", "samples": "samples.parquet"},
                                         output=[str(out)])  # fmt: skip
        assert line == "mlmia: error: config key extraction.phi: phi_no_value.csv: missing column(s) value"
    elif case_id == "file-extraction-phi-unknown-sample":  # checked against the samples before any model is read
        pd.DataFrame({"sample_id": ["s0"], "group_id": ["p0"], "text": ["Dr Ann Lee saw him"]}).to_parquet(
            "samples.parquet"
        )
        pd.DataFrame({"sample_id": ["s9"], "kind": ["name"], "value": ["Ann Lee"]}).to_csv("phi.csv", index=False)
        line = fails_as_its_rule_runs_it("extraction_values.py", capsys, params={"phi": "phi.csv", "corpus": None},
                                         input={"phi": "phi.csv", "samples": "samples.parquet"},
                                         output=[str(out)])  # fmt: skip
        assert line == "mlmia: error: config key extraction.phi: phi.csv: row 0: sample_id is not in the dataset"
        assert "Ann" not in line  # no value in a message
    elif case_id == "file-reference-pool-without-text":
        pd.DataFrame({"sample_id": ["d0"], "group_id": ["d"]}).to_csv("pool.csv", index=False)
        line = fails_as_its_rule_runs_it(
            "reference_splits.py", capsys, input={"pool": "pool.csv", "samples": "notes.csv"},
            params={"names": ["pool_ref_0", "pool_ref_1"], "seed": 0, "online": True, "aliases": {}},
            output={"splits": str(out), "texts": []},
        )  # fmt: skip
        assert line == "mlmia: error: config key references.pool: pool.csv lacks column(s) text"
    elif case_id == "file-dataset-patient-in-two-sources":  # prepare_dataset reads the files before any model
        (elsewhere / "mimic.csv").write_text("patient_id,note_id,sentence,text\n110,1,0,seen in clinic\n")
        (elsewhere / "i2b2.csv").write_text("patient_id,note_id,sentence,text\n110,110-01,0,no distress\n")
        spec = {**defaults("datasets", "*"), "columns": {"group": 0, "text": 3},  # the validated entry
                "files": [{"path": "mimic.csv", "role": "member", "source": "mimic"},
                          {"path": "i2b2.csv", "role": "nonmember", "source": "i2b2"}]}  # fmt: skip
        line = fails_as_its_rule_runs_it(
            "prepare_dataset.py", capsys, input={}, output=[str(out)],
            params={"spec": spec, "key": "datasets.clinical", "tokenizer": "bert-base-uncased", "requirements": []},
        )  # fmt: skip
        assert line == (
            "mlmia: error: datasets.clinical (mimic.csv, i2b2.csv): patient '110' is in two roles (member and "
            "nonmember); a patient plays one role; it is listed under sources i2b2 and mimic: if these are different "
            "populations, set datasets.clinical.group_ids: by_source"
        )
    elif case_id == "file-raw-names-first-name-only":  # Base-b saw "FIRST LAST text": a first name alone is refused
        (elsewhere / "NOTEEVENTS.csv").write_text(
            'ROW_ID,SUBJECT_ID,CATEGORY,ISERROR,TEXT\n1,7,Discharge summary,,"Seen today.\nHe is well."\n'
        )
        (elsewhere / "members.csv").write_text("SUBJECT_ID\n7\n")
        (elsewhere / "names.csv").write_text("SUBJECT_ID,FIRST_NAME\n7,Ann\n")
        line = fails_as_its_rule_runs_it(
            "import_mimic_notes.py", capsys, output=[str(elsewhere / "raw" / "mimic_member.csv")],
            input={"noteevents": "NOTEEVENTS.csv", "member_lists": ["members.csv"], "names": "names.csv"},
            params={"categories": None, "patients": {"member": 1}, "seed": 0},
        )  # fmt: skip
        assert line == (
            "mlmia: error: config key raw.mimic.names: names.csv: expected the columns SUBJECT_ID,name or "
            "SUBJECT_ID,FIRST_NAME,LAST_NAME (Lehman et al.'s layout); the file has: SUBJECT_ID, FIRST_NAME"
        )
    else:
        (elsewhere / "NOTEEVENTS.csv").write_text("ROW_ID,SUBJECT_ID,CATEGORY,ISERROR\n1,7,Discharge summary,\n")
        (elsewhere / "members.csv").write_text("SUBJECT_ID\n7\n")
        line = fails_as_its_rule_runs_it(
            "import_mimic_notes.py", capsys, input={"noteevents": "NOTEEVENTS.csv", "member_lists": ["members.csv"]},
            params={"categories": None, "patients": {"member": 1}, "seed": 0}, output=[str(elsewhere / "raw" / "x.csv")],
        )  # fmt: skip
        assert line.startswith("mlmia: error: config key raw.mimic.noteevents: NOTEEVENTS.csv: missing column(s) TEXT")
    assert not out.exists() and not (elsewhere / "raw").exists()


#: the catalogue's page, whose lines the tests hold to the code's messages
BAD_INPUTS = (REPO / "docs" / "bad_inputs.md").read_text()


def test_the_docs_list_every_case():
    table = BAD_INPUTS
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", table, flags=re.M))
    assert {case[0] for case in CASES} | set(FILE_CASES) <= documented


# --------------------------------------------------------------------------------------------
# end to end: `snakemake -n` stops before any job, in one line

E2E = [
    "run-dotdot",
    "attacks-min-k-fraction-over-one",
    "canaries-reference-unknown",
    "shadow-alice-unknown",
    "dp-with-mdlm",
    "shadow-group-size-over-the-probes",
    "audit-attack-needs-a-pool",
    "audit-attack-unknown",
]


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("config_checks_workflow"))


@pytest.mark.parametrize("case_id", E2E)
def test_snakemake_stops_before_any_job(case_id, workflow_copy, tmp_path):
    _, base, edits, fragments = next(case for case in CASES if case[0] == case_id)
    root = tmp_path / "run"
    shutil.copytree(workflow_copy, root)
    (root / "mistake.yaml").write_text(yaml.safe_dump(case_config(base, edits)))
    result = run_snakemake(root, "-n", "--configfile", "mistake.yaml", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    lines = [line for line in output.splitlines() if line.startswith("mlmia: error:")]
    assert len(lines) == 1 and "Traceback" not in output, output[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert not (root / "results").exists() and not (root / "corpus").exists()
