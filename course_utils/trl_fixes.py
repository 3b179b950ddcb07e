"""Fixes to the installed TRL that change how fast it runs; what it computes changes only by float rounding.

:mod:`course_utils.models` applies them when it is imported (every notebook imports it), and
:func:`course_utils.hardware.describe_environment` lists the ones applied, so a notebook's output says so.

**The LM head scores only the tokens a loss reads, on a CPU too.** TRL 1.16 computes per-token log-probabilities
with a fused LM head (``trl.trainer.utils.add_fused_lm_head``, used by ``GRPOTrainer``, ``SFTTrainer`` and others):
it projects hidden states onto the 49,152-token vocabulary in tiles, without materialising the logits. On CUDA and
XPU it projects only the positions whose label is not ``-100`` (the completion's tokens). On any other device it
projects every position, prompt and padding included, and masks the result afterwards, because on AWS Neuron a
number of rows that changes from batch to batch would recompile its kernels. A CPU compiles nothing, so there the
prompt's positions are pure waste: with notebook 01's 26-token prompts and 32-token completions, 45% of the head's
rows. :func:`apply_trl_fixes` makes TRL take its own compact path on a CPU. The loss is the same to the last bit
and the gradients to float32 rounding (one tensor of 272 differed, by at most 4.5e-8 against entries up to 0.73);
a GRPO step at ``cpu-ci`` sizes took 1.15-1.18x less time (``docs/BENCHMARKS.md``, "The LM head on a CPU").

**Sampling in mixed precision casts the weights once per call, not once per token.** Under ``bf16=True`` or
``fp16=True`` accelerate wraps the model's ``forward`` in its own autocast region. ``model.generate`` calls
``forward`` once per decoding step, and PyTorch empties its cache of low-precision weight copies whenever the
outermost autocast region ends, so every decoding step cast all 135M weights again. On this course's 2-core CPU
that made TRL's bf16 sampling *slower* than float32 (8 completions of 32 tokens: 5.8-6.0 s against 4.4-4.5 s).
:func:`apply_trl_fixes` runs ``GRPOTrainer``'s sampling call inside one autocast region of the same type, so the
copies are made once per call and dropped when it returns (the weights change only between calls). The sampled
tokens are identical (every op casts to the same dtype as before); the call took 2.6-2.7 s instead
(``docs/BENCHMARKS.md``, "Sampling under one autocast region").

``GRPO_COURSE_TRL_FIXES=0`` in the environment leaves TRL as installed (to compare, or to rule the fixes out
when something looks wrong).

>>> from course_utils.trl_fixes import applied_trl_fixes
>>> applied_trl_fixes()  # doctest: +SKIP
['LM head scores completion tokens only on CPU (TRL projects every position there)', 'sampling in bf16/fp16 ...']
"""

from __future__ import annotations

import functools
import inspect

import torch

from course_utils.switches import switch

#: The line of ``add_fused_lm_head`` that picks the compact path; the fix is applied only while TRL has it.
COMPACT_LINE = "compact = _use_triton(hidden_states.device)"
COMPACT_FIX = "LM head scores completion tokens only on CPU (TRL projects every position there)"
SAMPLING_FIX = "sampling in bf16/fp16 casts the weights once per call (TRL cast them at every decoding step)"
#: accelerate's mixed-precision setting -> the autocast dtype it applies to ``forward``
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: Environment variable: 0 leaves TRL as installed; unset or 1 applies the fixes.
FIXES_ENV = "GRPO_COURSE_TRL_FIXES"

_applied: list[str] = []


def _compact_on_cpu(original):
    def use_compact_path(device: torch.device) -> bool:
        return device.type == "cpu" or original(device)

    use_compact_path.course_fix = True  # marks the wrapper, so applying twice wraps once
    use_compact_path.original = original
    return use_compact_path


def _one_autocast_region(original):
    @functools.wraps(original)
    def generate_single_turn(self, *args, **kwargs):
        dtype = AUTOCAST_DTYPES.get(str(self.accelerator.mixed_precision))
        device_type = self.accelerator.device.type
        # float32, vLLM (its own engine), or already inside a region (whose end would not clear the copies): as is
        if dtype is None or self.use_vllm or torch.is_autocast_enabled(device_type):
            return original(self, *args, **kwargs)
        with torch.autocast(device_type, dtype=dtype):  # outermost: its end drops the cached copies
            return original(self, *args, **kwargs)

    generate_single_turn.course_fix = True
    generate_single_turn.original = original
    return generate_single_turn


def _apply_sampling_fix() -> None:
    from trl import GRPOTrainer

    method = GRPOTrainer._generate_single_turn
    if not getattr(method, "course_fix", False):
        # it assumes TRL samples through this one method, outside any autocast region (tests/test_trl_fixes.py)
        if "self._generate_single_turn(" not in inspect.getsource(GRPOTrainer._generate):
            return
        GRPOTrainer._generate_single_turn = _one_autocast_region(method)
    if SAMPLING_FIX not in _applied:
        _applied.append(SAMPLING_FIX)


def apply_trl_fixes() -> list[str]:
    """Apply the fixes this TRL needs (idempotent) and return their descriptions.

    A fix whose target has changed in the installed TRL is skipped, never forced: the test suite then fails
    (``tests/test_trl_fixes.py``) so that a maintainer checks whether the new TRL still needs it.
    """
    if not switch(FIXES_ENV, on="apply the course's TRL fixes", off="leave TRL as installed"):
        return list(_applied)
    from trl.trainer import utils as trl_utils

    use_triton = getattr(trl_utils, "_use_triton", None)
    if not getattr(use_triton, "course_fix", False):
        source = inspect.getsource(trl_utils)
        # `_use_triton` must be read in exactly one place in the module, the line that picks the compact path:
        # anywhere else, replacing it would also change which kernel runs.
        if use_triton is not None and COMPACT_LINE in source and source.count("_use_triton(") == 1:
            trl_utils._use_triton = _compact_on_cpu(use_triton)
            _applied.append(COMPACT_FIX)
    _apply_sampling_fix()
    return list(_applied)


def applied_trl_fixes() -> list[str]:
    """The descriptions of the fixes applied in this process (empty if none)."""
    return list(_applied)
