"""User sample files read into manifests: formats, columns by name or position, roles, errors."""

import json
import logging

import pandas as pd
import pytest
from conftest import build_tiny_tokenizer

from mlmia.core.errors import UserError
from mlmia.data import datasets
from mlmia.data.datasets import DATASET_COLUMNS, assign_lengths
from mlmia.models.tokenizer import content_tokens
from mlmia.terms.manifest import MANIFEST_COLUMNS
from mlmia.terms.schema import defaults

KEY = "datasets.mine"


def read_dataset(spec, *args, **kwargs):
    """`mlmia.data.datasets.read_dataset` of `spec` as validation resolves it: the schema's
    defaults (`datasets.<name>`) written in where the test leaves a key out."""
    return datasets.read_dataset({**defaults("datasets", "*"), **spec}, *args, **kwargs)


# the paper's processed format: header, column 0 the patient id, column 3 the text
PAPER_CSV = (
    'patient_id,note_id,sentence,text\n007,11,0,  patient admitted with chest pain  \n12,13,4,"denies fever, cough"\n'
)


def manifest_rows(df):
    return [tuple(r) for r in df[DATASET_COLUMNS].itertuples(index=False)]


def error(spec, root, key=KEY):
    with pytest.raises(UserError) as info:
        read_dataset(spec, root, key)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_paper_processed_files_by_position(tmp_path):
    (tmp_path / "members_long.csv").write_text(PAPER_CSV)
    (tmp_path / "nonmembers_short.csv").write_text("patient_id,note_id,sentence,text\n99,1,0,no acute distress\n")
    spec = {
        "format": "auto",
        "columns": {"group": 0, "text": 3},
        "files": [
            {"path": "members_long.csv", "role": "member", "source": "mimic", "length": "long"},
            {"path": "nonmembers_short.csv", "role": "nonmember", "source": "i2b2", "length": "short"},
        ],
    }
    df = read_dataset(spec, tmp_path, KEY)
    assert list(df.columns) == DATASET_COLUMNS
    assert manifest_rows(df) == [
        ("members_long:0", "007", "patient admitted with chest pain", "member", "mimic", "long"),
        ("members_long:1", "12", "denies fever, cough", "member", "mimic", "long"),
        ("nonmembers_short:0", "99", "no acute distress", "nonmember", "i2b2", "short"),
    ]


def test_patient_ids_of_disjoint_sources_are_kept_apart_by_source(tmp_path):
    """MIMIC's SUBJECT_ID 110 and i2b2's patient 110 are two patients where the dataset says the
    sources are disjoint populations (`group_ids: by_source`); as given, one patient in two roles."""
    (tmp_path / "members.csv").write_text("patient_id,note_id,sentence,text\n110,1,0,seen in clinic\n")
    (tmp_path / "nonmembers.csv").write_text("patient_id,note_id,sentence,text\n110,2,0,no acute distress\n")
    files = [
        {"path": "members.csv", "role": "member", "source": "mimic"},
        {"path": "nonmembers.csv", "role": "nonmember", "source": "i2b2"},
    ]
    spec = {"columns": {"group": 0, "text": 3}, "files": files}
    assert error(spec, tmp_path) == (
        f"{KEY} ({tmp_path / 'members.csv'}, {tmp_path / 'nonmembers.csv'}): patient '110' is in two roles "
        f"(member and nonmember); a patient plays one role; it is listed under sources i2b2 and mimic: if these "
        f"are different populations, set {KEY}.group_ids: by_source"
    )
    df = read_dataset({**spec, "group_ids": "by_source"}, tmp_path, KEY)
    assert df["group_id"].tolist() == ["mimic:110", "i2b2:110"]
    # a real overlap within one source is still refused, and without the hint
    files[1]["source"] = "mimic"
    message = error({**spec, "group_ids": "by_source"}, tmp_path)
    assert message.endswith("patient 'mimic:110' is in two roles (member and nonmember); a patient plays one role")
    assert "group_ids" in error({**spec, "group_ids": "by_patient"}, tmp_path)


