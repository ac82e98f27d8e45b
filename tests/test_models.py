"""Loading models: old pytorch_pretrained_bert checkpoints, conversion, vocabulary checks, GPU batch size."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TINY_MAX_LEN, TINY_WORDS, build_tiny_tokenizer, tiny_vocab

from mlmia.core.errors import UserError
from mlmia.models.loading import convert_checkpoint, load_mlm, load_tokenizer
from mlmia.scoring.energy import batch_size_for_memory, score_samples, sequence_bytes

# bert_config.json of pytorch_pretrained_bert (Google's BERT settings, no model_type)
OLD_CONFIG_KEYS = [
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size", "initializer_range",
]  # fmt: skip


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def modern(tiny_bert_dir):
    return load_mlm(tiny_bert_dir, "cpu")


@pytest.fixture(scope="module")
def samples():
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(TINY_WORDS, n)) for n in (1, 3, 7, 12, 25, 60)]
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(texts))], "text": texts})


def write_old_layout(directory, model, *, prefix=True, drop=(), vocab=None, nsp=True):
    """A BertForMaskedLM saved by hand as pytorch_pretrained_bert did: bert_config.json,
    pytorch_model.bin with LayerNorm gamma/beta and the bias in cls.predictions.bias only,
    NSP head and pooler included, and vocab.txt."""
    directory.mkdir(parents=True, exist_ok=True)
    cfg = model.config
    (directory / "bert_config.json").write_text(json.dumps({k: getattr(cfg, k) for k in OLD_CONFIG_KEYS}, indent=2))
    state = {}
    for key, value in model.state_dict().items():
        if key == "cls.predictions.decoder.bias":
            continue  # the old head has a single bias, cls.predictions.bias
        name = key if prefix else key.removeprefix("bert.")
        head, _, last = name.rpartition(".")
        if head.endswith("LayerNorm"):
            name = f"{head}.{'gamma' if last == 'weight' else 'beta'}"
        if name not in drop:
            state[name] = value.detach().clone()
    if nsp:
        hidden = cfg.hidden_size
        state.update({
            ("bert." if prefix else "") + "pooler.dense.weight": torch.randn(hidden, hidden),
            ("bert." if prefix else "") + "pooler.dense.bias": torch.randn(hidden),
            "cls.seq_relationship.weight": torch.randn(2, hidden),
            "cls.seq_relationship.bias": torch.randn(2),
        })  # fmt: skip
    assert any(k.endswith("LayerNorm.gamma") for k in state) and not any(k.endswith("LayerNorm.weight") for k in state)
    torch.save(state, directory / "pytorch_model.bin")
    if vocab is not False:
        (directory / "vocab.txt").write_text("\n".join(vocab or tiny_vocab()) + "\n")
    return directory


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def records():
    handler, logger = _Records(), logging.getLogger("mlmia")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.messages
    logger.removeHandler(handler)
    logger.setLevel(level)


def _energies(model, tok, samples):
    # the samples include texts longer than the tiny models (cut: the same cut on both sides)
    out = score_samples(model, tok, samples, patterns=6, seed=2, batch_size=5, truncate=True)
    return out["energy"].to_numpy(), np.concatenate([np.asarray(v) for v in out["per_pattern"]])


# --------------------------------------------------------------------------- old layout


@pytest.mark.parametrize("prefix", [True, False], ids=["bert-prefix", "no-prefix"])
def test_old_layout_scores_exactly_like_the_modern_directory(tmp_path, modern, samples, records, prefix):
    old_dir = write_old_layout(tmp_path / "clinicalbert", modern[0], prefix=prefix)
    model, tok = load_mlm(old_dir, "cpu")
    assert type(model).__name__ == "BertForMaskedLM" and not model.training
    assert len(tok) == len(modern[1]) and tok.model_max_length == TINY_MAX_LEN
    text = " ".join(samples["text"])
    assert tok(text)["input_ids"] == modern[1](text)["input_ids"]
    assert torch.equal(model.cls.predictions.decoder.weight, modern[0].bert.embeddings.word_embeddings.weight)
    for got, want in zip(_energies(model, tok, samples), _energies(*modern, samples)):
        np.testing.assert_array_equal(got, want)
    converted = [m for m in records if "old pytorch_pretrained_bert checkpoint converted" in m]
    assert len(converted) == 1 and "12 LayerNorm gamma/beta renamed" in converted[0]  # 6 LayerNorms x (gamma, beta)


def test_convert_checkpoint_round_trip(tmp_path, modern, samples):
    old_dir = write_old_layout(tmp_path / "old", modern[0], prefix=False)
    dst = convert_checkpoint(old_dir, tmp_path / "converted")
    assert dst == tmp_path / "converted"
    assert (dst / "config.json").is_file() and (dst / "tokenizer_config.json").is_file()
    assert not (dst / "bert_config.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["converted", "old"]  # no temp directory left
    model, tok = load_mlm(dst, "cpu")
    assert model.config.model_type == "bert" and len(tok) == len(modern[1])
    for got, want in zip(_energies(model, tok, samples), _energies(*modern, samples)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(UserError, match=r"converted: already exists"):
        convert_checkpoint(old_dir, dst)
    # an empty target directory is fine
    (tmp_path / "empty").mkdir()
    assert (convert_checkpoint(old_dir, tmp_path / "empty") / "config.json").is_file()


@pytest.mark.parametrize(
    "dropped, named",
    [
        (
            "cls.predictions.transform.dense.weight",
            "masked-LM head weights .*first cls.predictions.transform.dense.weight",
        ),
        ("cls.predictions.bias", "masked-LM head weights .*first cls.predictions.bias"),
        (
            "bert.encoder.layer.1.output.LayerNorm.gamma",
            "encoder weights .*first bert.encoder.layer.1.output.LayerNorm.weight",
        ),
    ],
)
def test_missing_weights_are_refused_naming_the_first(tmp_path, modern, dropped, named):
    old_dir = write_old_layout(tmp_path / "broken", modern[0], drop=(dropped,))
    with pytest.raises(UserError, match=named) as err:
        load_mlm(old_dir, "cpu")
    assert "\n" not in str(err.value) and str(old_dir) in str(err.value)


def test_weights_the_config_has_no_place_for_are_refused(tmp_path, modern):
    old_dir = write_old_layout(tmp_path / "three_layers", modern[0])
    cfg = json.loads((old_dir / "bert_config.json").read_text())
    (old_dir / "bert_config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 1}))
    with pytest.raises(
        UserError,
        match=r"have no place .*first bert.encoder.layer.1.attention.output.LayerNorm.bias; check num_hidden_layers",
    ):
        load_mlm(old_dir, "cpu")


def test_tied_decoder_weight_may_be_absent(tmp_path, modern, samples):
    old_dir = write_old_layout(tmp_path / "no_decoder", modern[0], drop=("cls.predictions.decoder.weight",))
    model, tok = load_mlm(old_dir, "cpu")
    np.testing.assert_array_equal(_energies(model, tok, samples)[0], _energies(*modern, samples)[0])


def test_untied_output_embeddings_are_kept(tmp_path, modern):
    old_dir = write_old_layout(tmp_path / "untied", modern[0])
    state = torch.load(old_dir / "pytorch_model.bin", weights_only=True)
    state["cls.predictions.decoder.weight"] = state["cls.predictions.decoder.weight"] + 0.5
    torch.save(state, old_dir / "pytorch_model.bin")
    model, _ = load_mlm(old_dir, "cpu")
    assert torch.equal(model.cls.predictions.decoder.weight, state["cls.predictions.decoder.weight"])
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, state["bert.embeddings.word_embeddings.weight"])
    assert torch.equal(model.cls.predictions.decoder.bias, state["cls.predictions.bias"])


def test_old_config_errors_name_the_file_and_key(tmp_path, modern):
    old_dir = write_old_layout(tmp_path / "cfg", modern[0])
    cfg = json.loads((old_dir / "bert_config.json").read_text())
    del cfg["num_attention_heads"]
    (old_dir / "bert_config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match=r"bert_config.json: missing key 'num_attention_heads'"):
        load_mlm(old_dir, "cpu")
    (old_dir / "bert_config.json").write_text("{not json")
    with pytest.raises(UserError, match=r"bert_config.json: not a readable JSON file"):
        load_mlm(old_dir, "cpu")
    (old_dir / "bert_config.json").unlink()
    with pytest.raises(UserError, match=r"no config.json \(nor bert_config.json\)"):
        load_mlm(old_dir, "cpu")


def test_old_layout_without_weights_or_vocab(tmp_path, modern, tiny_bert_dir, samples):
    old_dir = write_old_layout(tmp_path / "novocab", modern[0], vocab=False)
    with pytest.raises(UserError, match=r"without vocab.txt; name its tokenizer"):
        load_mlm(old_dir, "cpu")
    model, tok = load_mlm(old_dir, "cpu", tokenizer=tiny_bert_dir)  # the scoring tokenizer named apart
    np.testing.assert_array_equal(_energies(model, tok, samples)[0], _energies(*modern, samples)[0])
    (old_dir / "pytorch_model.bin").write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match=r"pytorch_model.bin: cannot read the weights"):
        load_mlm(old_dir, "cpu", tokenizer=tiny_bert_dir)
    (old_dir / "pytorch_model.bin").unlink()
    with pytest.raises(UserError, match=r"bert_config.json but no pytorch_model.bin"):
        load_mlm(old_dir, "cpu", tokenizer=tiny_bert_dir)


def test_do_lower_case_setting_for_a_bare_vocab(tmp_path):
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(tiny_vocab()) + "\n")
    chest, unk = tiny_vocab().index("chest"), tiny_vocab().index("[UNK]")
    assert load_tokenizer(vocab_file)("Chest", add_special_tokens=False)["input_ids"] == [chest]  # default: lower-cased
    assert load_tokenizer(vocab_file, do_lower_case=False)("Chest", add_special_tokens=False)["input_ids"] == [unk]
    assert load_tokenizer(tmp_path)("chest", add_special_tokens=False)["input_ids"] == [
        chest
    ]  # a directory with vocab.txt
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "max_len": 24}))  # old-style
    cased = load_tokenizer(tmp_path)
    assert cased("Chest", add_special_tokens=False)["input_ids"] == [unk] and cased.model_max_length == 24
    assert load_tokenizer(tmp_path, do_lower_case=True)("Chest", add_special_tokens=False)["input_ids"] == [chest]
    vocab_file.write_text("\n".join(t for t in tiny_vocab() if t != "[MASK]") + "\n")
    with pytest.raises(UserError, match=r"vocab.txt: no \[MASK\] token"):
        load_tokenizer(vocab_file)


# --------------------------------------------------------------------------- vocabulary mismatch


def test_vocabulary_mismatch_with_a_named_tokenizer(tmp_path, tiny_bert_dir):
    bigger = build_tiny_tokenizer(tmp_path / "tok_plus_one")
    bigger.add_tokens(["hypothyroidism"])
    bigger.save_pretrained(tmp_path / "tok_plus_one")
    n = len(tiny_vocab())
    with pytest.raises(UserError) as err:
        load_mlm(tiny_bert_dir, "cpu", tokenizer=tmp_path / "tok_plus_one")
    msg = str(err.value)
    assert "\n" not in msg
    assert (
        str(tiny_bert_dir) in msg
        and f"has {n} tokens" in msg
        and f"has {n + 1}" in msg
        and str(tmp_path / "tok_plus_one") in msg
    )
    load_mlm(tiny_bert_dir, "cpu", tokenizer=tiny_bert_dir)  # the same vocabulary named apart: fine


def test_vocabulary_mismatch_of_an_old_checkpoint_with_its_own_vocab(tmp_path, modern):
    n = len(tiny_vocab())
    old_dir = write_old_layout(tmp_path / "old", modern[0], vocab=tiny_vocab() + ["hypothyroidism"])
    with pytest.raises(UserError, match=rf"its vocabulary has {n} tokens but the tokenizer .*vocab.txt has {n + 1}"):
        load_mlm(old_dir, "cpu")


def test_a_named_tokenizer_that_does_not_exist(tmp_path, tiny_bert_dir):
    with pytest.raises(UserError, match=r"tokenizer .*nowhere: no such file or directory"):
        load_mlm(tiny_bert_dir, "cpu", tokenizer=tmp_path / "nowhere")


# --------------------------------------------------------------------------- batch size from free memory

BERT_BASE = {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522}
SMALL = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 1000}


def test_batch_size_for_memory_by_hand():
    # encoder: 10 (640 * 2 + 512) + 4 * 100 * 6 = 20320; head: 2 (512 + 1000 * 10) = 21024
    assert sequence_bytes(SMALL, 10, 2, 2) == 41344
    assert batch_size_for_memory(10_000_000, SMALL, 10, 2, masked_per_seq=2) == 193  # floor(0.8e7 / 41344)
    # full logits (no head split) add seq_len * V * d
    assert sequence_bytes(SMALL, 10, 2, 2, full_logits=True) == 41344 + 10 * 1000 * 2
    # default masked positions: ceil(0.15 (seq_len - 2)) = 2 for seq_len 10
    assert sequence_bytes(SMALL, 10, 2) == 41344


def test_batch_size_for_memory_is_monotone_clamped_and_takes_configs():
    from transformers import BertConfig

    sizes = [batch_size_for_memory(free, BERT_BASE, 128, 2, max_batch=10**9) for free in np.geomspace(1e6, 8e10, 40)]
    assert all(a <= b for a, b in zip(sizes, sizes[1:])) and sizes[0] == 1 and sizes[-1] > 1000
    assert batch_size_for_memory(0, BERT_BASE, 512, 2) == 1
    assert batch_size_for_memory(10**15, BERT_BASE, 16, 2) == 4096
    assert batch_size_for_memory(10**15, BERT_BASE, 16, 2, max_batch=64) == 64
    by_len = [batch_size_for_memory(40e9, BERT_BASE, n, 2) for n in (16, 64, 128, 256, 512)]
    assert all(a >= b for a, b in zip(by_len, by_len[1:])) and by_len[-1] >= 1
    assert batch_size_for_memory(40e9, BERT_BASE, 128, 4) < batch_size_for_memory(
        40e9, BERT_BASE, 128, 2
    )  # fp32 vs bf16
    cfg = BertConfig(**BERT_BASE)
    assert batch_size_for_memory(40e9, cfg, 128, 2) == batch_size_for_memory(40e9, BERT_BASE, 128, 2)
    with pytest.raises(UserError, match="hidden_size"):
        batch_size_for_memory(1e9, {"vocab_size": 10}, 8, 2)


def test_convert_and_score_from_the_command_line(tmp_path, modern, samples, capsys):
    from mlmia.cli import main

    old_dir = write_old_layout(tmp_path / "old", modern[0])
    assert main(["convert", str(old_dir), str(tmp_path / "new")]) == 0
    samples.to_parquet(tmp_path / "samples.parquet")
    out = tmp_path / "scores.parquet"
    assert (
        main(
            [
                "score",
                "--model",
                str(tmp_path / "new"),
                "--samples",
                str(tmp_path / "samples.parquet"),
                "--out",
                str(out),
                "--patterns",
                "3",
                "--truncate",
                "--mask-count",
                "floor",
            ]
        )
        == 0
    )
    scores = pd.read_parquet(out)
    assert scores["n_masked"].tolist() == [max(1, 15 * t // 100) for t in scores["n_tokens"]]
    # a second conversion into the same place is a user error: one line, exit code 2
    assert main(["convert", str(old_dir), str(tmp_path / "new")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mlmia: error:")]
    assert len(errors) == 1 and "already exists" in errors[0]


def test_rows_are_padded_on_the_right_with_their_attention_mask():
    import numpy as np

    from mlmia.models.batching import pad_rows, padded_batch

    ids, attention = padded_batch([np.array([5, 6, 7]), np.array([8])], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and attention.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert pad_rows([[1], [2, 3]], -100).tolist() == [[1, -100], [2, 3]]
