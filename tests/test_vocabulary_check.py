"""The vocabulary check (issue 41, item 4): how many of the patients' identifying values are whole
entries of a model's vocabulary, by role, against a count made by hand on a tiny tokenizer (and,
independently, in plain Python over its vocab.txt); a user's PHI table in its three forms; the
world's identifying values (tests/test_extraction.py, on the world it builds) and the count on the CI
world's own tokenizer (tests/test_extraction.py, on the CI run)."""

from __future__ import annotations

import unicodedata

import numpy as np
import pandas as pd
import pytest
from conftest import build_tiny_tokenizer, tiny_vocab

from mlmia.core.errors import UserError
from mlmia.memorization.vocabulary_check import user_values, vocabulary_check, vocabulary_shares
from mlmia.models.tokenizer import VocabularyReader
from mlmia.report.vocabulary import vocabulary_markdown

#: (patient, role, surname): which are whole entries of the tiny vocabulary, by hand (conftest.TINY_WORDS)
VALUES = [
    ("m1", "member", "Aspirin", True),  # lowercased: "aspirin"
    ("m2", "member", "Insulín", True),  # the accent stripped: "insulin"
    ("m3", "member", "METOPROLOL", True),
    ("m4", "member", "Smith", False),  # s ##m ##i ##t ##h
    ("n1", "nonmember", "Kidney", True),
    ("n2", "nonmember", "Jones", False),
    ("n3", "nonmember", "Heart Rate", False),  # two words, two tokens
    ("p1", "population", "Fever", True),
    ("p2", "population", "Brown", False),
    ("h1", "member_heldin", "Qzx", False),
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny_tokenizer")
    build_tiny_tokenizer(directory).save_pretrained(directory)
    return directory


def values_table() -> pd.DataFrame:
    return pd.DataFrame(
        [(g, r, "clinic", "surname", v) for g, r, v, _ in VALUES],
        columns=["group_id", "role", "source", "kind", "value"],
    )


def by_plain_python(value: str) -> bool:
    """The hand count: BERT uncased's normalization (lowercase, accents stripped) and a look-up in the word list."""
    text = "".join(c for c in unicodedata.normalize("NFD", value.lower()) if unicodedata.category(c) != "Mn")
    return text in set(tiny_vocab())


def test_a_tiny_tokenizers_whole_entries_by_hand(tiny):
    reader = VocabularyReader(tiny)
    assert reader.size == len(tiny_vocab())
    for _, _, value, whole in VALUES:
        assert reader.whole(value) == whole == by_plain_python(value), value


def test_shares_and_differences_by_hand(tiny):
    rows = vocabulary_check(values_table(), VocabularyReader(tiny), "tiny", "t", None, replicates=50, seed=1)
    shares = rows[rows["row"] == "share"].set_index("role")
    assert shares.loc["member", ["whole", "values", "patients"]].tolist() == [3, 4, 4]
    assert shares.loc["nonmember", ["whole", "values"]].tolist() == [1, 3]
    assert shares.loc["population", ["whole", "values"]].tolist() == [1, 2]
    assert shares.loc["member_heldin", "value"] == 0.0
    assert shares.loc["member", "value"] == pytest.approx(0.75)
    for _, row in shares.iterrows():
        assert row["ci_low"] <= row["value"] <= row["ci_high"] and row["replicates"] == 50
    differences = rows[rows["row"] == "difference"].set_index("versus")
    assert differences.loc["nonmember", "value"] == pytest.approx(0.75 - 1 / 3)
    assert differences.loc["population", "value"] == pytest.approx(0.25)
    assert set(rows["model"]) == {"tiny"} and set(rows["vocabulary_size"]) == {len(tiny_vocab())}


def test_a_difference_is_paired_and_separated_only_when_its_interval_excludes_zero():
    # every member's value whole, no non-member's: the difference is 1 in every replicate
    values = pd.DataFrame({"group_id": [f"m{i}" for i in range(8)] + [f"n{i}" for i in range(8)],
                           "role": ["member"] * 8 + ["nonmember"] * 8, "kind": "surname", "value": "x"})  # fmt: skip
    rows = vocabulary_shares(values, np.r_[np.ones(8), np.zeros(8)], replicates=30, seed=0)
    difference = rows[rows["row"] == "difference"].iloc[0]
    assert difference["value"] == 1.0 and difference["ci_low"] == difference["ci_high"] == 1.0
    assert difference["separated"]
    # the same shares on both sides: not separated
    rows = vocabulary_shares(values, np.r_[np.ones(4), np.zeros(4), np.ones(4), np.zeros(4)], replicates=30, seed=0)
    difference = rows[rows["row"] == "difference"].iloc[0]
    assert difference["value"] == 0.0 and difference["ci_low"] < 0 < difference["ci_high"]
    assert not difference["separated"]


def test_without_roles_to_compare_the_table_gives_the_shares_alone(tiny):
    values = values_table().assign(role="unknown")
    rows = vocabulary_check(values, VocabularyReader(tiny), "tiny", "t", None, replicates=10, seed=0)
    assert set(rows["row"]) == {"share"} and rows["whole"].tolist() == [5]
    text = "\n".join(vocabulary_markdown(rows))
    assert "no role" in text and "the shares alone, no comparison" in text


def test_only_the_kinds_asked_for_and_an_unknown_kind_in_one_line(tiny):
    values = pd.concat([values_table(), values_table().assign(kind="first_name")], ignore_index=True)
    rows = vocabulary_check(values, VocabularyReader(tiny), "tiny", "t", ["first_name"], replicates=5, seed=0)
    assert set(rows["kind"]) == {"first_name"}
    with pytest.raises(UserError, match=r"^config key audit_cards.vocabulary_kinds: kind 'city' is not among"):
        vocabulary_check(values, VocabularyReader(tiny), "tiny", "t", ["city"], replicates=5, seed=0)


def test_a_users_phi_table_in_each_form_gives_values_with_their_roles():
    samples = pd.DataFrame({
        "sample_id": ["s1", "s2", "s3"], "group_id": ["a", "a", "b"], "role": ["member", "member", "nonmember"],
        "source": "clinic", "text": ["Seen by Dr. Kidney today", "KIDNEY follows up", "Jones was admitted"],
    })  # fmt: skip
    offsets = pd.DataFrame({"sample_id": ["s1", "s2", "s3"], "kind": "surname", "start": [12, 0, 0], "end": [18, 6, 5]})
    found = user_values(samples, offsets.astype(str))
    # the same value in two of a's samples (in two cases) is one value; each patient's role from the samples
    assert sorted(map(tuple, found[["group_id", "role", "value"]].to_numpy())) == [
        ("a", "member", "Kidney"), ("b", "nonmember", "Jones")]  # fmt: skip
    by_sample = pd.DataFrame({"sample_id": ["s3"], "kind": "surname", "value": ["Jones"]})
    assert user_values(samples, by_sample)[["group_id", "role"]].values.tolist() == [["b", "nonmember"]]
    by_patient = pd.DataFrame({"group_id": ["a", "zz"], "kind": "surname", "value": ["Kidney", "Brown"]})
    found = user_values(samples, by_patient).set_index("group_id")
    assert found.loc["a", "role"] == "member" and found.loc["zz", "role"] == "unknown"  # not in the samples
    with pytest.raises(UserError, match=r"row 0: sample_id is not in the dataset"):
        user_values(samples, pd.DataFrame({"sample_id": ["s9"], "kind": "surname", "value": ["X"]}))


# --------------------------------------------------------------------------- a public tokenizer


def test_which_tokenizers_are_public_by_the_config():
    """models.<name>.public_tokenizer: as given for the user's tokenizer (left out: private, the check
    counts); a model the workflow trains inherits: the world's tokenizer (private) from scratch and on
    the DP targets' corpus, its init's when it continues one."""
    from mlmia.study.checks.models import tokenizer_is_public

    models = {
        "world": {"corpus": "target"},
        "world_pp": {"corpus": "target", "init": "world"},
        "bert": {"path": "bert-base-uncased", "public_tokenizer": True},
        "bert_ft": {"corpus": "target", "init": "bert"},
        "bert_ft_pp": {"corpus": "target", "init": "bert_ft"},
        "bert_dp": {"corpus": "dp_private", "init": "bert"},
        "mine": {"path": "models/mine"},
        "scored": {"path": "models/mine", "tokenizer": "bert-base-uncased", "public_tokenizer": True},
    }
    public = {name for name in models if tokenizer_is_public(models, name)}
    assert public == {"bert", "bert_ft", "bert_ft_pp", "scored"}
    assert not tokenizer_is_public(models, "pool_reference_0")  # not a configured model


def test_a_public_tokenizer_is_said_public_not_counted(tiny, tmp_path):
    """A public tokenizer's check is one row that says so, in the CSV, the Markdown page and the card's
    section; beside it a private tokenizer's table as before."""
    from mlmia.memorization.vocabulary_check import COLUMNS, public_check, write_vocabulary_report
    from mlmia.report.cards import vocabulary_lines
    from mlmia.report.vocabulary import PUBLIC, is_public

    private = vocabulary_check(values_table(), VocabularyReader(tiny), "tiny", "sha256:aa", None, replicates=5, seed=0)
    public = public_check("bert_ft", "bert-base-uncased (hub)")
    assert list(public.columns) == COLUMNS and public["row"].tolist() == ["public"]
    csv, markdown = tmp_path / "vocabulary.csv", tmp_path / "vocabulary.md"
    write_vocabulary_report([private, public], csv, markdown, "test values")
    table = pd.read_csv(csv)
    back = table[table["model"] == "bert_ft"]
    assert len(back) == 1 and is_public(back) and not is_public(table[table["model"] == "tiny"])
    assert back[["value", "whole", "vocabulary_size"]].isna().all(axis=None)  # no zeros: nothing counted
    text = markdown.read_text()
    assert f"## bert_ft\n\nTokenizer bert-base-uncased (hub): {PUBLIC}" in text
    assert "## tiny\n\nTokenizer sha256:aa: " in text and "| surname |" in text
    assert "A tokenizer the config marks public" in text
    lines = vocabulary_lines(back, {"run": True, "kinds": None, "values": "test values"})
    assert len(lines) == 1 and PUBLIC in lines[0] and "%" not in lines[0]
    # without a public tokenizer, the page is as it was
    write_vocabulary_report([private], csv, markdown, "test values")
    assert "public" not in markdown.read_text()
