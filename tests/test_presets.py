import re

import pytest

from course_utils.hardware import Hardware
from course_utils.presets import PRESET_ENV, PRESETS, TASKS, get_preset

CPU = Hardware("cpu", "cpu", "test CPU")
T4 = Hardware("t4", "cuda", "Tesla T4")
AMPERE = Hardware("gpu", "cuda", "NVIDIA A100")


ALL = [(task, name) for task, presets in TASKS.items() for name in presets]


@pytest.mark.parametrize(("task", "name"), ALL)
def test_every_preset_holds_whole_groups(task, name):
    p = TASKS[task][name]
    assert p.name == name
    assert p.per_device_train_batch_size % p.num_generations == 0
    assert p.num_generations >= 2 and p.prompts_per_step >= 1
    assert not (p.bf16 and p.fp16)


@pytest.mark.parametrize(("hardware", "expected"), [(CPU, "cpu"), (T4, "t4"), (AMPERE, "gpu")])
def test_auto_picks_the_preset_for_the_hardware(hardware, expected, monkeypatch):
    monkeypatch.delenv(PRESET_ENV, raising=False)
    assert get_preset("auto", hardware).name == expected


@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_has_the_same_preset_names_and_precision(task):
    assert list(TASKS[task]) == list(PRESETS)
    for name, p in TASKS[task].items():
        assert (p.bf16, p.fp16) == (PRESETS[name].bf16, PRESETS[name].fp16)


def test_task_selects_its_presets_and_unknown_tasks_are_named(monkeypatch):
    monkeypatch.delenv(PRESET_ENV, raising=False)
    assert get_preset("cpu-ci", CPU, task="arithmetic") == TASKS["arithmetic"]["cpu-ci"]
    assert get_preset("cpu-ci", CPU) == PRESETS["cpu-ci"]
    with pytest.raises(ValueError, match="Unknown task 'maths'.*'arithmetic'"):
        get_preset("cpu", CPU, task="maths")


@pytest.mark.parametrize("hardware", [CPU, T4, AMPERE], ids=lambda h: h.kind)
@pytest.mark.parametrize(("task", "name"), ALL)
def test_a_preset_runs_in_a_precision_the_hardware_has_or_names_one_that_does(task, name, hardware):
    """Whatever the presets' numbers become, get_preset never hands out a precision the machine lacks,
    and when it refuses, the preset its message suggests is one this machine can run."""
    try:
        preset = get_preset(name, hardware, task=task)
    except ValueError as refusal:
        suggested = re.search(r"Use preset='([\w-]+)'", str(refusal))
        assert suggested, f"refusing {name!r} on {hardware.name} must name a preset to use: {refusal}"
        preset = get_preset(suggested.group(1), hardware, task=task)
    assert not preset.bf16 or hardware.bf16, f"{preset.name!r} trains in bf16 on {hardware.name}"
    assert not preset.fp16 or hardware.device == "cuda", f"{preset.name!r} trains in fp16 on {hardware.name}"


def test_environment_variable_overrides_auto(monkeypatch):
    monkeypatch.setenv(PRESET_ENV, "cpu-ci")
    assert get_preset("auto", CPU).name == "cpu-ci"
    assert get_preset("cpu", CPU).name == "cpu"  # an explicit name wins


def test_unknown_preset_lists_the_choices():
    with pytest.raises(ValueError, match="Unknown preset 'cpu_ci'.*'cpu-ci'"):
        get_preset("cpu_ci", CPU)


def test_gpu_preset_on_cpu_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="no CUDA GPU was found. Use preset='cpu'"):
        get_preset("gpu", CPU)
    with pytest.raises(ValueError, match="sized for Ampere or newer.*Use preset='t4'"):
        get_preset("gpu", T4)


def test_a_bf16_preset_is_refused_where_bfloat16_is_missing(monkeypatch):
    """The gpu presets train in float32 (bf16 autocast gave NaN gradients on an H100); one made bf16 again
    still runs only where the GPU has bfloat16."""
    monkeypatch.setitem(PRESETS, "gpu-bf16", PRESETS["gpu"].with_overrides(name="gpu-bf16", bf16=True))
    with pytest.raises(ValueError, match="'gpu-bf16' needs bfloat16, which Tesla T4 lacks. Use preset='t4'"):
        get_preset("gpu-bf16", T4)
    assert get_preset("gpu-bf16", AMPERE).bf16


