"""Extraction of PHI by infilling (`mlmia.memorization.extraction`) against hand computations and brute force."""

import itertools
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, run_snakemake
from world_helpers import resolved

from mlmia.core.errors import UserError
from mlmia.memorization.extraction import (
    _reconstruction,
    extraction_rates,
    infill,
    k_best_sums,
    locate_values,
    named_spans,
    rate_by_occurrences,
    rate_differences,
)
from mlmia.metrics.bootstrap import multiplicities
from mlmia.terms.schema import defaults

#: the spans read per forward pass a test leaves to the config: the schema's
BATCH_SIZE = defaults("extraction")["batch_size"]


def test_values_are_found_between_word_boundaries_in_their_own_patients_samples_only():
    samples = pd.DataFrame({
        "sample_id": ["s1", "s2", "s3"], "group_id": ["p1", "p1", "p2"],
        "text": ["Dr. Ann saw Annette; ann again.", "metoprolol 25 mg and 25 tablets", "Ann is here"],
    })  # fmt: skip
    values = pd.DataFrame({
        "group_id": ["p1", "p1"], "kind": ["surname", "dose"], "value": ["Ann", "25"],
        "left": [None, "metoprolol "], "right": [None, " mg"],
    })  # fmt: skip
    spans = locate_values(samples, values)
    # "Ann" twice in s1 (not inside "Annette"), none for p2 (not its value); the dose only in its context
    ann = spans[spans.kind == "surname"]
    assert ann.sample_id.tolist() == ["s1", "s1"] and ann.occurrences.tolist() == [2, 2]
    assert [(a, b) for a, b in zip(ann.start, ann.end)] == [(4, 7), (21, 24)]
    dose = spans[spans.kind == "dose"]
    assert dose.sample_id.tolist() == ["s2"] and (dose.start.item(), dose.end.item()) == (11, 13)


def test_a_values_table_without_a_value_is_refused_in_one_line():
    samples = pd.DataFrame({"sample_id": ["s"], "group_id": ["p"], "text": ["x"]})
    with pytest.raises(UserError, match="missing column"):
        locate_values(samples, pd.DataFrame({"group_id": ["p"], "kind": ["k"]}))
    with pytest.raises(UserError, match="row 0: the value is empty"):
        locate_values(samples, pd.DataFrame({"group_id": ["p"], "kind": ["k"], "value": [" "]}))


def test_spans_a_user_names_in_each_of_the_three_forms():
    samples = pd.DataFrame({"sample_id": ["s1", "s2"], "group_id": ["p", "p"],
                            "text": ["Ann met ANN here", "Ann left"]})  # fmt: skip
    # offsets: the two named spans of one text are two occurrences of one value; s2's is another sample's
    offsets = pd.DataFrame({"sample_id": ["s1", "s1", "s2"], "kind": "name", "start": [0, 8, 0], "end": [3, 11, 3]})
    spans = named_spans(samples, offsets)
    first = spans[spans.sample_id == "s1"]
    assert first.occurrence.tolist() == [0, 1] and first.occurrences.tolist() == [2, 2]
    assert first.value_id.nunique() == 1 and spans.value_id.nunique() == 1  # one patient's one value
    # values per sample: found in that sample only (not in s2, although s2 holds it too)
    per_sample = named_spans(samples, pd.DataFrame({"sample_id": ["s1"], "kind": ["name"], "value": ["ann"]}))
    assert per_sample.sample_id.tolist() == ["s1", "s1"] and set(per_sample.group_id) == {"p"}
    # values per patient: found in each of its samples
    per_patient = named_spans(samples, pd.DataFrame({"group_id": ["p"], "kind": ["name"], "value": ["Ann"]}))
    assert per_patient.sample_id.tolist() == ["s1", "s1", "s2"]


