"""Fixes to the installed TRL: two change only how fast it runs (what it computes changes by float rounding at
most), one makes a documented setting work, and one to transformers makes its stop strings cheap to set up.

:mod:`course_utils.models` applies them when it is imported (every notebook imports it), and
:func:`course_utils.hardware.describe_environment` applies and lists them, so a notebook's output says so even when
it prints its environment before loading a model.

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

**``stop_strings`` in ``GRPOConfig.generation_kwargs`` stop a turn.** TRL 1.16 passes ``generation_kwargs`` into
the ``GenerationConfig`` it samples with, but calls ``model.generate`` without the tokenizer, and transformers needs
the tokenizer to find a stop string in the tokens, so it raises instead (TRL issue #2820, "Support stop strings list
for GRPO", is open). :func:`apply_trl_fixes` passes the trainer's tokenizer to that one call when the config holds
stop strings; without them, and with vLLM (which takes its own ``stop``), TRL runs as installed. Transformers pads a
row that stopped early, and TRL keeps a completion up to its first end-of-sequence token, so the padding would stay
in the completion unless padding ends a sequence: with a tokenizer whose pad token does not, the fix stops with an
error that says what to set. SmolLM2 pads with its end of turn, ``<|im_end|>``, so a stopped turn ends
``</tool_call><|im_end|>``, as a call turn ends in its chat template (notebook 10, section 6). The row that stops
last in a batch gets no padding; the fix adds the end-of-turn token to it (:func:`end_stopped_turns`), so every
stopped turn ends the same way, and the tool's reply always follows a finished turn.

**Transformers builds a stop string's token table once per vocabulary, not once per call.** Every ``generate``
call with ``stop_strings`` makes a ``StopStringCriteria``, which matches the stop strings against each of the
49,152 tokens. Transformers caches that table, keyed by the vocabulary's tokens in the order
``tokenizer.get_vocab()`` lists them, and a fast tokenizer lists them in a different order on every call, so the
cache never hits: 0.3 s a call on this course's CPU, 10 s of notebook 10 in CI mode (sampled with py-spy). The
table is indexed by token id, so the order does not change it; :func:`apply_trl_fixes` keys the cache by the
vocabulary sorted by id, and a call then takes 0.08 s. The table, and so every stop, is identical
(``docs/BENCHMARKS.md``, "Stop strings' token table built once per vocabulary").

``GRPO_COURSE_TRL_FIXES=0`` in the environment leaves TRL and transformers as installed (to compare, or to rule
the fixes out when something looks wrong); ``stop_strings`` then raise transformers' error as TRL 1.16 does, so
notebook 10 needs ``stop_after_call = False`` with it.

>>> from course_utils.trl_fixes import applied_trl_fixes
>>> applied_trl_fixes()  # doctest: +SKIP
['LM head scores completion tokens only on CPU (TRL projects every position there)', 'sampling in bf16/fp16 ...']
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from course_utils.switches import switch

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: The line of ``add_fused_lm_head`` that picks the compact path; the fix is applied only while TRL has it.
COMPACT_LINE = "compact = _use_triton(hidden_states.device)"
COMPACT_FIX = "LM head scores completion tokens only on CPU (TRL projects every position there)"
SAMPLING_FIX = "sampling in bf16/fp16 casts the weights once per call (TRL cast them at every decoding step)"
STOP_STRINGS_FIX = "stop_strings in generation_kwargs stop a turn (TRL does not give generate the tokenizer they need)"
STOP_TABLE_FIX = ("transformers' stop strings: each token table built once per vocabulary (its cache never hit: "
                  "a fast tokenizer lists its vocabulary in a new order at every call)")
#: The call in ``GRPOTrainer._generate_single_turn`` the stop-strings fix gives the tokenizer to.
GENERATE_CALL = "unwrapped_model.generate("
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


def _stop_strings_with_tokenizer(original):
    @functools.wraps(original)
    def generate_single_turn(self, *args, **kwargs):
        stops = getattr(self.generation_config, "stop_strings", None)
        if not stops or self.use_vllm or self.use_transformers_continuous_batching:  # TRL's path, as installed
            return original(self, *args, **kwargs)
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)  # a processor holds one
        check_stop_padding(tokenizer, self.eos_token_ids, "GRPOConfig(generation_kwargs={'stop_strings': ...})")
        model = self.accelerator.unwrap_model(self.model_wrapped)  # the object TRL calls generate on
        own = model.__dict__.get("generate")  # an instance's own generate, if it has one, is put back after
        model.generate = functools.partial(model.generate, tokenizer=tokenizer)
        try:
            completion_ids, logprobs = original(self, *args, **kwargs)
        finally:
            if own is None:
                del model.generate
            else:
                model.generate = own
        return end_stopped_turns(completion_ids, tokenizer, stops, self.generation_config.max_new_tokens), logprobs

    generate_single_turn.course_fix = True
    generate_single_turn.original = original
    return generate_single_turn


def _vocabulary_by_id(original):
    @functools.wraps(original)
    def clean_and_embed_tokens_with_cache(self, token_list, token_indices, tokenizer):
        # the cache key holds both tuples as given; sorted by id they are the same at every call, and the table,
        # indexed by id, does not depend on their order
        order = sorted(range(len(token_indices)), key=token_indices.__getitem__)
        by_id = tuple(token_list[i] for i in order), tuple(token_indices[i] for i in order)
        return original(self, *by_id, tokenizer)

    clean_and_embed_tokens_with_cache.course_fix = True
    clean_and_embed_tokens_with_cache.original = original
    return clean_and_embed_tokens_with_cache


def _apply_stop_table_fix() -> None:
    from transformers.generation import stopping_criteria

    criteria = stopping_criteria.StopStringCriteria
    method = criteria.clean_and_embed_tokens_with_cache
    if not getattr(method, "course_fix", False):
        # only while the cache is keyed by the lists it is given (tests/test_trl_fixes.py)
        if list(inspect.signature(method).parameters) != ["self", "token_list", "token_indices", "tokenizer"]:
            return
        if "cache_key = (\n            token_list,\n            token_indices," not in inspect.getsource(method):
            return
        criteria.clean_and_embed_tokens_with_cache = _vocabulary_by_id(method)
    if STOP_TABLE_FIX not in _applied:
        _applied.append(STOP_TABLE_FIX)


def check_stop_padding(tokenizer: PreTrainedTokenizerBase, end_ids: Sequence[int], setting: str) -> None:
    """Stop strings need a pad token that ends a sequence: a row that stops early is padded, and everything up to
    the first end-of-sequence token is kept, padding included. Raises a ValueError naming ``setting`` otherwise."""
    if tokenizer.pad_token_id not in end_ids:
        raise ValueError(
            f"{setting} needs a pad token that ends a sequence: a turn that stops early is padded, and everything "
            f"up to the first end-of-sequence token is kept as the completion, so the padding would be too. This "
            f"tokenizer pads with {tokenizer.pad_token!r}. Set tokenizer.pad_token = tokenizer.eos_token first, "
            f"or leave the stop strings out."
        )


def end_stopped_turns(
    rows: list[list[int]], tokenizer: PreTrainedTokenizerBase, stop_strings: Sequence[str], max_new_tokens: int
) -> list[list[int]]:
    """Each row that ends on a stop string, with room left, gets the end-of-sequence token after it.

    ``generate`` pads a row that stopped before the others, and with padding that ends a sequence such a row ends
    ``</tool_call><|im_end|>``; the last row of a batch to stop gets no padding. With the token added, every
    stopped turn ends the same way, the way the chat template ends a call turn. ``tool_rollouts`` does the same.

    >>> ids = tokenizer("<tool_call>{}</tool_call>", add_special_tokens=False)["input_ids"]  # doctest: +SKIP
    >>> end_stopped_turns([ids], tokenizer, ["</tool_call>"], 96)[0] == ids + [tokenizer.eos_token_id]  # doctest: +SKIP
    True
    """
    ended = []
    for row in rows:
        stopped = bool(row) and row[-1] != tokenizer.eos_token_id and len(row) < max_new_tokens
        if stopped and tokenizer.decode(row).endswith(tuple(stop_strings)):
            row = [*row, tokenizer.eos_token_id]
        ended.append(row)
    return ended


def installed_method(method):
    """The method as TRL installed it, under however many of this module's wrappers."""
    while getattr(method, "course_fix", False):
        method = method.original
    return method