def test_every_format_names_positions_role_column_and_role_names(tmp_path):
    # CSV by names, with an id column and a role column using the file's own labels
    (tmp_path / "named.csv").write_text("uid,pid,body,split\na1,p1,first text,train\na2,p2,second text,heldout\n")
    # TSV without a header, by position
    (tmp_path / "plain.tsv").write_text("p3\tthird text\tx\np4\tfourth text\ty\n")
    # Parquet with integer patient ids and a source column
    pd.DataFrame({"text": ["fifth text"], "patient": [42], "origin": ["i2b2"]}).to_parquet(tmp_path / "table.parquet")
    # JSONL with a role column holding a ROLES name directly
    (tmp_path / "lines.jsonl").write_text(
        json.dumps({"t": "sixth text", "g": "p6", "r": "population"})
        + "\n"
        + json.dumps({"t": " seventh text ", "g": 7, "r": "heldout"})
        + "\n"
    )
    common = {"role_names": {"train": "member", "heldout": "nonmember"}}
    specs = [
        (
            {
                "columns": {"text": "body", "group": "pid", "role": "split", "id": "uid"},
                "files": [{"path": "named.csv", "source": "mimic"}],
            },
            [
                ("a1", "p1", "first text", "member", "mimic", None),
                ("a2", "p2", "second text", "nonmember", "mimic", None),
            ],
        ),
        (
            {
                "header": False,
                "columns": {"text": 1, "group": 0},
                "files": [{"path": "plain.tsv", "role": "heldout", "source": "mimic", "length": "short"}],
            },
            [
                ("plain:0", "p3", "third text", "nonmember", "mimic", "short"),
                ("plain:1", "p4", "fourth text", "nonmember", "mimic", "short"),
            ],
        ),
        (
            {
                "columns": {"text": "text", "group": "patient", "source": "origin"},
                "files": [{"path": "table.parquet", "role": "population"}],
            },
            [("table:0", "42", "fifth text", "population", "i2b2", None)],
        ),
        (
            {"columns": {"text": "t", "group": "g", "role": "r"}, "files": [{"path": "lines.jsonl", "source": "i2b2"}]},
            [
                ("lines:0", "p6", "sixth text", "population", "i2b2", None),
                ("lines:1", "7", "seventh text", "nonmember", "i2b2", None),
            ],
        ),
    ]
    for spec, expected in specs:
        assert manifest_rows(read_dataset({**common, **spec}, tmp_path, KEY)) == expected


def test_explicit_format_overrides_the_extension(tmp_path):
    (tmp_path / "data.txt").write_text("g\tt\np1\tsome text\n")
    spec = {
        "format": "tsv",
        "columns": {"text": "t", "group": "g"},
        "files": [{"path": "data.txt", "role": "member", "source": "mimic"}],
    }
    assert manifest_rows(read_dataset(spec, tmp_path, KEY)) == [("data:0", "p1", "some text", "member", "mimic", None)]


def test_per_file_role_wins_over_the_role_column(tmp_path):
    (tmp_path / "a.csv").write_text("g,t,r\np1,x text,member\n")
    spec = {
        "columns": {"text": "t", "group": "g", "role": "r"},
        "files": [{"path": "a.csv", "role": "population", "source": "i2b2"}],
    }
    assert read_dataset(spec, tmp_path, KEY)["role"].tolist() == ["population"]


def test_absolute_paths_and_no_root(tmp_path):
    (tmp_path / "a.csv").write_text("g,t\np1,x text\n")
    spec = {
        "columns": {"text": "t", "group": "g"},
        "files": [{"path": str(tmp_path / "a.csv"), "role": "member", "source": "mimic"}],
    }
    assert read_dataset(spec)["sample_id"].tolist() == ["a:0"]


# --------------------------------------------------------------------------------------------
# errors: one line, naming the file, the row or the key


def simple_spec(path="a.csv", **file_keys):
    return {
        "columns": {"text": "t", "group": "g"},
        "files": [{"path": path, "role": "member", "source": "mimic", **file_keys}],
    }