def test_batch_must_hold_whole_groups():
    whole_groups = (
        r"Preset 'cpu-ci': per_device_train_batch_size=10 .* not a whole number of groups of num_generations=4"
    )
    with pytest.raises(ValueError, match=whole_groups):
        PRESETS["cpu-ci"].with_overrides(per_device_train_batch_size=10)
    with pytest.raises(ValueError, match="at least 2 per prompt"):
        PRESETS["cpu-ci"].with_overrides(num_generations=1, per_device_train_batch_size=8)
    assert PRESETS["cpu-ci"].with_overrides(max_steps=3).max_steps == 3


def test_unknown_override_is_named():
    with pytest.raises(ValueError, match=r"Unknown preset field\(s\) \['num_generation'\]"):
        PRESETS["cpu"].with_overrides(num_generation=4)


def test_the_bug_report_lists_the_trl_fixes_before_any_model_is_loaded():
    """Notebooks print it in their first cells, before course_utils.models (whose import applies the fixes)."""
    import subprocess
    import sys

    code = (
        "from course_utils.hardware import describe_environment; import sys; print(describe_environment()); "
        "print('models imported:', 'course_utils.models' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    from course_utils.trl_fixes import applied_trl_fixes

    assert "models imported: False" in out
    assert all(f"fix applied: {fix} " in out for fix in applied_trl_fixes()) and applied_trl_fixes()
    without_trl = "import sys; sys.modules['trl'] = None; " + code  # TRL unimportable: the report still prints
    out = subprocess.run([sys.executable, "-c", without_trl], capture_output=True, text=True, check=True).stdout
    assert "hardware: " in out and "fix applied" not in out


def test_bug_report_lists_each_key_library_and_says_which_is_missing(monkeypatch):
    import importlib.metadata

    from course_utils import hardware
    from course_utils.trl_fixes import applied_trl_fixes

    def version(name):  # peft missing, everything else at 1.0
        if name == "peft":
            raise importlib.metadata.PackageNotFoundError(name)
        return "1.0"

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
    lines = hardware.describe_environment(hardware.Hardware("cpu", "cpu", "CPU (2 threads)")).splitlines()
    assert lines[1:7] == [f"{p} {'(not installed)' if p == 'peft' else '1.0'}" for p in hardware.KEY_LIBRARIES]
    hardware_line = "hardware: cpu (CPU (2 threads)), its default preset trains in fp32"
    fixes = [f"fix applied: {fix} (course_utils.trl_fixes)" for fix in applied_trl_fixes()]
    assert lines[7:] == [hardware_line, *fixes], "the hardware, then each library fix this process applied"
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)  # AMX or AVX512-BF16: said, with its speed
    for speedup, verdict in ((1.9, "pays"), (0.55, "does not pay: float32")):
        monkeypatch.setattr(hardware, "cpu_bf16_speedup", lambda speedup=speedup: speedup)
        native = hardware.describe_environment(hardware.Hardware("cpu", "cpu", "CPU (2 threads)")).splitlines()[7]
        assert native == (f"hardware: cpu (CPU (2 threads), native bf16 at {speedup:.2f}x float32's speed, {verdict}), "
                          "its default preset trains in fp32")


def test_bf16_speedup_is_measured_only_where_bf16_is_native(monkeypatch):
    from course_utils import hardware

    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
    assert hardware.cpu_bf16_speedup.__wrapped__() == 0.0  # emulated bf16: not measured, never chosen
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)
    import torch

    before = torch.get_rng_state()
    assert hardware.cpu_bf16_speedup.__wrapped__() > 0.0  # a measured ratio, whatever this CPU's is
    assert torch.equal(torch.get_rng_state(), before), "the probe must not move a notebook's seeded random stream"


@pytest.mark.parametrize(("speedup", "pays"), [(0.0, False), (0.55, False), (1.19, False), (1.2, True), (3.0, True)])
def test_bf16_pays_from_the_measured_speedup(speedup, pays, monkeypatch):
    """0.55: AVX512-BF16 on an Intel Xeon whose AMX is hidden (measured); at 1.2 bf16 autocast is worth its cost."""
    from course_utils import hardware

    monkeypatch.setattr(hardware, "cpu_bf16_speedup", lambda: speedup)
    assert hardware.cpu_bf16_pays() is pays


