"""Notebook 09's script and accelerate configs, without training (the notebook runs the script in CI)."""

from pathlib import Path

import pytest
import torch
from notebook01 import differences, grpo_config_keywords, parameters
from repo_modules import load

from course_utils.hardware import Hardware
from course_utils.presets import get_preset, split_batch

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIGS = REPO_ROOT / "configs" / "accelerate"
CPU = Hardware(kind="cpu", device="cpu", name="CPU")


def _load_script():
    return load("scripts/grpo_length.py")


def test_batch_is_split_over_processes_or_refused_with_the_fix():
    assert split_batch(64, 8, 8) == 8  # the gpu preset's 64 completions on 8 processes: 8 each, 8 groups in all
    assert split_batch(8, 4) == 8
    assert split_batch(64, 8, 16) == 4  # half a group per process is fine: TRL groups the global batch
    assert split_batch(2, 4, steps_per_generation=2) == 2  # 2 per step, 4 per generation batch: one group
    with pytest.raises(ValueError, match="cannot be split evenly over 3 processes.*divides 64"):
        split_batch(64, 8, 3)
    with pytest.raises(ValueError, match=r"= 6 completions.*groups of num_generations=4.*=4 or 8"):
        split_batch(6, 4)
    with pytest.raises(ValueError, match=r"=6 \(× 2 process\(es\).*= 12 completions.*num_generations=8"):
        split_batch(12, 8, 2)
    with pytest.raises(ValueError, match="at least 2 per prompt"):
        split_batch(8, 1)


def test_trl_refuses_what_split_batch_refuses():
    from trl import GRPOConfig

    for per_device, num_generations, trl_says in ((6, 4, "divisible by num_generations"), (8, 1, "at least 2")):
        with pytest.raises(ValueError):
            split_batch(per_device, num_generations)
        with pytest.raises(ValueError, match=trl_says):
            GRPOConfig(output_dir="unused", num_generations=num_generations, per_device_train_batch_size=per_device,
                       bf16=False, report_to="none")  # fmt: skip


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
    # "no": the launcher exports it as ACCELERATE_MIXED_PRECISION, which TrainingArguments uses when the preset sets
    # neither bf16 nor fp16, so "bf16" here would put the float32 `gpu` preset under bf16 autocast
    assert config.mixed_precision == "no" and config.num_machines == 1
    assert f"--config_file configs/accelerate/{name}.yaml" in path.read_text(), "the file shows its own command"


def test_an_earlier_runs_results_are_refused_before_anything_loads(tmp_path):
    earlier = tmp_path / "results.json"
    earlier.write_text('{"length_error_after": 12.5}')
    with pytest.raises(SystemExit, match=rf"--output-dir {tmp_path} already holds an earlier run's results.json"):
        _load_script().main(["--output-dir", str(tmp_path)])
    assert earlier.read_text() == '{"length_error_after": 12.5}'  # untouched


@pytest.mark.parametrize("fsdp", [False, True])
def test_every_process_measures_after_training_when_fsdp_shards_the_weights(fsdp):
    trainer = type("StubTrainer", (), {"is_fsdp_enabled": fsdp})()  # the one fact the decision reads
    assert _load_script().weights_sharded(trainer) is fsdp


def test_zero3_is_refused_before_anything_loads(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")  # what `accelerate launch` sets from a ZeRO-3 config
    with pytest.raises(SystemExit, match="ZeRO-3 shards the weights.*deepspeed_zero2.yaml or fsdp.yaml"):
        _load_script().main(["--preset", "cpu-ci", "--output-dir", str(tmp_path / "run")])