@pytest.mark.parametrize(
    "table, message",
    [
        (pd.DataFrame({"sample_id": ["zz"], "kind": ["k"], "start": [0], "end": [1]}), "row 0: sample_id is not in"),
        (pd.DataFrame({"sample_id": ["s1"], "kind": ["k"], "start": [3], "end": [99]}), "row 0: the span 3-99 is not"),
        (pd.DataFrame({"sample_id": ["s1"], "kind": ["k"], "start": ["a"], "end": [2]}), "row 0: start and end must"),
        (pd.DataFrame({"sample_id": ["zz"], "kind": ["k"], "value": ["x"]}), "row 0: sample_id is not in"),
        (pd.DataFrame({"kind": ["k"], "value": ["x"]}), "give sample_id, kind, start, end"),
    ],
)
def test_unusable_named_spans_are_refused_in_one_line(table, message):
    samples = pd.DataFrame({"sample_id": ["s1"], "group_id": ["p"], "text": ["Ann met"]})
    with pytest.raises(UserError, match=message) as caught:
        named_spans(samples, table, where="phi.csv")
    assert str(caught.value).startswith("phi.csv: ") and "Ann" not in str(caught.value)


def test_k_best_sums_equal_brute_force():
    rng = np.random.default_rng(0)
    for positions, vocab, k in ((1, 7, 3), (3, 6, 5), (4, 4, 20), (2, 3, 50)):
        logp = rng.normal(size=(positions, vocab))
        every = sorted((sum(c) for c in itertools.product(*logp)), reverse=True)
        assert k_best_sums(logp, k) == pytest.approx(every[:k])


def test_reconstruction_by_hand():
    logp = np.log(np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3]]))
    # truth (0, 1): the argmax everywhere, nothing above it
    assert _reconstruction(logp, np.array([0, 1]), top_k=2) == (True, True, 0)
    # truth (1, 1): 0.15; above it (0,1)=0.30, (0,2)=0.18: rank 2, so top-3 but not top-2
    assert _reconstruction(logp, np.array([1, 1]), top_k=3) == (False, True, 2)
    assert _reconstruction(logp, np.array([1, 1]), top_k=2) == (False, False, 2)


class _Rigged:
    """A masked LM stand-in: at every position the logits favour token `favourite`; records
    the inputs it was given."""

    def __init__(self, vocab_size, favourite):
        import torch

        self.vocab_size, self.favourite, self.seen, self.training = vocab_size, favourite, [], False
        self._weight = torch.nn.Parameter(torch.zeros(1))

    def parameters(self):
        yield self._weight

    def eval(self):
        return self

    def train(self, mode=True):
        self.training = mode
        return self

    def __call__(self, input_ids, attention_mask):
        import torch

        self.seen.append(input_ids.clone())
        logits = torch.zeros((*input_ids.shape, self.vocab_size))
        logits[..., self.favourite] = 5.0
        return type("Out", (), {"logits": logits})()


def test_infill_masks_every_occurrence_and_reads_the_first(tiny_bert_dir):
    from mlmia.models.loading import load_tokenizer

    tokenizer = load_tokenizer(tiny_bert_dir)
    samples = pd.DataFrame({
        "sample_id": ["a", "b"], "group_id": ["p", "p"],
        "text": ["aspirin given with aspirin daily", "insulin given daily"],
    })  # fmt: skip
    values = pd.DataFrame({"group_id": ["p", "p"], "kind": ["drug", "drug"], "value": ["aspirin", "insulin"]})
    spans = locate_values(samples, values)
    aspirin = tokenizer.convert_tokens_to_ids("aspirin")
    model = _Rigged(len(tokenizer), aspirin)
    model.max_length = 40
    out = infill(model, tokenizer, samples, spans, top_k=1, batch_size=BATCH_SIZE)
    by_sample = out.set_index("sample_id")
    # the favourite token is the planted value: reconstructed; the other value is not, even at top_k=1
    assert (
        bool(by_sample.loc["a", "top1"]) and bool(by_sample.loc["a", "topk"]) and by_sample.loc["a", "occurrences"] == 2
    )
    assert not bool(by_sample.loc["b", "top1"]) and not bool(by_sample.loc["b", "topk"])
    # both occurrences of aspirin were masked in the one input the model saw for sample a
    seen = model.seen[0][0].tolist()
    assert aspirin not in seen and seen.count(tokenizer.mask_token_id) == 2
    assert "text" not in out.columns and "value" not in out.columns  # flags and counts only


