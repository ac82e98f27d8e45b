"""The embedded default world: determinism, roles, membership by construction."""

import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO
from world_helpers import resolved

from mlmia.core.errors import UserError
from mlmia.models.tokenizer import train_tokenizer
from mlmia.terms.manifest import length_bucket
from mlmia.world.corpus import build_world, corpus_settings, write_world
from mlmia.world.samples import named_variant, select_samples

# the section as validation writes it: every key (the library fills none)
TINY = resolved({
    "seed": 0,
    "sentences_per_patient": 6,
    "mimic": {"member_patients": 8, "heldin_patients": 3, "nonmember_patients": 6, "population_patients": 3},
    "i2b2": {"nonmember_patients": 5, "population_patients": 4, "shift": 0.3},
    "domain": {"patients": 5, "abstract_sentences": 20, "note_share": 0.35},
    "general": {"sentences": 60},
}, "corpus")  # fmt: skip


@pytest.fixture(scope="module")
def world():
    return build_world(TINY)


def test_deterministic_for_a_seed_and_different_across_seeds(world):
    again = build_world(TINY)
    for key in world:
        pd.testing.assert_frame_equal(world[key], again[key])
    other = build_world({**TINY, "seed": 1})
    assert set(other["samples"]["text"]) != set(world["samples"]["text"])
    assert set(other["target"]["text"]) != set(world["target"]["text"])


def test_tables_have_the_documented_columns(world):
    s = world["samples"]
    for col in ["sample_id", "group_id", "text", "source", "role", "variant", "name"]:
        assert col in s.columns
    assert s["sample_id"].is_unique
    assert set(s["role"]) == {"member", "member_heldin", "nonmember", "population"}
    assert set(s["source"]) == {"mimic", "i2b2"}
    assert set(s["variant"]) == {"plain", "named"}
    for key in ["target", "target_named", "domain", "general"]:
        assert list(world[key].columns) == ["sample_id", "group_id", "text"]
        assert len(world[key]) > 0


def test_a_patient_never_straddles_roles(world):
    s = world["samples"]
    assert (s.groupby("group_id")["role"].nunique() == 1).all()
    assert (s.groupby("group_id")["source"].nunique() == 1).all()
    members = set(s.loc[s["role"] == "member", "group_id"])
    heldin = set(s.loc[s["role"] == "member_heldin", "group_id"])
    assert members and heldin and not members & heldin
    assert set(s.loc[s["role"] == "population", "source"]) == {"mimic", "i2b2"}
    assert set(s.loc[s["role"] == "nonmember", "source"]) == {"mimic", "i2b2"}


def test_members_are_trained_and_non_members_are_not(world):
    s = world["samples"]
    plain = s[s["variant"] == "plain"]
    target = set(world["target"]["text"])
    named = set(world["target_named"]["text"])
    refs = set(world["domain"]["text"]) | set(world["general"]["text"])
    trained = plain["role"].isin(["member", "member_heldin"])
    assert plain.loc[trained, "text"].isin(target).all()
    held_out = plain.loc[~trained, "text"]
    assert len(held_out) > 0
    assert not held_out.isin(target | named | refs).any()
    # the targets train on every sentence of the member patients and on no other patient
    train_groups = set(world["target"]["group_id"])
    assert train_groups == set(plain.loc[trained, "group_id"])
    # scored samples are unique in the world, so no duplicate line blurs membership
    assert plain["text"].is_unique


def test_base_b_lines_carry_the_name_and_so_do_its_member_samples(world):
    s = world["samples"]
    tn = world["target_named"].merge(world["target"], on=["sample_id", "group_id"], suffixes=("_named", ""))
    names = s.drop_duplicates("group_id").set_index("group_id")["name"]
    assert len(tn) == len(world["target"])
    for _, row in tn.iterrows():
        assert row["text_named"] == f"{names[row['group_id']]} {row['text']}"
    named = s[s["variant"] == "named"]
    assert set(named["role"]) == {"member", "member_heldin"}
    assert named["text"].isin(set(world["target_named"]["text"])).all()
    for _, row in named.iterrows():
        assert row["text"].startswith(row["name"] + " ")
    plain_ids = set(s.loc[(s["variant"] == "plain") & s["role"].isin(["member", "member_heldin"]), "sample_id"])
    assert {sid[: -len("-named")] for sid in named["sample_id"]} == plain_ids
    # non-members carry no name prefix
    non = s[s["role"].isin(["nonmember", "population"])]
    assert not any(t.startswith(n + " ") for t, n in zip(non["text"], non["name"]))