def test_missing_file(tmp_path):
    assert error(simple_spec("nope.csv"), tmp_path) == f"{tmp_path / 'nope.csv'}: file not found ({KEY}.files[0].path)"


def test_unknown_format(tmp_path):
    (tmp_path / "a.xlsx").write_text("x")
    message = error(simple_spec("a.xlsx"), tmp_path)
    assert message.startswith(f"{tmp_path / 'a.xlsx'}: unknown format for extension '.xlsx'")
    assert f"{KEY}.format" in message
    assert error({**simple_spec(), "format": "excel"}, tmp_path) == (
        f"{KEY}.format: unknown format 'excel' (use one of auto, csv, tsv, parquet, jsonl)"
    )


def test_missing_named_column_lists_the_file_columns(tmp_path):
    (tmp_path / "a.csv").write_text("patient,t\np1,x text\n")
    assert error(simple_spec(), tmp_path) == (
        f"{tmp_path / 'a.csv'}: no column 'g' ({KEY}.columns.group); the file has: patient, t"
    )


def test_position_out_of_range(tmp_path):
    (tmp_path / "a.csv").write_text("a,b,c\np1,x,y\n")
    spec = {"columns": {"group": 0, "text": 3}, "files": [{"path": "a.csv", "role": "member", "source": "mimic"}]}
    assert error(spec, tmp_path) == (
        f"{tmp_path / 'a.csv'}: {KEY}.columns.text is position 3 but the file has 3 column(s) (positions 0-2)"
    )


def test_column_name_without_header(tmp_path):
    (tmp_path / "a.csv").write_text("p1,x text\n")
    assert error({**simple_spec(), "header": False}, tmp_path) == (
        f"{KEY}.columns.text: 't' is a column name but {KEY}.header is false (use a 0-based position)"
    )


def test_empty_text_names_file_and_row(tmp_path):
    (tmp_path / "a.csv").write_text("g,t\np1,fine text\np2,   \n")
    assert error(simple_spec(), tmp_path) == f"{tmp_path / 'a.csv'}: row 2: empty text"
    pd.DataFrame({"g": ["p1", "p2"], "t": ["ok", None]}).to_parquet(tmp_path / "b.parquet")
    assert error(simple_spec("b.parquet"), tmp_path) == f"{tmp_path / 'b.parquet'}: row 2: empty text"


def test_empty_group_id(tmp_path):
    (tmp_path / "a.csv").write_text("g,t\n,some text\n")
    assert error(simple_spec(), tmp_path) == f"{tmp_path / 'a.csv'}: row 1: empty group id ({KEY}.columns.group)"


def test_unknown_role_label(tmp_path):
    (tmp_path / "a.csv").write_text("g,t,r\np1,x text,train\np2,y text,dev\n")
    spec = {
        "columns": {"text": "t", "group": "g", "role": "r"},
        "role_names": {"train": "member", "heldout": "nonmember"},
        "files": [{"path": "a.csv", "source": "mimic"}],
    }
    assert error(spec, tmp_path) == (
        f"{tmp_path / 'a.csv'}: row 2: column 'r': unknown role label "
        f"(known roles: member, member_heldin, nonmember, population; {KEY}.role_names maps: train, heldout)"
    )
    bad_file_role = simple_spec()
    bad_file_role["files"][0]["role"] = "members"
    assert error(bad_file_role, tmp_path) == (
        f"{KEY}.files[0].role: unknown role 'members' (known roles: member, member_heldin, nonmember, population)"
    )


def test_file_without_role(tmp_path):
    (tmp_path / "a.csv").write_text("g,t\np1,x text\n")
    spec = {"columns": {"text": "t", "group": "g"}, "files": [{"path": "a.csv", "source": "mimic"}]}
    assert error(spec, tmp_path) == (
        f"{KEY}.files[0]: {tmp_path / 'a.csv'} has no role: give {KEY}.files[0].role or {KEY}.columns.role"
    )


def test_file_without_source(tmp_path):
    (tmp_path / "a.csv").write_text("g,t\np1,x text\n")
    spec = {"columns": {"text": "t", "group": "g"}, "files": [{"path": "a.csv", "role": "member"}]}
    assert "has no source" in error(spec, tmp_path)


