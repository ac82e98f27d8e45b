"""d-exposure of a de-identification tagger (Helali, Kleinbauer and Klakow, TSD 2020):
the PHI-labelled notes (mlmia.world.phi), the confidence extraction, the i2b2 XML path,
the findings, the overfitting experiment's design, trend test and distance from the maximum
(mlmia.memorization.overfitting), and `snakemake dexposure` end to end on the CI config."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import copy_workflow, run_snakemake, write_config
from world_helpers import resolved

from mlmia.core.errors import UserError
from mlmia.data.i2b2_phi import i2b2_labelled_sentences
from mlmia.memorization import dexposure as dx
from mlmia.memorization import dexposure_report as report
from mlmia.memorization import overfitting as of
from mlmia.metrics.intervals import seed_interval
from mlmia.report.finding import FINDING_COLUMNS, VERDICTS
from mlmia.terms.schema import defaults, schema_path
from mlmia.world import phi
from mlmia.world.phi_entities import phi_world

SMALL = resolved({"patients": 40, "sentences_per_patient": 6, "hospitals": 10, "ambiguous": 3, "occurrences": 4},
                 "dexposure")  # fmt: skip
#: the fixture tagger's size; what it leaves out, the schema's (its positions, its dropout)
TAGGER = resolved({"hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32}, "dexposure", "model")
PHRASE = "The patient often talks about {slot} ."


@pytest.fixture(scope="module")
def notes():
    return phi.generate_notes(SMALL)


def _frame(rows, split="train"):
    return pd.DataFrame(
        {
            "sentence_id": [f"s{i}" for i in range(len(rows))],
            "group_id": [f"p{i}" for i in range(len(rows))],
            "register": "mimic",
            "split": split,
            "words": [[w for w, _ in r] for r in rows],
            "tags": [[t for _, t in r] for r in rows],
        }
    )


# ------------------------------------------------------------------------------------ notes


def test_notes_are_deterministic_bio_and_in_both_registers(notes):
    again = phi.generate_notes(SMALL)
    pd.testing.assert_frame_equal(notes, again)
    other = phi.generate_notes({**SMALL, "seed": 1})
    assert [list(w) for w in other["words"]] != [list(w) for w in notes["words"]]
    assert set(notes["register"]) == {"mimic", "i2b2"}
    assert set(notes["split"]) == {"train", "valid"}
    assert not set(notes.loc[notes.split == "train", "group_id"]) & set(notes.loc[notes.split == "valid", "group_id"])
    seen = set()
    for words, tags in zip(notes["words"], notes["tags"]):
        assert len(words) == len(tags) > 0
        previous = "O"
        for tag in tags:
            if tag.startswith("I-"):  # an I- tag continues an entity of its class
                assert previous != "O" and previous[2:] == tag[2:]
            previous = tag
            seen.add(tag)
    assert {f"B-{c}" for c in phi.PHI_CLASSES} <= seen  # DATE labelled too
    phi.check_notes(notes)


def test_ambiguous_entities_are_balanced_and_chosen_per_class(notes):
    counts = phi.word_tag_counts(notes)
    world = phi_world(0, SMALL["hospitals"], SMALL["ambiguous"])
    table2 = phi.entity_occurrences(notes, world.ambiguous, phi.PHI_CLASSES)
    for cls in phi.SLOT_CLASSES:  # exactly `occurrences` per class, by construction
        assert (table2[cls] == SMALL["occurrences"]).all()
    chosen = phi.choose_entities(counts, phi.SLOT_CLASSES, phi.PHI_CLASSES)
    assert list(chosen) == list(phi.SLOT_CLASSES)
    assert len(set(chosen.values())) == 3 and set(chosen.values()) <= set(world.ambiguous)
    for cls, word in chosen.items():  # the inserted word is never its own candidate
        assert word not in phi.candidate_words(counts, cls, phi.PHI_CLASSES)
    stats = phi.class_statistics(notes, phi.PHI_CLASSES)
    assert stats.iloc[-1]["words"] >= SMALL["ambiguous"]  # words in more than one class


def test_candidate_words_are_the_words_labelled_only_as_the_class():
    notes = _frame(
        [
            [("Dr.", "O"), ("Kent", "B-PERSON"), ("in", "O"), ("Tyler", "B-LOCATION")],
            [("Anna", "B-PERSON"), ("Kent", "I-PERSON"), ("from", "O"), ("Lutz", "B-ORGANIZATION")],
            [("Lutz", "B-ORGANIZATION"), ("Hospital", "I-ORGANIZATION"), ("anna", "B-PERSON"), ("Hospital", "O")],
            [("Mills", "I-PERSON"), ("tyler", "B-PERSON"), ("May", "B-DATE"), ("may", "O")],
        ]
    )
    counts = phi.word_tag_counts(notes)
    classes = phi.PHI_CLASSES
    # Anna: B-PERSON twice (case folded); Kent: B- and I-PERSON; Mills: never B-; Tyler: two classes
    assert phi.candidate_words(counts, "PERSON", classes) == ["Anna", "Kent"]
    assert phi.candidate_words(counts, "ORGANIZATION", classes) == ["Lutz"]  # Hospital is also O
    assert phi.candidate_words(counts, "LOCATION", classes) == []
    assert phi.candidate_words(counts, "DATE", classes) == []  # May is also O
    stats = phi.class_statistics(notes, classes).set_index("class")
    assert stats.loc["PERSON", "mentions"] == 4 and stats.loc["PERSON", "only_this_class"] == 2
    assert stats.loc["more than one class", "words"] == 1  # tyler
    chosen = phi.choose_entities(counts, ["PERSON"], classes)
    assert chosen == {"PERSON": "Tyler"}
    with pytest.raises(UserError) as err:
        phi.choose_entities(counts, ["PERSON"], classes, {"PERSON": "Anna"})
    assert "Anna" not in str(err.value)  # an entity word is PHI: never in a message


def test_phrase_needs_one_slot():
    assert phi.phrase_slot(PHRASE) == (["The", "patient", "often", "talks", "about", "{slot}", "."], 5)
    for bad in ("no slot here", "{slot} and {slot}", "about{slot} ."):
        with pytest.raises(UserError):
            phi.phrase_slot(bad)


def test_inserted_sentences_and_subset(notes):
    inserted = dx.inserted_sentences(PHRASE, {"PERSON": "Kent", "LOCATION": "Lutz"}, 3)
    assert len(inserted) == 6
    words, tags = inserted[0]
    assert words[5] == "Kent" and tags[5] == "B-PERSON" and tags.count("O") == len(tags) - 1
    assert dx.inserted_sentences(PHRASE, {"PERSON": "Kent"}, 0) == []
    counts = phi.word_tag_counts(notes)
    chosen = phi.choose_entities(counts, phi.SLOT_CLASSES, phi.PHI_CLASSES)
    small = of.subset_training(notes, 0.1, chosen)
    n_train = int((notes.split == "train").sum())
    assert (small.split == "valid").sum() == (notes.split == "valid").sum()
    assert round(0.1 * n_train) <= (small.split == "train").sum() < 0.5 * n_train
    sub_counts = phi.class_counts(phi.word_tag_counts(small), phi.PHI_CLASSES)
    for word in chosen.values():  # still labelled under each of its classes
        assert (sub_counts.loc[phi.word_key(word), list(phi.SLOT_CLASSES)] > 0).all()


# ------------------------------------------------------------------------------------ the tagger


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, notes):
    from mlmia.models.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(
        [" ".join(w) for w in notes["words"]],
        tmp_path_factory.mktemp("tok"),
        vocab_size=400,
        min_frequency=2,
        min_patients=None,
    )
    tags = phi.tag_names(phi.PHI_CLASSES)
    model = dx.build_tagger(tokenizer, tags, TAGGER, 3)
    return model.eval(), tokenizer, tags


def test_slot_confidence_matches_a_recomputation_by_hand(tagger):
    import torch

    model, tokenizer, tags = tagger
    words, slot = phi.phrase_slot(PHRASE)
    fillers = ["Kent", "Zyxwvutsrq", "Searcy", "a"]  # one piece, many pieces (padding in the batch)
    assert len(tokenizer.tokenize("Zyxwvutsrq")) > 2
    probs = dx.slot_probabilities(model, tokenizer, PHRASE, fillers, max_length=32)
    assert probs.shape == (len(fillers), len(tags))
    for filler, row in zip(fillers, probs):
        sentence = words[:slot] + [filler] + words[slot + 1 :]
        # by hand: [CLS], then the pieces of the words before the slot; the slot word's first piece
        position = 1 + sum(len(tokenizer.tokenize(w)) for w in words[:slot])
        ids = tokenizer(" ".join(sentence), return_tensors="pt")["input_ids"]
        assert tokenizer.convert_ids_to_tokens(int(ids[0, position])) == tokenizer.tokenize(filler)[0]
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, position].double()
        expected = torch.softmax(logits, dim=-1).numpy()
        np.testing.assert_allclose(row, expected, atol=1e-5)
    # d-exposure of the first filler among the others, recomputed by the paper's definition
    cls = "PERSON"
    b = tags.index(f"B-{cls}")
    got = dx.class_d_exposure(model, tokenizer, PHRASE, cls, fillers[0], fillers[1:], tags, max_length=32)
    conf, labelled = probs[:, b], probs.argmax(axis=1) == b
    assert got["inserted_confidence"] == pytest.approx(conf[0], abs=1e-6)
    assert got["inserted_labelled"] == bool(labelled[0])
    if labelled[0]:
        rank = 1 + sum(1 for c, lab in zip(conf[1:], labelled[1:]) if lab and c >= conf[0])
        assert got["d_exposure"] == pytest.approx(-math.log2(rank / len(fillers)), abs=1e-6)
    else:
        assert got["d_exposure"] == 0.0
    assert got["max_d_exposure"] == pytest.approx(math.log2(len(fillers)))


def test_first_subword_labels(tagger):
    _, tokenizer, tags = tagger
    index = {t: i for i, t in enumerate(tags)}
    ids, labels, positions = dx.encode_words(
        tokenizer, [["Dr.", "Zyxwvutsrq", "said"]], 32, [["O", "B-PERSON", "O"]], index
    )
    lab, pos = labels[0], positions[0]
    assert lab[0] == -100 and lab[-1] == -100  # [CLS], [SEP]
    assert [int(lab[p]) for p in pos] == [index["O"], index["B-PERSON"], index["O"]]
    assert int((lab != -100).sum()) == 3  # continuation pieces carry no label
    assert pos[1] == 1 + len(tokenizer.tokenize("Dr."))


def test_train_and_measure_returns_rows_per_checkpoint_and_class(notes, tagger, tmp_path):
    _, tokenizer, _ = tagger
    counts = phi.word_tag_counts(notes)
    chosen = phi.choose_entities(counts, phi.SLOT_CLASSES, phi.PHI_CLASSES)
    runs = dx.train_and_measure(
        notes,
        chosen,
        tokenizer,
        phrase=PHRASE,
        repetitions=8,
        seed=0,
        model_settings={**TAGGER, "max_length": 48},
        training=resolved({"batch_size": 16, "lr": 0.003}, "dexposure", "training"),
        checkpoints=[1, 2],
        device="cpu",
        threads=1,
        record_dir=tmp_path / "record",
        log_every=3,
    )
    assert list(runs.columns[: len(dx.RUN_COLUMNS)]) == dx.RUN_COLUMNS
    assert len(runs) == 2 * 3 and set(runs["epoch"]) == {1, 2}
    assert (runs["d_exposure"] >= 0).all() and (runs["d_exposure"] <= runs["max_d_exposure"] + 1e-12).all()
    assert runs["f1"].between(0, 1).all() and (runs["valid_loss"] > 0).all()
    n_train = int((notes.split == "train").sum())
    assert (runs["train_sentences"] == n_train + 3 * 8).all()
    # the run's record is every trained model's (mlmia.models.run_record)
    info = json.loads((tmp_path / "record" / "train_info.json").read_text())
    assert list(info) == ["name", "config", "init_from", "n_texts", "n_tokens", "steps", "epochs_run", "final_loss",
                          "train_seconds", "total_seconds", "tokens_per_second", "threads", "device", "n_parameters",
                          "n_trainable_parameters"]  # fmt: skip
    assert info["n_texts"] == n_train + 3 * 8 and info["epochs_run"] == 2 and info["config"]["lr_decay"] is True
    # the optimiser settings it was not given are the schema's dexposure.training, recorded
    assert info["config"]["training"] == {"checkpoints": [2, 4, 8], "batch_size": 16, "lr": 0.003,
                                          "warmup_ratio": 0.06, "weight_decay": 0.01}  # fmt: skip
    log = pd.read_csv(tmp_path / "record" / "train_log.csv")
    assert log["step"].iloc[-1] == info["steps"] == 2 * math.ceil(info["n_texts"] / 16)
    assert (tmp_path / "record" / "train_curve.png").exists()


# ------------------------------------------------------------------------------------ i2b2 XML

I2B2_NOTE = """Record date: 2067-05-03

