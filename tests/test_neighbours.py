"""Neighbour samples (Mattern et al. 2023) made with a tiny random masked language model."""

import logging

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_MAX_LEN, TINY_WORDS, build_tiny_bert, build_tiny_tokenizer

from mlmia.attacks.table import NEIGHBOUR_SEPARATOR
from mlmia.core.errors import UserError
from mlmia.models.tokenizer import encode_text
from mlmia.scoring.neighbours import neighbour_samples

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


@pytest.mark.parametrize("which", ["wordpiece", "byte_bpe"])
def test_each_neighbour_changes_exactly_one_token(which, request, one_torch_thread):
    model, tokenizer = request.getfixturevalue(which)
    original = samples()
    n = 6
    out = neighbour_samples(model, tokenizer, original, n=n, seed=0)
    assert list(out.columns) == list(original.columns) and len(out) == n * len(original)
    expected_ids = [f"note{i}{NEIGHBOUR_SEPARATOR}{j}" for i in range(len(original)) for j in range(n)]
    assert out.sample_id.tolist() == expected_ids
    for i, row in original.iterrows():
        mine = out.iloc[i * n : (i + 1) * n]
        for column in ("group_id", "role", "source", "length"):
            assert (mine[column] == row[column]).all()  # copied from the original row
        before = tokens(tokenizer, row.text)
        assert mine.text.nunique() == n  # distinct neighbours, also where two drew one position
        for text in mine.text:
            after = tokens(tokenizer, text)
            # re-tokenized as the scorer reads text: the same length, one position changed
            assert after.shape == before.shape
            changed = np.flatnonzero(after != before)
            assert len(changed) == 1
            assert changed[0] < TINY_MAX_LEN - 2  # a position the model sees (the long text's tail is kept)
            assert not any(s in text for s in SPECIAL_STRINGS)
            if which == "wordpiece":  # a continuation piece replaces only a continuation piece
                old, new = tokenizer.convert_ids_to_tokens([int(before[changed[0]]), int(after[changed[0]])])
                assert old.startswith("##") == new.startswith("##")
    # the text outside the replaced token is kept as it was: the unknown "°" (WordPiece: the
    # word "°c" is one [UNK] token, which may itself be replaced once; byte-level BPE: bytes)
    assert out.text[out.sample_id.str.startswith("note1~")].str.contains("°").sum() >= n - 1
    if which == "wordpiece":  # and case and white space, which WordPiece does not tokenize (BPE does)
        assert out.text[out.sample_id.str.startswith("note2~")].str.contains("\n  ").all()
        assert out.text[out.sample_id.str.startswith("note0~")].str.contains("breath").sum() >= n - 1
        assert out.text[out.sample_id.str.startswith("note0~")].str.contains("Patient").sum() >= n - 1


def test_same_seed_same_neighbours_whatever_else_is_in_the_batch(wordpiece, one_torch_thread):
    model, tokenizer = wordpiece
    first = neighbour_samples(model, tokenizer, samples(), n=4, seed=7)
    pd.testing.assert_frame_equal(first, neighbour_samples(model, tokenizer, samples(), n=4, seed=7))
    # one sample alone, one row per forward pass: its neighbours are the same
    alone = neighbour_samples(model, tokenizer, samples().iloc[[2]], n=4, seed=7, batch_size=1)
    assert alone.text.tolist() == first.text[first.sample_id.str.startswith("note2~")].tolist()
    # more neighbours extend the list: neighbour j is drawn from (seed, sample id, j)
    more = neighbour_samples(model, tokenizer, samples().iloc[[0]], n=6, seed=7)
    assert more.text.tolist()[:4] == first.text[:4].tolist()
    other = neighbour_samples(model, tokenizer, samples(), n=4, seed=8)
    assert other.text.tolist() != first.text.tolist()


def test_errors_are_one_line_and_no_text_is_logged(wordpiece, caplog):
    model, tokenizer = wordpiece
    with caplog.at_level(logging.DEBUG, logger="mlmia"):
        neighbour_samples(model, tokenizer, samples(), n=2, seed=0)
    assert "neighbours" in caplog.text
    assert not any(word in caplog.text for word in ("chest", "aspirin", "hypertension", "admitted"))
    for kwargs, match in (
        (dict(n=0, seed=0), "n must be an integer >= 1"),
        (dict(n=2, seed=-1), "seed must be an integer >= 0"),
        (dict(n=2, seed=0, candidates=0), "candidates must be"),
    ):
        with pytest.raises(UserError, match=match) as info:
            neighbour_samples(model, tokenizer, samples(), **kwargs)
        assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="lack column 'text'"):
        neighbour_samples(model, tokenizer, samples().drop(columns="text"), n=2, seed=0)
    with pytest.raises(UserError, match="duplicate sample_id 'note0'"):
        neighbour_samples(model, tokenizer, pd.concat([samples(), samples()]), n=2, seed=0)
    with pytest.raises(UserError, match="no tokens to replace") as info:
        neighbour_samples(model, tokenizer, samples(["chest pain", "   "]), n=2, seed=0)
    assert "chest" not in str(info.value)
