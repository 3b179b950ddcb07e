"""The benchmark's recipes are what they claim to be, and its report states the ratios it measured."""

import pytest
from repo_modules import load

from course_utils.hardware import Hardware
from course_utils.presets import get_preset

bench = load("benchmarks/bench.py")

CPU = Hardware(kind="cpu", device="cpu", name="CPU")


def test_trl_defaults_change_only_sizes_and_precision(tmp_path):
    preset = get_preset("cpu", CPU)
    config, lora, _ = bench.recipe_config("trl-defaults", preset, str(tmp_path), 3, CPU)
    assert lora is None
    assert (config.learning_rate, config.beta, config.activation_checkpointing) == (1e-6, 0.0, True)
    assert (config.num_generations, config.per_device_train_batch_size) == (8, 16)
    assert config.max_completion_length == preset.max_completion_length and not config.bf16


def test_course_recipe_is_notebook_01s(tmp_path):
    config, lora, reward = bench.recipe_config("course", get_preset("cpu", CPU), str(tmp_path), 3, CPU)
    assert lora is None
    assert (config.learning_rate, config.beta, config.activation_checkpointing) == (5e-5, 0.04, False)
    assert reward([[{"role": "assistant", "content": "x" * 50}]], completion_ids=[[1]]) == [0.0]


def test_hf_course_recipe(tmp_path):
    config, lora, reward = bench.recipe_config("hf-course", get_preset("cpu", CPU), str(tmp_path), 3, CPU)
    assert (config.learning_rate, config.num_generations, config.max_completion_length) == (2e-5, 8, 96)
    assert (config.per_device_train_batch_size, config.gradient_accumulation_steps) == (8, 2)
    assert (lora.r, lora.lora_alpha, lora.target_modules) == (16, 32, "all-linear")
    assert reward([[{"role": "assistant", "content": "x" * 40}]]) == [-10]
    with pytest.raises(ValueError, match="Unknown recipe"):
        bench.recipe_config("mine", get_preset("cpu", CPU), str(tmp_path), 3, CPU)


def _cost(recipe, seconds):
    return {"recipe": recipe, "num_generations": 8, "completions_per_step": 16, "max_completion_length": 32,
            "seconds_per_step": seconds, "steps_per_second": 1 / seconds, "completions_per_second": 16 / seconds,
            "share_generate": 0.5, "share_score": 0.2, "share_loss_backward_optimizer": 0.3, "peak_memory_mb": 2000,
            "memory_kind": "RSS", "activation_checkpointing": False, "beta": 0.04}  # fmt: skip


def _learn(recipe, reached, seconds):
    return {"recipe": recipe, "base_error": 90.0, "reached": reached, "steps_to_halve": 6 if reached else None,
            "seconds_to_halve": seconds if reached else None, "final_step": 6, "final_seconds": seconds,
            "final_error": 40.0 if reached else 80.0, "cap_minutes": 12.0}  # fmt: skip


def test_report_states_the_measured_ratios():
    report = bench.render("2026-11-22 06:00", "python benchmarks/bench.py", {"trl": "1.16.0"},
                          [_cost("trl-defaults", 20.0), _cost("course", 10.0)],
                          [_learn("course", True, 120.0), _learn("hf-course", False, 720.0)])  # fmt: skip
    assert "steps per second: **2.00×**" in report
    assert "time to learn: **< 0.17** (the published course recipe had not halved the error after 12.0 min)" in report
    both = bench.render(
        "t", "c", {}, [_cost("trl-defaults", 20.0)], [_learn("course", True, 60.0), _learn("hf-course", True, 240.0)]
    )
    assert "Course / the published course recipe, time to learn: **0.25** (both recipes reached the goal)" in both
    assert "TRL defaults, time to learn" not in both  # not measured, not reported


def test_report_compares_with_trl_defaults_and_does_not_claim_a_ratio_the_course_did_not_reach():
    learns = [_learn("course", True, 60.0), _learn("trl-defaults", False, 600.0), _learn("hf-course", True, 120.0)]
    report = bench.render("t", "c", {}, [_cost("trl-defaults", 20.0), _cost("course", 10.0)], learns)
    expected = "Course / TRL defaults, time to learn: **< 0.10** (TRL defaults had not halved the error after 10.0 min)"
    assert expected in report
    stuck = bench.render("t", "c", {}, [], [_learn("course", False, 600.0), _learn("hf-course", True, 120.0)])
    assert "Course /" not in stuck


def _lever(name, seconds):
    return {**_cost("course", seconds), "lever": name}


def test_levers_table_states_speedups_against_the_course_recipe_and_defaults():
    costs = [_cost("trl-defaults", 20.0), _cost("course", 16.0)]
    levers = [_lever("beta=0 (no reference model)", 8.0), _lever("LoRA r=16", 32.0)]
    report = bench.render("t", "c", {}, costs, [], levers)
    assert "| beta=0 (no reference model) | 8.00 | 2.00× |" in report
    assert "| LoRA r=16 | 32.00 | 0.50× |" in report
    assert "Fastest lever (beta=0 (no reference model)) / TRL defaults, steps per second: **2.50×**" in report
    probe = ["| completions per call | precision | seconds | per 16 completions |", "| 16 | float32 | 7.0 | 7.0 |"]
    assert "### Generation alone" in bench.render("t", "c", {}, costs, [], [], probe)
    assert "### Generation alone" not in report


def test_levers_change_only_what_they_name(tmp_path):
    preset = get_preset("cpu", CPU)
    base, _, _ = bench.recipe_config("course", preset, str(tmp_path), 3, CPU)
    for lever in bench.LEVERS:
        config, lora, _ = bench.recipe_config("course", preset, str(tmp_path), 3, CPU, lever)
        changed = {k for k in ("beta", "bf16", "activation_checkpointing", "num_iterations", "steps_per_generation",
                               "use_cpu") if getattr(config, k) != getattr(base, k)}  # fmt: skip
        expected = set() if bench.LEVERS[lever] == "lora" else set(bench.LEVERS[lever])
        if "bf16" in expected:
            expected.add("use_cpu")
        assert changed == expected, lever
        assert (lora is not None) == (bench.LEVERS[lever] == "lora")
        assert config.learning_rate == base.learning_rate and config.num_generations == base.num_generations
    with pytest.raises(ValueError, match="levers apply to the course recipe"):
        bench.recipe_config("trl-defaults", preset, str(tmp_path), 3, CPU, "LoRA r=16")


def test_bf16_lever_only_where_the_hardware_has_native_bf16(monkeypatch):
    monkeypatch.setattr(bench, "cpu_has_native_bf16", lambda: False)
    assert not any("bf16" in n for n in bench.applicable_levers(CPU))
    monkeypatch.setattr(bench, "cpu_has_native_bf16", lambda: True)
    assert "bf16 autocast" in bench.applicable_levers(CPU)
    gpu = Hardware(kind="gpu", device="cuda", name="H100")
    assert not any("bf16" in n for n in bench.applicable_levers(gpu)), "GPU presets already train in bf16"


def test_generation_probe_prints_a_row_per_batch_and_precision(capsys):
    probe = load("benchmarks/generation_probe.py")
    assert probe.main(["--batches", "2", "--tokens", "2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 2 |")]
    assert [r.split(" | ")[1] for r in rows] == ["float32", "bf16 autocast"]
