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


# Every study's rules, each rule file once: the tables spec's groups (the workflow's own rules:
# sample tables in, scores, attacks, metrics, tables, figures, report), the embedded world's and
# each configured study's, as their plans name them (mlmia.study.plans; docs/adding_a_study.md).
STUDY_PLANS = STUDY.plans()

for rule_file in STUDY.rule_files(STUDY_PLANS):

    include: rule_file


rule all:
    default_target: True
    input:
        STUDY.plan("all").targets,
