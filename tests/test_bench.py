"""The benchmark's recipes are what they claim to be, its timing still finds TRL's methods, and its report
states the ratios it measured and reproduces the committed results."""

import inspect
import json
import time

import pytest
from notebook01 import differences, grpo_config_keywords
from repo_modules import REPO_ROOT, load

from course_utils.hardware import Hardware
from course_utils.presets import get_preset

bench = load("benchmarks/bench.py")  # puts the repository on sys.path and imports the benchmark's modules
recipes, report, step_cost = bench.recipes, bench.report, bench.step_cost
RESULTS = REPO_ROOT / "benchmarks" / "results"

CPU = Hardware(kind="cpu", device="cpu", name="CPU")


def test_trl_defaults_change_only_sizes_and_precision(tmp_path):
    """Against a GRPOConfig built with nothing set: the installed TRL's defaults, not numbers copied here."""
    from trl import GRPOConfig

    preset = get_preset("cpu", CPU)
    config, lora, _ = recipes.recipe_config("trl-defaults", preset, str(tmp_path), 3, CPU)
    assert lora is None
    defaults = GRPOConfig(output_dir=str(tmp_path), use_cpu=True)
    for name in ("learning_rate", "beta", "activation_checkpointing", "loss_type", "scale_rewards", "temperature"):
        assert getattr(config, name) == getattr(defaults, name), name
    for name in ("num_generations", "per_device_train_batch_size", "max_completion_length"):  # the preset's sizes
        assert getattr(config, name) == getattr(preset, name), name
    assert not config.bf16  # this CPU preset trains in float32


def test_course_recipe_is_notebook_01s(tmp_path):
    preset = get_preset("cpu", CPU)
    config, lora, reward = recipes.recipe_config("course", preset, str(tmp_path), preset.max_steps, CPU)
    assert lora is None
    assert differences(config, grpo_config_keywords(preset), ignore={"output_dir", "disable_tqdm"}) == {}
    assert reward([[{"role": "assistant", "content": "x" * 50}]], completion_ids=[[1]]) == [0.0]


def test_hf_course_recipe(tmp_path):
    config, lora, reward = recipes.recipe_config("hf-course", get_preset("cpu", CPU), str(tmp_path), 3, CPU)
    assert (config.learning_rate, config.num_generations, config.max_completion_length) == (2e-5, 8, 96)
    assert (config.per_device_train_batch_size, config.gradient_accumulation_steps) == (8, 2)
    assert (lora.r, lora.lora_alpha, lora.target_modules) == (16, 32, "all-linear")
    assert reward([[{"role": "assistant", "content": "x" * 40}]]) == [-10]
    with pytest.raises(ValueError, match="Unknown recipe"):
        recipes.recipe_config("mine", get_preset("cpu", CPU), str(tmp_path), 3, CPU)


def _cost(recipe, seconds):
    return {"recipe": recipe, "num_generations": 8, "completions_per_step": 16, "max_completion_length": 32,
            "seconds_per_step": seconds, "steps_per_second": 1 / seconds, "completions_per_second": 16 / seconds,
            "share_generate": 0.5, "share_score": 0.2, "share_loss_backward_optimizer": 0.3, "peak_memory_mb": 2000,
            "memory_kind": "RSS", "activation_checkpointing": False, "beta": 0.04}  # fmt: skip


def _learn(recipe, reached, seconds):
    return {"recipe": recipe, "base_error": 90.0, "reached": reached, "steps_to_halve": 6 if reached else None,
            "seconds_to_halve": seconds if reached else None, "final_step": 6, "final_seconds": seconds,
            "final_error": 40.0 if reached else 80.0, "cap_minutes": 12.0}  # fmt: skip


def _render(costs, learns, levers=(), probe=()):
    run = {"started": "t", "command": "c", "environment": {"trl": "1.16.0"}, "step_cost": list(costs),
           "levers": list(levers), "generation_probe": list(probe), "time_to_learn": list(learns)}  # fmt: skip
    return report.render(run)


