# mlmia: membership inference attacks on masked language models
# (Mireshghallah et al., EMNLP 2022), end to end.
from snakemake.utils import min_version, validate

min_version("9.0")


report: "report/workflow.rst"


# The embedded default unless the user names config files (Snakemake would merge them).
if not workflow.config_settings.configfiles:

    configfile: "config/config.yaml"


try:
    validate(config, "config/schema/config.schema.yaml")
except WorkflowError:
    # Snakemake's message dumps the schema; say which key is wrong, in one line.
    from mlmia.configcheck import schema_violation

    raise WorkflowError(
        schema_violation(config, "config/schema/config.schema.yaml")
    ) from None


include: "rules/common.smk"


wildcard_constraints:
    model=MODEL_PATTERN,
    energy="masked|normalized",
    experiment=name_pattern(EXPERIMENTS),


include: "rules/import.smk"
include: "rules/datasets.smk"


# The embedded world builds its corpora and trains its models; other setups bring theirs.
if "corpus" in config:

    include: "rules/corpus.smk"
    include: "rules/train.smk"


include: "rules/score.smk"
include: "rules/attack.smk"
include: "rules/exposure.smk"
include: "rules/tables.smk"
include: "rules/figures.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets(),
