"""The scoring settings (the config's `scoring:` section) as one object, the same for every rule
that scores samples: the paper's energies (`score_shard`) and the canaries' membership scores
alike, so that a setting added here reaches them all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace

from mlmia.scoring.schedules import SCHEDULE_KEYS, check_schedule


@dataclass(frozen=True)
class ScoringSettings:
    """What a score depends on (K, the masking patterns; seed, reduction, mask count, precision,
    truncation, and the schedule of a progressive or ELBO energy), the batch size and the device.
    The job-level keys of `scoring:` (shard size, threads, GPUs, memory) are the rules' resources,
    not settings of a score. Every setting is given: they come from the validated config, which
    carries every default (`from_config`)."""

    patterns: int
    seed: int
    reduction: str
    mask_count: str
    precision: str
    batch_size: int | None
    truncate: bool
    device: str
    #: the energy kind's schedule (`mlmia.scoring.schedules.SCHEDULE_KEYS`: scoring.progressive,
    #: scoring.elbo); None for the kinds without one
    schedule: Mapping | None

    @classmethod
    def from_config(cls, scoring: Mapping, energy: str = "masked") -> ScoringSettings:
        """The settings of a validated `scoring:` section (every key given) for energy kind
        `energy`: only the masked energy draws K patterns, so the others carry K = 1 and a change
        of K does not rescore them; a progressive or ELBO energy carries its schedule
        (`scoring.<kind>`), the others none."""
        settings = cls(**{f.name: scoring[f.name] for f in fields(cls) if f.name != "schedule"}, schedule=None)
        if energy == "masked":
            return settings
        schedule = check_schedule(energy, scoring[energy]) if energy in SCHEDULE_KEYS else None
        return replace(settings, patterns=1, schedule=schedule)

    @classmethod
    def from_params(cls, params: Mapping) -> ScoringSettings:
        """The settings a rule's params carry (`as_params`: a kind without a schedule has no
        `schedule` key)."""
        return cls(**{"schedule": None, **params})

    def as_params(self) -> dict:
        """A plain mapping, for a rule's params (Snakemake reruns the rule when it changes); the
        kinds without a schedule leave the key out, so their params are what they always were."""
        out = asdict(self)
        if out["schedule"] is None:
            del out["schedule"]
        else:
            out["schedule"] = dict(out["schedule"])
        return out

    def score_arguments(self) -> dict:
        """The keyword arguments of `mlmia.scoring.energy.score_samples` that these settings fix,
        every one of them (the device is the loaded model's): a job relies on no keyword default."""
        out = asdict(self)
        del out["device"]
        if out["schedule"] is not None:
            out["schedule"] = dict(out["schedule"])
        return out
