# Two commands do all the set-up:  make run  (the main job)  and  make test.
# TORCH is the torch requirement installed before the rest (an installed torch is kept). The
# default, torch==2.13.0, is whatever build the package index serves for this platform: from the
# public index (PyPI) on Linux x86_64 that is a CUDA build (several GB; it runs on the CPU too),
# on macOS and Linux aarch64 a CPU build. One command each (README.md, "Set-up"):
#   CPU only:  make install TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
#   CUDA 12.8: make install TORCH="torch==2.9.1 --index-url https://download.pytorch.org/whl/cu128"
# `make install` ends by printing the build it holds.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
CORES ?= 2
SNAKEMAKE_ARGS ?=
# `make test` runs every test but the default-world tier: the real one-node SLURM cluster
# (marked slurm, ~6-10 min, as root; Debian's slurm-wlm and munge installed with apt-get when
# missing; they skip, printing why, only where those packages cannot be installed) and the
# long checks on the CI config (marked slow). `make test-default` runs the default-world tier:
# the paper's findings and the README's examples on the full default run (about an hour of 2
# cores). `make test-fast` leaves out the slow, slurm and default-world tiers and the tests that
# run the workflow's jobs end to end on the CI config (marked workflow, ~3 min).
PYTEST_ARGS ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SHOW_TORCH = $(BIN)/python -c "import torch; cuda = torch.version.cuda; print('torch', torch.__version__, '(CUDA ' + cuda + ' build)' if cuda else '(CPU build)', '- GPU seen' if torch.cuda.is_available() else '- no GPU seen')"

.PHONY: run test test-default test-fast bench gpu-check install lint format config-docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e ".[dev,slurm]"
	@$(SHOW_TORCH)
	touch $(STAMP)

install: $(STAMP)
	@$(SHOW_TORCH)

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) $(SNAKEMAKE_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-default: $(STAMP)
	$(BIN)/python -m pytest -m default_world $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not slurm and not workflow"

# Every speed figure of docs/benchmark_run.md in one run (about 6 min on 2 cores; add
# BENCH_ARGS=--default-run to also time the default run and a one-table rerun, +15 min).
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python bench/run_benchmarks.py $(BENCH_ARGS)

# The GPU check (bench/gpu_check.py; docs/testing.md#the-gpu-check): the gpu-marked tests, CUDA
# against CPU energies, BERT-base-shaped bf16 and fp32 scoring with MFU, the batch size from free
# memory and the out-of-memory halving on real memory; one line per item in results/gpu_check.txt.
# About 2 minutes on one H100 (estimated; not yet run on a GPU). The script exits 0: all pass;
# 1: an item failed; 3: no GPU here (needs a CUDA build of torch in .venv: see TORCH above);
# make itself then exits 2. Bare, without the venv: PYTHONPATH=src python3 bench/gpu_check.py
GPU_CHECK_ARGS ?=
gpu-check: $(STAMP)
	$(BIN)/python bench/gpu_check.py $(GPU_CHECK_ARGS)

# The same checks run in `make test` (tests/test_lint.py).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
	$(BIN)/snakefmt Snakefile rules

# config/README.md, written from the config schemas (tests/test_config_docs.py fails when it is stale).
config-docs: $(STAMP)
	$(BIN)/python -m mlmia.study.config_docs > config/README.md.tmp && mv config/README.md.tmp config/README.md

clean:
	rm -rf results/* .snakemake
	git checkout -- results/README.md
