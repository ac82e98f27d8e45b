"""The scoring settings (the config's `scoring:` section) as one object, the same for every rule
that scores samples: the paper's energies (`score_shard`) and the canaries' membership scores
alike, so that a setting added here reaches them all. A rule passes what a score depends on as
its params (`as_params`: Snakemake reruns the job when they change) and the device and the batch
size, which choose how a job runs but not what it computes, as its resources (the scoring
jobs' `mlmia.study.plans.base.Resources`, the batch size as `batch_size_resource` writes it):
changing them reruns nothing. The job builds the settings back from both (`from_params`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace

from mlmia.scoring.schedules import SCHEDULE_KEYS, check_schedule

#: the settings that choose how a scoring job runs, not what it computes: a rule's resources
RUN_FIELDS = ("device", "batch_size")
#: the automatic batch size (`scoring.batch_size: null`) as a resource, which cannot be None
AUTOMATIC_BATCH = "auto"


def batch_size_resource(batch_size: int | None) -> int | str:
    """`scoring.batch_size` as a rule's resource: the integer, or `AUTOMATIC_BATCH` for null."""
    return AUTOMATIC_BATCH if batch_size is None else int(batch_size)


@dataclass(frozen=True)
class ScoringSettings:
    """What a score depends on (K, the masking patterns; seed, reduction, mask count, precision,
    truncation, and the schedule of a progressive or ELBO energy), the batch size and the device.
    The batch size and the device change no score but for floating-point rounding (a sample's masks
    are keyed on the sample, not on its batch or device, `mlmia.scoring.masks`; `precision: auto` is
    the device's own dtype): a rule passes them as resources, not params (`RUN_FIELDS`). The
    job-level keys of `scoring:` (shard size, threads, GPUs, memory) are the rules' resources too,
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
    def from_params(cls, params: Mapping, resources) -> ScoringSettings:
        """The settings a job's params carry (`as_params`: a kind without a schedule has no
        `schedule` key) with the device and the batch size of its resources (`snakemake.resources`;
        a batch size of `AUTOMATIC_BATCH` is None, the automatic: `batch_size_resource`)."""
        batch_size = resources.batch_size
        return cls(
            **{"schedule": None, **params},
            device=str(resources.device),
            batch_size=None if batch_size == AUTOMATIC_BATCH else int(batch_size),
        )

    def as_params(self) -> dict:
        """A plain mapping of what a score depends on, for a rule's params (Snakemake reruns the
        rule when it changes): the device and the batch size left out (`RUN_FIELDS`, the rule's
        resources); the kinds without a schedule leave that key out too."""
        out = {key: value for key, value in asdict(self).items() if key not in RUN_FIELDS}
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