def test_sentences_vary_in_length_and_kind(world):
    s = world["samples"]
    plain = s[s["variant"] == "plain"]
    words = plain["text"].str.split().str.len()
    assert words.min() < 8 and words.max() > 25
    assert plain["kind"].nunique() >= 8


def test_length_bucket():
    assert length_bucket(9) is None
    assert length_bucket(10) == "short"
    assert length_bucket(19) == "short"
    assert length_bucket(20) == "long"
    assert length_bucket(60) == "long"
    assert length_bucket(61) is None


def test_the_resolved_section_is_what_the_world_reads():
    # the defaults of the default world (config/config.yaml writes them out), by hand: validation
    # writes them, a section given in part keeps its other keys' defaults
    settings = corpus_settings(resolved({"seed": 3, "i2b2": {"nonmember_patients": 5}}, "corpus"))
    assert settings["seed"] == 3 and settings["sentences_per_patient"] == 4
    assert settings["mimic"] == {
        "member_patients": 220,
        "heldin_patients": 60,
        "nonmember_patients": 130,
        "population_patients": 90,
    }
    assert settings["i2b2"] == {"nonmember_patients": 5, "population_patients": 70, "shift": 0.15}
    assert settings["domain"]["note_share"] == 0.95 and settings["general"]["medical_share"] == 0.6
    # no fallback: a key left out is a programming error (validation writes every one)
    with pytest.raises(KeyError):
        corpus_settings({k: v for k, v in settings.items() if k != "seed"})
    with pytest.raises(KeyError):
        corpus_settings({**settings, "mimic": {"member_patients": 3}})


def test_settings_are_validated():
    with pytest.raises(UserError, match=r"^corpus\.mimic: unknown key\(s\) members \(known: member_patients, "):
        corpus_settings(resolved({"mimic": {"members": 3}}, "corpus"))
    with pytest.raises(UserError, match=r"^corpus: unknown key\(s\) colour \(known: seed, sentences_per_patient, "):
        corpus_settings(resolved({"colour": 1}, "corpus"))
    with pytest.raises(UserError, match="non-negative integer"):
        corpus_settings(resolved({"mimic": {"member_patients": -1}}, "corpus"))
    with pytest.raises(UserError, match="between 0 and 1"):
        corpus_settings(resolved({"i2b2": {"shift": 2}}, "corpus"))


def test_write_world(tmp_path):
    outs = {k: str(tmp_path / f"{k}.parquet") for k in ["samples", "target"]}
    world = write_world(TINY, outs)
    back = pd.read_parquet(outs["samples"])
    pd.testing.assert_frame_equal(back, world["samples"])
    with pytest.raises(UserError):
        write_world(TINY, {"nope": str(tmp_path / "x.parquet")})


def test_general_corpus_mixes_news_with_the_asked_share_of_medical_prose():
    from mlmia.world.lexicon import general_sentences

    news = set(general_sentences())
    world = build_world({**TINY, "general": {"sentences": 60, "medical_share": 0.25, "note_share": 0.0}})
    general = world["general"]
    assert len(general) == 60
    medical = general[~general["text"].isin(news)]
    assert len(medical) == 15  # round(60 * 0.25): case-report and abstract sentences
    assert medical["sample_id"].str.startswith("encyclopedic-").all()
    # no note register: none of the MIMIC / i2b2 habits appear in the medical share
    assert not medical["text"].str.contains(r"Sig:|p\.o\.|WBC-|^# ", regex=True).any()
    # and no scored sample is in the general reference's training text
    assert not set(general["text"]) & set(world["samples"]["text"])
    only_news = build_world({**TINY, "general": {"sentences": 60, "medical_share": 0.0, "note_share": 0.4}})["general"]
    assert only_news["text"].isin(news).all()


