"""Tokenizer and MLM training: tiny runs on CPU."""

import json
import os
import random
import subprocess
import sys
from collections import Counter

import pandas as pd
import pytest
import torch
from training_helpers import model_entry

from mlmia.core.errors import UserError
from mlmia.models.objectives import MaskedBatch, make_objective, objective_names
from mlmia.models.objectives.bert_mlm import BertMLM, mlm_mask
from mlmia.models.settings import TrainingSettings
from mlmia.models.tokenizer import (
    SPECIAL_TOKENS,
    tokenizer_from_tables,
    train_tokenizer,
    word_counts,
    word_patients,
    wordpiece_vocab,
)
from mlmia.models.training import masked_lm_loss, train_mlm
from mlmia.terms.schema import defaults, schema_path, validate
from mlmia.training_job import train_from_table

TEXTS = (
    [f"Patient {i} was started on metoprolol {5 * (i % 7 + 1)} mg PO BID for atrial fibrillation." for i in range(30)]
    + [f"VS: T 98.{i % 10} BP 1{i % 9 + 1}0/80 HR {60 + i} RR 16 O2 sat 9{i % 10}% on RA." for i in range(30)]
    + ["Lungs: clear to auscultation bilaterally, no wheezes, rales, rhonchi."] * 10
)

MLM_PROBABILITY = defaults("models", "*")["mlm_probability"]
TINY = {
    "hidden_size": 32,
    "num_layers": 1,
    "num_heads": 2,
    "intermediate_size": 64,
    "batch_size": 16,
    "lr": 3e-3,
    "epochs": 12,
    "warmup_ratio": 0.1,
    "seed": 0,
    "dropout": 0.0,
    "pack": False,
    "crop_prob": 0.5,
}


def checked(given: dict) -> dict:
    """A model entry's settings as the trainer checks them (`TrainingSettings`), the rest the schema's defaults."""
    return TrainingSettings.from_entry(model_entry(given)).as_dict()


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok")
    train_tokenizer(TEXTS, d, vocab_size=200, min_frequency=1, min_patients=None)
    return d


