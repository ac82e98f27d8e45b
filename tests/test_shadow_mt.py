"""The shadow protocol's translation target (`snakemake shadow_mt`): the world's parallel corpus
(`mlmia.world.parallel`), the encoder-decoder (`mlmia.models.seq2seq`) and its black-box features
(`mlmia.shadow.translation`), and the protocol run on them (`mlmia.shadow.mt_workflow`).

Expected values come from outside the code under test: the parameter count by hand from the
architecture, the model score from a teacher-forced pass that runs the model without its cache, the
facts of a pair from the record both sides were rendered from, and memorisation from a planted split
(pairs trained on against pairs of documents never seen)."""

from __future__ import annotations

import random
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import sacrebleu
import torch
from training_helpers import seq2seq_entry
from world_helpers import resolved

from mlmia.core.errors import UserError
from mlmia.models.seq2seq import (
    build_translation_model,
    encode_sources,
    greedy_translate,
    load_translation_model,
    train_translation_model,
)
from mlmia.models.settings import seq2seq_settings
from mlmia.models.tokenizer import train_tokenizer
from mlmia.shadow import protocols
from mlmia.shadow.features import STAT_COLUMNS
from mlmia.shadow.mt_workflow import queried_pairs, split_and_pairs, tables
from mlmia.shadow.split import probe_table
from mlmia.shadow.translation import MT_FEATURE_COLUMNS, translation_features
from mlmia.world.corpus import build_world
from mlmia.world.lexicon import lexicon
from mlmia.world.parallel import (
    PARALLEL_COLUMNS,
    Choices,
    build_parallel_corpus,
    draw_fact,
    i2b2_target,
    mimic_source,
    parallel_settings,
)
from mlmia.world.patients import make_patient

SMALL = {"documents": {"discharge": 16, "progress": 16, "consult": 6, "case_reports": 5, "news": 5},
         "sentences_per_document": 4}  # fmt: skip
TINY_WORLD = resolved({
    "seed": 0,
    "sentences_per_patient": 4,
    "mimic": {"member_patients": 4, "heldin_patients": 2, "nonmember_patients": 3, "population_patients": 2},
    "i2b2": {"nonmember_patients": 3, "population_patients": 2},
    "domain": {"patients": 3, "abstract_sentences": 10},
    "general": {"sentences": 30},
}, "corpus")  # fmt: skip
TINY_MODEL = {"d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "attention_heads": 2, "ffn_dim": 128,
              "max_length": 96, "dropout": 0.0, "batch_size": 8, "lr": 0.003, "warmup_ratio": 0.05}  # fmt: skip


@pytest.fixture(scope="module")
def corpus():
    return build_parallel_corpus(SMALL, 0)