def test_report_states_the_measured_ratios():
    markdown = _render([_cost("trl-defaults", 20.0), _cost("course", 10.0)],
                       [_learn("course", True, 120.0), _learn("hf-course", False, 720.0)])  # fmt: skip
    assert "steps per second: **2.00×**" in markdown
    assert "time to learn: **< 0.17** (the published course recipe had not halved the error after 12.0 min)" in markdown
    both = _render([_cost("trl-defaults", 20.0)], [_learn("course", True, 60.0), _learn("hf-course", True, 240.0)])
    assert "Course / the published course recipe, time to learn: **0.25** (both recipes reached the goal)" in both
    assert "TRL defaults, time to learn" not in both  # not measured, not reported


def test_report_compares_with_trl_defaults_and_does_not_claim_a_ratio_the_course_did_not_reach():
    learns = [_learn("course", True, 60.0), _learn("trl-defaults", False, 600.0), _learn("hf-course", True, 120.0)]
    markdown = _render([_cost("trl-defaults", 20.0), _cost("course", 10.0)], learns)
    expected = "Course / TRL defaults, time to learn: **< 0.10** (TRL defaults had not halved the error after 10.0 min)"
    assert expected in markdown
    stuck = _render([], [_learn("course", False, 600.0), _learn("hf-course", True, 120.0)])
    assert "Course /" not in stuck


def _lever(name, seconds):
    return {**_cost("course", seconds), "lever": name}


def test_levers_table_states_speedups_against_the_course_recipe_and_defaults():
    costs = [_cost("trl-defaults", 20.0), _cost("course", 16.0)]
    levers = [_lever("beta=0 (no reference model)", 8.0), _lever("LoRA r=16", 32.0)]
    markdown = _render(costs, [], levers)
    assert "| beta=0 (no reference model) | 8.00 | 2.00× |" in markdown
    assert "| LoRA r=16 | 32.00 | 0.50× |" in markdown
    assert "Fastest lever (beta=0 (no reference model)) / TRL defaults, steps per second: **2.50×**" in markdown
    probe = ["| completions per call | precision | seconds | per 16 completions |", "| 16 | float32 | 7.0 | 7.0 |"]
    assert "### Generation alone" in _render(costs, [], [], probe)
    assert "### Generation alone" not in markdown


def test_committed_results_are_what_the_report_writes_from_their_json(tmp_path):
    run = json.loads((RESULTS / "latest.json").read_text())
    markdown = report.write(tmp_path, run)
    assert markdown == (RESULTS / "latest.md").read_text()
    for name in ("latest.md", "latest.json", "step_cost.csv", "levers.csv", "time_to_learn.csv"):
        assert (tmp_path / name).read_bytes() == (RESULTS / name).read_bytes(), name


def test_trl_still_has_the_private_methods_the_step_cost_times():
    from trl import GRPOTrainer

    for name in step_cost.TIMED_METHODS:
        assert callable(getattr(GRPOTrainer, name, None)), f"GRPOTrainer.{name} is gone: update step_cost.py"
    outer = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "self._generate(" in outer, "scoring time = outer - inner assumes the outer method calls _generate"


class _FakeTrainer:
    def _generate(self, prompts):
        time.sleep(0.02)
        return [p + "!" for p in prompts]

    def _generate_and_score_completions(self, batch):
        completions = self._generate(batch)
        time.sleep(0.01)  # scoring
        return completions


def test_private_method_timing_adds_up_and_fails_loudly_when_a_method_is_gone():
    trainer = _FakeTrainer()
    seconds = step_cost.time_private_methods(trainer)
    assert trainer._generate_and_score_completions(["a", "b"]) == ["a!", "b!"]  # the wrapped methods still work
    assert trainer._generate_and_score_completions(["c"]) == ["c!"]
    generating, both = seconds["_generate"], seconds["_generate_and_score_completions"]
    assert 0.04 <= generating < both, seconds  # two calls of >= 0.02 s each, inside the outer ones
    assert both - generating >= 0.02, seconds  # two calls of >= 0.01 s of scoring
    with pytest.raises(RuntimeError, match=r"TRL .* has no \['_generate'\].*update TIMED_METHODS"):
        step_cost.time_private_methods(object(), names=("_generate",))