def _apply_sampling_fixes() -> None:
    from trl import GRPOTrainer

    method = GRPOTrainer._generate_single_turn
    if not getattr(method, "course_fix", False):
        # both assume TRL samples through this one method (tests/test_trl_fixes.py): the autocast region, that it
        # does so outside any region; the stop strings, that it calls generate there once, without the tokenizer
        if "self._generate_single_turn(" not in inspect.getsource(GRPOTrainer._generate):
            return
        source = inspect.getsource(method)
        if source.count(GENERATE_CALL) == 1 and "tokenizer=" not in source:
            method = _stop_strings_with_tokenizer(method)
        GRPOTrainer._generate_single_turn = _one_autocast_region(method)
    stop_strings_fixed = getattr(GRPOTrainer._generate_single_turn.original, "course_fix", False)
    for fix in [SAMPLING_FIX, *([STOP_STRINGS_FIX] if stop_strings_fixed else [])]:
        if fix not in _applied:
            _applied.append(fix)


def apply_trl_fixes() -> list[str]:
    """Apply the fixes this TRL (and transformers) needs (idempotent) and return their descriptions.

    A fix whose target has changed in the installed library is skipped, never forced: the test suite then fails
    (``tests/test_trl_fixes.py``) so that a maintainer checks whether the new version still needs it.
    """
    if not switch(FIXES_ENV, on="apply the course's library fixes", off="leave TRL and transformers as installed"):
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
    _apply_sampling_fixes()
    _apply_stop_table_fix()
    return list(_applied)


def applied_trl_fixes() -> list[str]:
    """The descriptions of the fixes applied in this process (empty if none)."""
    return list(_applied)
