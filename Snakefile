# mlmia: membership inference attacks on masked language models
# (Mireshghallah et al., EMNLP 2022), end to end.
import os
import sys
from pathlib import Path

from snakemake.utils import min_version

from mlmia.core.errors import UserError
from mlmia.study.study import Study

min_version("9.0")
# Set for envs/mlmia.post-deploy.sh, which installs the library from here into the
# --use-conda environment (the workflow sets this variable; it reads none from the user).
os.environ.update(MLMIA_WORKFLOW_DIR=workflow.basedir)


report: "report/workflow.rst"


# The embedded default unless the user names config files (Snakemake would merge them).
if not workflow.config_settings.configfiles:

    configfile: "config/config.yaml"


# The study: the config validated against the schemas (defaults filled in, one line per
# error), its tables spec, and what every table, figure and finding needs.
CONFIG_FILES = workflow.config_settings.configfiles or [
    Path(workflow.basedir) / "config" / "config.yaml"
]
try:
    STUDY = Study.from_config(config, workflow.basedir, CONFIG_FILES)
except UserError as exc:
    # one line, as every step's errors, and no Snakemake frame: the config is the user's
    print(f"mlmia: error: {exc}", file=sys.stderr)
    sys.exit(1)


include: "rules/common.smk"


wildcard_constraints:
    model=MODEL_PATTERN,
    energy=name_pattern(ENERGY_KINDS),
    experiment=name_pattern(STUDY.experiments),


include: "rules/import.smk"
include: "rules/datasets.smk"


# The embedded world builds its corpora and trains its models; other setups bring theirs.
if "corpus" in config:

    include: "rules/corpus.smk"
    include: "rules/shadow.smk"
    include: "rules/canaries.smk"

    if "shadow_mt" in config:

        include: "rules/shadow_mt.smk"


# The studies beyond the world's (mlmia.study.plans): PHI extraction reads the embedded world's
# patients, or the spans a user names; d-exposure tags the embedded world's notes, or the i2b2
# 2014 XML a config names.
STUDY_PLANS = STUDY.plans()

if "extraction" in STUDY_PLANS:

    include: "rules/extraction.smk"


if "dexposure" in STUDY_PLANS:

    include: "rules/dexposure.smk"


include: "rules/train.smk"
include: "rules/score.smk"
include: "rules/zoo.smk"
include: "rules/attack.smk"
include: "rules/exposure.smk"
include: "rules/tables.smk"
include: "rules/figures.smk"
include: "rules/report.smk"
include: "rules/dp.smk"


rule all:
    default_target: True
    input:
        STUDY.plan("all").targets,
