"""Neighbour samples (Mattern et al. 2023) made with a tiny random masked language model: the
guarantees of each text, Mattern et al.'s definition computed here independently, common random
numbers with the scorer, and the attack table's join on ``neighbour_of``."""

import hashlib
import logging

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import TINY_MAX_LEN, TINY_WORDS, build_tiny_bert, build_tiny_tokenizer
from workflow_helpers import REPO

from mlmia.attacks.base import get_attack
from mlmia.attacks.protocols import scored_parts
from mlmia.attacks.table import build_attack_table, select_samples
from mlmia.core.errors import UserError
from mlmia.models.tokenizer import encode_text
from mlmia.scoring.energy import score_samples
from mlmia.scoring.neighbours import NEIGHBOUR_SEPARATOR, neighbour_samples
from mlmia.study.study import Study
from mlmia.terms.manifest import rows_read
from mlmia.terms.schema import defaults

#: the config's neighbour settings, which a job passes whole (`neighbours`: count is `n`)
NEIGHBOURS = {("n" if key == "count" else key): value for key, value in defaults("neighbours").items()
              if key in ("count", "seed", "candidates", "dropout")}  # fmt: skip


def make_neighbours(model, tokenizer, samples, **given):
    """`neighbour_samples` with the config's defaults for what a test does not set."""
    return neighbour_samples(model, tokenizer, samples, **{**NEIGHBOURS, **given})


LONG = " ".join(TINY_WORDS[:60])  # about 60 tokens: longer than the tiny models' 40 positions
TEXTS = [
    "Patient admitted with chest pain and shortness of breath.",
    "denies fever, cough; 12mg aspirin daily. temp 38°C",  # "°c" is no word of the vocabulary: [UNK]
    "History:\n  hypertension, diabetes   (chronic)",
    LONG,
]
SPECIAL_STRINGS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "<s>", "</s>", "<pad>", "<mask>", "<unk>")


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
    tokenizer = build_tiny_tokenizer(tmp_path_factory.mktemp("neighbours_wordpiece"))
    return build_tiny_bert(0, len(tokenizer)), tokenizer


@pytest.fixture(scope="module")
def byte_bpe():
    """A byte-level BPE tokenizer (RoBERTa's kind) learnt from the tiny words, and a tiny BERT over it."""
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    texts = [" ".join(TINY_WORDS[i : i + 12]) for i in range(0, len(TINY_WORDS), 5)]
    specials = ["<pad>", "<unk>", "<s>", "</s>", "<mask>"]
    bpe.train_from_iterator(texts, vocab_size=300, min_frequency=1, special_tokens=specials, show_progress=False)
    bpe.post_processor = processors.RobertaProcessing(
        ("</s>", bpe.token_to_id("</s>")), ("<s>", bpe.token_to_id("<s>"))
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
        mask_token="<mask>", model_max_length=TINY_MAX_LEN,
    )  # fmt: skip
    return build_tiny_bert(1, len(tokenizer)), tokenizer


