"""Old pytorch_pretrained_bert checkpoints (bert_config.json, pytorch_model.bin, vocab.txt), read
into a current BertForMaskedLM and a fast WordPiece tokenizer: `mlmia.models.loading.load_mlm`
reads them through `load_legacy_bert`, `convert_checkpoint` saves them in the current layout."""

from __future__ import annotations

from pathlib import Path

import torch

from mlmia.core.errors import UserError, first_line
from mlmia.core.logs import get_logger
from mlmia.models.hub import quiet_transformers

log = get_logger(__name__)

LEGACY_CONFIG = "bert_config.json"
LEGACY_WEIGHTS = "pytorch_model.bin"
LEGACY_VOCAB = "vocab.txt"
# bert_config.json keys without which no BertConfig can be built (the others have BERT's defaults).
_LEGACY_REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
_LEGACY_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Weights of an old checkpoint that BertForMaskedLM has no use for: NSP head, pooler, buffers.
_LEGACY_IGNORED = (
    "cls.seq_relationship.",
    "bert.pooler.",
    "bert.embeddings.position_ids",
    "bert.embeddings.token_type_ids",
)


def _read_legacy_config(path: Path):
    import json

    from transformers import BertConfig

    cfg_path = path / LEGACY_CONFIG
    try:
        raw = json.loads(cfg_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{cfg_path}: not a readable JSON file: {first_line(exc)}") from exc
    if not isinstance(raw, dict):
        raise UserError(f"{cfg_path}: expected a JSON object of BERT settings")
    for key in _LEGACY_REQUIRED:
        if key not in raw:
            raise UserError(f"{cfg_path}: missing key {key!r}")
        if not isinstance(raw[key], int) or isinstance(raw[key], bool) or raw[key] < 1:
            raise UserError(f"{cfg_path}: {key!r} must be a positive integer, got {raw[key]!r}")
    if raw["hidden_size"] % raw["num_attention_heads"]:
        raise UserError(
            f"{cfg_path}: hidden_size {raw['hidden_size']} is not a multiple of num_attention_heads {raw['num_attention_heads']}"
        )
    try:
        return BertConfig(**raw)
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"{cfg_path}: not a valid BERT configuration: {first_line(exc)}") from exc


def _read_legacy_weights(path: Path) -> dict:
    weights = path / LEGACY_WEIGHTS
    if not weights.is_file():
        raise UserError(f"model {path}: {LEGACY_CONFIG} but no {LEGACY_WEIGHTS} in this directory")
    try:
        sd = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - corrupt, truncated or not a weights file
        raise UserError(f"{weights}: cannot read the weights: {first_line(exc)}") from exc
    if isinstance(sd, dict) and isinstance(sd.get("state_dict"), dict):
        sd = sd["state_dict"]
    if (
        not isinstance(sd, dict)
        or not sd
        or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in sd.items())
    ):
        raise UserError(f"{weights}: not a state dict (a mapping of parameter names to tensors)")
    return sd


def modernize_state_dict(state_dict: dict) -> tuple[dict, int]:
    """(renamed state dict, number of LayerNorm gamma/beta renamed) for BertForMaskedLM.

    `...LayerNorm.gamma`/`.beta` -> `.weight`/`.bias`; encoder keys without the `bert.`
    prefix get it; a DataParallel `module.` prefix is dropped; the NSP head, the pooler
    and position/type id buffers are dropped.
    """
    out, renamed = {}, 0
    for key, value in state_dict.items():
        k = key[len("module.") :] if key.startswith("module.") else key
        if k.startswith(("embeddings.", "encoder.", "pooler.")):
            k = "bert." + k
        head, _, last = k.rpartition(".")
        if last in ("gamma", "beta"):
            k = f"{head}.{'weight' if last == 'gamma' else 'bias'}"
            renamed += 1
        if k.startswith(_LEGACY_IGNORED):
            continue
        out[k] = value
    return out, renamed