class _Conditional(_Rigged):
    """At the span's first position token `a` (logit 5); at its second, token `b` (logit 6) when
    the first reads `a`, else token `c` (logit 4): the second depends on the first."""

    def __init__(self, vocab_size, first, a, b, c):
        super().__init__(vocab_size, a)
        self.first, self.a, self.b, self.c = first, a, b, c

    def __call__(self, input_ids, attention_mask):
        import torch

        self.seen.append(input_ids.clone())
        logits = torch.zeros((*input_ids.shape, self.vocab_size))
        logits[:, self.first, self.a] = 5.0
        follows = input_ids[:, self.first] == self.a
        logits[follows, self.first + 1, self.b] = 6.0
        logits[~follows, self.first + 1, self.c] = 4.0
        return type("Out", (), {"logits": logits})()


def test_the_iterative_fill_reads_a_token_with_the_ones_already_filled(tiny_bert_dir):
    from mlmia.models.loading import load_tokenizer

    tokenizer = load_tokenizer(tiny_bert_dir)
    samples = pd.DataFrame({"sample_id": ["a"], "group_id": ["p"], "text": ["patient given aspirin daily"]})
    values = pd.DataFrame({"group_id": ["p"], "kind": ["drug"], "value": ["given aspirin"]})
    ids = tokenizer("patient given aspirin daily")["input_ids"]
    given, aspirin, insulin = (tokenizer.convert_tokens_to_ids(t) for t in ("given", "aspirin", "insulin"))
    model = _Conditional(len(tokenizer), ids.index(given), given, aspirin, insulin)
    out = infill(model, tokenizer, samples, locate_values(samples, values), top_k=1, batch_size=BATCH_SIZE).iloc[0]
    # one pass reads "given insulin" (the second position sees a mask); filling "given" first, then
    # reading again, gives "given aspirin": the value. Two passes were run.
    assert not out.top1_one_pass and out.top1 and out.topk and len(model.seen) == 2
    assert (
        model.seen[1][0, ids.index(given)] == given and model.seen[1][0, ids.index(aspirin)] == tokenizer.mask_token_id
    )


def results_table():
    # two models, members m1-m3 and non-members n1-n2; one value per patient, sample level
    rows = []
    for model, hits in (("target", [1, 1, 0, 1, 0, 0]), ("reference", [0, 1, 0, 0, 0, 0])):
        for (sample, group), hit in zip(
            [("a", "m1"), ("b", "m1"), ("c", "m2"), ("d", "m3"), ("e", "n1"), ("f", "n2")], hits
        ):
            rows.append(dict(model=model, sample_id=sample, group_id=group, kind="surname", value_id=f"v-{group}",
                             n_tokens=1, occurrences=1, top1=bool(hit), topk=bool(hit), rank_below_k=0))  # fmt: skip
    return pd.DataFrame(rows)


ROLES = {"m1": "member", "m2": "member", "m3": "member", "n1": "nonmember", "n2": "nonmember"}


def test_rates_and_their_replicates_by_hand():
    estimates, replicates = extraction_rates(results_table(), ROLES, replicates=30, seed=3)
    cell = estimates.set_index(["model", "role", "kind", "level", "metric"])
    # sample level: target members 3 of 4 samples; patient level: m1 and m3 of 3 patients
    assert cell.loc[("target", "member", "surname", "sample", "top1"), "value"] == pytest.approx(0.75)
    assert cell.loc[("target", "member", "surname", "patient", "top1"), "value"] == pytest.approx(2 / 3)
    assert cell.loc[("reference", "member", "all", "sample", "top1"), "value"] == pytest.approx(0.25)
    # replicate 7 by hand: member patients (m1, m2, m3) drawn with these multiplicities
    m = multiplicities(3, 3, 7, ("member",))
    expected = (m[0] * 2 + m[2] * 1) / (m[0] * 2 + m[1] + m[2])
    rep = replicates[(replicates.model == "target") & (replicates.role == "member") & (replicates.kind == "surname")
                     & (replicates.level == "sample") & (replicates.metric == "top1") & (replicates.replicate == 7)]  # fmt: skip
    assert rep.value.item() == pytest.approx(expected)