@pytest.fixture(scope="module")
def tokenizer_dir(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("mt_tokenizer")
    train_tokenizer(
        pd.concat([corpus["text"], corpus["target"]]), out, vocab_size=900, min_frequency=2, min_patients=None
    )
    return out


@pytest.fixture(scope="module")
def planted(corpus, tokenizer_dir, tmp_path_factory):
    """A tiny encoder-decoder trained to memorise the clinical pairs of half the discharge and progress
    documents; the other half never seen: (model, tokenizer, trained pairs, unseen pairs, train info)."""
    clinical = corpus[corpus["subcorpus"].isin(["discharge", "progress"])]
    docs = sorted(clinical["group_id"].unique())
    seen = set(docs[::2])
    trained, unseen = clinical[clinical["group_id"].isin(seen)], clinical[~clinical["group_id"].isin(seen)]
    out = tmp_path_factory.mktemp("mt_model") / "model"
    info = train_translation_model(
        trained["text"],
        trained["target"],
        tokenizer_dir,
        out,
        seq2seq_entry({**TINY_MODEL, "epochs": 60}),
        threads=1,
        device="cpu",
    )
    model, tokenizer = load_translation_model(out, "cpu")
    return model, tokenizer, trained.reset_index(drop=True), unseen.reset_index(drop=True), info, out


# --------------------------------------------------------------------------- the parallel corpus


def _numbers(text: str) -> Counter:
    """The numbers of a text, those of an i2b2 dosing interval aside ("q.8h.": "every eight hours")."""
    return Counter(re.findall(r"\d+(?:\.\d+)?", re.sub(r"q\.\d+h\.", "", text)))


def test_both_sides_render_one_fact_record():
    lex = lexicon()
    rng = random.Random(5)
    for kind in ("hpi", "pmh", "med", "dcmed", "vitals", "labs", "imaging", "course", "followup", "problem", "social"):
        for i in range(10):
            patient = make_patient(rng, lex, f"p{i}", "mt")
            record = draw_fact(rng, patient, kind, "mimic")
            source, target = mimic_source(record), i2b2_target(record, Choices(0, f"{kind}-{i}"))
            source, target = source.lower(), target.lower()  # the uncased tokenizer reads them so
            # the record's facts are on both sides
            for key in ("drug", "dose", "finding", "doctor", "phone", "state", "age"):
                if key in record:
                    assert str(record[key]).lower() in source and str(record[key]).lower() in target, (kind, key)
            dx = record.get("dx")
            for diagnosis in dx if isinstance(dx, list) else [dx] if dx else []:
                assert diagnosis.lower() in source and diagnosis.lower() in target, kind
            for value in record.get("labs", {}).values():
                assert value in source and value in target
            # and nothing else: every number of the target is one of the source's
            assert not (_numbers(target) - _numbers(source)), (kind, _numbers(target) - _numbers(source))


def test_corpus_columns_groups_and_facts(corpus):
    assert list(corpus.columns) == PARALLEL_COLUMNS
    assert corpus["sample_id"].is_unique and corpus["text"].is_unique
    assert set(corpus["subcorpus"]) == {"discharge", "progress", "consult", "case_reports", "news"}
    # documents are the groups, one subcorpus each, several sentences each
    assert (corpus.groupby("group_id")["subcorpus"].nunique() == 1).all()
    sizes = corpus.groupby("group_id").size()
    assert (
        sizes.median() >= 3
        and corpus.groupby("subcorpus")["group_id"].nunique()["discharge"] == SMALL["documents"]["discharge"]
    )
    clinical = corpus[corpus["subcorpus"] != "news"]
    for source, target in zip(clinical["text"], clinical["target"]):
        assert not (_numbers(target) - _numbers(source))
        assert source != target
    news = corpus[corpus["subcorpus"] == "news"]
    assert (news["text"] == news["target"]).all() and set(news["variant"]) == {"identity"}
    # the case reports are another source register than the notes: none opens like a MIMIC line
    case = corpus[corpus["subcorpus"] == "case_reports"]
    assert not case["text"].str.match(r"^(VS:|Past Medical History:|Followup|# )").any()
    assert case["target"].str.match(r"^[A-Z ]+:").mean() > 0.5


def test_target_variation_is_seeded_by_the_pair_alone(corpus):
    again = build_parallel_corpus(SMALL, 0)
    pd.testing.assert_frame_equal(corpus, again)
    other = build_parallel_corpus(SMALL, 1)
    assert set(other["text"]).isdisjoint(set(corpus["text"]) - set(corpus.loc[corpus.kind == "news", "text"]))
    # one record, rendered under the keys of different pairs: the source is the same, the target's
    # wording follows the key, and the same key gives the same wording
    patient = make_patient(random.Random(3), lexicon(), "p", "mt")
    record = draw_fact(random.Random(4), patient, "vitals", "mimic")
    targets = {sid: i2b2_target(record, Choices(0, sid)) for sid in (f"mt-x-{i:03d}" for i in range(40))}
    assert len(set(targets.values())) >= 8  # 16 renderings of a vitals line
    assert all(i2b2_target(record, Choices(0, sid)) == text for sid, text in targets.items())
    # across the corpus, each clinical kind has more than one rendering
    kinds = corpus[corpus["kind"] != "news"].groupby("kind")["variant"].nunique()
    assert (kinds[kinds.index.isin(["vitals", "labs", "pmh", "hpi", "med"])] > 1).all()


def test_the_world_is_unchanged():
    before = build_world(TINY_WORLD)
    build_parallel_corpus(SMALL, 0)
    after = build_world(TINY_WORLD)
    for key in before:
        pd.testing.assert_frame_equal(before[key], after[key])


def test_corpus_settings_are_the_resolved_section():
    # the default world's parallel corpus (the schema's shadow_mt.corpus), by hand: validation
    # writes every default, the library fills none
    settings = parallel_settings(resolved({"documents": {"news": 3}}, "shadow_mt", "corpus"))
    assert settings == {
        "documents": {"discharge": 250, "progress": 250, "consult": 100, "case_reports": 60, "news": 3},
        "sentences_per_document": 6,
    }
    # the subcorpora are built in the schema's order, whatever the config's
    backwards = {"documents": dict(reversed(settings["documents"].items())), "sentences_per_document": 6}
    assert list(parallel_settings(backwards)["documents"]) == list(settings["documents"])
    with pytest.raises(KeyError):
        parallel_settings({"documents": {"news": 3}, "sentences_per_document": 6})
    with pytest.raises(
        UserError, match=r"^shadow_mt\.corpus: unknown key\(s\) docs \(known: documents, sentences_per_document\)$"
    ):
        parallel_settings({**settings, "docs": 3})


def test_bad_corpus_settings_name_the_key():
    with pytest.raises(UserError, match="documents: unknown subcorpus 'tweets'"):
        build_parallel_corpus(resolved({"documents": {"tweets": 3}}, "shadow_mt", "corpus"), 0)
    with pytest.raises(UserError, match="news: 100000 documents asked"):
        build_parallel_corpus(resolved({"documents": {"news": 100000}}, "shadow_mt", "corpus"), 0)


# --------------------------------------------------------------------------- the model


class _Vocabulary:
    """What building a model reads of a tokenizer: its size and special ids."""

    pad_token_id, cls_token_id, sep_token_id = 0, 2, 3

    def __len__(self) -> int:
        return 3000


def test_model_built_from_config_has_the_hand_counted_parameters():
    d, f, v, positions = 128, 512, 3000, 128
    attention = 4 * (d * d + d)
    norm = 2 * d
    ffn = d * f + f + f * d + d
    encoder_layer = attention + norm + ffn + norm
    decoder_layer = attention + norm + attention + norm + ffn + norm
    # shared embeddings, learned positions (BART's offset of 2) and the embedding LayerNorm of each stack
    expected = v * d + 2 * (positions + 2) * d + 2 * norm + 2 * encoder_layer + 2 * decoder_layer
    model = build_translation_model(seq2seq_entry(), _Vocabulary())
    assert sum(p.numel() for p in model.parameters()) == expected == 1_343_488
    assert model.config.forced_eos_token_id is None and model.config.decoder_start_token_id == 2
    with pytest.raises(UserError, match=r"^translation model config: unknown key\(s\) hidden \(known: d_model, "):
        seq2seq_settings(seq2seq_entry({"hidden": 3}))
    with pytest.raises(UserError, match="not a multiple"):
        seq2seq_settings(seq2seq_entry({"d_model": 30, "attention_heads": 4}))


def test_training_reduces_the_loss_and_memorises_the_trained_pairs(planted):
    model, tokenizer, trained, unseen, info, out = planted
    curve = pd.read_csv(out / "train_log.csv")
    assert curve["loss"].iloc[-1] < 0.5 * curve["loss"].iloc[0]
    assert info["n_parameters"] == sum(p.numel() for p in model.parameters())
    seen_features = translation_features(model, tokenizer, trained)
    unseen_features = translation_features(model, tokenizer, unseen)
    # a trained pair, its wording drawn at random per pair, is reproduced; an unseen one only guessed
    assert seen_features["bleu"].mean() > unseen_features["bleu"].mean() + 20
    assert seen_features["model_score"].mean() > unseen_features["model_score"].mean()


def test_training_is_deterministic(corpus, tokenizer_dir, tmp_path):
    pairs = corpus[corpus["subcorpus"] == "discharge"].head(24)
    weights = []
    for run in ("a", "b"):
        train_translation_model(
            pairs["text"],
            pairs["target"],
            tokenizer_dir,
            tmp_path / run,
            seq2seq_entry({**TINY_MODEL, "epochs": 2}),
            threads=1,
            device="cpu",
        )
        model, _ = load_translation_model(tmp_path / run, "cpu")
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.equal(weights[0], weights[1])


def test_model_score_is_the_teacher_forced_log_probability_of_the_own_output(planted):
    model, tokenizer, trained, unseen, *_ = planted
    sources = pd.concat([trained["text"].head(6), unseen["text"].head(6)]).tolist()
    translations = greedy_translate(model, tokenizer, sources, batch_size=5)
    encoded = encode_sources(tokenizer, sources, model.config.max_position_embeddings)
    for src, out in zip(encoded, translations):
        # one pass over the whole output, no cache, one sentence at a time
        decoder_in = torch.tensor([[tokenizer.cls_token_id, *out.ids[:-1].tolist()]])
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([src.tolist()]), decoder_input_ids=decoder_in).logits[0].double()
        logp = torch.log_softmax(logits, dim=-1)
        assert torch.equal(logp.argmax(dim=-1), torch.tensor(out.ids))  # greedy: each token the top-1
        expected = logp[torch.arange(len(out.ids)), torch.tensor(out.ids)].numpy()
        np.testing.assert_allclose(out.log_probs, expected, atol=1e-4)
        assert out.model_score == pytest.approx(expected.mean(), abs=1e-4)


