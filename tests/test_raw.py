"""Raw-data importers: sentence splitting, MIMIC-III NOTEEVENTS, i2b2 XML, patient sampling."""

import pandas as pd
import pytest

from mlmia.core.errors import UserError
from mlmia.data.datasets import read_dataset
from mlmia.data.raw import (
    i2b2_xml,
    mimic_noteevents,
    read_patient_list,
    sample_patients,
    split_sentences,
    write_processed,
)
from mlmia.terms.schema import defaults

# --------------------------------------------------------------------------------------------
# sentence splitting


@pytest.mark.parametrize(
    "text, expected",
    [
        # sentence-final punctuation before a capital; "No." has fewer than 3 word characters
        (
            "The patient is a 65 yo man. He presented with chest pain! Was he febrile? No.",
            ["The patient is a 65 yo man.", "He presented with chest pain!", "Was he febrile?"],
        ),
        # de-identification brackets stay inside the sentence, even with a period inside
        (
            "Seen by Dr. [**Last Name (STitle) 123**] on [**2101-3-4**]. Follow up in 2 weeks.",
            ["Seen by Dr. [**Last Name (STitle) 123**] on [**2101-3-4**].", "Follow up in 2 weeks."],
        ),
        (
            "He came from [**Hospital 1. Ward**] to the floor. [**Known firstname**] did well.",
            ["He came from [**Hospital 1. Ward**] to the floor.", "[**Known firstname**] did well."],
        ),
        # wrapped lines join; blank lines, headers and list items split; list markers dropped
        (
            "HISTORY OF PRESENT ILLNESS: 65 yo male with\nhistory of CAD who presents with chest pain.\n\n"
            "Past Medical History:\n1. Coronary artery disease\n2) Hypertension, on lisinopril\n"
            "- diet controlled diabetes\nDischarge Condition: stable",
            [
                "HISTORY OF PRESENT ILLNESS:",
                "65 yo male with history of CAD who presents with chest pain.",
                "Past Medical History:",
                "Coronary artery disease",
                "Hypertension, on lisinopril",
                "diet controlled diabetes",
                "Discharge Condition:",
                "stable",
            ],
        ),
        # no split before a lower-case letter, nor inside decimals
        (
            "Given aspirin p.o. q.d. and heparin. then discharged.",
            ["Given aspirin p.o. q.d. and heparin. then discharged."],
        ),
        ("Creatinine 1.2. Potassium 4.5 mg/dL.", ["Creatinine 1.2.", "Potassium 4.5 mg/dL."]),
        # titles and initials do not end a sentence
        ("Mr. Smith saw J. Doe today. Next visit 3/4.", ["Mr. Smith saw J. Doe today.", "Next visit 3/4."]),
        # closing quotes stay with their sentence
        ('He said "stop." The end came.', ['He said "stop."', "The end came."]),
        # whitespace collapses; CRLF line ends; a time is not a header
        ("  Lots   of\tspace  here. ", ["Lots of space here."]),
        (
            "Pt was seen at 10:30 today.\r\nVitals: T 98.6 BP 120/80",
            ["Pt was seen at 10:30 today.", "Vitals:", "T 98.6 BP 120/80"],
        ),
        ("", []),
        (None, []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


# --------------------------------------------------------------------------------------------
# MIMIC-III

NOTEEVENTS = (
    "ROW_ID,SUBJECT_ID,HADM_ID,CHARTDATE,CHARTTIME,STORETIME,CATEGORY,DESCRIPTION,CGID,ISERROR,TEXT\n"
    '1,100,5001,2101-03-04,,,Discharge summary,Report,,,"Admission Date: [**2101-3-4**]\n\n'
    'HISTORY OF PRESENT ILLNESS: 65 yo man with ""crushing"" chest pain,\nradiating to the arm. He was given aspirin.\n"\n'
    '2,100,5001,2101-03-05,,,Radiology,CHEST (PA & LAT),,,"FINDINGS: Mild cardiomegaly is seen."\n'
    '3,200,5002,2102-01-01,,,Discharge summary,Report,,1,"Wrong patient note. Should be skipped."\n'
    '4,200,5002,2102-01-02,,,Discharge summary ,Report,,,"Brief Hospital Course:\n'
    'Patient improved on lasix. Discharged home."\n'
    '5,300,5003,2103-01-01,,,Discharge summary,Report,,,"Short note with one sentence only."\n'
)

# Lehman et al.'s layout: SUBJECT_ID, TEXT (whole notes, multi-line), MODIFIED
MEMBER_LIST = 'SUBJECT_ID,TEXT,MODIFIED\n100,"note one\nsecond line, with comma",0\n100,"note two",1\n'


@pytest.fixture
def mimic_files(tmp_path):
    notes = tmp_path / "NOTEEVENTS.csv"
    notes.write_text(NOTEEVENTS)
    list_a = tmp_path / "SUBJECT_ID_to_NOTES_1a.csv"
    list_a.write_text(MEMBER_LIST)
    list_b = tmp_path / "ids_only.csv"  # no header: ids in column 0
    list_b.write_text("300\n")
    return notes, [list_a, list_b]


def test_mimic_noteevents(mimic_files):
    notes, lists = mimic_files
    out = mimic_noteevents(notes, lists, chunksize=2)  # chunks split the file between quoted notes
    assert list(out.columns) == ["patient_id", "note_id", "sentence", "text", "trained"]
    assert [tuple(r) for r in out.itertuples(index=False)] == [
        # a header splits off the text after it on its line
        ("100", "1", 0, "Admission Date:", True),
        ("100", "1", 1, "[**2101-3-4**]", True),
        ("100", "1", 2, "HISTORY OF PRESENT ILLNESS:", True),
        ("100", "1", 3, '65 yo man with "crushing" chest pain, radiating to the arm.', True),
        ("100", "1", 4, "He was given aspirin.", True),
        # note 3 (ISERROR = 1) is skipped; the category matches despite its trailing space
        ("200", "4", 0, "Brief Hospital Course:", False),
        ("200", "4", 1, "Patient improved on lasix.", False),
        ("200", "4", 2, "Discharged home.", False),
        ("300", "5", 0, "Short note with one sentence only.", True),
    ]
    assert out["sentence"].dtype == "int64" and out["trained"].dtype == bool


def test_mimic_categories(mimic_files):
    notes, lists = mimic_files
    everything = mimic_noteevents(notes, lists, categories=None)
    assert sorted(set(everything["note_id"])) == ["1", "2", "4", "5"]
    radiology = mimic_noteevents(notes, lists, categories=["radiology"])
    assert radiology["text"].tolist() == ["FINDINGS:", "Mild cardiomegaly is seen."]
    with pytest.raises(
        UserError, match=r"NOTEEVENTS.csv: no notes of categories 'Echo' \(of 5 rows, 1 marked ISERROR\)"
    ):
        mimic_noteevents(notes, lists, categories=("Echo",))


def test_patient_lists(tmp_path, mimic_files):
    _, lists = mimic_files
    assert read_patient_list(lists[0], chunksize=1) == {"100"}
    assert read_patient_list(lists[1]) == {"300"}
    other_header = tmp_path / "other.csv"
    other_header.write_text("patient\n7\n8.0\n")
    assert read_patient_list(other_header) == {"7", "8"}
    with pytest.raises(UserError) as info:
        read_patient_list(tmp_path / "missing.csv")
    assert str(info.value) == f"{tmp_path / 'missing.csv'}: patient list not found"


def test_mimic_missing_columns(tmp_path, mimic_files):
    _, lists = mimic_files
    bad = tmp_path / "bad.csv"
    bad.write_text("ROW_ID,SUBJECT_ID,TEXT\n1,2,hello\n")
    with pytest.raises(UserError) as info:
        mimic_noteevents(bad, lists)
    assert str(info.value) == f"{bad}: missing column(s) CATEGORY, ISERROR (has: ROW_ID, SUBJECT_ID, TEXT)"


# --------------------------------------------------------------------------------------------
# i2b2


def i2b2_doc(text):
    return (
        '<?xml version="1.0" encoding="UTF-8" ?>\n<deIdi2b2>\n<TEXT><![CDATA[\n' + text + "\n]]></TEXT>\n"
        '<TAGS>\n<DATE id="P0" start="16" end="26" text="2093-01-13" TYPE="DATE" comment="" />\n</TAGS>\n</deIdi2b2>\n'
    )


@pytest.fixture
def i2b2_dir(tmp_path):
    d = tmp_path / "i2b2"
    d.mkdir()
    (d / "110-02.xml").write_text(
        i2b2_doc("Record date: 2093-01-13\n\nCHIEF COMPLAINT: chest pain & SOB <3 days.\nHe is 64.")
    )
    (d / "110-01.xml").write_text(i2b2_doc("Patient seen in clinic. Labs pending."))
    (d / "205-01.xml").write_text(i2b2_doc("Follow-up for diabetes mellitus."))
    (d / "notes.txt").write_text("ignored")
    return d


def test_i2b2_xml(i2b2_dir):
    out = i2b2_xml(i2b2_dir)
    assert [tuple(r) for r in out.itertuples(index=False)] == [
        ("110", "110-01", 0, "Patient seen in clinic."),
        ("110", "110-01", 1, "Labs pending."),
        ("110", "110-02", 0, "Record date:"),
        ("110", "110-02", 1, "2093-01-13"),
        ("110", "110-02", 2, "CHIEF COMPLAINT:"),
        ("110", "110-02", 3, "chest pain & SOB <3 days."),
        ("110", "110-02", 4, "He is 64."),
        ("205", "205-01", 0, "Follow-up for diabetes mellitus."),
    ]
    # a list of files reads the same notes in the order given
    one = i2b2_xml([i2b2_dir / "205-01.xml", i2b2_dir / "110-01.xml"])
    assert one["note_id"].tolist() == ["205-01", "110-01", "110-01"]


def test_i2b2_errors(tmp_path, i2b2_dir):
    broken = tmp_path / "300-01.xml"
    broken.write_text("<deIdi2b2><TEXT>unclosed</deIdi2b2>")
    with pytest.raises(UserError, match=rf"^{broken}: not valid XML: mismatched tag"):
        i2b2_xml([i2b2_dir / "110-01.xml", broken])
    no_text = tmp_path / "301-01.xml"
    no_text.write_text("<deIdi2b2><TAGS/></deIdi2b2>")
    with pytest.raises(UserError) as info:
        i2b2_xml(no_text)
    assert str(info.value) == f"{no_text}: no TEXT element (expected <deIdi2b2><TEXT>...</TEXT></deIdi2b2>)"
    badly_named = tmp_path / "record.xml"
    badly_named.write_text(i2b2_doc("Some text here."))
    with pytest.raises(UserError, match="record.xml: expected a name PATIENT-RECORD.xml like 110-02.xml"):
        i2b2_xml(badly_named)
    with pytest.raises(UserError, match="i2b2 XML file or directory not found"):
        i2b2_xml(tmp_path / "nowhere")


# --------------------------------------------------------------------------------------------
# sampling and writing


def sentence_table(n_trained, n_other, per_patient=2):
    rows = []
    for i in range(n_trained + n_other):
        for j in range(per_patient):
            rows.append(
                {
                    "patient_id": f"p{i:02d}",
                    "note_id": f"n{i}",
                    "sentence": j,
                    "text": f"text {i} {j}",
                    "trained": i < n_trained,
                }
            )
    return pd.DataFrame(rows)


def drawn_patients(out):
    return {role: set(part["patient_id"]) for role, part in out.groupby("role")}


def test_sample_patients_mimic():
    sentences = sentence_table(10, 8)
    out = sample_patients(sentences, {"member": 3, "member_heldin": 2, "nonmember": 4}, seed=1, key="raw.mimic.counts")
    patients = drawn_patients(out)
    assert {r: len(p) for r, p in patients.items()} == {"member": 3, "member_heldin": 2, "nonmember": 4}
    trained = set(sentences.loc[sentences["trained"], "patient_id"])
    assert patients["member"] <= trained and patients["member_heldin"] <= trained
    assert not patients["nonmember"] & trained
    assert not patients["member"] & patients["member_heldin"]
    # every sentence of a drawn patient, in input order
    assert len(out) == 2 * 9
    assert out.drop(columns="role").equals(
        sentences[sentences["patient_id"].isin(set().union(*patients.values()))].reset_index(drop=True)
    )
    # seeded, and independent of the input row order
    shuffled = sentences.sample(frac=1, random_state=0)
    again = sample_patients(shuffled, {"member": 3, "member_heldin": 2, "nonmember": 4}, seed=1, key="k")
    assert drawn_patients(again) == patients
    other = sample_patients(sentences, {"member": 3, "member_heldin": 2, "nonmember": 4}, seed=2, key="k")
    assert drawn_patients(other) != patients


def test_sample_patients_i2b2_disjoint():
    sentences = sentence_table(0, 12).drop(columns="trained")
    out = sample_patients(sentences, {"nonmember": 5, "population": 7}, seed=0, key="raw.i2b2.counts")
    patients = drawn_patients(out)
    assert len(patients["nonmember"]) == 5 and len(patients["population"]) == 7
    assert not patients["nonmember"] & patients["population"]


@pytest.mark.parametrize(
    "table, counts, expected",
    [
        (
            sentence_table(4, 3),
            {"member": 3, "member_heldin": 2},
            "raw.counts: 5 trained patients asked for (member 3 + member_heldin 2), there are 4",
        ),
        (
            sentence_table(4, 3),
            {"nonmember": 4},
            "raw.counts: 4 untrained patients asked for (nonmember 4), there are 3",
        ),
        (
            sentence_table(0, 3).drop(columns="trained"),
            {"nonmember": 2, "population": 2},
            "raw.counts: 4 patients asked for (nonmember 2 + population 2), there are 3",
        ),
        (
            sentence_table(0, 3).drop(columns="trained"),
            {"member": 1},
            "raw.counts.member: members need a `trained` column in the sentence table (MIMIC with member lists)",
        ),
        (
            sentence_table(2, 2),
            {"members": 1},
            "raw.counts.members: unknown role (known roles: member, member_heldin, nonmember, population)",
        ),
        (sentence_table(2, 2), {"member": -1}, "raw.counts.member: must be a non-negative integer, got -1"),
    ],
)
def test_sample_patients_errors(table, counts, expected):
    with pytest.raises(UserError) as info:
        sample_patients(table, counts, seed=0, key="raw.counts")
    assert str(info.value) == expected


def test_write_processed_round_trip(tmp_path, mimic_files):
    notes, lists = mimic_files
    drawn = sample_patients(mimic_noteevents(notes, lists), {"member": 2, "nonmember": 1}, seed=0, key="k")
    paths = write_processed(drawn, tmp_path / "processed", "mimic")
    assert paths == [tmp_path / "processed" / "mimic_member.csv", tmp_path / "processed" / "mimic_nonmember.csv"]
    assert sorted(p.name for p in (tmp_path / "processed").iterdir()) == ["mimic_member.csv", "mimic_nonmember.csv"]
    assert paths[1].read_text() == (
        "patient_id,note_id,sentence,text\n200,4,0,Brief Hospital Course:\n200,4,1,Patient improved on lasix.\n"
        "200,4,2,Discharged home.\n"
    )
    # the paper's processed format: read back with positions
    spec = {
        **defaults("datasets", "*"),  # as validation resolves a config's entry
        "columns": {"group": 0, "text": 3},
        "files": [{"path": str(p), "role": role, "source": "mimic"} for p, role in zip(paths, ["member", "nonmember"])],
    }
    back = read_dataset(spec, key="datasets.mimic")
    assert back["text"].tolist() == drawn.sort_values("role", kind="stable")["text"].tolist()
    assert back["sample_id"].tolist()[:2] == ["mimic_member:0", "mimic_member:1"]
    assert back["group_id"].tolist() == drawn.sort_values("role", kind="stable")["patient_id"].tolist()


def test_write_processed_errors(tmp_path):
    table = sentence_table(1, 0).assign(role="members")
    with pytest.raises(UserError, match=r"write_processed x: unknown role\(s\) members"):
        write_processed(table, tmp_path, "x")
    with pytest.raises(UserError, match=r"write_processed x: missing column\(s\) role"):
        write_processed(sentence_table(1, 0), tmp_path, "x")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# Base-b's names


def test_names_in_lehman_et_al_layout_give_the_full_name(tmp_path):
    from mlmia.data.raw import insert_names, read_names

    lehman = tmp_path / "names.csv"
    lehman.write_text("SUBJECT_ID,FIRST_NAME,LAST_NAME\n11,Ann,Lee\n12.0,Bo,Van  Kim\n")
    assert read_names(lehman) == {"11": "Ann Lee", "12": "Bo Van Kim"}
    plain = tmp_path / "plain.csv"
    plain.write_text("subject_id,Name\n11,Ann Lee\n")  # header names without case
    assert read_names(plain) == {"11": "Ann Lee"}
    sentences = pd.DataFrame(
        {"patient_id": ["11", "12", "14"], "text": ["seen today", "discharged", "not trained"],
         "role": ["member", "member_heldin", "nonmember"]}
    )  # fmt: skip
    named = insert_names(sentences, read_names(lehman), key="raw.mimic.names")
    assert named["text"].tolist() == ["Ann Lee seen today", "Bo Van Kim discharged"]


@pytest.mark.parametrize(
    "content, expected",
    [
        # a layout that is neither: refused naming its columns (first names alone would be kept silently)
        (
            "SUBJECT_ID,FIRST_NAME\n11,Ann\n",
            "expected the columns SUBJECT_ID,name or SUBJECT_ID,FIRST_NAME,LAST_NAME "
            "(Lehman et al.'s layout); the file has: SUBJECT_ID, FIRST_NAME",
        ),
        (
            "SUBJECT_ID,FIRST_NAME,MIDDLE_NAME,LAST_NAME\n11,Ann,J,Lee\n",
            "the file has: SUBJECT_ID, FIRST_NAME, MIDDLE_NAME, LAST_NAME",
        ),
        ("patient,name\n11,Ann Lee\n", "the file has: patient, name"),
        ("11,Ann,Lee\n12,Bo,Kim\n", "the file has: 3 column(s), names not shown"),  # no header: no name printed
        ("SUBJECT_ID,FIRST_NAME,LAST_NAME\n11,Ann,\n", "row 1: empty LAST_NAME for patient '11'"),
        ("SUBJECT_ID,name\n11,Ann Lee\n11,Bo Kim\n", "row 2: patient '11' given twice"),
        ("SUBJECT_ID,name\n", "no names (a header row and no patients)"),
    ],
)
def test_names_files_of_another_layout_are_refused(tmp_path, content, expected):
    from mlmia.data.raw import read_names

    path = tmp_path / "names.csv"
    path.write_text(content)
    with pytest.raises(UserError) as info:
        read_names(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message
    assert not {"Ann", "Lee", "Kim"} & set(message.replace(",", " ").split())