def test_the_mimic_population_changes_no_other_row_of_the_world_or_of_the_sample_tables(tmp_path):
    """The CI world with and without its MIMIC population: every table of the world, and the
    selected sample tables (plain and Base-b's), are the same but for the population's rows,
    which come last; so every paper table, which reads none of them, is unchanged."""
    config = yaml.safe_load((REPO / "config" / "ci.yaml").read_text())
    corpus, samples = resolved(config["corpus"], "corpus"), resolved(config["samples"], "samples")
    assert corpus["mimic"]["population_patients"] > 0 and list(samples["counts"]["population"])[-1] == "mimic"
    without = {**corpus, "mimic": {**corpus["mimic"], "population_patients": 0}}
    old, new = build_world(without), build_world(corpus)
    for key in ("target", "target_named", "domain", "general"):
        pd.testing.assert_frame_equal(new[key], old[key])
    added = new["samples"].iloc[len(old["samples"]) :]
    pd.testing.assert_frame_equal(new["samples"].iloc[: len(old["samples"])], old["samples"])
    assert len(added) > 0 and (added["role"] == "population").all() and (added["source"] == "mimic").all()
    assert not set(added["group_id"]) & set(old["samples"]["group_id"])
    assert new["samples"]["text"].is_unique and not set(added["text"]) & set(new["domain"]["text"])

    texts = pd.concat([old[k]["text"] for k in ("target", "target_named", "domain", "general")])
    tokenizer = train_tokenizer(texts, tmp_path / "tokenizer", vocab_size=1500, min_frequency=2, min_patients=None)
    old_counts = {**samples["counts"], "population": {"i2b2": samples["counts"]["population"]["i2b2"]}}
    before = select_samples(old["samples"], tokenizer, old_counts, samples["lengths"], samples["seed"])
    after = select_samples(new["samples"], tokenizer, samples["counts"], samples["lengths"], samples["seed"])
    pd.testing.assert_frame_equal(after.iloc[: len(before)], before)
    rest = after.iloc[len(before) :]
    assert len(rest) == sum(samples["counts"]["population"]["mimic"].values())
    assert (rest["role"] == "population").all() and (rest["source"] == "mimic").all()
    pd.testing.assert_frame_equal(
        named_variant(after, new["samples"], tokenizer).iloc[: len(before)],
        named_variant(before, old["samples"], tokenizer),
    )


def test_min_patients_leaves_the_scored_samples_as_they_were(world, tmp_path):
    """tokenizer.min_patients splits rare words into more tokens, so it would move sentences across
    the length buckets: the buckets are the tokenizer's learnt without it (`length_tokenizer`), the
    token counts the scoring tokenizer's."""
    corpora = [world[k] for k in ("target", "target_named", "domain", "general")]
    texts, groups = pd.concat([c["text"] for c in corpora]), pd.concat([c["group_id"] for c in corpora])
    plain = train_tokenizer(texts, tmp_path / "plain", vocab_size=1500, min_frequency=2, min_patients=None)
    shared = train_tokenizer(texts, tmp_path / "shared", vocab_size=1500, min_frequency=2, groups=groups.tolist(),
                             min_patients=3)  # fmt: skip
    counts = {"member": {"mimic": 3}, "member_heldin": {"mimic": 1}, "nonmember": {"mimic": 2, "i2b2": 2},
              "population": {"i2b2": 1}}  # fmt: skip
    before = select_samples(world["samples"], plain, counts, ["long"], 0)
    after = select_samples(world["samples"], shared, counts, ["long"], 0, length_tokenizer=plain)
    pd.testing.assert_frame_equal(after.drop(columns="n_tokens"), before.drop(columns="n_tokens"))
    tokens = [len(shared.tokenize(t)) for t in after["text"]]
    assert after["n_tokens"].tolist() == tokens and (after["n_tokens"] >= before["n_tokens"]).all()
    assert (after["n_tokens"] > before["n_tokens"]).any()