def test_differences_are_paired_on_the_same_replicates():
    estimates, replicates = extraction_rates(results_table(), ROLES, replicates=50, seed=1)
    diffs = rate_differences(estimates, replicates, [
        {"name": "target_vs_reference", "first": {"model": "target", "role": "member"},
         "second": {"model": "reference", "role": "member"}},
        {"name": "same", "first": {"model": "target", "role": "member"}, "second": {"model": "target", "role": "member"}},
        {"name": "members_vs_nonmembers", "first": {"model": "target", "role": "member"},
         "second": {"model": "target", "role": "nonmember"}},
    ])  # fmt: skip
    row = diffs.set_index(["comparison", "kind", "level", "metric"])
    assert row.loc[("target_vs_reference", "surname", "sample", "top1"), "difference"] == pytest.approx(0.5)
    assert (diffs.n == 50).all()  # every replicate draws members and non-members: all 50 have the difference
    # a cell against itself: every replicate difference is 0, so is the interval (paired)
    same = row.loc[("same", "surname", "sample", "top1")]
    assert same.difference == 0 and same.ci_low == 0 and same.ci_high == 0
    # the target extracts members' values and no non-member's: 0.75 - 0
    assert row.loc[("members_vs_nonmembers", "surname", "sample", "top1"), "difference"] == pytest.approx(0.75)


def test_rate_grows_with_the_samples_that_hold_the_value_by_hand():
    results = results_table()
    by_count = rate_by_occurrences(results[results.model == "target"].assign(role="member"), bins=(1, 2))
    table = by_count.set_index("samples_bin")
    # m1 holds its value in 2 samples (extracted), m2, m3, n1, n2 in one each (m3 extracted)
    assert table.loc["1", "units"] == 4 and table.loc["1", "top1"] == pytest.approx(0.25)
    assert table.loc["2+", "units"] == 1 and table.loc["2+", "top1"] == 1.0


def test_a_tiny_model_trained_on_a_value_gives_it_back_and_not_a_value_it_never_saw(tiny_bert_dir, one_torch_thread):
    import torch
    from transformers import BertForMaskedLM

    from mlmia.models.loading import load_tokenizer

    tokenizer = load_tokenizer(tiny_bert_dir)
    model = BertForMaskedLM.from_pretrained(tiny_bert_dir)
    planted = "patient given aspirin daily"
    ids = torch.tensor([tokenizer(planted)["input_ids"]])
    position = ids[0].tolist().index(tokenizer.convert_tokens_to_ids("aspirin"))
    masked, labels = ids.clone(), torch.full_like(ids, -100)
    masked[0, position], labels[0, position] = tokenizer.mask_token_id, ids[0, position]
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for _ in range(60):  # the planted value memorised: its masked position learnt
        optimizer.zero_grad()
        model(input_ids=masked, labels=labels).loss.backward()
        optimizer.step()
    samples = pd.DataFrame({"sample_id": ["planted", "unseen"], "group_id": ["p", "q"],
                            "text": [planted, "patient given insulin daily"]})  # fmt: skip
    values = pd.DataFrame({"group_id": ["p", "q"], "kind": ["drug", "drug"], "value": ["aspirin", "insulin"]})
    out = infill(model, tokenizer, samples, locate_values(samples, values), top_k=3, batch_size=BATCH_SIZE)
    out = out.set_index("sample_id")
    assert bool(out.loc["planted", "top1"]) and out.loc["planted", "rank_below_k"] == 0
    assert not bool(out.loc["unseen", "top1"])


def test_the_world_gives_each_patient_its_phi_and_the_templates_that_write_it_are_found():
    from test_corpus import TINY

    from mlmia.world.corpus import build_world
    from mlmia.world.patient_phi import IDENTIFYING_KINDS, PHI_KINDS, identifying_values

    world = build_world(TINY)
    samples, phi = world["samples"], world["phi"]
    plain = samples[samples.variant == "plain"]
    assert set(phi.group_id) == set(samples.group_id) and set(phi.kind) == set(PHI_KINDS)
    spans = locate_values(plain, phi)
    found = spans.groupby("kind").sample_id.apply(set)
    # by construction: MIMIC's history line names the patient, its follow-up line the physician,
    # its social-history line the state (mlmia.world.registers.mimic's templates)
    for template, kind in (("m_hpi", "surname"), ("m_followup", "physician"), ("m_social", "state")):
        holding = set(plain[plain.kind == template].sample_id)
        assert holding and holding <= found[kind], (template, kind)
    # every dose is found between its drug and "mg", in the medication lines
    assert set(plain[plain.sample_id.isin(found["dose"])].kind) <= {"m_med", "m_dcmed", "m_course", "i_med", "i_course"}
    # the vocabulary check's values: one per patient and identifying kind, the first name and surname its name's
    values = identifying_values(samples, phi)
    patients = plain.drop_duplicates("group_id").set_index("group_id")
    assert list(dict.fromkeys(values["kind"])) == list(IDENTIFYING_KINDS)
    assert (values.groupby("kind").size() == len(patients)).all() and values["value"].notna().all()
    wide = values.pivot(index="group_id", columns="kind", values="value")
    assert ((wide["first_name"] + " " + wide["surname"]) == patients["name"].reindex(wide.index)).all()
    assert (values["role"].to_numpy() == patients["role"].reindex(values["group_id"]).to_numpy()).all()