def test_a_file_without_rows_is_refused(tmp_path):
    (tmp_path / "a.csv").write_text("g,t\np1,x text\n")
    (tmp_path / "b.csv").write_text("g,t\n")  # a header and no row
    spec = simple_spec()
    spec["files"].append({"path": "b.csv", "role": "nonmember", "source": "mimic"})
    assert (
        error(spec, tmp_path)
        == f"{tmp_path / 'b.csv'}: no rows ({KEY}.files[1]): give it samples or leave it out of the list"
    )


def test_duplicate_sample_ids_name_both_files(tmp_path):
    for sub in ("x", "y"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "a.csv").write_text("g,t\np1,x text\n")
    spec = simple_spec("x/a.csv")
    spec["files"].append({"path": "y/a.csv", "role": "nonmember", "source": "mimic"})
    assert error(spec, tmp_path) == (
        f"{tmp_path / 'y' / 'a.csv'}: row 1: sample id 'a:0' already used by {tmp_path / 'x' / 'a.csv'} row 1 "
        f"(sample ids must be unique across the files of {KEY})"
    )


def test_duplicate_ids_within_one_file(tmp_path):
    (tmp_path / "a.csv").write_text("i,g,t\ns1,p1,x text\ns1,p2,y text\n")
    spec = simple_spec()
    spec["columns"]["id"] = "i"
    assert "row 2: sample id 's1' already used by" in error(spec, tmp_path)


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            {"colums": {}},
            f"{KEY}: unknown key(s) colums (known: format, header, columns, files, role_names, group_ids, rows, root, tokenizer, "
            "shards)",
        ),
        ({"columns": {"text": "t"}}, f"{KEY}.columns.group: missing (a column name or a 0-based position)"),
        (
            {"columns": {"text": "t", "group": -1}},
            f"{KEY}.columns.group: must be a column name or a 0-based position, got -1",
        ),
        (
            {"columns": {"text": "t", "group": True}},
            f"{KEY}.columns.group: must be a column name or a 0-based position, got True",
        ),
        ({"header": "yes"}, f"{KEY}.header: must be true or false, got 'yes'"),
        ({"files": []}, f"{KEY}.files: must be a non-empty list of {{path: ...}} entries"),
        (
            {"files": [{"path": "a.csv", "role": "member", "source": "x", "length": "medium"}]},
            f"{KEY}.files[0].length: must be one of short, long or null, got 'medium'",
        ),
        ({"rows": "sentences"}, f"{KEY}.rows: must be one of samples, notes, got 'sentences'"),
        (
            {"rows": "notes", "files": [{"path": "a.csv", "role": "member", "source": "x", "length": "long"}]},
            f"{KEY}.files[0].length: a file of whole notes ({KEY}.rows: notes) has sentences of every length: leave it "
            "out (the scoring tokenizer counts each sentence)",
        ),
        (
            {"role_names": {"train": "members"}},
            f"{KEY}.role_names.train: unknown role 'members' (known roles: member, member_heldin, nonmember, population)",
        ),
    ],
)
def test_bad_spec_names_the_key(tmp_path, change, expected):
    (tmp_path / "a.csv").write_text("g,t\np1,x text\n")
    assert error({**simple_spec(), **change}, tmp_path) == expected


def test_unreadable_csv_names_the_file(tmp_path):
    (tmp_path / "a.csv").write_text('g,t\np1,"unclosed\n')
    assert error(simple_spec(), tmp_path).startswith(f"{tmp_path / 'a.csv'}: cannot read as csv:")


# --------------------------------------------------------------------------------------------
# length buckets


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def words(n):
    return " ".join(["patient"] * n)