def wordpiece_tokenizer(vocab_file: Path, name: str, do_lower_case: bool | None, max_length: int | None):
    """BertTokenizerFast from a bare vocab.txt (one token per line, id = line number)."""
    import json

    from transformers import BertTokenizerFast

    try:
        lines = vocab_file.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{vocab_file}: cannot read the vocabulary: {first_line(exc)}") from exc
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {}
    for i, token in enumerate(lines):
        vocab[token] = i
    missing = [t for t in _LEGACY_SPECIALS if t not in vocab]
    if missing:
        raise UserError(f"{vocab_file}: no {missing[0]} token (not a BERT WordPiece vocabulary)")
    settings_path = vocab_file.parent / "tokenizer_config.json"
    settings = {}
    if settings_path.is_file():
        try:
            settings = json.loads(settings_path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{settings_path}: not a readable JSON file: {first_line(exc)}") from exc
        settings = settings if isinstance(settings, dict) else {}
    if do_lower_case is None:
        do_lower_case = bool(settings.get("do_lower_case", True))
    length = settings.get("model_max_length", settings.get("max_len", max_length))
    kwargs = {"model_max_length": int(length)} if isinstance(length, int) and length > 0 else {}
    return BertTokenizerFast(vocab=vocab, do_lower_case=bool(do_lower_case), name_or_path=name, **kwargs)


def load_legacy_bert(path: Path, name: str, *, with_tokenizer: bool, do_lower_case: bool | None):
    """(BertForMaskedLM, tokenizer or None) from an old pytorch_pretrained_bert directory."""
    from transformers import BertForMaskedLM

    config = _read_legacy_config(path)
    state, renamed = modernize_state_dict(_read_legacy_weights(path))
    emb, dec = state.get("bert.embeddings.word_embeddings.weight"), state.get("cls.predictions.decoder.weight")
    if emb is not None and dec is not None and (emb.shape != dec.shape or not torch.equal(emb, dec)):
        config.tie_word_embeddings = False  # a checkpoint with its own output embeddings
        if "cls.predictions.bias" in state:
            state.setdefault("cls.predictions.decoder.bias", state["cls.predictions.bias"])
    with quiet_transformers():
        model = BertForMaskedLM(config)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    expected = list(shapes)
    # tied weights (decoder.weight = word embeddings, decoder.bias = bias): any name but the
    # first of a shared parameter need not be in the checkpoint
    first_name: dict[int, str] = {}
    tied = set()
    for pname, param in model.named_parameters(remove_duplicate=False):
        if first_name.setdefault(id(param), pname) != pname:
            tied.add(pname)
    missing = [k for k in expected if k not in state and k not in tied]
    if missing:
        kind = "masked-LM head" if missing[0].startswith("cls.") else "encoder"
        raise UserError(
            f"model {name}: {path / LEGACY_WEIGHTS} lacks {len(missing)} {kind} weights needed for scoring, "
            f"first {missing[0]} (named as in BertForMaskedLM)"
        )
    bad = [k for k in expected if k in state and tuple(state[k].shape) != shapes[k]]
    if bad:
        raise UserError(
            f"model {name}: {bad[0]} has shape {tuple(state[bad[0]].shape)} in {LEGACY_WEIGHTS} "
            f"but {shapes[bad[0]]} per {LEGACY_CONFIG}"
        )
    unexpected = sorted(k for k in state if k not in shapes)
    stray = [k for k in unexpected if k.startswith(("bert.embeddings.", "bert.encoder.", "cls.predictions."))]
    if stray:  # e.g. more layers in the weights than in the config: the model would not be the trained one
        raise UserError(
            f"model {name}: {len(stray)} weights of {LEGACY_WEIGHTS} have no place in the model {LEGACY_CONFIG} describes, "
            f"first {stray[0]}; check num_hidden_layers and the other sizes"
        )
    model.load_state_dict({k: v for k, v in state.items() if k not in unexpected}, strict=False)
    if unexpected:
        log.warning(
            "model %s: %d weights of the checkpoint are not used by BertForMaskedLM, e.g. %s",
            name,
            len(unexpected),
            unexpected[0],
        )
    model.config._name_or_path = str(path)
    tok = None
    if with_tokenizer:
        if not (path / LEGACY_VOCAB).is_file():
            raise UserError(
                f"model {name}: old-layout checkpoint without {LEGACY_VOCAB}; name its tokenizer (e.g. bert-base-uncased)"
            )
        tok = wordpiece_tokenizer(path / LEGACY_VOCAB, str(path), do_lower_case, config.max_position_embeddings)
    log.info(
        "model %s: old pytorch_pretrained_bert checkpoint converted on load (%s, %d LayerNorm gamma/beta renamed); "
        "mlmia.models.loading.convert_checkpoint saves it in the current layout once",
        name,
        LEGACY_CONFIG,
        renamed,
    )
    return model, tok