def test_feature_table_columns_and_bleu(planted):
    model, tokenizer, trained, *_ = planted
    pairs = trained.head(8)
    features = translation_features(model, tokenizer, pairs)
    assert list(features.columns) == MT_FEATURE_COLUMNS
    assert {"bleu", "precision_1", "precision_2", "precision_3", "precision_4", "model_score"} <= set(features.columns)
    assert set(STAT_COLUMNS) <= set(features.columns)
    assert features["sample_id"].tolist() == pairs["sample_id"].tolist()
    assert (features["model_score"] <= 0).all() and features["bleu"].between(0, 100).all()
    # BLEU recomputed from the decoded strings by sacrebleu itself
    for row, out, target in zip(
        features.itertuples(), greedy_translate(model, tokenizer, pairs["text"]), pairs["target"]
    ):
        ids = out.ids[:-1] if out.ids[-1] == tokenizer.sep_token_id else out.ids
        hypothesis = tokenizer.decode(ids.tolist(), clean_up_tokenization_spaces=False)
        reference = tokenizer.decode(tokenizer(target, add_special_tokens=False)["input_ids"],
                                     clean_up_tokenization_spaces=False)  # fmt: skip
        assert row.bleu == pytest.approx(min(100.0, sacrebleu.sentence_bleu(hypothesis, [reference]).score))
        assert row.n_tokens == len(out.ids)
    with pytest.raises(UserError, match="duplicate sample_id"):
        translation_features(model, tokenizer, pd.concat([pairs.head(1), pairs.head(1)]))


