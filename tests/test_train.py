"""Tokenizer and MLM training: tiny runs on CPU."""

import json

import pandas as pd
import pytest
import torch

from mlmia.errors import UserError
from mlmia.train import (masked_lm_loss, mlm_mask, model_settings, train_from_table, train_mlm,
                         train_tokenizer, tokenizer_from_tables)

TEXTS = [
    f"Patient {i} was started on metoprolol {5 * (i % 7 + 1)} mg PO BID for atrial fibrillation."
    for i in range(30)
] + [
    f"VS: T 98.{i % 10} BP 1{i % 9 + 1}0/80 HR {60 + i} RR 16 O2 sat 9{i % 10}% on RA."
    for i in range(30)
] + ["Lungs: clear to auscultation bilaterally, no wheezes, rales, rhonchi."] * 10

TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "batch_size": 16,
        "lr": 3e-3, "epochs": 12, "warmup_ratio": 0.1, "seed": 0, "dropout": 0.0, "pack": False,
        "crop_prob": 0.5}


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok")
    train_tokenizer(TEXTS, d, vocab_size=200, min_frequency=1)
    return d


def _fixed_mask_loss(model, tokenizer, texts, seed=0):
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    special = torch.isin(enc["input_ids"], torch.tensor(tokenizer.all_special_ids))
    ids, labels = mlm_mask(enc["input_ids"], special, len(tokenizer), tokenizer.mask_token_id,
                           torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return float(masked_lm_loss(model, ids, enc["attention_mask"], labels))


def test_tokenizer_is_bert_uncased(tok_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    enc = tok("VS: T 98.6 BP")
    toks = tok.convert_ids_to_tokens(enc["input_ids"])
    assert toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    assert "vs" in toks and "bp" in toks  # lower-cased
    assert tok.mask_token == "[MASK]" and tok.pad_token_id is not None
    with pytest.raises(UserError):
        train_tokenizer([], tok_dir / "empty")


def test_tokenizer_ids_are_canonical(tmp_path):
    texts = TEXTS + [f"{w} {w}ing {w}ed" for w in ["walk", "talk", "jump", "mark", "park", "bark"] * 5]
    a = train_tokenizer(texts, tmp_path / "a", vocab_size=120, min_frequency=1).get_vocab()
    b = train_tokenizer(texts, tmp_path / "b", vocab_size=120, min_frequency=1).get_vocab()
    for vocab in (a, b):
        order = sorted(vocab, key=vocab.get)
        assert order[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        assert order[5:] == sorted(order[5:])
    # the trainer may break a tie in the last merges differently from run to run
    assert len(set(a) ^ set(b)) <= 0.1 * len(a)


def test_mlm_mask_standard_rates():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 100, (400, 50))
    ids[:, 0] = 2
    ids[:, -1] = 3
    special = (ids == 2) | (ids == 3)
    masked, labels = mlm_mask(ids, special, 100, 4, g)
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
    _, lab = mlm_mask(short, (short == 2) | (short == 3), 100, 4, g)
    assert ((lab != -100).sum(1) >= 1).all()


def test_masked_position_head_equals_full_logits_loss(tok_dir):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=64)).eval()
    enc = tok(TEXTS[:20], padding=True, return_tensors="pt")
    special = torch.isin(enc["input_ids"], torch.tensor(tok.all_special_ids))
    ids, labels = mlm_mask(enc["input_ids"], special, len(tok), tok.mask_token_id, torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=enc["attention_mask"], labels=labels).loss
        fast = masked_lm_loss(model, ids, enc["attention_mask"], labels)
    assert abs(float(full) - float(fast)) < 1e-5