def test_assign_lengths_keeps_file_buckets_and_every_sample(tokenizer, caplog):
    manifest = pd.DataFrame(
        {
            "sample_id": [f"s{i}" for i in range(7)],
            "group_id": ["g"] * 7,
            "text": [words(5), words(12), words(25), words(70), words(12), words(5), "aspirin 2x"],
            "role": ["member"] * 7,
            "source": ["mimic"] * 7,
            "length": [None, None, None, None, "long", "short", None],
        }
    )
    logger = logging.getLogger("mlmia.data.datasets")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="mlmia.data.datasets"):
            out = assign_lengths(manifest, tokenizer)
    finally:
        logger.removeHandler(caplog.handler)
    assert list(out.columns) == MANIFEST_COLUMNS
    # samples in no bucket stay, with no length: `lengths: [all]` means every sample
    assert out["sample_id"].tolist() == [f"s{i}" for i in range(7)]
    assert out["length"].tolist() == [None, "short", "long", None, "long", "short", None]
    assert out["n_tokens"].tolist() == [5, 12, 25, 70, 12, 5, 3]
    assert out["n_tokens"].dtype == "int64"
    assert "3 of 7 samples fall in no length bucket" in caplog.text
    assert "kept the file's length bucket for 2 samples (2 of them" in caplog.text
    # the same count as the scoring path
    assert content_tokens(tokenizer, ["aspirin 2x"]).tolist() == [3]


def test_assign_lengths_custom_buckets(tokenizer):
    manifest = pd.DataFrame(
        {
            "sample_id": ["a", "b", "c"],
            "group_id": ["g"] * 3,
            "text": [words(3), words(8), words(9)],
            "role": ["member"] * 3,
            "source": ["mimic"] * 3,
            "length": [None] * 3,
        }
    )
    out = assign_lengths(manifest, tokenizer, buckets={"tiny": [1, 4], "small": [5, 8]})
    assert out["length"].tolist() == ["tiny", "small", None]
    with pytest.raises(UserError, match="length buckets: tiny and small overlap"):
        assign_lengths(manifest, tokenizer, buckets={"tiny": [1, 5], "small": [5, 8]})


def test_read_then_assign_lengths(tmp_path, tokenizer):
    (tmp_path / "m.csv").write_text(f"patient_id,note_id,sentence,text\n1,1,0,{words(15)}\n2,1,0,{words(3)}\n")
    spec = {"columns": {"group": 0, "text": 3}, "files": [{"path": "m.csv", "role": "member", "source": "mimic"}]}
    out = assign_lengths(read_dataset(spec, tmp_path, KEY), tokenizer)
    assert [tuple(r) for r in out.itertuples(index=False)] == [
        ("m:0", "1", words(15), "member", "mimic", "short", 15),
        ("m:1", "2", words(3), "member", "mimic", None, 3),  # in no bucket: kept, with no length
    ]


def test_numeric_role_labels(tmp_path):
    # YAML `role_names: {1: member, 0: nonmember}` gives integer keys; the file's labels are numbers too
    (tmp_path / "a.jsonl").write_text(
        '{"t": "x text", "g": "p1", "label": 1}\n{"t": "y text", "g": "p2", "label": 0}\n'
    )
    spec = {
        "columns": {"text": "t", "group": "g", "role": "label"},
        "role_names": {1: "member", 0: "nonmember"},
        "files": [{"path": "a.jsonl", "source": "mimic"}],
    }
    assert read_dataset(spec, tmp_path, KEY)["role"].tolist() == ["member", "nonmember"]


def test_section_root_and_caller_keys(tmp_path):
    # the workflow passes its whole config section: root, tokenizer and shards are its keys
    (tmp_path / "a.csv").write_text("g,t\np1,x text\n")
    spec = {**simple_spec(), "root": str(tmp_path), "tokenizer": "bert-base-uncased", "shards": 4}
    assert read_dataset(spec, key=KEY)["sample_id"].tolist() == ["a:0"]
    # an explicit root wins over the section's
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.csv").write_text("g,t\np9,other text\n")
    assert read_dataset(spec, tmp_path / "sub", KEY)["group_id"].tolist() == ["p9"]