# --------------------------------------------------------------------------- the protocol


SETTINGS = resolved({"shared": ["discharge", "progress"], "in_house": "consult", "ood": ["case_reports", "news"],
                     "probes": 3, "probe_sentences": 1, "bob_share": 0.9, "shadows": 2, "slice_share": 0.3,
                     "group_size": 3, "groups": 10, "bootstrap": 20, "seed": 0}, "shadow_mt")  # fmt: skip


def test_the_workflow_runs_the_translation_target_as_a_protocol_of_its_own(corpus):
    """rules/shadow.smk runs either shadow protocol by name (mlmia.shadow.protocols): the translation
    target's corpus from its settings alone, and its split as `split_and_pairs` makes it."""
    translation = protocols.protocol("shadow_mt")
    assert translation.section == "shadow_mt"
    pd.testing.assert_frame_equal(translation.corpus({}, {"corpus": SMALL, "seed": 0}), build_parallel_corpus(SMALL, 0))
    for made, expected in zip(translation.split(corpus, SETTINGS), split_and_pairs(corpus, SETTINGS)):
        if isinstance(made, dict):
            assert made.keys() == expected.keys()
            for name in made:
                pd.testing.assert_frame_equal(made[name], expected[name])
        else:
            pd.testing.assert_frame_equal(made, expected)
    with pytest.raises(UserError, match="shadow protocol: unknown target 'shadow_xx'"):
        protocols.protocol("shadow_xx")