def test_tiny_training_lowers_loss_and_saves_a_loadable_model(tok_dir, tmp_path):
    from transformers import AutoTokenizer, BertForMaskedLM

    out = tmp_path / "m"
    info = train_mlm(TEXTS, tok_dir, out, config=TINY, threads=1, device="cpu", log_every=5)
    assert info["steps"] == 12 * 5
    log = pd.read_csv(out / "train_log.csv")
    assert list(log.columns) == ["epoch", "step", "loss", "lr", "seconds"]
    assert log["loss"].iloc[-1] < log["loss"].iloc[0] - 0.5
    assert (out / "train_curve.png").stat().st_size > 0
    assert json.loads((out / "train_info.json").read_text())["n_texts"] == len(TEXTS)

    model = BertForMaskedLM.from_pretrained(str(out)).eval()
    tok = AutoTokenizer.from_pretrained(str(out))
    torch.manual_seed(123)
    fresh = BertForMaskedLM(model.config).eval()
    assert _fixed_mask_loss(model, tok, TEXTS) < _fixed_mask_loss(fresh, tok, TEXTS) - 1.0


def test_packed_training_covers_every_line_and_learns(tok_dir, tmp_path):
    import numpy as np

    from mlmia.train import _pack

    lines = [np.arange(10 * i, 10 * i + 1 + i % 7) for i in range(40)]
    blocks = _pack(lines, 16, np.random.default_rng(0), sep_id=-1)
    stream = np.concatenate(blocks)
    assert all(len(b) == 16 for b in blocks[:-1])
    assert len(stream) == sum(len(x) + 1 for x in lines)
    assert sorted(stream[stream >= 0].tolist()) == sorted(np.concatenate(lines).tolist())
    info = train_mlm(TEXTS * 3, tok_dir, tmp_path / "p", config={**TINY, "pack": True, "block_size": 32,
                                                                "batch_size": 4, "epochs": 6},
                     threads=1, device="cpu", log_every=5)
    log = pd.read_csv(tmp_path / "p" / "train_log.csv")
    assert info["steps"] > 20 and log["loss"].iloc[-1] < log["loss"].iloc[0] - 0.5


def test_continue_from_a_saved_model(tok_dir, tmp_path):
    from transformers import BertForMaskedLM

    base = tmp_path / "base"
    texts = pd.DataFrame({"text": TEXTS})
    texts.to_parquet(tmp_path / "t.parquet")
    train_from_table(tmp_path / "t.parquet", tok_dir, base, config={**TINY, "epochs": 2}, threads=1, device="cpu")
    plus = tmp_path / "plus"
    # the size keys of the config are ignored when continuing: the saved model's sizes win
    info = train_from_table(tmp_path / "t.parquet", tok_dir, plus, config={**TINY, "epochs": 2, "hidden_size": 64},
                            init_dir=base, threads=1, device="cpu")
    assert info["init_from"] == str(base)
    a = BertForMaskedLM.from_pretrained(str(base))
    b = BertForMaskedLM.from_pretrained(str(plus))
    assert a.config.hidden_size == b.config.hidden_size == 32
    assert not torch.equal(a.bert.embeddings.word_embeddings.weight, b.bert.embeddings.word_embeddings.weight)
    with pytest.raises(UserError):
        train_mlm(TEXTS, tok_dir, tmp_path / "x", config=TINY, init_dir=tmp_path / "missing")


def test_training_is_seeded(tok_dir, tmp_path):
    cfg = {**TINY, "epochs": 1}
    a = train_mlm(TEXTS, tok_dir, tmp_path / "a", config=cfg, threads=1, device="cpu")
    b = train_mlm(TEXTS, tok_dir, tmp_path / "b", config=cfg, threads=1, device="cpu")
    assert a["final_loss"] == b["final_loss"]


def test_settings_are_validated(tmp_path):
    assert model_settings({})["hidden_size"] == 128
    with pytest.raises(UserError, match="unknown"):
        model_settings({"layers": 3})
    with pytest.raises(UserError, match="multiple"):
        model_settings({"hidden_size": 30, "num_heads": 4})
    pd.DataFrame({"text": TEXTS}).to_parquet(tmp_path / "a.parquet")
    tok = tokenizer_from_tables([tmp_path / "a.parquet"], tmp_path / "tok", vocab_size=150, min_frequency=1)
    assert len(tok) <= 150
