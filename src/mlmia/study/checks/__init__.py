"""The whole config checked before any job, in one place: `check_config(config)` on a validated
config (the schema's defaults filled in), callable without Snakemake (`Study.from_config` runs it,
then the checks that need the study: `mlmia.study.checks.training` and `Study._check`).

Every refusal is a `UserError` of one line naming the config key as the user wrote it
(`config key canaries.reference: ...`); nothing is built or written. The checks, by concern:

- `names`: the run's folder, the names the studies reserve, every key that names a model or a
  sample table, a reference that is its own target or saw the patients;
- `models`: where each model comes from, and no setting that cannot apply to it;
- `world`: the sections only the embedded world reads (a reference pool without it), the samples it
  can give, the sources, the neighbour subsample;
- `studies`: the canaries', d-exposure's, the DP audit's, the imported scores' and the audit cards' settings;
- `shadow`: the shadow protocols' subcorpora and sizes, derived from the config (no corpus built);
- `training` (on the study): the trainer's own rules on every trained model's settings.

A check that needs a user's file is made by the first job that reads it (docs/bad_inputs.md).
"""

from __future__ import annotations

from mlmia.study.checks.models import check_models
from mlmia.study.checks.names import (
    check_attacks,
    check_extraction,
    check_named_models,
    check_reserved,
    check_run,
)
from mlmia.study.checks.shadow import check_shadow, check_shadow_mt
from mlmia.study.checks.studies import (
    check_audit_cards,
    check_canaries,
    check_dexposure,
    check_dp_audit,
    check_imported,
)
from mlmia.study.checks.world import (
    check_extraction_sources,
    check_neighbour_subsample,
    check_references,
    check_samples,
    check_world_sections,
)

#: the config's checks, in the order they run (what a later one reads, an earlier one has checked)
CHECKS = (
    check_run,
    check_reserved,
    check_world_sections,
    check_references,
    check_models,
    check_named_models,
    check_attacks,
    check_extraction,
    check_extraction_sources,
    check_samples,
    check_neighbour_subsample,
    check_dp_audit,
    check_canaries,
    check_dexposure,
    check_imported,
    check_audit_cards,
    check_shadow,
    check_shadow_mt,
)


def check_config(config: dict) -> None:
    """Refuse, in one line naming the key, what the schema cannot say of a validated config."""
    for check in CHECKS:
        check(config)
