"""Notebook 09's script and accelerate configs, without training (the notebook runs the script in CI)."""

from pathlib import Path

import pytest
import torch
from notebook01 import differences, grpo_config_keywords, parameters
from repo_modules import load

from course_utils.hardware import Hardware
from course_utils.presets import get_preset

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS = REPO_ROOT / "configs" / "accelerate"
CPU = Hardware(kind="cpu", device="cpu", name="CPU")


def _load_script():
    return load("scripts/grpo_length.py")


def test_batch_is_split_over_processes_or_refused_with_the_fix():
    script = _load_script()
    assert script.per_process_batch(64, 8) == 8
    assert script.per_process_batch(8, 1) == 8
    with pytest.raises(ValueError, match="cannot be split evenly over 3 processes.*divides 64"):
        script.per_process_batch(64, 3)


def test_defaults_are_notebook_01s_recipe(tmp_path):
    script = _load_script()
    args = script.parse_args(["--output-dir", str(tmp_path)])
    params = parameters()
    assert (args.preset, args.model_name, args.seed, args.report_to, args.target_chars) == (
        params["preset"], params["model_name"], params["seed"], params["report_to"], params["target_chars"],
    )  # fmt: skip
    preset = get_preset("cpu", CPU)
    config = script.build_config(args, preset, CPU, per_device=preset.per_device_train_batch_size)
    # what a script launched on N processes adds (use_cpu also turns dataloader_pin_memory off)
    script_only = {"output_dir", "use_cpu", "dataloader_pin_memory", "model_init_kwargs", "use_vllm", "vllm_mode"}
    assert differences(config, grpo_config_keywords(preset), ignore=script_only) == {}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_use_vllm_without_a_gpu_is_refused_before_anything_loads():
    with pytest.raises(SystemExit, match="needs a CUDA GPU and the vllm package"):
        _load_script().main(["--use-vllm"])


def test_a_tracker_that_is_not_installed_is_refused_before_anything_loads(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "trackio" else object())
    with pytest.raises(SystemExit, match='--report-to: report_to="trackio" needs the trackio package'):
        _load_script().main(["--report-to", "trackio"])


@pytest.mark.parametrize(
    ("name", "distributed_type"), [("ddp", "MULTI_GPU"), ("deepspeed_zero2", "DEEPSPEED"), ("fsdp", "FSDP")]
)
def test_accelerate_configs_parse(name, distributed_type):
    from accelerate.commands.config.config_args import load_config_from_file

    path = CONFIGS / f"{name}.yaml"
    config = load_config_from_file(str(path))
    assert config.distributed_type.value == distributed_type
    assert config.mixed_precision == "bf16" and config.num_machines == 1
    assert f"--config_file configs/accelerate/{name}.yaml" in path.read_text(), "the file shows its own command"
