"""The scoring settings (the config's `scoring:` section) as one object, the same for every rule
that scores samples: the paper's energies (`score_shard`) and the canaries' membership scores
alike, so that a setting added here reaches them all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace


@dataclass(frozen=True)
class ScoringSettings:
    """What a score depends on (K, seed, reduction, mask count, precision, truncation), the batch
    size and the device. The job-level keys of `scoring:` (shard size, threads, GPUs, memory)
    are the rules' resources, not settings of a score."""

    k: int = 10
    seed: int = 0
    reduction: str = "mean"
    mask_count: str = "ceil"
    precision: str = "auto"
    batch_size: int | None = None
    truncate: bool = False
    device: str = "auto"

    @classmethod
    def from_config(cls, scoring: Mapping, energy: str = "masked") -> ScoringSettings:
        """The settings of a validated `scoring:` section for energy kind `energy`: only the masked
        energy draws K patterns, so the others carry K = 1 and a change of K does not rescore them."""
        settings = cls(**{f.name: scoring[f.name] for f in fields(cls) if f.name in scoring})
        return settings if energy == "masked" else replace(settings, k=1)

    def as_params(self) -> dict:
        """A plain mapping, for a rule's params (Snakemake reruns the rule when it changes)."""
        return asdict(self)

    def score_arguments(self) -> dict:
        """The keyword arguments of `mlmia.scoring.energy.score_samples` that these settings fix
        (the device is the loaded model's)."""
        return {key: value for key, value in asdict(self).items() if key != "device"}