def test_the_command_line_parses_each_flag():
    args = bench.parse_args([])
    assert args.preset == "auto" and not (args.skip_learn or args.skip_levers or args.skip_probe)
    flags = ["--skip-learn", "--skip-levers", "--skip-probe", "--steps", "1", "--out", "x", "--preset", "cpu"]
    args = bench.parse_args(flags)
    assert (args.skip_learn, args.skip_levers, args.skip_probe, args.steps, args.out) == (True, True, True, 1, "x")
    args = bench.parse_args(["--lever", "num_iterations=2", "--lever", "bf16 + num_iterations=2"])
    assert args.lever == ["num_iterations=2", "bf16 + num_iterations=2"]


def test_an_unknown_lever_is_refused_with_the_names_to_choose_from(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--lever", "bf17"])
    message = capsys.readouterr().err
    assert "argument --lever: invalid choice: 'bf17'" in message
    assert "(choose from 'beta=0 (no reference model)', 'bf16 autocast'" in message


def test_levers_change_only_what_they_name(tmp_path):
    preset = get_preset("cpu", CPU)
    base, _, _ = recipes.recipe_config("course", preset, str(tmp_path), 3, CPU)
    for lever in recipes.LEVERS:
        config, lora, _ = recipes.recipe_config("course", preset, str(tmp_path), 3, CPU, lever)
        changed = {k for k in ("beta", "bf16", "activation_checkpointing", "num_iterations", "steps_per_generation",
                               "use_cpu") if getattr(config, k) != getattr(base, k)}  # fmt: skip
        expected = set() if recipes.LEVERS[lever] == "lora" else set(recipes.LEVERS[lever])
        if "bf16" in expected:
            expected.add("use_cpu")
        assert changed == expected, lever
        assert (lora is not None) == (recipes.LEVERS[lever] == "lora")
        assert config.learning_rate == base.learning_rate and config.num_generations == base.num_generations
    with pytest.raises(ValueError, match="levers apply to the course recipe"):
        recipes.recipe_config("trl-defaults", preset, str(tmp_path), 3, CPU, "LoRA r=16")


def test_bf16_lever_only_where_the_hardware_has_native_bf16(monkeypatch):
    monkeypatch.setattr(recipes, "cpu_has_native_bf16", lambda: False)
    assert not any("bf16" in n for n in recipes.applicable_levers(CPU))
    monkeypatch.setattr(recipes, "cpu_has_native_bf16", lambda: True)
    assert "bf16 autocast" in recipes.applicable_levers(CPU)
    gpu = Hardware(kind="gpu", device="cuda", name="H100")
    assert not any("bf16" in n for n in recipes.applicable_levers(gpu)), "GPU presets already train in bf16"


@pytest.mark.slow  # loads the course model
def test_generation_probe_prints_a_row_per_batch_and_precision(capsys):
    probe = load("benchmarks/generation_probe.py")
    assert probe.main(["--batches", "2", "--tokens", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 2 |")]
    assert [r.split(" | ")[1] for r in rows] == ["float32", "bf16 autocast"]
    assert "read bandwidth" in out and all(r.endswith("% |") for r in rows)  # each row's share of the bound


@pytest.mark.slow  # loads the course model
def test_generation_probe_profile_names_the_operators_and_times_each_product_shape(capsys):
    probe = load("benchmarks/generation_probe.py")
    assert probe.main(["--batches", "2", "--tokens", "2", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "| `aten::mm` |" in out  # the products are among the largest operators even at 2 rows
    products = [line.split(" | ")[0] for line in out.splitlines() if line.startswith("| 576 x ")]
    assert "| 576 x 49152" in products  # the LM head: 576 hidden units onto the 49,152-token vocabulary
    assert "ms per decoding step of 2 completions" in out


def test_decode_bound_is_the_slower_of_memory_and_compute():
    probe = load("benchmarks/generation_probe.py")
    # 0.54 GB of weights at 10 GB/s: 54 ms a step; 2 x 135e6 x 16 operations at 100 GFLOP/s: 43.2 ms; 16 / 0.054
    assert round(probe.decode_bound_tokens_per_second(540e6, 135e6, 16, 10.0, 100.0), 1) == 296.3
    # at 64 completions compute takes over: 2 x 135e6 x 64 / 100e9 = 172.8 ms a step; 64 / 0.1728
    assert round(probe.decode_bound_tokens_per_second(540e6, 135e6, 64, 10.0, 100.0), 1) == 370.4