def world_phi_pattern(config: str = "ci.yaml") -> re.Pattern:
    """Every PHI value of the world's patients and every first name, as whole words (doses aside: bare
    numbers, which every table holds)."""
    from mlmia.world.corpus import build_world
    from mlmia.world.patient_phi import identifying_values

    corpus = resolved(yaml.safe_load((REPO / "config" / config).read_text())["corpus"], "corpus")
    world = build_world(corpus)
    phi = world["phi"]
    names = identifying_values(world["samples"], phi)
    values = set(phi[phi.kind != "dose"].value) | set(names[names.kind == "first_name"].value)
    values = sorted(values, key=len, reverse=True)
    return re.compile(rb"(?<![A-Za-z0-9])(" + b"|".join(re.escape(v.encode()) for v in values) + rb")(?![A-Za-z0-9])")


def assert_no_phi(run, files, pattern: re.Pattern) -> int:
    """No file of `files` (text files; a Parquet file is a table whose strings the caller checks) holds
    a value `pattern` matches; the number of files read."""
    texts = [p for p in files if p.is_file() and p.suffix != ".parquet"]
    for path in texts:
        assert not pattern.search(path.read_bytes()), f"{path.relative_to(run)} holds a PHI value"
    return len(texts)


def hand_count_of_the_vocabulary(run) -> dict:
    """{(kind, role): (whole entries, values)} of the CI world's names in Base's vocabulary, counted in
    plain Python: one name per patient from corpus/world.parquet (first name, then surname), BERT
    uncased's normalization (lowercase, accents stripped), a look-up in tokenizer.json's vocabulary."""
    import json
    import unicodedata

    vocab = set(json.loads((run / "models/base/tokenizer.json").read_text())["model"]["vocab"])
    world = pd.read_parquet(run / "corpus/world.parquet")
    patients = world[world.variant == "plain"].drop_duplicates("group_id")
    counts = {}
    for name, role in zip(patients["name"], patients["role"]):
        first, last = name.rsplit(" ", 1)
        for kind, value in (("first_name", first), ("surname", last)):
            text = "".join(c for c in unicodedata.normalize("NFD", value.lower()) if unicodedata.category(c) != "Mn")
            whole, n = counts.get((kind, role), (0, 0))
            counts[kind, role] = (whole + (text in vocab), n + 1)
    return counts


