"""A DP model's settings, checked: its `dp:` setting (`dp_settings`), its gradient canaries
(`canary_settings`), and what DP-SGD asks of the model's other settings (`check_dp_model`). The
settings come complete from the validated config (every default written when it is read,
`mlmia.study`): a missing key is a programming error (KeyError), an unknown one a UserError.
Without torch or Opacus: the config checks (`mlmia.study.checks`) run these when the config is
read, the training job (`mlmia.training_job`) when it starts."""

from __future__ import annotations

import math

from mlmia.core.errors import UserError
from mlmia.defences.clipping import CLIPPINGS
from mlmia.models.settings import freezes_word_embeddings

ACCOUNTANTS = ("rdp", "prv", "gdp")
UNITS = ("sample", "patient")
#: faulty trainers the audit must catch (module docstring)
FAULTS = (
    "no_noise",
    "noise_tenth",
    "noise_half",
    "no_clipping",
    "clipping_double",
    "wrong_sampling_rate",
    "sampling_rate_double",
    "sampled_batch_size",
)
#: the keys of a `dp:` setting, in the order train_info.json records them
DP_KEYS = ("epsilon", "delta", "max_grad_norm", "accountant", "unit", "fault", "canaries", "clipping")
#: the keys of a DP model's `canaries` setting (those of dp_audit.gradient_canaries that the training takes)
CANARY_KEYS = ("count", "sentinels", "norm", "seed")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def dp_settings(value) -> dict:
    """A model's `dp:` setting (every key given), checked, in the order of `DP_KEYS`; a wrong key
    or value is a UserError (one line), a missing key a KeyError."""
    if not isinstance(value, dict):
        raise UserError(f"model config: dp must be a mapping such as {{epsilon: 4, max_grad_norm: 1.0}}, got {value!r}")
    unknown = sorted(set(value) - set(DP_KEYS))
    if unknown:
        raise UserError(f"model config: dp: unknown key(s) {', '.join(unknown)} (known: {', '.join(DP_KEYS)})")
    out = {key: value[key] for key in DP_KEYS}
    if out["epsilon"] is not None and not (_number(out["epsilon"]) and out["epsilon"] > 0):
        raise UserError(f"model config: dp.epsilon must be a number > 0 or null (no DP), got {out['epsilon']!r}")
    if out["delta"] is not None and not (_number(out["delta"]) and 0 < out["delta"] < 1):
        raise UserError(
            f"model config: dp.delta must lie in (0, 1) or be null (1 / training units), got {out['delta']!r}"
        )
    if not (_number(out["max_grad_norm"]) and out["max_grad_norm"] > 0):
        raise UserError(f"model config: dp.max_grad_norm must be a number > 0, got {out['max_grad_norm']!r}")
    if out["accountant"] not in ACCOUNTANTS:
        raise UserError(
            f"model config: dp.accountant must be one of {', '.join(ACCOUNTANTS)}, got {out['accountant']!r}"
        )
    if out["unit"] not in UNITS:
        raise UserError(f"model config: dp.unit must be one of {', '.join(UNITS)}, got {out['unit']!r}")
    if out["clipping"] not in ("auto", *CLIPPINGS):
        raise UserError(
            f"model config: dp.clipping must be one of auto, {', '.join(CLIPPINGS)}, got {out['clipping']!r}"
        )
    if out["clipping"] == "ghost" and out["unit"] == "patient":
        raise UserError("model config: dp.clipping ghost needs unit sample (a patient's gradient is the mean of its "
                        "lines' per-sample gradients, which ghost clipping never forms)")  # fmt: skip
    if out["fault"] is not None:
        if out["fault"] not in FAULTS:
            raise UserError(f"model config: dp.fault must be one of {', '.join(FAULTS)}, got {out['fault']!r}")
        if out["epsilon"] is None:
            raise UserError("model config: dp.fault needs an epsilon (a claim the fault breaks)")
    out["canaries"] = canary_settings(out["canaries"])
    return out


def canary_settings(value) -> dict | None:
    """A DP model's `canaries` setting (every key given: dp_audit.gradient_canaries' when the DP
    audit is configured; None: no gradient canaries), checked, in the order of `CANARY_KEYS`; a
    wrong key or value is a UserError (one line), a missing key a KeyError."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UserError(f"model config: dp.canaries must be a mapping such as {{count: 500}}, got {value!r}")
    unknown = sorted(set(value) - set(CANARY_KEYS))
    if unknown:
        raise UserError(f"model config: dp.canaries: unknown key(s) {', '.join(unknown)} "
                        f"(known: {', '.join(CANARY_KEYS)})")  # fmt: skip
    out = {key: value[key] for key in CANARY_KEYS}
    for key in ("count", "sentinels", "seed"):
        if not (isinstance(out[key], int) and not isinstance(out[key], bool) and out[key] >= 0):
            raise UserError(f"model config: dp.canaries.{key} must be an integer >= 0, got {out[key]!r}")
    if out["count"] < 2:
        raise UserError(f"model config: dp.canaries.count must be at least 2, got {out['count']}")
    if not (isinstance(out["norm"], (int, float)) and math.isfinite(out["norm"]) and out["norm"] > 0):
        raise UserError(f"model config: dp.canaries.norm must be a number > 0, got {out['norm']!r}")
    return out


def check_dp_model(cfg: dict) -> None:
    """What DP-SGD asks of a model's other settings (`cfg`: `mlmia.models.settings.TrainingSettings`'
    as a mapping, with `dp` checked by `dp_settings`): no packing (a packed block mixes lines, so no line would
    be one unit), and for ghost clipping the word embeddings frozen (BERT ties them to the output
    projection, a parameter two layers read, which ghost clipping refuses; `mlmia.defences.clipping.
    clipping_mode` checks the model itself)."""
    if cfg["pack"]:
        raise UserError("model config: pack: dp needs pack: false (a packed block mixes lines, so no line is one unit)")
    if cfg["dp"]["clipping"] == "ghost" and not freezes_word_embeddings(cfg["freeze"]):
        raise UserError("model config: dp.clipping ghost needs the tied word embeddings frozen "
                        "(freeze: [word_embeddings]): ghost clipping refuses a parameter two layers read")  # fmt: skip
