"""Every masked-LM architecture a user may bring, as tiny random checkpoints built here.

For each: it loads, its masked and normalized energies equal a brute force written here
(plain model forward, full logits), padded embedding matrices included; saved without its
LM head it is refused; special-token strings in the text ("[MASK]", "<pad>", "</s>") are
scored as the characters they are, for every tokenizer family (WordPiece, byte-level BPE,
Unigram/SentencePiece)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_vocab
from safetensors.torch import load_file, save_file

from mlmia.core.errors import UserError
from mlmia.models.loading import load_mlm
from mlmia.models.tokenizer import content_tokens, encode_text
from mlmia.scoring.energy import score_samples
from mlmia.scoring.masks import mask_patterns

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MAX_LEN = 64  # tokenizer limit; every text here is far shorter (no truncation)
ATOL = 1e-4
K, SEED = 3, 7
SENTENCES = [
    "patient admitted with chest pain and shortness of breath",
    "history of hypertension and diabetes, denies fever or cough",
    "blood pressure 120/80, heart rate 72, normal sinus rhythm",
    "aspirin 81 mg daily; metoprolol 25 mg oral tablet",
    "discharged home, follow up in clinic in two weeks",
    "Acute kidney failure with chronic liver disease",
    "mask pad sep cls unk MASK PAD SEP CLS UNK NOTUSED s [ ] < > /",
]
ALPHABET = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:;-/()%[]<>")
WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# --------------------------------------------------------------------------- tokenizers


def _wordpiece_pieces() -> list[str]:
    return [t for t in tiny_vocab() if t not in WORDPIECE_SPECIALS] + list("[]<>")


def _bpe_pieces():
    """(byte-level BPE tokens in id order, merges) trained on SENTENCES, no special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=330, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(SENTENCES * 3, trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return sorted(model["vocab"], key=model["vocab"].get), merges


def _unigram_pieces() -> list[tuple[str, float]]:
    """SentencePiece-style (piece, log-probability) pairs trained on SENTENCES, no special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=150, special_tokens=["<unk>"], unk_token="<unk>", initial_alphabet=ALPHABET, show_progress=False
    )
    tok.train_from_iterator(SENTENCES * 3, trainer)
    return [(p, s) for p, s in json.loads(tok.to_str())["model"]["vocab"] if p != "<unk>"]


def _ids(tokens) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for t in tokens:
        vocab.setdefault(t, len(vocab))
    return vocab


def _unigram(leading, pieces, trailing=()):
    """A SentencePiece vocabulary as converted ones are: the special pieces are pieces too (score 0)."""
    return [(t, 0.0) for t in leading] + list(pieces) + [(t, 0.0) for t in trailing]


def build_tokenizers() -> dict[str, object]:
    """One tokenizer per convention, named by the family and its special tokens."""
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    wordpiece = _wordpiece_pieces()
    bpe_tokens, merges = _bpe_pieces()
    unigram = _unigram_pieces()
    limit = {"model_max_length": MAX_LEN}
    out = {
        # WordPiece with [MASK] (BERT, DistilBERT, ELECTRA)
        "wordpiece": tf.BertTokenizerFast(vocab=_ids([*WORDPIECE_SPECIALS, *wordpiece]), **limit),
        # WordPiece with <s> </s> <pad> <mask> (MPNet; <pad> must be id 1)
        "wordpiece-mpnet": tf.MPNetTokenizerFast(
            vocab=_ids(["<s>", "<pad>", "</s>", "[UNK]", *wordpiece, "<mask>"]), **limit
        ),
        # byte-level BPE with <mask> (RoBERTa)
        "bpe-roberta": tf.RobertaTokenizerFast(
            vocab=_ids(["<s>", "<pad>", "</s>", "<unk>", *bpe_tokens, "<mask>"]), merges=merges, **limit
        ),
        # Unigram, SentencePiece conventions of each model
        "unigram-albert": tf.AlbertTokenizerFast(
            vocab=_unigram(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], unigram), **limit
        ),
        "unigram-deberta-v2": tf.DebertaV2TokenizerFast(
            vocab=_unigram(["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"], unigram), **limit
        ),
        # DeBERTa-v3: [MASK] is not a SentencePiece piece but added after them (id 128000 of 128001)
        "unigram-deberta-v3": tf.DebertaV2TokenizerFast(
            vocab=_unigram(["[PAD]", "[CLS]", "[SEP]", "[UNK]"], unigram), **limit
        ),
        "unigram-xlmr": tf.XLMRobertaTokenizerFast(
            vocab=_unigram(["<s>", "<pad>", "</s>", "<unk>"], unigram, ["<mask>"]), **limit
        ),
        "unigram-camembert": tf.CamembertTokenizerFast(
            vocab=_unigram(
                ["<s>NOTUSED", "<pad>", "</s>NOTUSED", "<unk>", "<unk>NOTUSED", "<s>", "</s>"], unigram, ["<mask>"]
            ),
            **limit,
        ),
    }
    # ModernBERT: byte-level BPE, its [CLS] [SEP] [PAD] [MASK] after the merged tokens
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    vocab = _ids([*bpe_tokens, *specials])
    backend = Tokenizer(models.BPE(vocab, merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    out["bpe-modernbert"] = tf.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        **limit,
    )
    for name, tok in out.items():
        assert tok.mask_token_id is not None and tok.pad_token_id is not None, name
    assert out["unigram-deberta-v3"].mask_token_id == len(out["unigram-deberta-v3"]) - 1
    return out


# --------------------------------------------------------------------------- models


SMALL = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 64}


def _ids_of(tok) -> dict:
    return {"pad_token_id": tok.pad_token_id, "bos_token_id": tok.cls_token_id, "eos_token_id": tok.sep_token_id}


def _bert(tf, tok, rows):
    return tf.BertForMaskedLM(tf.BertConfig(vocab_size=rows, max_position_embeddings=MAX_LEN, **SMALL, **_ids_of(tok)))


def _roberta_like(cls, config):
    def build(tf, tok, rows):
        cfg = getattr(tf, config)(vocab_size=rows, max_position_embeddings=MAX_LEN + 2, **SMALL, **_ids_of(tok))
        return getattr(tf, cls)(cfg)

    return build


def _distilbert(tf, tok, rows):
    cfg = tf.DistilBertConfig(
        vocab_size=rows, dim=32, n_layers=1, n_heads=4, hidden_dim=64, max_position_embeddings=MAX_LEN, pad_token_id=0
    )
    return tf.DistilBertForMaskedLM(cfg)


def _albert(tf, tok, rows):
    cfg = tf.AlbertConfig(vocab_size=rows, embedding_size=16, max_position_embeddings=MAX_LEN, **SMALL, **_ids_of(tok))
    return tf.AlbertForMaskedLM(cfg)


def _electra(tf, tok, rows):
    cfg = tf.ElectraConfig(vocab_size=rows, embedding_size=16, max_position_embeddings=MAX_LEN, **SMALL, **_ids_of(tok))
    return tf.ElectraForMaskedLM(cfg)


def _deberta(legacy: bool):
    def build(tf, tok, rows):
        cfg = tf.DebertaV2Config(
            vocab_size=rows,
            max_position_embeddings=MAX_LEN,
            relative_attention=True,
            position_buckets=16,
            pos_att_type=["p2c", "c2p"],
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            legacy=legacy,
            **SMALL,
            **_ids_of(tok),
        )
        return tf.DebertaV2ForMaskedLM(cfg)

    return build


def _modernbert(tf, tok, rows):
    cfg = tf.ModernBertConfig(
        vocab_size=rows,
        max_position_embeddings=MAX_LEN,
        hidden_size=32,
        num_hidden_layers=2,  # one global, one local (sliding window) attention layer
        num_attention_heads=4,
        intermediate_size=64,
        global_attn_every_n_layers=2,
        local_attention=8,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
        cls_token_id=tok.cls_token_id,
        sep_token_id=tok.sep_token_id,
    )
    return tf.ModernBertForMaskedLM(cfg)


@dataclass(frozen=True)
class Arch:
    tokenizer: str  # key of build_tokenizers()
    build: Callable  # (transformers, tokenizer, embedding rows) -> random MaskedLM model
    base: str  # parameter-name prefix of the base model (what a headless checkpoint keeps)
    pad_to: int = 1  # embedding rows: len(tokenizer) rounded up to a multiple of this


ARCHS = {
    "bert": Arch("wordpiece", _bert, "bert"),
    "bert-padded": Arch("wordpiece", _bert, "bert", pad_to=64),  # NVIDIA's BERT: 30528 rows for 30522 tokens
    "distilbert": Arch("wordpiece", _distilbert, "distilbert"),
    "electra": Arch("wordpiece", _electra, "electra"),
    "mpnet": Arch("wordpiece-mpnet", _roberta_like("MPNetForMaskedLM", "MPNetConfig"), "mpnet"),
    "roberta": Arch("bpe-roberta", _roberta_like("RobertaForMaskedLM", "RobertaConfig"), "roberta"),
    "modernbert": Arch("bpe-modernbert", _modernbert, "model", pad_to=64),  # 50368 rows for 50280 tokens
    "albert": Arch("unigram-albert", _albert, "albert"),
    "deberta-v2": Arch("unigram-deberta-v2", _deberta(legacy=True), "deberta"),
    "deberta-v3": Arch("unigram-deberta-v3", _deberta(legacy=False), "deberta"),
    "deberta-v3-padded": Arch("unigram-deberta-v3", _deberta(legacy=False), "deberta", pad_to=50),  # 128100 rows
    "xlm-roberta": Arch("unigram-xlmr", _roberta_like("XLMRobertaForMaskedLM", "XLMRobertaConfig"), "roberta"),
    "camembert": Arch("unigram-camembert", _roberta_like("CamembertForMaskedLM", "CamembertConfig"), "roberta"),
}


@pytest.fixture(scope="module")
def tokenizers():
    return build_tokenizers()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tokenizers):
    """checkpoint(name) -> a saved directory (model + tokenizer) of ARCHS[name], built once."""
    import transformers as tf

    built = {}

    def get(name):
        if name not in built:
            arch, tok = ARCHS[name], tokenizers[ARCHS[name].tokenizer]
            rows = -(-len(tok) // arch.pad_to) * arch.pad_to
            torch.manual_seed(sorted(ARCHS).index(name))
            model = arch.build(tf, tok, rows)
            # large random weights (as initializer_range 0.3) so logits are far from uniform and
            # errors show; random biases, so that a missing output bias changes the scores
            with torch.no_grad():
                for pname, param in model.named_parameters():
                    if param.dim() > 1 or "bias" in pname:
                        param.normal_(0.0, 0.3)
            directory = tmp_path_factory.mktemp(name)
            model.save_pretrained(directory)
            tok.save_pretrained(directory)
            built[name] = directory
        return built[name]

    return get


# --------------------------------------------------------------------------- the brute force


def _specials(tok) -> set[str]:
    return {str(t) for t in tok.all_special_tokens}


def _literal_content_ids(tok, text: str) -> list[int]:
    """Ids of `text` with every special-token string read as characters: the tokenizer's own
    normalizer, pre-tokenizer and model, with the special tokens taken out of the model's
    vocabulary (the unknown token aside) and no added tokens."""
    from tokenizers import models

    backend = tok.backend_tokenizer
    state = json.loads(backend.to_str())["model"]
    drop = _specials(tok) - {tok.unk_token}
    if state["type"] == "WordPiece":
        model = models.WordPiece(
            {t: i for t, i in state["vocab"].items() if t not in drop},
            unk_token=state["unk_token"],
            continuing_subword_prefix=state["continuing_subword_prefix"],
            max_input_chars_per_word=state["max_input_chars_per_word"],
        )
    elif state["type"] == "BPE":
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in state["merges"]]
        model = models.BPE({t: i for t, i in state["vocab"].items() if t not in drop}, merges)
    else:
        assert state["type"] == "Unigram"
        vocab = [(p, s) for p, s in state["vocab"] if p not in drop]
        model = models.Unigram(vocab, unk_id=[p for p, _ in vocab].index(tok.unk_token), byte_fallback=False)
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    words = backend.pre_tokenizer.pre_tokenize_str(text) if backend.pre_tokenizer is not None else [(text, None)]
    return [tok.convert_tokens_to_ids(piece.value) for word, _ in words for piece in model.tokenize(word)]


def _brute_force(model, tok, text: str, patterns) -> list[float]:
    """Mean cross-entropy over the masked positions of each pattern (rows of content indices),
    from the plain model forward on [CLS] content [SEP] (<s> content </s>)."""
    content = _literal_content_ids(tok, text)
    ids = torch.tensor([tok.cls_token_id, *content, tok.sep_token_id])
    positions = torch.as_tensor(np.asarray(patterns)) + 1  # content index -> sequence position
    copies = ids.repeat(len(positions), 1)
    rows = torch.arange(len(positions))[:, None]
    copies[rows, positions] = tok.mask_token_id
    with torch.no_grad():
        logits = model(input_ids=copies).logits.float()
    ce = F.cross_entropy(logits[rows, positions].transpose(1, 2), ids[positions], reduction="none")
    return ce.mean(dim=1).tolist()


def _texts(tok) -> list[str]:
    """Clinical text, and text spelling the tokenizer's own special tokens."""
    mask, pad, sep, cls = tok.mask_token, tok.pad_token, tok.sep_token, tok.cls_token
    return [
        "patient admitted with chest pain and shortness of breath",
        f"chest pain {mask} and fever",
        f"denies {pad} cough {sep} nausea {cls}",
        f"aspirin{mask}daily, heart{sep}rate {pad}{mask}",
    ]


# --------------------------------------------------------------------------- tests


def test_the_installed_transformers_has_every_architecture():
    import transformers as tf

    for cls in ("AlbertForMaskedLM", "DebertaV2ForMaskedLM", "ModernBertForMaskedLM", "MPNetForMaskedLM"):
        assert hasattr(tf, cls), cls
    assert "legacy" in tf.DebertaV2Config().to_dict()  # the DeBERTa-v3 head (legacy=False) exists


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_scores_equal_the_brute_force(name, checkpoint):
    model, tok = load_mlm(checkpoint(name), "cpu")
    arch = ARCHS[name]
    assert model.get_input_embeddings().weight.shape[0] == -(-len(tok) // arch.pad_to) * arch.pad_to
    if arch.pad_to > 1:
        assert model.get_input_embeddings().weight.shape[0] > len(tok)  # padded rows, accepted
    texts = _texts(tok)
    samples = pd.DataFrame({"sample_id": [f"{name}-{i}" for i in range(len(texts))], "text": texts})
    masked = score_samples(model, tok, samples, energy="masked", patterns=K, seed=SEED)
    normalized = score_samples(model, tok, samples, energy="normalized")
    lengths = [len(_literal_content_ids(tok, t)) for t in texts]
    assert max(lengths) + 2 <= 40  # no truncation anywhere
    assert masked["n_tokens"].tolist() == normalized["n_tokens"].tolist() == lengths
    assert content_tokens(tok, texts).tolist() == lengths
    for sid, text, n, got_masked, got_normalized in zip(
        samples["sample_id"], texts, lengths, masked.itertuples(), normalized.itertuples()
    ):
        want = _brute_force(model, tok, text, mask_patterns(SEED, sid, n, K, "ceil"))
        np.testing.assert_allclose(got_masked.per_pattern, want, rtol=0, atol=ATOL)
        np.testing.assert_allclose(got_masked.energy, np.mean(want), rtol=0, atol=ATOL)
        want = _brute_force(model, tok, text, np.arange(n)[:, None])
        np.testing.assert_allclose(got_normalized.per_pattern, want, rtol=0, atol=ATOL)
        np.testing.assert_allclose(got_normalized.energy, np.mean(want), rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_every_architecture_runs_its_head_on_the_masked_positions_only(name, checkpoint):
    """The scorer's split (encoder, then the LM head on the masked positions alone) is found for
    every architecture here, and gives the full forward's logits at those positions."""
    from mlmia.models.loading import mlm_parts

    model, tok = load_mlm(checkpoint(name), "cpu")
    parts = mlm_parts(model)
    assert parts is not None, f"{name}: no head split, scored with full logits"
    encoder, head = parts
    ids = tok(_texts(tok)[:3], padding=True, return_tensors="pt")
    chosen = ids["attention_mask"].bool().clone()
    chosen[:, 0] = False  # some positions, not all
    with torch.no_grad():
        full = model(input_ids=ids["input_ids"], attention_mask=ids["attention_mask"]).logits
        hidden = encoder(input_ids=ids["input_ids"], attention_mask=ids["attention_mask"]).last_hidden_state
        split = head(hidden[chosen])
    torch.testing.assert_close(split, full[chosen], rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", sorted({a.tokenizer for a in ARCHS.values()}))
def test_special_token_strings_in_text_are_characters(family, tokenizers):
    tok = tokenizers[family]
    texts = _texts(tok)[1:]
    special_ids = set(tok.all_special_ids) - {tok.unk_token_id}
    plain = tok(texts, add_special_tokens=False)["input_ids"]
    assert all(special_ids & set(ids) for ids in plain)  # what the literal [MASK], <pad>, [SEP] used to become
    enc = encode_text(tok, texts)
    bare = encode_text(tok, texts, add_special_tokens=False)
    for text, ids, special, content in zip(texts, enc["input_ids"], enc["special_tokens_mask"], bare["input_ids"]):
        want = _literal_content_ids(tok, text)
        assert not special_ids & set(want)
        assert [i for i, s in zip(ids, special) if not s] == want == content
        assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id and sum(special) == 2
    assert content_tokens(tok, texts).tolist() == [len(_literal_content_ids(tok, t)) for t in texts]
    # the caller's tokenizer is left as it was: it still reads the strings as special tokens
    assert tok.backend_tokenizer.encode_special_tokens is False
    assert tok(texts, add_special_tokens=False)["input_ids"] == plain


def _rewrite_weights(src, dst, keep):
    shutil.copytree(src, dst)
    weights = load_file(dst / "model.safetensors")
    kept = {k: v for k, v in weights.items() if keep(k, v)}
    assert 0 < len(kept) < len(weights)
    save_file(kept, dst / "model.safetensors", metadata={"format": "pt"})
    return sorted(set(weights) - set(kept))


HEAD_PARTS = {
    "whole head": lambda base, rows: lambda k, v: k.startswith(base + "."),
    # the output bias (one value per vocabulary row): not tied to anything, so missing
    "output bias": lambda base, rows: lambda k, v: k.startswith(base + ".") or tuple(v.shape) != (rows,),
    "head norm": lambda base, rows: lambda k, v: k.startswith(base + ".") or "norm" not in k.lower(),
}


@pytest.mark.parametrize("part", sorted(HEAD_PARTS))
@pytest.mark.parametrize("name", sorted(ARCHS))
def test_a_checkpoint_without_its_lm_head_is_refused(name, part, checkpoint, tmp_path):
    src = checkpoint(name)
    rows = json.loads((src / "config.json").read_text())["vocab_size"]
    dst = tmp_path / name
    removed = _rewrite_weights(src, dst, HEAD_PARTS[part](ARCHS[name].base, rows))
    with pytest.raises(UserError) as err:
        load_mlm(dst, "cpu")
    msg = str(err.value)
    assert "\n" not in msg and str(dst) in msg and "masked-LM head" in msg
    assert any(k in msg for k in removed), (msg, removed)


@pytest.mark.parametrize("name", ["modernbert", "deberta-v3"])
def test_a_base_model_saved_alone_is_refused(name, checkpoint, tmp_path):
    model, tok = load_mlm(checkpoint(name), "cpu")
    model.base_model.save_pretrained(tmp_path / "encoder")
    tok.save_pretrained(tmp_path / "encoder")
    with pytest.raises(UserError, match=r"no trained masked-LM head") as err:
        load_mlm(tmp_path / "encoder", "cpu")
    assert "\n" not in str(err.value)


def test_a_tokenizer_with_ids_beyond_the_embeddings_is_refused(checkpoint, tokenizers, tmp_path):
    tok = tokenizers["unigram-deberta-v3"]
    dst = tmp_path / "short"
    shutil.copytree(checkpoint("deberta-v3"), dst)
    config = json.loads((dst / "config.json").read_text())
    weights = load_file(dst / "model.safetensors")
    rows = len(tok) - 1  # no row for [MASK], the last id
    for key, value in weights.items():
        if value.shape[0] == len(tok):
            weights[key] = value[:rows].contiguous()
    save_file(weights, dst / "model.safetensors", metadata={"format": "pt"})
    (dst / "config.json").write_text(json.dumps({**config, "vocab_size": rows}))
    with pytest.raises(UserError) as err:
        load_mlm(dst, "cpu")
    msg = str(err.value)
    assert "\n" not in msg and f"has {rows} tokens" in msg and f"has {len(tok)}" in msg and str(dst) in msg


class _Rows(torch.nn.Module):
    def __init__(self, rows):
        super().__init__()
        self.embeddings = torch.nn.Embedding(rows, 2)

    def get_input_embeddings(self):
        return self.embeddings


class _Vocab:
    """A tokenizer's sizes only: `size` tokens, ids 0..size-1, and special ids maybe beyond."""

    def __init__(self, size, special_ids):
        self.size, self.all_special_ids = size, list(special_ids)

    def __len__(self):
        return self.size

    def get_vocab(self):
        return {f"t{i}": i for i in range(self.size)}


def test_vocabulary_check_on_sizes(caplog):
    from mlmia.models.loading import check_vocabulary

    check_vocabulary(_Rows(12), _Vocab(10, [0, 9]), "m", "t")  # padded: fine
    with pytest.raises(
        UserError, match=r"model m: its vocabulary has 12 tokens but the tokenizer t has 10 \(ids up to 12\)"
    ):
        check_vocabulary(_Rows(12), _Vocab(10, [0, 12]), "m", "t")  # a special id without a row
    with pytest.raises(UserError, match=r"has 12 tokens but the tokenizer t has 13"):
        check_vocabulary(_Rows(12), _Vocab(13, [0]), "m", "t")
    check_vocabulary(_Rows(10 + 128), _Vocab(10, [0]), "m", "t")  # as many more rows as padding explains: fine
    with pytest.raises(UserError) as info:  # one more: not the model's tokenizer (a 5-token cache entry), refused
        check_vocabulary(_Rows(10 + 129), _Vocab(10, [0]), "m", "t")
    assert str(info.value) == (
        "model m: its vocabulary has 139 rows but the tokenizer t has 10 tokens (ids up to 9), 129 fewer, more than "
        "padding explains: it is not the model's own tokenizer; score with the tokenizer the model was trained with"
    )