def test_split_gives_each_model_its_pairs_with_targets(corpus):
    split, pairs, training = split_and_pairs(corpus, SETTINGS)
    assert set(training) == {"alice", "bob_0", "bob_1"}
    target = corpus.set_index("sample_id")["target"]
    for frame in training.values():
        assert list(frame.columns) == ["sample_id", "group_id", "text", "target"]
        assert (frame["target"] == frame["sample_id"].map(target)).all()
    probes = probe_table(split)
    alice = set(training["alice"]["sample_id"])
    assert set(probes.loc[probes["member"], "sample_id"]) <= alice
    assert not set(probes.loc[~probes["member"], "sample_id"]) & alice
    queried = queried_pairs(split, pairs, "alice")
    assert set(queried["sample_id"]) == set(probes["sample_id"]) and queried["target"].notna().all()


def test_tables_run_on_translation_features(corpus):
    """The protocol's tables from feature tables of the translation columns, the shadows' training
    sources flagging Table 5's OOV pairs."""
    split, pairs, training = split_and_pairs(corpus, SETTINGS)
    rng = np.random.default_rng(0)

    def fake(ids, member=None):
        n = len(ids)
        shift = np.zeros(n) if member is None else 15.0 * np.asarray(member, dtype=float)
        frame = pd.DataFrame({"sample_id": list(ids), "n_tokens": 20, "model_score": -1.0 + shift / 30,
                              "bleu": np.clip(rng.uniform(10, 60, n) + shift, 0, 100)})  # fmt: skip
        for k in range(1, 5):
            frame[f"precision_{k}"] = np.clip(frame["bleu"] + rng.normal(0, 5, n), 0, 100)
        for column in STAT_COLUMNS:
            frame[column] = rng.integers(5, 20, n)
        return frame[MT_FEATURE_COLUMNS]

    probes = probe_table(split)
    features = {"alice": fake(probes["sample_id"], probes["member"])}
    for s in range(2):
        rows = pairs[pairs["shadow"] == s]
        features[f"bob_{s}"] = fake(rows["sample_id"], rows["member"])
    result = tables(split, pairs, features, training, SETTINGS)
    assert {"table2", "table3", "table4", "table5", "table6", "figure7", "findings"} <= set(result)
    # the workflow's one entry for both protocols (rules/shadow.smk) gives the same tables
    same = protocols.tables("shadow_mt", split, pairs, features, training, SETTINGS)
    for name in ("table2", "table3", "table4", "table5", "table6", "figure7"):
        pd.testing.assert_frame_equal(same[name], result[name])
    assert set(result["table3"]["features"]) == {
        "bleu + precision_1 + precision_2 + precision_3 + precision_4 + model_score"
    }
