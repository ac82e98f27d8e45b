"""A model entry's training settings, checked: a masked language model's (`TrainingSettings`,
with the parts `freeze` may name) and the translation target's encoder-decoder
(`seq2seq_settings`). The settings come complete from the validated config (every default
written when it is read, `mlmia.study`): a key missing here is a programming error (KeyError),
an unknown one a UserError. Without torch: the config checks (`mlmia.study.checks`) run these
when the config is read, the trainers when a job starts."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, fields

from mlmia.core.errors import UserError
from mlmia.models.objectives import objective_names

#: what `freeze` may name, and the parameters of a BertForMaskedLM each holds ("weights": every
#: matrix, embeddings included, so that only the biases and LayerNorms train: BitFit, Ben Zaken,
#: Goldberg and Ravfogel, ACL 2022; under DP, Bu, Wang, Zha and Karypis, "Differentially private
#: bias-term fine-tuning of foundation models", ICML 2024)
FROZEN_PARTS = {
    "word_embeddings": ("bert.embeddings.word_embeddings.weight",),
    "embeddings": ("bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
                   "bert.embeddings.token_type_embeddings.weight"),
    "weights": (),
}  # fmt: skip
#: keys of a model entry (or a training spec's settings) that are not the trainer's: where the
#: model comes from and what the workflow names it
NOT_TRAINING = frozenset({"init", "reference", "corpus", "text", "description", "threads", "path", "role", "kind",
                          "label"})  # fmt: skip
#: the keys of a translation model's settings (`shadow_mt.model`)
SEQ2SEQ_KEYS = ("d_model", "encoder_layers", "decoder_layers", "attention_heads", "ffn_dim", "max_length", "dropout",
                "epochs", "batch_size", "lr", "warmup_ratio", "weight_decay", "seed")  # fmt: skip


@dataclass(frozen=True)
class TrainingSettings:
    """A masked language model's training settings (a `models:` entry's, resolved: every key
    given), in the order train_info.json records them. `dp`: the entry's `dp` setting as given
    (None: no DP); DP-SGD's settings check it (`mlmia.defences.dp_settings.dp_settings`, which
    `mlmia.training_job` applies once)."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_length: int
    position_offset: int
    pack: bool
    crop_prob: float
    crop_max: int
    block_size: int
    dropout: float
    epochs: float
    batch_size: int
    lr: float
    warmup_ratio: float
    weight_decay: float
    objective: str
    mlm_probability: float
    seed: int
    precision: str
    freeze: list
    dp: dict | None

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_entry(cls, entry: Mapping) -> TrainingSettings:
        """The settings of a resolved model entry (where the model comes from, `NOT_TRAINING`,
        left aside); an unknown key or a wrong value is a UserError, a missing key a KeyError."""
        known = cls.keys()
        unknown = [k for k in entry if k not in known and k not in NOT_TRAINING]
        if unknown:
            raise UserError(
                f"model config: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})"
            )
        out = cls(**{key: copy.deepcopy(entry[key]) for key in known})
        out.check()
        return out

    def check(self) -> None:
        """The rules the schema cannot say: the heads divide the width, a known objective and
        precision, the parts `freeze` may name, no bf16 with dp."""
        if self.hidden_size % self.num_heads:
            raise UserError(
                f"model config: hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}"
            )
        if self.objective not in objective_names():
            raise UserError(
                f"model config: objective must be one of {', '.join(objective_names())}, got {self.objective!r}"
            )
        if self.precision not in ("fp32", "bf16"):
            raise UserError(f"model config: precision must be fp32 or bf16, got {self.precision!r}")
        freeze = self.freeze
        if not (isinstance(freeze, list) and all(part in FROZEN_PARTS for part in freeze)):
            raise UserError(f"model config: freeze must be a list of {', '.join(FROZEN_PARTS)}, got {freeze!r}")
        if self.dp is not None and self.precision != "fp32":
            raise UserError(
                "model config: precision bf16 is not offered with dp (Opacus' per-sample gradients run in fp32)"
            )

    def as_dict(self) -> dict:
        """The settings as a fresh mapping, in the fields' order (what train_info.json records)."""
        return {key: copy.deepcopy(getattr(self, key)) for key in self.keys()}


def freezes_word_embeddings(parts) -> bool:
    """Whether freezing `parts` (`FROZEN_PARTS`) leaves BERT's word embeddings, which it ties to the
    output projection, out of training ("weights": every matrix, those included)."""
    return any(part == "weights" or "bert.embeddings.word_embeddings.weight" in FROZEN_PARTS[part] for part in parts)


def seq2seq_settings(config: Mapping) -> dict:
    """A translation model's settings (`shadow_mt.model`, resolved: every key given), checked: an
    unknown key or a width that the heads do not divide is a UserError, a missing key a KeyError."""
    unknown = sorted(k for k in config if k not in SEQ2SEQ_KEYS)
    if unknown:
        raise UserError(
            f"translation model config: unknown key(s) {', '.join(unknown)} (known: {', '.join(SEQ2SEQ_KEYS)})"
        )
    out = {key: config[key] for key in SEQ2SEQ_KEYS}
    if int(out["d_model"]) % int(out["attention_heads"]):
        raise UserError(
            f"translation model config: d_model {out['d_model']} is not a multiple of attention_heads "
            f"{out['attention_heads']}"
        )
    if int(out["max_length"]) < 4:
        raise UserError(f"translation model config: max_length must be at least 4, got {out['max_length']}")
    return out