Mr. Smith's visit at Sharon Memorial Hospital. He lives in Boston with his wife.
Dr. Jones saw him, age 67.
"""


def _i2b2_xml(text: str, tags: list[tuple[str, str, str]]) -> str:
    elements = []
    for i, (element, phi_type, value) in enumerate(tags):
        start = text.index(value)
        elements.append(
            f'<{element} id="P{i}" start="{start}" end="{start + len(value)}" text="{value}" TYPE="{phi_type}" comment="" />'
        )
    return (
        '<?xml version="1.0" encoding="UTF-8" ?>\n<deIdi2b2>\n<TEXT><![CDATA['
        + text
        + "]]></TEXT>\n<TAGS>\n"
        + "\n".join(elements)
        + "\n</TAGS>\n</deIdi2b2>\n"
    )


def test_i2b2_xml_becomes_labelled_sentences(tmp_path):
    tags = [
        ("DATE", "DATE", "2067-05-03"),
        ("NAME", "PATIENT", "Smith"),
        ("LOCATION", "HOSPITAL", "Sharon Memorial Hospital"),
        ("LOCATION", "CITY", "Boston"),
        ("NAME", "DOCTOR", "Jones"),
        ("AGE", "AGE", "67"),
    ]
    (tmp_path / "110-01.xml").write_text(_i2b2_xml(I2B2_NOTE, tags))
    (tmp_path / "111-01.xml").write_text(_i2b2_xml("Seen by Dr. Jones in Boston.\n", tags[3:5]))
    sentences = i2b2_labelled_sentences(tmp_path)
    got = [list(zip(w, t)) for w, t in zip(sentences["words"], sentences["tags"])]
    o = "O"
    assert got == [
        [("Record", o), ("date:", o), ("2067-05-03", "B-DATE")],
        # "Smith's" cut at the PHI boundary; a sentence ends after "." before a capital
        [("Mr.", o), ("Smith", "B-PERSON"), ("'s", o), ("visit", o), ("at", o), ("Sharon", "B-ORGANIZATION"),
         ("Memorial", "I-ORGANIZATION"), ("Hospital", "I-ORGANIZATION"), (".", o)],
        [("He", o), ("lives", o), ("in", o), ("Boston", "B-LOCATION"), ("with", o), ("his", o), ("wife.", o)],
        [("Dr.", o), ("Jones", "B-PERSON"), ("saw", o), ("him,", o), ("age", o), ("67.", o)],  # AGE stays O
        [("Seen", o), ("by", o), ("Dr.", o), ("Jones", "B-PERSON"), ("in", o), ("Boston", "B-LOCATION"), (".", o)],
    ]  # fmt: skip
    assert set(sentences["group_id"]) == {"110", "111"}
    notes = phi.load_notes(resolved({"valid_share": 0.5}, "dexposure"), [tmp_path])
    assert set(notes["split"]) == {"train", "valid"} and list(notes.columns) == phi.NOTE_COLUMNS


def test_i2b2_offsets_that_do_not_match_are_refused_without_the_text(tmp_path):
    xml = _i2b2_xml(I2B2_NOTE, [("NAME", "PATIENT", "Smith")]).replace('text="Smith"', 'text="Smyth"')
    (tmp_path / "110-01.xml").write_text(xml)
    with pytest.raises(UserError) as err:
        i2b2_labelled_sentences(tmp_path)
    assert "P0" in str(err.value) and "Smith" not in str(err.value) and "Smyth" not in str(err.value)


# ------------------------------------------------------------------------------------ findings


def _runs(main_values):
    """Synthetic runs of the main experiment: main_values[seed][reps] = d-exposure of every class."""
    rows = []
    for seed, by_reps in enumerate(main_values):
        for reps, value in by_reps.items():
            for cls in ("PERSON", "LOCATION"):
                rows.append(dict(setting="main", seed=seed, repetitions=reps, epoch=4, **{"class": cls},
                                 d_exposure=value, max_d_exposure=6.0, train_loss=0.1, valid_loss=0.2, f1=0.9))  # fmt: skip
    return pd.DataFrame(rows)


def test_finding_grows_with_repetitions_holds_fails_and_needs_seeds():
    def checked(runs):
        return {f.finding: f for f in report.findings(runs)}

    grows = [{0: 0.0, 16: 1.0, 64: 3.0}, {0: 0.1, 16: 1.5, 64: 3.5}, {0: 0.0, 16: 0.5, 64: 2.5}]
    checks = checked(_runs(grows))
    assert list(checks) == ["grows_with_repetitions"]  # the overfitting finding: mlmia.memorization.overfitting
    # grows: the old "holds" (t-interval above 0) is the verdict separated
    grown = checks["grows_with_repetitions"]
    assert (grown.verdict, grown.holds, grown.n) == ("separated", True, 3)
    assert grown.difference == pytest.approx(np.mean([3.0, 3.4, 2.5]))
    assert (grown.first_value, grown.second_value) == pytest.approx((3.0, np.mean([0.0, 0.1, 0.0])))
    assert grown.first == "64 repetitions" and grown.second == "0 repetitions" and "Spearman" in grown.note
    shrinks = [{0: 1.0, 16: 0.5, 64: 0.0}, {0: 1.2, 16: 0.6, 64: 0.1}]
    shrunk = checked(_runs(shrinks))["grows_with_repetitions"]
    assert (shrunk.verdict, shrunk.holds) == ("reversed", False)  # the old "does not hold"
    # one seed: no interval, not resolvable; holds by the point estimate as before
    one = checked(_runs(grows[:1]))["grows_with_repetitions"]
    assert (one.verdict, one.holds, one.n) == ("not resolvable", True, 1)
    assert one.note.startswith("1 seed: no interval")
    mean, low, high = seed_interval([1.0, 2.0, 3.0])
    assert (mean, low, high) == pytest.approx(
        (2.0, 2.0 - 4.302652729911275 / math.sqrt(3), 2.0 + 4.302652729911275 / math.sqrt(3))
    )
    assert np.isnan(seed_interval([1.0])[1])


def test_figure1_is_saved_in_the_configured_figure_style(tmp_path):
    # each class's line style must not replace the config's figure_style (the saver reads its dpi)
    from PIL import Image

    style = {**defaults("figure_style"), "dpi": 40}
    tidy = report.table3(_runs([{0: 0.5, 64: 2.0}, {0: 0.4, 64: 2.5}]))
    report.plot_figure1(tidy, [tmp_path / "figure1.png", tmp_path / "figure1.pdf"], style)
    with Image.open(tmp_path / "figure1.png") as image:
        assert image.size == (6 * 40, 4 * 40)  # the figure's 6 x 4 inches at the configured dpi
    assert (tmp_path / "figure1.pdf").stat().st_size > 0


def test_every_dexposure_key_has_a_schema_default():
    schema = yaml.safe_load(schema_path("config").read_text())
    props = schema["properties"]["dexposure"]["properties"]
    assert schema["properties"]["dexposure"]["additionalProperties"] is False
    assert set(phi.NOTE_SETTINGS) <= set(props)
    for section in ("model", "training", "overfit"):
        assert props[section]["additionalProperties"] is False
        assert all("default" in spec for spec in props[section]["properties"].values()), section
    for key, spec in props.items():
        assert "default" in spec, key


def test_notes_settings_are_the_resolved_sections():
    # the generated notes of the default world, by hand: 400 patients of 8 sentences, 6 ambiguous
    # entities 12 times in each class (the schema's, which validation writes into the config); the
    # tagger's keys are not the generator's
    settings = phi.phi_settings(resolved({"patients": 10, "repetitions": [0, 4]}, "dexposure"))
    assert settings["patients"] == 10 and settings["sentences_per_patient"] == 8
    assert settings["ambiguous"] == 6 and settings["occurrences"] == 12 and settings["valid_share"] == 0.2
    assert settings["phrase"] == "The patient often talks about {slot} ."
    assert list(settings) == list(phi.NOTE_SETTINGS)
    assert phi.phi_settings(defaults("dexposure"))["patients"] == 400
    with pytest.raises(KeyError):  # no fallback: validation writes every key
        phi.phi_settings({"patients": 10})
    with pytest.raises(UserError, match=r"^dexposure\.patients: must be a non-negative integer, got -1$"):
        phi.phi_settings({**defaults("dexposure"), "patients": -1})


def test_a_tagger_takes_every_setting_it_is_handed(tagger):
    # the fixture's tagger gives neither its positions nor its dropout: the test passes the
    # schema's dexposure.model; the library fills none
    model, _, _ = tagger
    expected = defaults("dexposure", "model")
    assert model.config.max_position_embeddings == expected["max_length"] == 64
    assert model.config.hidden_dropout_prob == model.config.attention_probs_dropout_prob == expected["dropout"] == 0.1
    assert model.config.num_hidden_layers == 1  # what it sets wins
    with pytest.raises(KeyError):
        dx.build_tagger(None, ["O"], {"hidden_size": 16, "num_heads": 2}, 0)


# ------------------------------------------------------------------------------------ end to end


@pytest.mark.workflow
def test_snakemake_dexposure_on_the_ci_config(tmp_path):
    workdir = copy_workflow(tmp_path)
    config = write_config(workdir, "ci.yaml")
    run_snakemake(workdir, "dexposure", "--configfile", str(config))
    out = workdir / "results" / "ci" / "dexposure"
    for name in ("table1", "table2", "table3", "overfit", "findings"):
        # the findings are a section of the d-exposure report, at its tables' heading level
        assert (out / f"{name}.md").read_text().startswith("## " if name != "findings" else "## Findings of Helali")
        assert len(pd.read_csv(out / f"{name}.csv"))
    for name in ("figure1", "figure2"):
        assert (out / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
        assert (out / f"{name}.pdf").read_bytes()[:4] == b"%PDF"
    settings = yaml.safe_load(config.read_text())["dexposure"]
    table3 = pd.read_csv(out / "table3.csv")
    assert set(table3["repetitions"]) == set(settings["repetitions"])
    assert set(table3["class"]) == {"PERSON", "LOCATION", "ORGANIZATION", "mean"}
    assert set(table3["epoch"]) == set(settings["training"]["checkpoints"])
    assert (table3["d_exposure"] <= table3["max_d_exposure"] + 1e-9).all()
    findings = pd.read_csv(out / "findings.csv")
    # the overfitting finding for the model, then per class
    assert list(findings["finding"]) == ["grows_with_repetitions"] + ["no_growth_when_overfitting"] * 4
    assert list(findings.columns) == FINDING_COLUMNS and set(findings["verdict"]) <= set(VERDICTS)
    # the overfitting experiment: one slope per seed and class (the model as "mean"), its seeds
    trends = pd.read_csv(out / "overfit_seeds.csv")
    assert sorted(set(trends["seed"])) == list(range(settings["overfit"]["seeds"]))
    assert set(trends["class"]) == {"PERSON", "LOCATION", "ORGANIZATION", "mean"}
    assert (trends["below_run_max"] >= 0).all() and (trends["below_ceiling"] >= -1e-9).all()
    curve = pd.read_csv(out / "figure2.csv")
    assert list(curve["epoch"]) == list(
        range(settings["overfit"]["every"], settings["overfit"]["epochs"] + 1, settings["overfit"]["every"])
    )
    # no entity word (PHI) in any log
    chosen = pd.read_parquet(out / "chosen.parquet")
    logs = "".join(p.read_text() for p in (workdir / "results" / "ci" / "logs" / "dexposure").rglob("*.log"))
    assert "d-exposure" in logs
    for word in chosen["word"]:
        assert word.lower() not in logs.lower()
