"""Runs that start alike sample alike: the first batch of completions, sampled once and replayed in later runs.

Notebook 11 trains six objectives from the same model, seed, data and sampling settings, so the first
generation call of every run sees the same weights, prompts and random state and samples the same completions
(the same token ids, checked on the course model). :class:`SharedFirstBatch` samples that batch once. A later
run replays it only when all of those match; it then also restores the random state that the sampling left
behind, so the run trains exactly as it would have without the replay. Any mismatch samples afresh, and so
does a trainer that generates with vLLM, whose sampler keeps a random state of its own.

>>> shared = SharedFirstBatch()
>>> for name, keywords in objectives.items():  # doctest: +SKIP
...     set_seed(seed)
...     trainer = shared.attach(GRPOTrainer(model=copy.deepcopy(model), args=GRPOConfig(..., **keywords), ...))
...     trainer.train()  # the first run samples its first batch; the others replay it
>>> shared.replayed  # doctest: +SKIP
5
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import torch
from trl import GRPOTrainer

#: The sampling settings of a GRPOConfig that a replayed batch must share with the recorded one.
SAMPLING_ARGS = ("max_completion_length", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                 "generation_kwargs", "bf16", "fp16")  # fmt: skip


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def _fingerprint(trainer: GRPOTrainer, prompt_ids: list[list[int]], num_generations: int) -> str:
    """What decides the sampled tokens: the weights, the prompts, the sampling settings and the random state."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, parameter in trainer.model.named_parameters():  # float64 sum and norm: any training step moves them
            data = parameter.detach()
            norm = torch.linalg.vector_norm(data, dtype=torch.float64).item()
            digest.update(f"{name}{tuple(data.shape)}{data.sum(dtype=torch.float64).item()!r}{norm!r}".encode())
    digest.update(repr((prompt_ids, num_generations, [getattr(trainer.args, a, None) for a in SAMPLING_ARGS])).encode())
    for value in _rng_state().values():
        tensors = value if isinstance(value, list) else [value]
        for tensor in tensors:
            digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


class SharedFirstBatch:
    """Records the first batch that one ``GRPOTrainer`` samples and replays it in later trainers that would sample
    the same one. ``replayed`` counts the runs that reused it."""

    def __init__(self) -> None:
        self._key: str | None = None
        self._batch: Any = None
        self._rng_after: dict[str, Any] | None = None
        self.replayed = 0

    def attach(self, trainer: GRPOTrainer) -> GRPOTrainer:
        """Route ``trainer``'s first sampling call through this record; returns the trainer."""
        sample = trainer._generate_single_turn  # TRL 1.16's one call to the generator (tests/test_shared_batch.py)
        first = True

        def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            nonlocal first
            # later batches, images, and vLLM (whose sampler keeps its own random state): sampled as usual
            if not first or images is not None or multimodal_fields or trainer.args.use_vllm:
                return sample(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
            first = False
            key = _fingerprint(trainer, prompt_ids, num_generations)
            if key == self._key:
                _set_rng_state(self._rng_after)  # as if the batch had just been sampled
                self.replayed += 1
                return copy.deepcopy(self._batch)
            batch = sample(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
            self._key, self._batch, self._rng_after = key, copy.deepcopy(batch), _rng_state()
            return batch

        trainer._generate_single_turn = generate
        return trainer