def test_the_dp_private_text_adds_new_patients_and_never_a_world_sample(world):
    """The DP targets' text: the target's lines first, then the new patients' (ids of their own, a
    stream of their own: the same with or without the rest of the world); a new line whose text is
    a world sample (here one planted in the sample table) or a target line is left out."""
    from mlmia.world.dp_corpus import PATIENT_PREFIX, dp_corpus_settings, dp_private_text

    alone = dp_private_text(world["target"].iloc[:0], world["samples"].iloc[:0], TINY, {"patients": 12})
    assert alone["group_id"].nunique() == 12 and alone["group_id"].str.startswith(PATIENT_PREFIX).all()
    text = dp_private_text(world["target"], world["samples"], TINY, {"patients": 12})
    n = len(world["target"])
    assert text.iloc[:n]["text"].tolist() == world["target"]["text"].tolist()
    # the new lines: the patients' own, but for those (formulaic) lines that the world holds already
    known = set(world["samples"]["text"]) | set(world["target"]["text"])
    expected = alone[~alone["text"].isin(known)]
    assert 0 < len(expected) < len(alone) and text.iloc[n:]["sample_id"].tolist() == expected["sample_id"].tolist()
    assert not set(text.iloc[n:]["text"]) & set(world["samples"]["text"])
    planted = pd.concat([world["samples"], expected.iloc[[3, 7]].assign(role="nonmember")], ignore_index=True)
    kept = dp_private_text(world["target"], planted, TINY, {"patients": 12})
    assert len(kept) == len(text) - 2 and not set(expected["text"].iloc[[3, 7]]) & set(kept["text"])
    assert (
        dp_private_text(world["target"], world["samples"], TINY, {"patients": 0})["text"].tolist()
        == world["target"]["text"].tolist()
    )
    assert dp_corpus_settings({"patients": 0}) == {"patients": 0}  # the resolved section, checked
    with pytest.raises(KeyError):  # resolved: every key given (mlmia.study.resolve)
        dp_corpus_settings({})
    for bad in ({"patients": -1}, {"patients": True}):
        with pytest.raises(UserError, match=r"^dp_corpus\.patients: must be a non-negative integer"):
            dp_corpus_settings(bad)
    with pytest.raises(UserError, match=r"^dp_corpus: unknown key\(s\) people \(known: patients\)$"):
        dp_corpus_settings({"people": 3})


def test_a_template_writes_the_patients_phi_exactly_when_it_is_flagged_phi_bearing():
    """PHI here is what the d-exposure tagger labels: a name, a place or a date of the patient
    (the surname, the physician, the state, the stay's dates of `patient_phi`). The PHI-labelled
    notes take their all-O sentences from the templates not flagged (`mlmia.world.phi`), so the
    flag, never a template's name, decides them: every sentence of a flagged template holds one
    of those values, no sentence of another template does."""
    import random
    import re

    from mlmia.world.corpus import REGISTERS
    from mlmia.world.lexicon import lexicon
    from mlmia.world.patient_phi import patient_phi
    from mlmia.world.patients import make_patient

    rng = random.Random(0)
    flagged = set()
    for source, register in REGISTERS.items():
        for template in (register.opening, *register.templates):
            for i in range(30):
                patient = make_patient(rng, lexicon(), f"{source}-{i:05d}", source)
                values = patient_phi([patient]).query("kind in ['surname', 'physician', 'state', 'date']")["value"]
                text = template.render(rng, patient)
                written = [v for v in values if re.search(rf"(?<![\w/-]){re.escape(v)}(?![\w/-])", text)]
                assert bool(written) == template.phi_bearing, (template.name, text)
            if template.phi_bearing:
                flagged.add(template.name)
    # the PHI-bearing templates as the notes have always left them out of their PHI-free sentences
    assert flagged == {"m_hpi", "m_labs", "m_imaging", "m_followup", "m_social", "i_hpi", "i_imaging", "i_followup"}
