"""A model entry's training settings checked and filled in from the config schema: a masked
language model's (`model_settings`, with the parts `freeze` may name) and the translation target's
encoder-decoder (`seq2seq_settings`). Without torch: the config checks (`mlmia.study.checks`) run
these when the config is read, the trainers when a job starts."""

from __future__ import annotations

from mlmia.core.errors import UserError
from mlmia.models.objectives import objective_names
from mlmia.terms.schema import defaults

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


def model_settings(config: dict | None) -> dict:
    """The model config with defaults filled in: the training settings of a `models:` entry,
    each defaulting to the config schema's (`mlmia.terms.schema.defaults`); unknown keys are an
    error. The `dp` setting is left as given: DP-SGD checks it (`mlmia.defences.dp_settings.dp_settings`)."""
    config = dict(config or {})
    out = defaults("models", "*")
    extra = {"init", "reference", "corpus", "text", "description", "threads", "path", "role", "kind", "label"}
    unknown = [k for k in config if k not in out and k not in extra]
    if unknown:
        raise UserError(f"model config: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(out))})")
    out.update({k: v for k, v in config.items() if k in out})
    if out["hidden_size"] % out["num_heads"]:
        raise UserError(
            f"model config: hidden_size {out['hidden_size']} is not a multiple of num_heads {out['num_heads']}"
        )
    if out["objective"] not in objective_names():
        raise UserError(
            f"model config: objective must be one of {', '.join(objective_names())}, got {out['objective']!r}"
        )
    if out["precision"] not in ("fp32", "bf16"):
        raise UserError(f"model config: precision must be fp32 or bf16, got {out['precision']!r}")
    freeze = out["freeze"]
    if not (isinstance(freeze, list) and all(part in FROZEN_PARTS for part in freeze)):
        raise UserError(f"model config: freeze must be a list of {', '.join(FROZEN_PARTS)}, got {freeze!r}")
    if out["dp"] is not None and out["precision"] != "fp32":
        raise UserError(
            "model config: precision bf16 is not offered with dp (Opacus' per-sample gradients run in fp32)"
        )
    return out


def freezes_word_embeddings(parts) -> bool:
    """Whether freezing `parts` (`FROZEN_PARTS`) leaves BERT's word embeddings, which it ties to the
    output projection, out of training ("weights": every matrix, those included)."""
    return any(part == "weights" or "bert.embeddings.word_embeddings.weight" in FROZEN_PARTS[part] for part in parts)


def seq2seq_settings(config: dict | None) -> dict:
    """The model config with the config schema's defaults of `shadow_mt.model` filled in
    (`mlmia.terms.schema.defaults`); an unknown key or a width that the heads do not divide is an error."""
    config = dict(config or {})
    out = defaults("shadow_mt", "model")  # every key of the model has one
    unknown = sorted(k for k in config if k not in out)
    if unknown:
        raise UserError(f"translation model config: unknown key(s) {', '.join(unknown)} (known: {', '.join(out)})")
    out.update(config)
    if int(out["d_model"]) % int(out["attention_heads"]):
        raise UserError(
            f"translation model config: d_model {out['d_model']} is not a multiple of attention_heads "
            f"{out['attention_heads']}"
        )
    if int(out["max_length"]) < 4:
        raise UserError(f"translation model config: max_length must be at least 4, got {out['max_length']}")
    return out