def samples(texts=TEXTS):
    return pd.DataFrame(
        {
            "sample_id": [f"note{i}" for i in range(len(texts))],
            "group_id": [f"p{i // 2}" for i in range(len(texts))],
            "role": ["member", "nonmember"] * (len(texts) // 2) + ["member"] * (len(texts) % 2),
            "source": "s",
            "length": "short",
            "text": texts,
        }
    )


def tokens(tokenizer, text):
    enc = encode_text(tokenizer, [text], add_special_tokens=False, return_attention_mask=False, verbose=False)
    return np.asarray(enc["input_ids"][0])


def kept_outside(tokenizer, original: str, neighbour: str, k: int) -> bool:
    """The neighbour is the original text outside content token k (and the white space before it)."""
    enc = encode_text(tokenizer, [original], add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    offsets = enc["offset_mapping"][0]
    cut = offsets[k - 1][1] if k > 0 else offsets[k][0]
    end = offsets[k][1]
    return neighbour.startswith(original[:cut]) and neighbour.endswith(original[end:])


def swap_of(tokenizer, original: str, neighbour: str) -> tuple[int, int]:
    """(content position, new token id) of a neighbour that changes one token."""
    before, after = tokens(tokenizer, original), tokens(tokenizer, neighbour)
    assert after.shape == before.shape
    changed = np.flatnonzero(after != before)
    assert len(changed) == 1
    return int(changed[0]), int(after[changed[0]])


@pytest.mark.parametrize("which", ["wordpiece", "byte_bpe"])
def test_each_neighbour_changes_exactly_one_token(which, request, one_torch_thread):
    model, tokenizer = request.getfixturevalue(which)
    original = samples()
    n = 6
    out = make_neighbours(model, tokenizer, original, n=n, seed=0)
    assert list(out.columns) == [*original.columns, "neighbour_of", "mask_id"] and len(out) == n * len(original)
    expected_ids = [f"note{i}{NEIGHBOUR_SEPARATOR}{j}" for i in range(len(original)) for j in range(n)]
    assert out.sample_id.tolist() == expected_ids
    for i, row in original.iterrows():
        mine = out.iloc[i * n : (i + 1) * n]
        for column in ("group_id", "role", "source", "length"):
            assert (mine[column] == row[column]).all()  # copied from the original row
        assert (mine.neighbour_of == row.sample_id).all() and (mine.mask_id == row.sample_id).all()
        assert mine.text.nunique() == n  # distinct neighbours, also where two swap one position
        for text in mine.text:
            # re-tokenized as the scorer reads text: the same length, one position changed
            k, new = swap_of(tokenizer, row.text, text)
            assert k < TINY_MAX_LEN - 2  # a position the model sees (the long text's tail is kept)
            assert not any(s in text for s in SPECIAL_STRINGS)
            if which == "wordpiece":  # a continuation piece replaces only a continuation piece
                old = tokenizer.convert_ids_to_tokens(int(tokens(tokenizer, row.text)[k]))
                assert old.startswith("##") == tokenizer.convert_ids_to_tokens(new).startswith("##")
                # the rest of the text is kept as it was: case, white space, the unknown "°"
                # (WordPiece reads "°c" as one [UNK] token, which may itself be swapped)
                assert kept_outside(tokenizer, row.text, text, k)
    if which == "wordpiece":
        assert out.text[out.sample_id.str.startswith("note2~")].str.contains("\n  ").all()


def mattern_swaps(model, tokenizer, text: str, sample_id: str, seed: int, candidates: int, p: float):
    """Mattern et al.'s single-token swaps of `text`, best first, written here from the paper and
    their code (mireshghallah/neighborhood-curvature-mia; MIMIR's BertModel.generate_neighbors_),
    one full forward per position: the text as it is, dropout p on the input embedding of the
    token at that position; candidates: the top `candidates` tokens other than the original (no
    special token, the original's WordPiece kind); score p(c) / (1 - p(original)). Returns
    (top-`candidates` swaps, every other allowed swap), each as [(content position, token id)]
    in score order (ties: position, then token id)."""
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    special = set(tokenizer.all_special_ids)
    key = int.from_bytes(hashlib.sha256(sample_id.encode("utf-8")).digest()[:16], "little")
    top, rest = [], []
    for k in range(ids.shape[1] - 2):  # [CLS] x_0 ... x_{T-1} [SEP]
        position = k + 1
        embeds = model.get_input_embeddings()(ids).detach().clone()
        kept = np.random.default_rng([seed, key, k, 7]).random(embeds.shape[-1]) >= p
        embeds[0, position] = embeds[0, position] * torch.tensor(kept, dtype=torch.float32) / (1 - p)
        with torch.no_grad():  # no dropout: the plain forward on the token ids
            logits = model(inputs_embeds=embeds).logits if p else model(input_ids=ids).logits
            probs = torch.softmax(logits[0, position].double(), dim=-1).numpy()
        original = int(ids[0, position])
        left = 1.0 - probs[original]
        score = probs / (left if left > 0 else 0.1)
        kind = pieces[original].startswith("##")
        allowed = [
            c for c in range(len(pieces)) if c not in special and c != original and pieces[c].startswith("##") == kind
        ]
        allowed.sort(key=lambda c: (-score[c], c))
        top += [(-score[c], k, c) for c in allowed[:candidates]]
        rest += [(-score[c], k, c) for c in allowed[candidates:]]
    return [(k, c) for _, k, c in sorted(top)], [(k, c) for _, k, c in sorted(rest)]


@pytest.mark.parametrize("dropout", [0.7, 0.0])
def test_neighbours_are_mattern_et_al_best_single_swaps(wordpiece, dropout, one_torch_thread):
    model, tokenizer = wordpiece
    text = "patient admitted with chest pain and fever no cough"  # words of the vocabulary: every swap is valid
    table = samples([text])
    n_tokens = len(tokens(tokenizer, text))
    top, _ = mattern_swaps(model, tokenizer, text, "note0", seed=3, candidates=3, p=dropout)
    assert len(top) == 3 * n_tokens
    # n = every top-3 swap of every position: all positions, in the reference's order
    out = make_neighbours(model, tokenizer, table, n=3 * n_tokens, seed=3, candidates=3, dropout=dropout)
    assert [swap_of(tokenizer, text, t) for t in out.text] == top
    assert {k for k, _ in top} == set(range(n_tokens))
    if dropout:  # the dropout moves the ranking: without it the swaps are others
        plain, _ = mattern_swaps(model, tokenizer, text, "note0", seed=3, candidates=3, p=0.0)
        assert plain != top
        other_seed, _ = mattern_swaps(model, tokenizer, text, "note0", seed=4, candidates=3, p=dropout)
        assert other_seed != top


@pytest.mark.parametrize("fixture", ["tiny_roberta", "tiny_distilbert"])
def test_other_architectures_read_the_text_through_their_embeddings(request, fixture, one_torch_thread):
    # no dropout: the model reads the word embeddings as it reads the token ids (RoBERTa's
    # positions counted from padding_idx + 1, DistilBERT's embeddings without token types)
    model, tokenizer = request.getfixturevalue(fixture)
    text = "patient admitted with chest pain and fever"
    top, _ = mattern_swaps(model, tokenizer, text, "note0", seed=0, candidates=2, p=0.0)
    out = make_neighbours(model, tokenizer, samples([text, "no cough"]), n=6, seed=0, candidates=2, dropout=0.0)
    assert [swap_of(tokenizer, text, t) for t in out.text[:6]] == top[:6]


def test_a_short_text_takes_further_candidates_in_score_order(wordpiece, one_torch_thread, caplog):
    model, tokenizer = wordpiece
    text = "chest pain"  # two tokens, two candidates each: four top swaps, then the rest of the vocabulary
    top, rest = mattern_swaps(model, tokenizer, text, "note0", seed=0, candidates=2, p=0.7)
    with caplog.at_level(logging.INFO, logger="mlmia"):
        out = make_neighbours(model, tokenizer, samples([text]), n=7, seed=0, candidates=2)
    assert [swap_of(tokenizer, text, t) for t in out.text] == top + rest[:3]
    assert "1 samples past the top 2 candidates" in caplog.text
    with pytest.raises(UserError, match="only .* single-token swaps .* 1000 neighbours were asked for") as info:
        make_neighbours(model, tokenizer, samples([text]), n=1000, seed=0, candidates=2)
    assert "chest" not in str(info.value)


def test_same_seed_same_neighbours_whatever_else_is_in_the_batch(wordpiece, one_torch_thread):
    model, tokenizer = wordpiece
    first = make_neighbours(model, tokenizer, samples(), n=4, seed=7)
    pd.testing.assert_frame_equal(first, make_neighbours(model, tokenizer, samples(), n=4, seed=7))
    # one sample alone, one row per forward pass: its neighbours are the same
    alone = make_neighbours(model, tokenizer, samples().iloc[[2]], n=4, seed=7, batch_size=1)
    assert alone.text.tolist() == first.text[first.sample_id.str.startswith("note2~")].tolist()
    # more neighbours extend the list: the best swaps come first
    more = make_neighbours(model, tokenizer, samples().iloc[[0]], n=6, seed=7)
    assert more.text.tolist()[:4] == first.text[:4].tolist()
    other = make_neighbours(model, tokenizer, samples(), n=4, seed=8)
    assert other.text.tolist() != first.text.tolist()


def test_a_neighbour_is_scored_under_its_samples_masking_patterns(wordpiece, one_torch_thread):
    model, tokenizer = wordpiece
    original = samples(TEXTS[:3])
    neighbours = make_neighbours(model, tokenizer, original, n=3, seed=0)
    scored = score_samples(model, tokenizer, neighbours, patterns=4, seed=5)
    for row, score in zip(neighbours.itertuples(), scored.itertuples()):
        # the same text scored under its sample's id: the same patterns, the same numbers
        alone = score_samples(model, tokenizer, pd.DataFrame({"sample_id": [row.neighbour_of], "text": [row.text]}),
                              patterns=4, seed=5).iloc[0]  # fmt: skip
        np.testing.assert_allclose(score.per_pattern, alone.per_pattern, rtol=0, atol=1e-5)  # batches differ
        np.testing.assert_allclose(score.token_logp, alone.token_logp, rtol=0, atol=1e-5)
    # keyed on its own id instead (no mask_id), a neighbour draws other patterns
    own = score_samples(model, tokenizer, neighbours.drop(columns="mask_id"), patterns=4, seed=5)
    assert (own.n_tokens > 8).any() and own.per_pattern.tolist() != scored.per_pattern.tolist()


def test_the_attack_table_joins_neighbours_on_neighbour_of():
    manifest = samples(["a", "b", "c", "d"])  # note0, note2: members; note1, note3: non-members
    # neighbour ids that say nothing of their sample; the scores in another order than the table
    neighbours = pd.DataFrame({"sample_id": ["x5", "x1", "x9", "x2", "x7", "x3", "x4", "x8"],
                               "neighbour_of": ["note2", "note0", "note2", "note1", "note0", "note3", "note1", "note3"]})  # fmt: skip
    energy = {"x5": 5.0, "x1": 1.0, "x9": 9.0, "x2": 2.0, "x7": 7.0, "x3": 3.0, "x4": 4.0, "x8": 8.0}
    scores = {
        ("target", "masked"): pd.DataFrame({"sample_id": manifest.sample_id, "energy": [1.0, 2.0, 3.0, 4.0]}),
        ("neighbours", "masked"): pd.DataFrame({"sample_id": sorted(energy), "energy": [energy[i] for i in sorted(energy)]}),
    }  # fmt: skip
    models = {"target": "t", "neighbours": "t"}
    columns = {"target": ["energy"], "neighbours": ["energy"]}
    kwargs = dict(nonmembers="s", population="s")
    table = build_attack_table(manifest, scores, models, columns, neighbours=neighbours, **kwargs)
    assert table.neighbours_energy.tolist() == [[1.0, 7.0], [2.0, 4.0], [5.0, 9.0], [3.0, 8.0]]
    # neighbours of a sample the experiment does not take need no scores (they were not scored)
    other = pd.DataFrame({"sample_id": ["y0", "y1"], "neighbour_of": ["note9", "note9"]})
    wider = build_attack_table(manifest, scores, models, columns, neighbours=pd.concat([other, neighbours]), **kwargs)
    assert wider.neighbours_energy.tolist() == table.neighbours_energy.tolist()
    # a population sample's neighbours are not scored: it gets none, and no neighbourhood statistic
    # (NaN), while every audited sample keeps its own; the metrics' parts drop it for this attack
    pooled = pd.concat([manifest, samples(["e"]).assign(sample_id="pop0", group_id="q0", role="population")])
    pooled_scores = {**scores, ("target", "masked"): pd.DataFrame({"sample_id": pooled.sample_id,
                                                                    "energy": [1.0, 2.0, 3.0, 4.0, 5.0]})}  # fmt: skip
    with_population = build_attack_table(pooled, pooled_scores, models, columns, neighbours=neighbours, **kwargs)
    assert with_population.neighbours_energy.tolist() == table.neighbours_energy.tolist() + [None]
    statistic = get_attack("neighbourhood").statistic(with_population)
    np.testing.assert_allclose(statistic[:4], [1 - 4.0, 2 - 3.0, 3 - 7.0, 4 - 5.5])  # by hand: own minus mean
    assert np.isnan(statistic[4])
    ((part, _),) = scored_parts(with_population, [get_attack("neighbourhood")])
    assert part.role.tolist() == ["member", "nonmember"] * 2
    for given, match in (
        (None, "the neighbours' scores come without their neighbour table"),
        (neighbours.drop(columns="neighbour_of"), "lacks column.*neighbour_of"),
        (neighbours[neighbours.neighbour_of != "note3"], "sample 'note3' has no neighbours"),
        (pd.concat([neighbours, pd.DataFrame({"sample_id": ["x0"], "neighbour_of": ["note0"]})]), "no masked score for sample 'x0'"),
    ):  # fmt: skip
        with pytest.raises(UserError, match=match) as info:
            build_attack_table(manifest, scores, models, columns, neighbours=given, **kwargs)
        assert "\n" not in str(info.value)


def test_a_model_is_scored_on_the_rows_its_experiments_read(monkeypatch):
    """`rows_read` keeps a sample (or a neighbour, by its sample's role, source and length) iff
    some experiment reading the scores selects it: checked against each experiment's own
    selection (`select_samples`), and the default config's DP target against its experiments."""
    rng = np.random.default_rng(3)
    n = 400
    manifest = pd.DataFrame({"sample_id": [f"s{i}" for i in range(n)], "group_id": [f"p{i // 3}" for i in range(n)],
                             "role": rng.choice(["member", "member_heldin", "nonmember", "population"], n),
                             "source": rng.choice(["mimic", "i2b2"], n), "length": rng.choice(["short", "long"], n)})  # fmt: skip
    selections = [{"nonmembers": "mimic", "population": "i2b2", "length": "long"},
                  {"nonmembers": "i2b2", "population": "i2b2", "length": None}]  # fmt: skip
    kept = rows_read(manifest, selections)
    expected = set()
    for selection in selections:
        expected |= set(select_samples(manifest, **selection, where="test").sample_id)
    assert set(kept.sample_id) == expected and kept.sample_id.tolist() == [
        i for i in manifest.sample_id if i in expected
    ]
    assert 0 < len(kept) < n  # the short MIMIC non-members and the MIMIC population are read by neither
    assert rows_read(manifest, []).equals(manifest)  # read by no experiment: every row
    # the neighbour table keeps the neighbours of exactly the kept samples
    neighbours = manifest.loc[manifest.index.repeat(2)].assign(neighbour_of=lambda t: t.sample_id)
    assert set(rows_read(neighbours, selections).neighbour_of) == expected
    # the default world: a DP target's neighbour scores cover its long samples only; Base's every length
    monkeypatch.chdir(REPO)
    study = Study.from_config(yaml.safe_load((REPO / "config/config.yaml").read_text()), REPO)
    dp = study.score_rows("clinical~neighbours", "dp_eps8", "masked")
    assert dp and {s["length"] for s in dp} == {"long"} and {s["nonmembers"] for s in dp} == {"mimic"}
    # its neighbours: the audited samples' only; its own scores: the population too (RMIA reads it)
    assert {s["population"] for s in dp} == {None}
    assert {s["population"] for s in study.score_rows("clinical", "dp_eps8", "masked")} == {"i2b2"}
    assert not (rows_read(neighbours.assign(role="population"), dp)).size
    assert {s["length"] for s in study.score_rows("clinical", "base", "masked")} >= {"long", "short"}
    assert study.score_rows("clinical", "no_such_model", "masked") == []


def test_errors_are_one_line_and_no_text_is_logged(wordpiece, caplog):
    model, tokenizer = wordpiece
    with caplog.at_level(logging.DEBUG, logger="mlmia"):
        make_neighbours(model, tokenizer, samples(), n=2, seed=0)
    assert "neighbours" in caplog.text
    assert not any(word in caplog.text for word in ("chest", "aspirin", "hypertension", "admitted"))
    for kwargs, match in (
        (dict(n=0, seed=0), "n must be an integer >= 1"),
        (dict(n=2, seed=-1), "seed must be an integer >= 0"),
        (dict(n=2, seed=0, candidates=0), "candidates must be"),
        (dict(n=2, seed=0, dropout=1.0), "dropout must be a probability in \\[0, 1\\)"),
        (dict(n=2, seed=0, dropout=-0.1), "dropout must be"),
    ):
        with pytest.raises(UserError, match=match) as info:
            make_neighbours(model, tokenizer, samples(), **kwargs)
        assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="lack column 'text'"):
        make_neighbours(model, tokenizer, samples().drop(columns="text"), n=2, seed=0)
    with pytest.raises(UserError, match="duplicate sample_id 'note0'"):
        make_neighbours(model, tokenizer, pd.concat([samples(), samples()]), n=2, seed=0)
    with pytest.raises(UserError, match="no tokens to replace") as info:
        make_neighbours(model, tokenizer, samples(["chest pain", "   "]), n=2, seed=0)
    assert "chest" not in str(info.value)
