#!/usr/bin/env bash
# Snakemake runs this inside the new environment once it is created (--use-conda). It
# installs the mlmia library from the checkout the workflow runs from: the Snakefile puts
# that directory in MLMIA_WORKFLOW_DIR (a relative path in envs/mlmia.yaml would be read
# from .snakemake/conda/, where Snakemake copies the environment file).
set -euo pipefail
: "${MLMIA_WORKFLOW_DIR:?the Snakefile sets MLMIA_WORKFLOW_DIR to the workflow's directory}"
python -m pip install --no-deps --editable "$MLMIA_WORKFLOW_DIR"
