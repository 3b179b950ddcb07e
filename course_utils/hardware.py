"""What machine are we on, and which numeric precision does it support?"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where it is used, so the version list below works without it
    import torch


@dataclass(frozen=True)
class Hardware:
    """The accelerator the course will train on.

    kind is one of ``"cpu"``, ``"t4"`` (a CUDA GPU without bfloat16, such as Colab's free T4)
    or ``"gpu"`` (a CUDA GPU with bfloat16: Ampere, Ada, Hopper and later).
    """

    kind: str
    device: str
    name: str

    @property
    def bf16(self) -> bool:
        """The GPU computes in bfloat16 (Ampere and newer). The course's presets still train in float32 there:
        bf16 autocast gave NaN gradients on an H100 (the note above ``course_utils.presets.Preset``)."""
        return self.kind == "gpu"

    @property
    def fp16(self) -> bool:
        """Train with float16 mixed precision (float32 master weights, float16 autocast)."""
        return self.kind == "t4"

    @property
    def load_dtype(self) -> torch.dtype:
        """The dtype to load weights in: float32 everywhere; bf16 and fp16 are autocast (mixed precision).

        Weights stored in bfloat16 keep 8 bits of mantissa, so most AdamW steps at lr = 1e-5 (about 1e-5 per
        weight) round away: on an H100 the warm starts and GRPO of notebooks 02, 04 and 10 then changed
        nothing (docs/BENCHMARKS.md, "On a GPU"). fp16 mixed precision (T4) needs float32 weights too.
        """
        import torch

        return torch.float32


def cpu_has_native_bf16() -> bool:
    """AMX or AVX512-BF16: the instructions that let a CPU multiply bfloat16 matrices without emulating them.

    Having them is not enough for bf16 to pay: see :func:`cpu_bf16_pays`.
    """
    import torch

    return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())


#: bf16 autocast is used on a CPU only where its matrix products measure at least this much faster than float32's.
BF16_MIN_SPEEDUP = 1.2


@functools.cache
def cpu_bf16_speedup() -> float:
    """bf16 matrix products' speed over float32's on this CPU, measured once per process (about 0.1 s).

    One layer of the course model (256 tokens through its 576 -> 1536 projection) on one core, alternated seven
    times, the best time of each. 0.0 on a CPU without native bf16 (:func:`cpu_has_native_bf16`), where bf16 is
    emulated. Measured, because the instructions alone do not tell: AVX512-BF16 made notebook 11's steps 1.3x
    faster on an AMD EPYC, and ran these products at about 0.55x float32's speed on an Intel Xeon whose AMX its
    virtual machine hides (docs/BENCHMARKS.md, "bf16 only where it pays").

    >>> cpu_bf16_speedup() >= 0.0
    True
    """
    if not cpu_has_native_bf16():
        return 0.0
    import torch

    numbers = torch.Generator().manual_seed(0)  # its own generator: a notebook's seeded random stream is untouched
    x, w = torch.randn(256, 576, generator=numbers), torch.randn(1536, 576, generator=numbers)
    best = {torch.float32: float("inf"), torch.bfloat16: float("inf")}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core's rate: a ratio that another busy process cannot skew
    try:
        with torch.inference_mode():
            pairs = {dtype: (x.to(dtype), w.to(dtype)) for dtype in best}
            for a, b in pairs.values():  # warm-up: oneDNN builds its kernels on first use
                torch.nn.functional.linear(a, b)
            for _ in range(7):
                for dtype, (a, b) in pairs.items():
                    start = time.perf_counter()
                    torch.nn.functional.linear(a, b)
                    best[dtype] = min(best[dtype], time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return best[torch.float32] / best[torch.bfloat16]


def cpu_bf16_pays() -> bool:
    """bf16 autocast is worth it on this CPU: native bf16 measured at least ``BF16_MIN_SPEEDUP`` times float32."""
    return cpu_bf16_speedup() >= BF16_MIN_SPEEDUP


def detect_hardware() -> Hardware:
    """Look at the machine: CUDA with or without bfloat16, else the CPU."""
    import torch

    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        kind = "gpu" if torch.cuda.is_bf16_supported(including_emulation=False) else "t4"
        return Hardware(kind=kind, device="cuda", name=name)
    return Hardware(kind="cpu", device="cpu", name=f"CPU ({torch.get_num_threads()} threads)")


#: The libraries whose versions decide a run's numbers: bug reports, benchmark records and ``make doctor``.
KEY_LIBRARIES = ("torch", "transformers", "trl", "datasets", "peft", "accelerate")


def library_versions(packages: tuple[str, ...] = KEY_LIBRARIES) -> dict[str, str | None]:
    """``{package: installed version}``, ``None`` for one that is not installed.

    >>> library_versions(("surely-not-a-package",))
    {'surely-not-a-package': None}
    """
    import importlib.metadata

    versions: dict[str, str | None] = {}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def describe_environment(hardware: Hardware | None = None) -> str:
    """One line per fact a bug report needs: Python, key library versions, hardware and precision."""
    import platform

    hardware = hardware or detect_hardware()
    lines = [f"python {platform.python_version()} on {platform.system()} {platform.machine()}"]
    lines += [f"{name} {version or '(not installed)'}" for name, version in library_versions().items()]
    precision = "fp16 mixed" if hardware.fp16 else "fp32"  # the presets' choice: fp32 on Ampere+ too
    capable = ", bf16 capable" if hardware.bf16 else ""  # a preset named in the notebook says its own precision
    if hardware.kind == "cpu" and cpu_has_native_bf16():  # notebooks that opt in train under bf16 autocast if it pays
        verdict = "pays" if cpu_bf16_pays() else "does not pay: float32"
        capable = f", native bf16 at {cpu_bf16_speedup():.2f}x float32's speed, {verdict}"
    lines.append(f"hardware: {hardware.kind} ({hardware.name}{capable}), its default preset trains in {precision}")
    from course_utils.trl_fixes import applied_trl_fixes, apply_trl_fixes

    try:  # applied here too: notebooks print this before importing course_utils.models, which applies them
        fixes = apply_trl_fixes()
    except ImportError:  # TRL missing or broken: nothing to fix, and the bug report still prints
        fixes = applied_trl_fixes()
    lines += [f"fix applied: {fix} (course_utils.trl_fixes)" for fix in fixes]
    return "\n".join(lines)
