"""Score import: layout, alignment and one-line errors for bad files."""

import numpy as np
import pytest

from mlmia.core.errors import UserError
from mlmia.data.importing import ScoreSet, import_manifest, import_model_scores, read_line_scores

SETS = [ScoreSet("members", "member", "mimic"), ScoreSet("nonmembers", "nonmember", "i2b2")]


def write_sets(tmp_path, counts=None, values=None):
    counts = counts or {}
    files = {}
    for model in ("target", "ref"):
        files[model] = {}
        for s in SETS:
            n = counts.get((model, s.name), 4)
            lines = (
                values.get((model, s.name))
                if values and (model, s.name) in values
                else [f"{0.5 + i}" for i in range(n)]
            )
            path = tmp_path / f"{model}__{s.name}.txt"
            path.write_text("".join(f"{v}\n" for v in lines))
            files[model][s.name] = str(path)
    return files


def test_manifest_and_scores_align(tmp_path):
    files = write_sets(tmp_path)
    manifest = import_manifest(SETS, files, "long")
    assert list(manifest.sample_id) == [f"members:{i}" for i in range(4)] + [f"nonmembers:{i}" for i in range(4)]
    assert list(manifest.role) == ["member"] * 4 + ["nonmember"] * 4
    scores = import_model_scores(SETS, files["target"], "target", "masked", patterns=20)
    assert list(scores.sample_id) == list(manifest.sample_id)
    np.testing.assert_allclose(scores.energy, [0.5, 1.5, 2.5, 3.5] * 2)
    assert list(scores.columns) == [
        "sample_id",
        "model",
        "energy_kind",
        "energy",
        "n_tokens",
        "n_masked",
        "per_pattern",
        "patterns",
        "seed",
        "token_logp",
        "token_mean",
        "token_var",
        "token_top1",
    ]
    # published scores carry no per-token evidence: the token-level attacks refuse them
    assert all(len(cell) == 0 for column in ("token_logp", "token_top1") for cell in scores[column])


def test_unequal_length_names_both_files(tmp_path):
    files = write_sets(tmp_path, counts={("ref", "nonmembers"): 3})
    with pytest.raises(UserError) as info:
        import_manifest(SETS, files)
    message = str(info.value)
    assert "ref__nonmembers.txt" in message and "target__nonmembers.txt" in message and "3 scores" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "bad, expected", [("nan", "line 3: score is nan"), ("inf", "line 3: score is inf"), ("abc", "line 3: not a number")]
)
def test_non_finite_scores_name_the_line(tmp_path, bad, expected):
    path = tmp_path / "s.txt"
    path.write_text(f"1.0\n2.0\n{bad}\n")
    with pytest.raises(UserError, match=expected):
        read_line_scores(path)


def test_empty_role_file(tmp_path):
    files = write_sets(tmp_path, counts={("target", "members"): 0, ("ref", "members"): 0})
    with pytest.raises(UserError, match="empty score file"):
        import_manifest(SETS, files)


def test_duplicate_sample_id_in_score_table(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text("sample_id,energy\na,1.0\nb,2.0\n")
    files = {"target": {"members": str(path), "nonmembers": str(path)}}
    with pytest.raises(UserError, match="duplicate sample_id 'a'"):
        import_manifest(SETS, files)


def test_unknown_role(tmp_path):
    with pytest.raises(UserError, match="unknown role 'members'"):
        import_manifest([ScoreSet("x", "members", "mimic")], {"t": {"x": str(tmp_path / "x.txt")}})