def test_requirements_are_checked_before_scoring():
    from mlmia.data.datasets import check_requirements

    manifest = pd.DataFrame(
        {"role": ["member", "nonmember", "nonmember"], "source": ["a", "a", "b"], "length": ["long", "short", "long"]}
    )
    check_requirements(manifest, [{"experiment": "e", "role": "nonmember", "source": "a", "length": "short"}], KEY)
    with pytest.raises(UserError) as info:
        check_requirements(manifest, [{"experiment": "e", "role": "nonmember", "source": "b", "length": "short"}], KEY)
    assert (
        str(info.value)
        == f"{KEY}: experiment 'e' needs nonmember samples from source 'b' of length 'short'; the dataset has none"
    )
    with pytest.raises(UserError, match="needs population samples"):
        check_requirements(manifest, [{"experiment": "e", "role": "population", "source": "a", "length": None}], KEY)


def test_whole_notes_are_cut_into_sentence_samples_of_their_patient(tmp_path, caplog):
    """`rows: notes`: each row a whole note; by hand, the splitter's rules (a header is a piece of
    its own, a list item starts a sentence, a sentence ends at '. ' before a capital, not after
    'Dr.'), each sentence a sample of the note's patient, role and source, id '<note id>#<i>'."""
    notes = pd.DataFrame(
        {
            "patient": ["p1", "p2", "p3"],
            "note": ["n1", "n2", "n3"],
            "body": [
                "HISTORY OF PRESENT ILLNESS:\nSeen by Dr. Smith today. Pain resolved.",
                "Medications:\n1. aspirin 81 mg daily\n2. metoprolol 25 mg",
                "ok.",  # fewer than three word characters: no sentence
            ],
            "split": ["train", "test", "test"],
        }
    )
    notes.to_csv(tmp_path / "notes.csv", index=False)
    spec = {
        "rows": "notes",
        "columns": {"text": "body", "group": "patient", "role": "split", "id": "note"},
        "role_names": {"train": "member", "test": "nonmember"},
        "files": [{"path": "notes.csv", "source": "clinic"}],
    }
    with caplog.at_level(logging.INFO):
        manifest = read_dataset(spec, tmp_path, KEY)
    assert manifest_rows(manifest) == [
        ("n1#0", "p1", "HISTORY OF PRESENT ILLNESS:", "member", "clinic", None),
        ("n1#1", "p1", "Seen by Dr. Smith today.", "member", "clinic", None),
        ("n1#2", "p1", "Pain resolved.", "member", "clinic", None),
        ("n2#0", "p2", "Medications:", "nonmember", "clinic", None),
        ("n2#1", "p2", "aspirin 81 mg daily", "nonmember", "clinic", None),
        ("n2#2", "p2", "metoprolol 25 mg", "nonmember", "clinic", None),
    ]
    assert "3 notes cut into 6 sentence samples (1 notes gave none" in caplog.text
    assert "Smith" not in caplog.text  # counts only: a note's text is never logged
    # the same file read as samples: one sample a row, as before
    as_samples = read_dataset({**spec, "rows": "samples"}, tmp_path, KEY)
    assert list(as_samples["sample_id"]) == ["n1", "n2", "n3"]


def test_a_duplicate_note_id_names_the_file_row(tmp_path):
    (tmp_path / "notes.csv").write_text("g,id,t\np1,n1,First one. Second one.\np2,n1,Other note here.\n")
    spec = {**simple_spec(), "rows": "notes", "columns": {"text": "t", "group": "g", "id": "id"}}
    assert "row 2: sample id" in error(
        {**spec, "files": [{"path": "notes.csv", "role": "member", "source": "x"}]}, tmp_path
    )


def test_validation_writes_every_default_of_a_dataset_entry(tmp_path):
    # the entry is prepare_dataset's params, read with no fallback: a validated one is complete
    from mlmia.terms.schema import schema_path, validate

    entry = {"columns": {"text": "t", "group": "g"}, "files": [{"path": "a.csv", "role": "member", "source": "x"}]}
    config = validate({"run": "x", "tables_spec": "t.yaml", "datasets": {"d": dict(entry)}}, schema_path("config"))
    assert config["datasets"]["d"] == {**entry, **defaults("datasets", "*")}
    with pytest.raises(KeyError):  # an entry that skipped validation is a caller's mistake
        datasets.read_dataset(entry, tmp_path, KEY)