def _fixed_mask_loss(model, tokenizer, texts, seed=0):
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    special = torch.isin(enc["input_ids"], torch.tensor(tokenizer.all_special_ids))
    objective = BertMLM(len(tokenizer), tokenizer.mask_token_id, MLM_PROBABILITY)
    batch = objective.mask(enc["input_ids"], special, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return float(masked_lm_loss(model, objective, batch, enc["attention_mask"]))


def test_tokenizer_is_bert_uncased(tok_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    enc = tok("VS: T 98.6 BP")
    toks = tok.convert_ids_to_tokens(enc["input_ids"])
    assert toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    assert "vs" in toks and "bp" in toks  # lower-cased
    assert tok.mask_token == "[MASK]" and tok.pad_token_id is not None
    with pytest.raises(UserError):
        train_tokenizer([], tok_dir / "empty", vocab_size=200, min_frequency=1, min_patients=None)


def test_tokenizer_ids_are_canonical(tmp_path):
    texts = TEXTS + [f"{w} {w}ing {w}ed" for w in ["walk", "talk", "jump", "mark", "park", "bark"] * 5]
    a = train_tokenizer(texts, tmp_path / "a", vocab_size=120, min_frequency=1, min_patients=None).get_vocab()
    b = train_tokenizer(texts, tmp_path / "b", vocab_size=120, min_frequency=1, min_patients=None).get_vocab()
    for vocab in (a, b):
        order = sorted(vocab, key=vocab.get)
        assert order[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        assert order[5:] == sorted(order[5:])
    assert a == b


def _tie_heavy_texts(n=400, seed=0):
    """Lines of words drawn from a small lexicon: many pairs with equal counts (ties)."""
    rng = random.Random(seed)
    stems = [
        "metoprolol",
        "lisinopril",
        "atorvastatin",
        "warfarin",
        "heparin",
        "insulin",
        "aspirin",
        "furosemide",
        "amlodipine",
        "albuterol",
        "pneumonia",
        "sepsis",
        "effusion",
        "edema",
        "tachycardia",
        "bradycardia",
        "hypotension",
        "dyspnea",
        "orthopnea",
        "wheezes",
        "rales",
    ]
    words = stems + [s[:k] + t[k:] for s in stems for t in stems[:5] for k in (3, 5)]
    return [
        " ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + rng.choice([".", ",", " mg"]) for _ in range(n)
    ]


_BUILD = """
import sys
from pathlib import Path
from mlmia.models.tokenizer import tokenizer_from_tables
tokenizer_from_tables([sys.argv[1]], sys.argv[2], vocab_size=int(sys.argv[3]), min_frequency=2, min_patients=None)
"""


def test_vocabulary_is_the_same_in_every_process(tmp_path):
    """The `tokenizers` trainer breaks ties in hash-map order (huggingface/tokenizers#1794):
    the vocabulary must not depend on the process (PYTHONHASHSEED or the Rust hash seeds)."""
    table = tmp_path / "texts.parquet"
    pd.DataFrame({"text": TEXTS + _tie_heavy_texts()}).to_parquet(table)
    dirs = []
    for seed in ("0", "4242"):
        out = tmp_path / f"tok_{seed}"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        result = subprocess.run(
            [sys.executable, "-c", _BUILD, str(table), str(out), "300"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        dirs.append(out)
    here = tokenizer_from_tables([table], tmp_path / "here", vocab_size=300, min_frequency=2, min_patients=None)
    assert len(here) == 300
    dirs.append(tmp_path / "here")
    # transformers 5 saves the vocabulary in tokenizer.json (no vocab.txt): every file must match
    names = sorted(p.name for p in dirs[0].iterdir())
    assert "tokenizer.json" in names
    for d in dirs[1:]:
        assert sorted(p.name for p in d.iterdir()) == names
        for name in names:
            assert (d / name).read_bytes() == (dirs[0] / name).read_bytes(), (d, name)


def test_vocabulary_properties():
    texts = TEXTS + _tie_heavy_texts(200) + ["Zyxomab zyxomab ZYXOMAB"] * 5 + ["Qat once."]
    counts = word_counts(texts)
    assert counts["zyxomab"] == 15 and counts["metoprolol"] >= 30 and counts["qat"] == 1
    # more occurrences of each pair in zyxomab than of any other pair
    counts["zyxomab"] = 1 + sum(c * len(w) for w, c in counts.items())
    base = wordpiece_vocab(counts, vocab_size=1, min_frequency=2)  # below the base: specials and characters, all kept
    chars = {c for w in counts for c in w}
    inner = {"##" + c for w in counts for c in w[1:]}
    assert base[:5] == SPECIAL_TOKENS and set(base) == set(SPECIAL_TOKENS) | chars | inner
    assert len(base) == len(set(base))
    assert "q" in base and "##q" not in base  # "q" only ever starts a word here
    # the most frequent word's pairs come first: len(word) - 1 merges make it one token
    top = wordpiece_vocab(counts, vocab_size=len(base) + len("zyxomab") - 1, min_frequency=2)
    assert top[-1] == "zyxomab" and all(t.lstrip("#") in "zyxomab" for t in top[len(base) :])
    # the asked size when the corpus allows it; the same tokens whatever the input order
    for size in (len(base) + 1, 150, 400):
        vocab = wordpiece_vocab(counts, vocab_size=size, min_frequency=2)
        assert len(vocab) == size and vocab[: len(base)] == base
        assert vocab == wordpiece_vocab(dict(reversed(list(counts.items()))), vocab_size=size, min_frequency=2)
    # no limit on the size: merging stops when no pair occurs min_frequency times, and every
    # word that occurs that often is then a single token; a rarer one is not merged
    full = wordpiece_vocab(counts, vocab_size=10**6, min_frequency=2)
    assert set(full) >= {w for w, c in counts.items() if c >= 2}
    assert "qat" not in full and "##at" in full
    assert len(wordpiece_vocab(counts, vocab_size=10**6, min_frequency=10**6)) == len(base)


def _naive_wordpiece_vocab(counts, vocab_size, min_frequency):
    """wordpiece_vocab's recipe done the slow way: all pair counts recomputed for every merge."""
    vocab = list(SPECIAL_TOKENS)
    rank = {t: i for i, t in enumerate(vocab)}

    def add(token):
        rank.setdefault(token, len(vocab))
        if rank[token] == len(vocab):
            vocab.append(token)
        return rank[token]

    words = sorted(counts)
    for ch in sorted({c for w in words for c in w}):
        add(ch)
    for ch in sorted({c for w in words for c in w[1:]}):
        add("##" + ch)
    split = [[rank[w[0]]] + [rank["##" + c] for c in w[1:]] for w in words]
    while len(vocab) < vocab_size:
        pairs = Counter()
        for syms, w in zip(split, words):
            for pair in zip(syms, syms[1:]):
                pairs[pair] += counts[w]
        if not pairs:
            break
        (a, b), count = min(pairs.items(), key=lambda item: (-item[1], item[0]))
        if count < min_frequency:
            break
        new = add(vocab[a] + vocab[b].removeprefix("##"))
        for k, syms in enumerate(split):
            merged, j = [], 0
            while j < len(syms):
                if syms[j : j + 2] == [a, b]:
                    merged.append(new)
                    j += 2
                else:
                    merged.append(syms[j])
                    j += 1
            split[k] = merged
    return vocab


def test_vocabulary_matches_the_slow_recipe():
    """The incremental pair counts and the heap give the same merges, in the same order, as
    recounting everything at each step (repeated letters: overlapping pairs such as aaa)."""
    rng = random.Random(1)
    for _ in range(150):
        letters = "abcde"[: rng.randint(1, 5)]
        counts = Counter()
        for _ in range(rng.randint(1, 30)):
            counts["".join(rng.choice(letters) for _ in range(rng.randint(1, 8)))] += rng.randint(1, 5)
        size, min_frequency = rng.randint(5, 80), rng.randint(1, 4)
        assert wordpiece_vocab(counts, size, min_frequency) == _naive_wordpiece_vocab(counts, size, min_frequency)


def test_min_patients_keeps_words_many_patients_share(tmp_path):
    """tokenizer.min_patients by hand: "zorbaxil" fills one patient's notes (40 times), "quenby"
    is written by three patients (twice each); with min_patients 2 the first is no entry and
    the second is whole, every text still reads without [UNK], and nothing of the first but
    its characters is an entry. Without it, both are whole."""
    texts, groups = [], []
    for i in range(10):  # the filler every patient writes
        texts.append(f"the patient is stable on day {i} .")
        groups.append(f"p{i % 5}")
    texts += ["zorbaxil zorbaxil zorbaxil zorbaxil"] * 10
    groups += ["p0"] * 10
    for patient in ("p1", "p2", "p3"):
        texts += ["quenby came ."] * 2
        groups += [patient] * 2
    assert word_patients(texts, groups)["zorbaxil"] == 1 and word_patients(texts, groups)["quenby"] == 3
    assert word_patients(texts, groups)["the"] == 5
    plain = train_tokenizer(texts, tmp_path / "plain", vocab_size=10**4, min_frequency=2, min_patients=None)
    assert plain.tokenize("zorbaxil quenby") == ["zorbaxil", "quenby"]
    shared = train_tokenizer(texts, tmp_path / "shared", vocab_size=10**4, min_frequency=2, groups=groups,
                             min_patients=2)  # fmt: skip
    vocab = shared.get_vocab()
    assert "quenby" in vocab and "patient" in vocab and "zorbaxil" not in vocab
    # zorbaxil adds its characters and nothing else: the vocabulary learnt without its lines, and them
    without = set(wordpiece_vocab(word_counts([t for t in texts if "zorbaxil" not in t]), 10**4, 2))
    characters = set("zorbaxil") | {"##" + c for c in "orbaxil"}
    assert set(vocab) - without == characters - without and "##x" in set(vocab) - without
    assert shared.tokenize("quenby") == ["quenby"] and len(shared.tokenize("zorbaxil")) > 1
    for text in texts:  # every text reads back, no [UNK]
        tokens = shared.tokenize(text)
        assert "[UNK]" not in tokens and " ".join(tokens).replace(" ##", "") == text.lower()
    # the same patients' words, whatever the patient ids are called; min_patients 1 is no filter
    renamed = train_tokenizer(texts, tmp_path / "renamed", vocab_size=10**4, min_frequency=2,
                              groups=[g.upper() for g in groups], min_patients=2)  # fmt: skip
    assert renamed.get_vocab() == vocab
    one = train_tokenizer(texts, tmp_path / "one", vocab_size=10**4, min_frequency=2, groups=groups, min_patients=1)
    assert one.get_vocab() == plain.get_vocab()
    with pytest.raises(UserError, match="min_patients needs the patient of every training text"):
        train_tokenizer(texts, tmp_path / "none", vocab_size=10**4, min_frequency=2, min_patients=2)


def test_min_patients_from_tables(tmp_path):
    """The workflow's path: the corpora's group_id columns name the patients; the same id in two
    tables (the target's and Base-b's corpora) is one patient."""
    a = pd.DataFrame({"group_id": ["p1", "p2"], "text": ["quenby came .", "the day ."]})
    b = pd.DataFrame({"group_id": ["p1", "p3"], "text": ["quenby came .", "quenby and the day ."]})
    a.to_parquet(tmp_path / "a.parquet")
    b.to_parquet(tmp_path / "b.parquet")
    tables = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    two = tokenizer_from_tables(tables, None, vocab_size=10**4, min_frequency=2, min_patients=2)
    assert "quenby" in two.get_vocab()  # p1 and p3
    three = tokenizer_from_tables(tables, tmp_path / "three", vocab_size=10**4, min_frequency=2, min_patients=3)
    assert "quenby" not in three.get_vocab() and "came" not in three.get_vocab()  # p1 twice is one patient
    pd.DataFrame({"text": ["quenby ."]}).to_parquet(tmp_path / "c.parquet")
    with pytest.raises(UserError, match="group_id"):
        tokenizer_from_tables([tmp_path / "c.parquet"], None, vocab_size=10**4, min_frequency=2, min_patients=2)


def test_vocabulary_follows_the_tokenizers_trainer(tmp_path):
    """The same recipe as the `tokenizers` WordPiece trainer: only ties may go the other way.

    On so small a corpus most pairs tie, and the trainer itself differs by up to ~10% of its
    tokens from run to run (on the default world's corpus it gave the same 3000 tokens)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    texts = TEXTS + _tie_heavy_texts(300)
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=None)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(
        texts,
        trainers.WordPieceTrainer(
            vocab_size=250,
            min_frequency=2,
            special_tokens=SPECIAL_TOKENS,
            continuing_subword_prefix="##",
            show_progress=False,
        ),
    )
    ours = set(wordpiece_vocab(word_counts(texts), vocab_size=250, min_frequency=2))
    assert len(ours) == len(tok.get_vocab()) == 250
    assert len(ours ^ set(tok.get_vocab())) <= 0.2 * 250
    # and the saved tokenizer splits a frequent word into one token, an unseen one into pieces
    fast = train_tokenizer(texts, tmp_path / "tok", vocab_size=250, min_frequency=2, min_patients=None)
    assert fast.tokenize("Metoprolol") == ["metoprolol"]
    assert len(fast.tokenize("metoprololol")) > 1 and "[UNK]" not in fast.tokenize("metoprololol")


def test_mlm_mask_standard_rates():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 100, (400, 50))
    ids[:, 0] = 2
    ids[:, -1] = 3
    special = (ids == 2) | (ids == 3)
    masked, labels = mlm_mask(ids, special, 100, 4, g, MLM_PROBABILITY)
    chosen = labels != -100
    assert not chosen[special].any()
    assert 0.13 < chosen.float().mean() / (~special).float().mean() < 0.17
    assert (labels[chosen] == ids[chosen]).all()
    frac_mask = (masked[chosen] == 4).float().mean()
    frac_kept = (masked[chosen] == ids[chosen]).float().mean()
    assert 0.76 < frac_mask < 0.84
    assert 0.08 < frac_kept < 0.14  # 10% kept + the random draws that hit the same token
    # every sequence gets at least one target, even a short one
    short = torch.tensor([[2, 7, 3]] * 50)
    _, lab = mlm_mask(short, (short == 2) | (short == 3), 100, 4, g, MLM_PROBABILITY)
    assert ((lab != -100).sum(1) >= 1).all()


def test_masked_position_head_equals_full_logits_loss(tok_dir):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(0)
    model = BertForMaskedLM(
        BertConfig(
            vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
        )
    ).eval()
    enc = tok(TEXTS[:20], padding=True, return_tensors="pt")
    special = torch.isin(enc["input_ids"], torch.tensor(tok.all_special_ids))
    ids, labels = mlm_mask(
        enc["input_ids"], special, len(tok), tok.mask_token_id, torch.Generator().manual_seed(1), MLM_PROBABILITY
    )
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=enc["attention_mask"], labels=labels).loss
        fast = masked_lm_loss(
            model,
            BertMLM(len(tok), tok.mask_token_id, MLM_PROBABILITY),
            MaskedBatch(ids, labels),
            enc["attention_mask"],
        )
    assert abs(float(full) - float(fast)) < 1e-5


def test_tiny_training_lowers_loss_and_saves_a_loadable_model(tok_dir, tmp_path):
    from transformers import AutoTokenizer, BertForMaskedLM

    out = tmp_path / "m"
    info = train_mlm(TEXTS, tok_dir, out, config=model_entry(TINY), threads=1, device="cpu", log_every=5)
    assert info["steps"] == 12 * 5
    log = pd.read_csv(out / "train_log.csv")
    assert list(log.columns) == ["epoch", "step", "loss", "lr", "seconds"]
    assert log["loss"].iloc[-1] < log["loss"].iloc[0] - 0.5
    assert (out / "train_curve.png").stat().st_size > 0
    assert list(json.loads((out / "train_info.json").read_text())) == list(info) == [
        "name", "config", "init_from", "n_texts", "n_tokens", "steps", "epochs_run", "final_loss", "train_seconds",
        "total_seconds", "tokens_per_second", "threads", "device", "n_parameters",
        "n_trainable_parameters",
    ]  # fmt: skip
    assert info["n_texts"] == len(TEXTS) and info["final_loss"] == log["loss"].iloc[-1]

    model = BertForMaskedLM.from_pretrained(str(out)).eval()
    tok = AutoTokenizer.from_pretrained(str(out))
    torch.manual_seed(123)
    fresh = BertForMaskedLM(model.config).eval()
    assert _fixed_mask_loss(model, tok, TEXTS) < _fixed_mask_loss(fresh, tok, TEXTS) - 1.0


def test_one_batch_builder_for_the_plain_and_the_dp_step(tok_dir):
    """`BatchBuilder` (crop, pad, mask, offset) as both steps use it: the same masks from the same
    generators; position ids None for the plain step without offset, per-row positions from 0
    for DP-SGD's; with an offset the same per-row positions for both; a crop keeps [CLS] and cuts
    1..crop_max tokens after it."""
    import numpy as np
    from transformers import AutoTokenizer

    from mlmia.models.training_batches import BatchBuilder

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    rows = [np.asarray(ids, dtype=np.int64) for ids in tok(TEXTS[:6])["input_ids"]]
    objective = make_objective(checked({}), tok)

    def built(row_positions, **settings):
        cfg = checked({"crop_prob": 0.0, **settings})
        build = BatchBuilder(objective, tok, cfg, np.random.default_rng(0), torch.Generator().manual_seed(1),
                             row_positions)  # fmt: skip
        return build(rows)

    plain, attn, pos = built(False)
    private, _, rows_pos = built(True)
    assert pos is None and torch.equal(plain.labels, private.labels) and int(attn.sum()) == sum(map(len, rows))
    assert torch.equal(rows_pos, torch.arange(attn.shape[1]).expand(attn.shape))
    shifted = [built(flag, position_offset=3)[2] for flag in (False, True)]
    assert torch.equal(*shifted) and 0 < int((shifted[0] - rows_pos).max()) <= 3
    _, cut, _ = built(False, crop_prob=1.0, crop_max=2)
    assert ((attn.sum(1) - cut.sum(1)) >= 1).all() and ((attn.sum(1) - cut.sum(1)) <= 2).all()


def test_packed_training_covers_every_line_and_learns(tok_dir, tmp_path):
    import numpy as np

    from mlmia.models.training_batches import pack_lines

    lines = [np.arange(10 * i, 10 * i + 1 + i % 7) for i in range(40)]
    blocks = pack_lines(lines, 16, np.random.default_rng(0), sep_id=-1)
    stream = np.concatenate(blocks)
    assert all(len(b) == 16 for b in blocks[:-1])
    assert len(stream) == sum(len(x) + 1 for x in lines)
    assert sorted(stream[stream >= 0].tolist()) == sorted(np.concatenate(lines).tolist())
    info = train_mlm(
        TEXTS * 3,
        tok_dir,
        tmp_path / "p",
        config=model_entry({**TINY, "pack": True, "block_size": 32, "batch_size": 4, "epochs": 6}),
        threads=1,
        device="cpu",
        log_every=5,
    )
    log = pd.read_csv(tmp_path / "p" / "train_log.csv")
    assert info["steps"] > 20 and log["loss"].iloc[-1] < log["loss"].iloc[0] - 0.5


def test_continue_from_a_saved_model(tok_dir, tmp_path):
    from transformers import BertForMaskedLM

    base = tmp_path / "base"
    texts = pd.DataFrame({"text": TEXTS})
    texts.to_parquet(tmp_path / "t.parquet")
    train_from_table(
        tmp_path / "t.parquet", tok_dir, base, config=model_entry({**TINY, "epochs": 2}), threads=1, device="cpu"
    )
    plus = tmp_path / "plus"
    # the size keys of the config are ignored when continuing: the saved model's sizes win
    info = train_from_table(
        tmp_path / "t.parquet",
        tok_dir,
        plus,
        config=model_entry({**TINY, "epochs": 2, "hidden_size": 64}),
        init_dir=base,
        threads=1,
        device="cpu",
    )
    assert info["init_from"] == str(base)
    a = BertForMaskedLM.from_pretrained(str(base))
    b = BertForMaskedLM.from_pretrained(str(plus))
    assert a.config.hidden_size == b.config.hidden_size == 32
    assert not torch.equal(a.bert.embeddings.word_embeddings.weight, b.bert.embeddings.word_embeddings.weight)
    with pytest.raises(UserError):
        train_mlm(
            TEXTS,
            tok_dir,
            tmp_path / "x",
            config=model_entry(TINY),
            init_dir=tmp_path / "missing",
            threads=1,
            device="cpu",
        )
    # freeze: the word embeddings (and, tied to them, the output projection) stay as they start, the rest trains
    frozen = train_mlm(TEXTS, tok_dir, tmp_path / "frozen", config=model_entry({**TINY, "epochs": 1, "freeze": ["word_embeddings"]}),
                       init_dir=base, threads=1, device="cpu")  # fmt: skip
    c = BertForMaskedLM.from_pretrained(str(tmp_path / "frozen"))
    assert torch.equal(a.bert.embeddings.word_embeddings.weight, c.bert.embeddings.word_embeddings.weight)
    assert torch.equal(c.cls.predictions.decoder.weight, c.bert.embeddings.word_embeddings.weight)
    assert not torch.equal(a.bert.embeddings.position_embeddings.weight, c.bert.embeddings.position_embeddings.weight)
    assert not torch.equal(a.cls.predictions.bias, c.cls.predictions.bias)
    word = a.bert.embeddings.word_embeddings.weight.numel()
    assert frozen["n_trainable_parameters"] == frozen["n_parameters"] - word


def test_bf16_training_learns_as_fp32_does_and_is_refused_with_dp(tok_dir, tmp_path):
    """bf16 (autocast) is an option: it still learns, its weights stay fp32, and the loss curve
    stays near fp32's on the same seed (both compute the same loss; bf16 rounds the matmuls)."""
    cfg = {**TINY, "epochs": 3}
    fp32 = train_mlm(TEXTS, tok_dir, tmp_path / "fp32", config=model_entry(cfg), threads=1, device="cpu", log_every=5)
    bf16 = train_mlm(TEXTS, tok_dir, tmp_path / "bf16", config=model_entry({**cfg, "precision": "bf16"}), threads=1, device="cpu",
                     log_every=5)  # fmt: skip
    a = pd.read_csv(tmp_path / "fp32" / "train_log.csv")["loss"]
    b = pd.read_csv(tmp_path / "bf16" / "train_log.csv")["loss"]
    assert b.iloc[-1] < b.iloc[0] - 0.3 and abs(b.iloc[-1] - a.iloc[-1]) < 0.25
    assert fp32["final_loss"] != bf16["final_loss"]  # bf16 did run
    from transformers import BertForMaskedLM

    assert BertForMaskedLM.from_pretrained(str(tmp_path / "bf16")).bert.embeddings.word_embeddings.weight.dtype == (
        torch.float32
    )
    with pytest.raises(UserError, match="precision bf16 is not offered with dp"):
        checked({"precision": "bf16", "dp": {"epsilon": 8}})
    with pytest.raises(UserError, match="precision must be fp32 or bf16"):
        checked({"precision": "fp16"})


def test_every_setting_the_trainers_read_is_a_training_setting():
    # the trainers read only the settings a resolved model entry has (`TrainingSettings`, `DP_KEYS`)
    import inspect
    import re

    from mlmia import training_job
    from mlmia.defences import clipping, dp_sgd
    from mlmia.defences.dp_settings import DP_KEYS
    from mlmia.models import training

    read = set()
    for module in (training, dp_sgd, training_job):
        read |= set(re.findall(r'\bcfg(?:\[|\.get\()"(\w+)"', inspect.getsource(module)))
    assert {"hidden_size", "epochs", "lr", "freeze", "dp"} <= read <= set(TrainingSettings.keys())
    dp_read = set()
    for module in (dp_sgd, clipping):
        dp_read |= set(re.findall(r'\bdp(?:\[|\.get\()"(\w+)"', inspect.getsource(module)))
    assert {"epsilon", "unit", "clipping"} <= dp_read <= set(DP_KEYS)


def test_training_is_seeded(tok_dir, tmp_path):
    cfg = {**TINY, "epochs": 1}
    a = train_mlm(TEXTS, tok_dir, tmp_path / "a", config=model_entry(cfg), threads=1, device="cpu")
    b = train_mlm(TEXTS, tok_dir, tmp_path / "b", config=model_entry(cfg), threads=1, device="cpu")
    assert a["final_loss"] == b["final_loss"]


def test_settings_are_validated(tmp_path):
    assert checked({})["hidden_size"] == 128
    # the config schema's defaults, for a model entry that sets nothing: BERT's 15% masking, no
    # DP-SGD unless asked for, nothing frozen; validation writes every one into an entry (precision:
    # training.precision's, written when the study reads the config)
    assert checked({}) == defaults("models", "*") | {"precision": "fp32"}
    assert {k: checked({})[k] for k in ("mlm_probability", "dp", "freeze")} == {
        "mlm_probability": 0.15, "dp": None, "freeze": []}  # fmt: skip
    entry = {"corpus": "target", "epochs": 2}
    validate({"run": "x", "tables_spec": "unused.yaml", "models": {"m": entry}}, schema_path("config"))
    assert entry == defaults("models", "*") | {"corpus": "target", "epochs": 2}
    # the trainer fills nothing in: a settings mapping that lacks a key is a programming error
    with pytest.raises(KeyError, match="precision"):
        TrainingSettings.from_entry(entry)
    with pytest.raises(UserError, match="unknown"):
        checked({"layers": 3})
    with pytest.raises(UserError, match="multiple"):
        checked({"hidden_size": 30, "num_heads": 4})
    assert checked({})["objective"] == "bert_mlm" and objective_names() == ["bert_mlm", "mdlm"]
    with pytest.raises(UserError, match="objective must be one of bert_mlm, mdlm"):
        checked({"objective": "diffusion"})
    pd.DataFrame({"text": TEXTS}).to_parquet(tmp_path / "a.parquet")
    tok = tokenizer_from_tables(
        [tmp_path / "a.parquet"], tmp_path / "tok", vocab_size=150, min_frequency=1, min_patients=None
    )
    assert len(tok) <= 150
    objective = make_objective(checked({"mlm_probability": 0.2}), tok)  # the config's, built for the tokenizer
    assert isinstance(objective, BertMLM) and objective.mlm_probability == 0.2
    assert (objective.vocab_size, objective.mask_token_id) == (len(tok), tok.mask_token_id)


def test_adamw_groups_and_the_linear_schedule():
    from transformers import BertConfig, BertForMaskedLM

    from mlmia.models.optimizer import adamw_with_schedule

    model = BertForMaskedLM(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=16, max_position_embeddings=16))  # fmt: skip
    optim, sched = adamw_with_schedule(model, lr=1.0, weight_decay=0.01, warmup_ratio=0.2, total_steps=10)
    decayed, not_decayed = optim.param_groups
    assert decayed["weight_decay"] == 0.01 and not_decayed["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decayed["params"]) and all(p.ndim == 1 for p in not_decayed["params"])
    rates = []
    for _ in range(10):
        rates.append(optim.param_groups[0]["lr"])
        optim.step()
        sched.step()
    assert rates == pytest.approx([0.5, 1.0, 1.0, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8])
    optim, sched = adamw_with_schedule(
        model, lr=1.0, weight_decay=0.0, warmup_ratio=0.2, total_steps=10, lr_decay=False
    )
    for _ in range(5):
        optim.step()
        sched.step()
    assert optim.param_groups[0]["lr"] == 1.0
