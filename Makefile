# Two commands do all the set-up:  make run  (the main job)  and  make test.
# TORCH picks the torch build installed before the rest. The default is the CPU build
# (torch==2.13.0, which lies on disk here); on a GPU machine pass the CUDA build you want,
# e.g. `make run TORCH="torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124"`,
# or install torch into .venv yourself first: an installed torch is kept.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
CORES ?= 2
SNAKEMAKE_ARGS ?=
# The default run's findings test (marked slow, ~20 min) is left out of the default `make test`;
# `make test-all` runs everything. The SLURM tests (marked slurm, ~6-10 min: a one-node cluster
# as root, Debian's slurm-wlm and munge installed with apt-get when missing) are in `make test`;
# they skip, printing why, only where those packages cannot be installed.
PYTEST_ARGS ?= -m "not slow"
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-all install lint format clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e ".[dev,slurm]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) $(SNAKEMAKE_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-all: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile rules

format: $(STAMP)
	$(BIN)/snakefmt Snakefile rules

clean:
	rm -rf results/* .snakemake logs benchmarks
	git checkout -- results/README.md