@pytest.mark.parametrize(("task", "name"), ALL)
def test_every_presets_held_out_set_exists_for_its_task(task, name):
    """The gpu preset once asked for 128 held-out length prompts where 120 exist: every GPU run of 01 failed."""
    from course_utils.data import arithmetic_problems, length_prompts

    p = TASKS[task][name]
    if task == "length":
        data = length_prompts(n_test=p.n_eval)
    else:  # notebooks 02 and 04 train on 36 one-digit sums ("add1", 100 distinct)
        data = arithmetic_problems("add1", n_train=36, n_test=p.n_eval)
    assert len(data["test"]) == p.n_eval


@pytest.mark.parametrize("hardware", [CPU, T4, AMPERE], ids=lambda h: h.kind)
def test_weights_load_in_a_dtype_where_a_small_adamw_step_still_moves_them(hardware):
    """bf16 and fp16 are autocast: weights stored in bfloat16 round an lr = 1e-5 step away (seen on an H100:
    notebooks 02, 04 and 10 learned nothing), so every machine keeps float32 master weights."""
    import torch

    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 64).to(hardware.load_dtype)
    before = layer.weight.detach().clone()
    layer(torch.randn(8, 64, dtype=hardware.load_dtype)).square().mean().backward()
    torch.optim.AdamW(layer.parameters(), lr=1e-5).step()  # Adam's first step moves each weight by ~lr
    assert (layer.weight != before).float().mean() > 0.99


@pytest.mark.parametrize(
    ("hardware", "pays", "enabled", "expected"),
    [
        (CPU, True, True, True),  # bf16 measured faster than float32: the trainer runs under bf16 autocast
        (CPU, False, True, False),  # emulated, or native but slower than float32: stays float32
        (CPU, True, False, False),  # the notebook's cpu_bf16=False: float32
        (AMPERE, True, True, False),  # the gpu preset stays float32 (NaN gradients under bf16 on an H100)
    ],
)
def test_cpu_bf16_only_on_a_cpu_where_it_pays(hardware, pays, enabled, expected, monkeypatch):
    from course_utils import hardware as hardware_module
    from course_utils.presets import with_cpu_bf16

    monkeypatch.setattr(hardware_module, "cpu_bf16_pays", lambda: pays)
    preset = get_preset("cpu-ci" if hardware.kind == "cpu" else "gpu", hardware)
    changed = with_cpu_bf16(preset, hardware, enabled=enabled)
    assert changed.bf16 is expected and not changed.fp16
    assert changed.num_generations == preset.num_generations and changed.name == preset.name  # sizes untouched


def test_cpu_bf16_leaves_an_fp16_preset_alone(monkeypatch):
    from course_utils import hardware as hardware_module
    from course_utils.presets import with_cpu_bf16

    monkeypatch.setattr(hardware_module, "cpu_bf16_pays", lambda: True)
    fp16 = get_preset("cpu-ci", CPU).with_overrides(fp16=True)
    assert with_cpu_bf16(fp16, CPU) == fp16  # choosing both is refused by the preset's validation


@pytest.mark.parametrize(("bf16", "fp16"), [(True, False), (False, False), (False, True)])
def test_in_training_precision_autocasts_only_a_bf16_preset(bf16, fp16):
    import torch

    from course_utils.presets import in_training_precision

    preset = get_preset("cpu-ci", CPU).with_overrides(bf16=bf16, fp16=fp16)
    layer = torch.nn.Linear(4, 4)
    region = in_training_precision(preset, CPU)
    with region:
        inside = layer(torch.ones(1, 4)).dtype
    assert inside == (torch.bfloat16 if bf16 else torch.float32)  # fp16 (a T4) measures in float32
    assert layer(torch.ones(1, 4)).dtype == torch.float32  # the region ended with the block

    @in_training_precision(preset, CPU)
    def measured():
        return layer(torch.ones(1, 4)).dtype

    assert measured() == measured() == inside  # a decorator too, entered once per call
