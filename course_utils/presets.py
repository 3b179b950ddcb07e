"""Named hardware presets: how big a run each machine can afford.

A preset fixes the sizes a notebook's GRPO run uses (group size, batch, completion length,
steps, precision, evaluation set size). Notebooks read the fields into their own ``GRPOConfig``
so that the TRL code stays visible; the preset only decides the numbers.

``cpu-ci`` is the smallest run that still demonstrates learning; the test suite uses it.

Presets come per *task*, because a lesson's task decides how long completions are and how many
steps learning takes: ``"length"`` (notebooks 01 and 05: short free-text answers) and ``"arithmetic"``
(notebooks 02 and 04: reasoning/answer completions after a supervised warm start).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from course_utils import hardware as _hardware
from course_utils.hardware import Hardware, detect_hardware

if TYPE_CHECKING:  # torch is imported where it is used
    import torch

#: Environment variable that overrides ``preset="auto"`` (e.g. ``COURSE_PRESET=cpu-ci make lab``).
PRESET_ENV = "COURSE_PRESET"


# Why the ``gpu`` presets train in float32 although the GPU has bfloat16: on an H100, GRPO under ``bf16=True``
# (autocast over float32 weights) stopped with "CUDA error: device-side assert triggered" in 4 of 21 notebook runs
# over two leases (11, 12, and 01 at learning rates 1e-5 and 5e-6). In a script of notebook 01's recipe at lr 1e-5
# the loss stayed finite while the gradient norm turned NaN at step 15, so every weight became NaN and the next
# ``generate`` sampled from NaN probabilities. The same script in float32 ran its 40 steps clean and no slower
# (79 s): a 135M model gains nothing from bf16. docs/BENCHMARKS.md, "On a GPU", holds the runs.


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    num_generations: int  # group size G: completions sampled per prompt
    per_device_train_batch_size: int  # counts completions, not prompts
    max_completion_length: int  # tokens per completion
    max_steps: int  # optimizer steps of the notebook's main GRPO run
    n_eval: int  # held-out prompts used for before/after measurements
    eval_batch_size: int
    bf16: bool = False
    fp16: bool = False
    activation_checkpointing: bool = False
    sized_for: str = "cpu"  # the hardware kind these sizes are for: "cpu", "t4" or "gpu" (Hardware.kind)

    @property
    def prompts_per_step(self) -> int:
        return self.per_device_train_batch_size // self.num_generations

    def with_overrides(self, **changes) -> Preset:
        """A copy with some fields changed; unknown names raise a clear error."""
        unknown = sorted(set(changes) - set(asdict(self)))
        if unknown:
            raise ValueError(f"Unknown preset field(s) {unknown}; valid fields: {sorted(asdict(self))}")
        return _validated(replace(self, **changes))


#: Sizes for the length task (notebooks 01 and 05).
PRESETS: dict[str, Preset] = {
    "cpu-ci": Preset(
        name="cpu-ci",
        description="Smallest run that still shows learning; used by `make test` (2 CPU cores).",
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=32,
        max_steps=12,
        n_eval=24,
        eval_batch_size=24,
    ),
    "cpu": Preset(
        name="cpu",
        description="A laptop or CI runner without a GPU; default of `make course` there.",
        num_generations=8,
        per_device_train_batch_size=16,
        max_completion_length=32,
        max_steps=16,
        n_eval=40,
        eval_batch_size=40,
    ),
    "t4": Preset(
        name="t4",
        sized_for="t4",
        description="Colab's free T4 (16 GB, no bfloat16): fp16 mixed precision.",
        num_generations=8,
        per_device_train_batch_size=32,
        max_completion_length=48,
        max_steps=40,
        n_eval=64,
        eval_batch_size=64,
        fp16=True,
        activation_checkpointing=True,
    ),
    "gpu": Preset(
        name="gpu",
        sized_for="gpu",
        description="Ampere or newer (A100, L4, H100, RTX 30xx+): float32 (bf16 autocast gave NaN gradients).",
        num_generations=8,
        per_device_train_batch_size=64,
        max_completion_length=48,
        max_steps=40,
        n_eval=120,  # every held-out length prompt: length_prompts has 120 (a quarter of the topics)
        eval_batch_size=120,
        bf16=False,  # float32: see the note above Preset
    ),
}

#: Sizes for the arithmetic tasks (notebooks 02 and 04). A formatted one-digit answer takes about 30 tokens,
#: so 48 leaves room; four prompts per step made a correct completion appear in most steps on the CPU.
ARITHMETIC_PRESETS: dict[str, Preset] = {
    "cpu-ci": Preset(
        name="cpu-ci",
        description="Smallest run that still shows learning; used by `make test` (2 CPU cores).",
        num_generations=4,
        per_device_train_batch_size=16,
        max_completion_length=48,
        max_steps=12,
        n_eval=48,
        eval_batch_size=48,
    ),
    "cpu": Preset(
        name="cpu",
        description="A laptop or CI runner without a GPU; default of `make course` there.",
        num_generations=4,
        per_device_train_batch_size=16,
        max_completion_length=48,
        max_steps=20,  # 16 (5 + 11 in notebook 04) left stage 1's sampled format flat: -0.4 points (2026-11-29)
        n_eval=64,
        eval_batch_size=64,
    ),
    "t4": Preset(
        name="t4",
        sized_for="t4",
        description="Colab's free T4 (16 GB, no bfloat16): fp16 mixed precision.",
        num_generations=8,
        per_device_train_batch_size=32,
        max_completion_length=64,
        max_steps=30,
        n_eval=64,
        eval_batch_size=64,
        fp16=True,
    ),
    "gpu": Preset(
        name="gpu",
        sized_for="gpu",
        description="Ampere or newer (A100, L4, H100, RTX 30xx+): float32 (bf16 autocast gave NaN gradients).",
        num_generations=8,
        per_device_train_batch_size=64,
        max_completion_length=64,
        max_steps=30,
        n_eval=64,
        eval_batch_size=64,
        bf16=False,  # float32: see the note above Preset
    ),
}

TASKS: dict[str, dict[str, Preset]] = {"length": PRESETS, "arithmetic": ARITHMETIC_PRESETS}

_DEFAULT_FOR_HARDWARE = {"cpu": "cpu", "t4": "t4", "gpu": "gpu"}


_cpu_precision: list[str] = []  # what with_cpu_bf16 chose on a CPU in this process, latest last


def cpu_precision_chosen() -> str | None:
    """What :func:`with_cpu_bf16` last chose on a CPU in this process: ``"bf16 autocast"`` or ``"float32"``.

    None when it was not asked (notebooks 01-09, and any GPU run). ``record_results`` keeps it, so that a seed's
    result is filed under the precision it trained in: the same notebook trains in bf16 on one CPU and in float32
    on another (docs/PROOF.md).
    """
    return _cpu_precision[-1] if _cpu_precision else None


def with_cpu_bf16(preset: Preset, hardware: Hardware, enabled: bool = True) -> Preset:
    """``preset`` trained under bf16 autocast when ``hardware`` is a CPU on which bf16 pays (``cpu_bf16_pays``).

    That is a CPU with native bf16 (AMX or AVX512-BF16) whose bf16 matrix products measure at least
    ``course_utils.hardware.BF16_MIN_SPEEDUP`` times as fast as float32's. Elsewhere, or with ``enabled=False``, the
    preset comes back unchanged: float32 on a CPU where bf16 is emulated or slower, and the GPU presets' own
    precision. Weights stay float32 either way
    (``Hardware.load_dtype``); only the trainer's forward and backward passes run in bf16. A notebook that opts
    in has been validated in both precisions (docs/PROOF.md). ``GRPOConfig`` accepts ``bf16=True`` on a CPU only
    with ``use_cpu=True``.

    >>> cpu = Hardware(kind="cpu", device="cpu", name="CPU")
    >>> with_cpu_bf16(get_preset("cpu-ci", cpu), cpu, enabled=False).bf16
    False
    """
    if hardware.kind != "cpu" or preset.fp16:
        return preset
    chosen = preset.with_overrides(bf16=True) if enabled and _hardware.cpu_bf16_pays() else preset
    _cpu_precision.append("bf16 autocast" if chosen.bf16 else "float32")
    return chosen


def in_training_precision(preset: Preset, hardware: Hardware) -> torch.autocast:
    """A region (``with`` or a decorator) that runs model calls in the precision ``preset`` trains in.

    bf16 autocast when the preset trains under bf16 (``with_cpu_bf16``), else nothing changes. Held-out answers,
    samples and judges outside the trainer go inside it, so the base model and a trained one are measured in the
    trainings' precision: a gain is then learning, not a change of precision. An fp16 preset (a T4) gets no
    region: its measurements run in float32.

    >>> cpu = Hardware(kind="cpu", device="cpu", name="CPU")
    >>> import torch
    >>> with in_training_precision(get_preset("cpu-ci", cpu).with_overrides(bf16=True), cpu):
    ...     torch.is_autocast_enabled("cpu")
    True
    """
    import torch

    return torch.autocast(hardware.device, dtype=torch.bfloat16, enabled=preset.bf16)


def split_batch(global_batch: int, num_generations: int, num_processes: int = 1, steps_per_generation: int = 1) -> int:
    """Each process's ``per_device_train_batch_size`` for ``global_batch`` completions per optimizer step.

    GRPO's batch arithmetic, which ``GRPOConfig`` enforces, explained with the fix when it does not add up
    (``ValueError``):

    - ``per_device_train_batch_size`` counts completions, not prompts, and a group needs at least 2 of them;
    - the global batch splits evenly over the processes, so the recipe (prompts per step, group size) is the
      same on 1 or N of them;
    - one generation batch, ``per_device_train_batch_size × num_processes × steps_per_generation``
      completions (``steps_per_generation`` defaults to ``gradient_accumulation_steps``), is whole groups of
      ``num_generations``.
    """
    if num_generations < 2:
        raise ValueError(
            f"num_generations={num_generations}: GRPO compares completions of the same prompt, so it needs at "
            "least 2 per prompt. Set num_generations >= 2 (4 to 8 is typical)."
        )
    if num_processes < 1 or global_batch % num_processes:
        raise ValueError(
            f"a batch of {global_batch} completions cannot be split evenly over {num_processes} processes. "
            f"Use a process count that divides {global_batch}."
        )
    per_device = global_batch // num_processes
    generation_batch = global_batch * steps_per_generation
    if generation_batch % num_generations:
        lower = num_generations * max(1, per_device // num_generations)
        raise ValueError(
            f"per_device_train_batch_size={per_device} (× {num_processes} process(es) × "
            f"steps_per_generation={steps_per_generation}) = {generation_batch} completions, which is not a whole "
            f"number of groups of num_generations={num_generations}. The batch counts completions, not prompts: "
            f"use per_device_train_batch_size={lower} or {lower + num_generations}, or change num_generations."
        )
    return per_device


def _validated(preset: Preset) -> Preset:
    try:
        split_batch(preset.per_device_train_batch_size, preset.num_generations)
    except ValueError as error:
        raise ValueError(f"Preset {preset.name!r}: {error}") from None
    if preset.bf16 and preset.fp16:
        raise ValueError(f"Preset {preset.name!r}: choose bf16 or fp16, not both.")
    for field in ("max_completion_length", "max_steps", "n_eval", "eval_batch_size"):
        if getattr(preset, field) < 1:
            raise ValueError(f"Preset {preset.name!r}: {field} must be >= 1, got {getattr(preset, field)}.")
    return preset


def get_preset(name: str = "auto", hardware: Hardware | None = None, task: str = "length") -> Preset:
    """Return the preset ``name`` for ``task``; ``"auto"`` picks the one for this machine.

    ``"auto"`` honours the ``COURSE_PRESET`` environment variable first, so an instructor can
    switch every notebook to ``cpu-ci`` without editing them.
    """
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}. Choose one of: {', '.join(map(repr, TASKS))}.")
    presets = TASKS[task]
    hw = hardware or detect_hardware()
    from_env = name == "auto" and bool(os.environ.get(PRESET_ENV, "").strip())
    if from_env:
        name = os.environ[PRESET_ENV].strip()
    elif name == "auto":
        name = _DEFAULT_FOR_HARDWARE[hw.kind]
    if name not in presets:
        if from_env:
            raise ValueError(
                f"Unknown preset {name!r} in {PRESET_ENV}={name}: set {PRESET_ENV} to one of "
                f"{', '.join(presets)} (or unset it to pick the preset for this machine)."
            )
        raise ValueError(f"Unknown preset {name!r}. Choose one of: 'auto', {', '.join(map(repr, presets))}.")
    preset = presets[name]

    def use(other: str) -> str:  # the change to make, in the terms the learner chose the preset with
        return f"{PRESET_ENV}={other} (or unset {PRESET_ENV})" if from_env else f"preset={other!r} (or 'auto')"

    origin = f" (from {PRESET_ENV})" if from_env else ""
    if (preset.sized_for != "cpu" or preset.bf16 or preset.fp16) and hw.kind == "cpu":
        raise ValueError(f"Preset {name!r}{origin} is sized for a GPU, but no CUDA GPU was found. Use {use('cpu')}.")
    if preset.bf16 and hw.kind == "t4":
        raise ValueError(f"Preset {name!r}{origin} needs bfloat16, which {hw.name} lacks. Use {use('t4')}.")
    if preset.sized_for == "gpu" and hw.kind == "t4":
        raise ValueError(
            f"Preset {name!r}{origin} is sized for Ampere or newer (A100, L4, H100); {hw.name} has no bfloat16, "
            f"so it is older. Use {use('t4')}: fp16 mixed precision and the batches a T4 affords."
        )
    return _validated(preset)