def test_snakemake_extraction_runs_on_the_ci_world_and_writes_no_phi(ci_run):
    run_snakemake(ci_run, "extraction", "--configfile", "test_config.yaml")
    run = ci_run / "results/ci"
    rates = pd.read_csv(run / "extraction/rates.csv")
    assert set(rates.role) == {"member", "nonmember"} and rates.value.between(0, 1).all()
    assert set(rates.model) == {"base", "ref_domain"} and set(rates.level) == {"sample", "patient"}
    findings = pd.read_csv(run / "extraction/findings.csv")
    assert len(findings) == 4 and set(findings.finding) == {"members_vs_nonmembers", "target_vs_reference"}
    assert "# PHI extraction by infilling" in (run / "tables/table_extraction.md").read_text()
    assert (run / "figures/fig_extraction.png").stat().st_size > 0
    assert not (run / "extraction/phi.parquet").exists()  # the values table is temporary
    assert not (run / "extraction/identifiers.parquet").exists()  # so is the vocabulary check's
    # the vocabulary check of both models, its counts those of a count by hand (names only: the world's file)
    vocabulary = pd.read_csv(run / "extraction/vocabulary.csv")
    assert set(vocabulary.model) == {"base", "ref_domain"} and set(vocabulary.vocabulary_size) == {1500}
    shares = vocabulary[(vocabulary.model == "base") & (vocabulary.row == "share")].set_index(["kind", "role"])
    for key, (whole, n) in hand_count_of_the_vocabulary(run).items():
        assert (shares.loc[key, "whole"], shares.loc[key, "values"]) == (whole, n), key
    assert set(shares.index.get_level_values("kind")) == {"first_name", "surname", "physician", "state"}
    assert "## ref_domain" in (run / "tables/table_vocabulary.md").read_text()
    # each PHI kind beside its tokens' membership signal (ci.yaml names zoo_long_mimic): the summary's numbers,
    # and the study's differences
    kinds = pd.read_csv(run / "extraction/token_kinds.csv")
    summary = pd.read_csv(run / "attack/zoo_long_mimic.token_kinds.csv").set_index("kind")
    slot = kinds[kinds.evidence == "slot_score"].set_index("kind")
    assert set(slot.experiment) == {"zoo_long_mimic"} and set(slot.attack) == {"informia"}
    assert slot["value"].to_dict() == pytest.approx(summary["difference"].to_dict(), nan_ok=True)
    top1 = kinds[kinds.evidence == "extracted_top1"].set_index("kind")["value"]
    differences = pd.read_csv(run / "extraction/differences.csv")
    chosen = differences.query("comparison == 'members_vs_nonmembers' and level == 'sample' and metric == 'top1'")
    assert top1.to_dict() == pytest.approx(
        chosen[chosen.kind != "all"].set_index("kind")["difference"].to_dict(), nan_ok=True
    )
    assert "# PHI kinds: extraction and the membership signal" in (run / "tables/table_extraction_kinds.md").read_text()
    # no value of the world's patients in any file the study leaves (the figure is drawn from the rates and
    # counts grepped here)
    files = [
        p for folder in ("extraction", "logs/extraction", "benchmarks/extraction") for p in (run / folder).rglob("*")
    ]
    files += [
        run / "tables/table_extraction.md",
        run / "tables/table_vocabulary.md",
        run / "tables/table_extraction_kinds.md",
    ]
    assert assert_no_phi(run, files, world_phi_pattern()) >= 14
    for path in (run / "extraction/infill").glob("*.parquet"):  # flags and counts, no string but ids and kinds
        table = pd.read_parquet(path)
        assert set(table.columns) == {"sample_id", "group_id", "kind", "value_id", "n_tokens", "occurrences", "top1",
                                      "top1_one_pass", "topk", "rank_below_k"}  # fmt: skip


def test_a_zero_rate_is_printed_as_a_count_not_as_a_degenerate_interval():
    from mlmia.memorization.extraction_report import comparisons, extraction_table

    estimates, replicates = extraction_rates(results_table(), ROLES, replicates=20, seed=1)
    differences = rate_differences(estimates, replicates, comparisons("target", "reference"))
    lines = extraction_table(estimates, differences, "target", "reference", 3).splitlines()
    surname = next(line for line in lines if line.startswith("| surname |"))  # sample level, top-1
    # target members 3 of 4 samples, non-members 0 of 2 (a count, not "0.0 [0.0, 0.0]"), reference members 1 of 4
    assert surname.startswith("| surname | 75.0 [") and "| 0 of 2 |" in surname and "| 25.0 [" in surname


def test_percentages_never_print_minus_zero():
    from mlmia.memorization.extraction_report import interval_text

    assert interval_text(0.055, -0.0004, 0.119, signed=True) == "+5.5 [0.0, 11.9]"
    assert interval_text(-0.0004, -0.012, 0.0, signed=True) == "+0.0 [-1.2, 0.0]"
    # the same on another scale and precision (the kinds table's bits): -0.004 and 0.0049 round to 0.00
    assert interval_text(-0.004, -0.3, 0.0049, signed=True, scale=1.0, digits=2) == "+0.00 [-0.30, 0.00]"
