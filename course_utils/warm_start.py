"""A short supervised warm start: show the model the answer format before GRPO, and train it only once.

Notebook 02 builds this step in the open with TRL's ``SFTTrainer`` and explains why it is needed (a
model that never writes the format gives a format reward zero variance, so GRPO learns nothing).
Later notebooks call :func:`supervised_warm_start` instead of repeating that code.

:func:`train_or_reuse` runs ``trainer.train()`` once per machine: it keys the result by a hash of
everything that decides the trained weights (the model's weights, the tokenized data, the training
settings and seed, the trainer's collator and callbacks, the library versions, the fixes of
:mod:`course_utils.trl_fixes` and the device) and keeps it
under ``warm-starts/`` in the course cache. A later run with the same key (the next notebook on the same
recipe, an instructor's second run) loads the same weights and random state in seconds instead of
training. ``GRPO_COURSE_REUSE=0`` trains every time and leaves the cache alone.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.metadata
import io
import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from safetensors.torch import load_model, save_model
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer
from trl import SFTConfig, SFTTrainer

from course_utils import cache
from course_utils.data import worked_examples
from course_utils.presets import Preset
from course_utils.switches import switch
from course_utils.trl_fixes import applied_trl_fixes

#: Set to 0 to train every warm start again and leave the cache alone (1, the default, reuses).
REUSE_ENV = "GRPO_COURSE_REUSE"
#: How many warm starts the cache keeps, the least recently used removed first (each is a copy of the model).
KEEP_WARM_STARTS = 4
#: Training settings that change where and how a run reports or saves, never the weights it trains.
REPORTING_FIELDS = frozenset({
    "output_dir", "run_name", "report_to", "disable_tqdm", "logging_dir", "logging_strategy", "logging_steps",
    "logging_first_step", "log_level", "log_level_replica", "log_on_each_node", "save_strategy", "save_steps",
    "save_total_limit", "save_only_model", "save_on_each_node", "push_to_hub", "hub_token", "hub_model_id",
    "hub_strategy", "hub_private_repo", "hub_always_push", "hub_revision",
})  # fmt: skip
#: Callbacks that only print or log; any other callback is part of the key (it may change training).
REPORTING_CALLBACKS = frozenset(
    {"DefaultFlowCallback", "PrinterCallback", "ProgressCallback", "NotebookProgressCallback"}
)
_TRACKERS = "transformers.integrations"  # the module of the callbacks that report_to adds
_KEY_FORMAT = 1  # raise when the key's recipe changes, so older entries are never matched


def reuse_enabled() -> bool:
    """Whether ``GRPO_COURSE_REUSE`` lets :func:`train_or_reuse` use the cache (unset or 1: yes; 0: no)."""
    return switch(REUSE_ENV, on="reuse cached warm starts", off="always train")


def _json(value: Any) -> str:
    """Stable text for hashing: objects that JSON cannot write count by their type, never their address."""
    return json.dumps(value, sort_keys=True, default=lambda obj: type(obj).__qualname__)


def warm_start_key(trainer: Trainer) -> str | None:
    """A hash of everything that decides the weights ``trainer.train()`` will produce; None if it cannot tell.

    None (so :func:`train_or_reuse` just trains) when the data is streamed or the caller gave its own
    optimizer, whose state the hash cannot see.
    """
    data = trainer.train_dataset
    if not isinstance(data, Dataset) or trainer.optimizer is not None or trainer.lr_scheduler is not None:
        return None
    digest = hashlib.sha256()
    model = trainer.model
    config = {k: v for k, v in model.config.to_dict().items() if k != "_name_or_path"}
    versions = {name: importlib.metadata.version(name) for name in ("torch", "transformers", "trl", "accelerate")}
    callbacks = sorted(  # the trainer's own reporters and the trackers of report_to do not change training
        type(c).__qualname__ for c in trainer.callback_handler.callbacks
        if type(c).__qualname__ not in REPORTING_CALLBACKS and not type(c).__module__.startswith(_TRACKERS)
    )  # fmt: skip
    collator = trainer.data_collator
    settings = {k: v for k, v in trainer.args.to_dict().items() if k not in REPORTING_FIELDS}
    for part in (
        _KEY_FORMAT, versions, applied_trl_fixes(), str(trainer.args.device), torch.backends.cpu.get_cpu_capability(),
        type(trainer).__qualname__, type(model).__qualname__, config, settings,
        type(collator).__qualname__, vars(collator) if hasattr(collator, "__dict__") else None,
        callbacks,
        getattr(trainer, "compute_loss_func", None) and trainer.compute_loss_func.__qualname__,
        [name for name, p in model.named_parameters() if p.requires_grad],
    ):  # fmt: skip
        digest.update(_json(part).encode())
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().contiguous().cpu()
        digest.update(_json([name, str(tensor.dtype), list(tensor.shape)]).encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    for row in data:
        digest.update(_json(row).encode())
    return digest.hexdigest()[:40]


def _random_state() -> dict[str, Any]:
    """Python's, NumPy's and torch's random states as JSON (training draws from them; a reuse restores them)."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    state = {
        "python": [python_state[0], list(python_state[1]), python_state[2]],
        "numpy": [numpy_state[0], numpy_state[1].tolist(), *map(float, numpy_state[2:])],
        "torch": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [base64.b64encode(s.numpy().tobytes()).decode() for s in torch.cuda.get_rng_state_all()]
    return state


def _restore_random_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), int(position), int(has_gauss), cached))
    torch.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(state["torch"])), dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(
            [torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8) for s in state["cuda"]]
        )


def _entry(key: str) -> Path:
    return cache.cache_dir() / cache.WARM_STARTS_DIR / f"{cache.WARM_START_ENTRY_PREFIX}{key}"


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def _load(trainer: Trainer, entry: Path) -> dict[str, Any] | None:
    """Load a finished entry into ``trainer.model`` in place; None (nothing changed) if it is incomplete."""
    try:
        record = json.loads((entry / "warm_start.json").read_text())
        if _file_digest(entry / "model.safetensors") != record["file_sha256"]:
            raise ValueError("its weights file is not the one written")  # checked before the model is touched
        load_model(trainer.model, str(entry / "model.safetensors"), strict=True, device=str(trainer.model.device))
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        print(f"The cached warm start in {entry} is unusable ({error}); training it again.")
        if cache.is_marked(entry.parent.parent):  # the course's own entry, in the course's marked cache
            shutil.rmtree(entry, ignore_errors=True)
        return None
    _restore_random_state(record["random_state"])
    trainer.model.train(record["training"])
    trainer.state.log_history = record["log_history"]
    trainer.state.global_step = record["global_step"]
    os.utime(entry / "warm_start.json")  # most recently used: evicted last
    return record


def _store(trainer: Trainer, key: str, seconds: float) -> Path | None:
    """Write the trained model and its random state under a temporary name, then rename it into place."""
    entry = _entry(key)
    partial = entry.with_name(f"{entry.name}.partial-{os.getpid()}")
    try:
        cache.ensure_cache_dir()
        partial.mkdir(parents=True, exist_ok=True)
        save_model(trainer.model, str(partial / "model.safetensors"))
        record = {
            "key": key, "model": trainer.model.config._name_or_path, "rows": len(trainer.train_dataset),
            "output_dir": trainer.args.output_dir,
            "trained_s": round(seconds, 1), "created": time.strftime("%Y-%m-%d %H:%M"),
            "training": trainer.model.training, "global_step": trainer.state.global_step,
            "log_history": trainer.state.log_history, "random_state": _random_state(),
            "file_sha256": _file_digest(partial / "model.safetensors"),
        }  # fmt: skip
        (partial / "warm_start.json").write_text(json.dumps(record))
        partial.rename(entry)  # fails if another run stored the same key first: theirs is the same
    except (OSError, cache.CacheError) as error:
        shutil.rmtree(partial, ignore_errors=True)
        if not entry.is_dir():
            print(f"The warm start was trained but not cached ({error}); the next run trains it again.")
        return None
    _evict(entry.parent)
    return entry


def _evict(folder: Path, keep: int = KEEP_WARM_STARTS) -> None:
    """Remove the least recently used finished warm starts beyond ``keep``, and partial ones over a day old."""
    finished, now = [], time.time()
    for entry in folder.glob(f"{cache.WARM_START_ENTRY_PREFIX}*"):
        if entry.is_symlink() or not entry.is_dir():
            continue
        if ".partial-" in entry.name:
            if now - entry.stat().st_mtime > 86400:
                shutil.rmtree(entry, ignore_errors=True)
        elif (entry / "warm_start.json").is_file():
            finished.append(entry)
    finished.sort(key=lambda entry: (entry / "warm_start.json").stat().st_mtime, reverse=True)
    for entry in finished[keep:]:
        shutil.rmtree(entry, ignore_errors=True)


def train_or_reuse(trainer: Trainer, *, quiet: bool = False) -> PreTrainedModel:
    """Run ``trainer.train()``, or load what the same training left in the course cache; return the model.

    The model is trained or loaded in place, so ``trainer.model`` is the object the caller passed in, and
    the random state ends as training would have left it. ``quiet`` hides the trainer's per-step log lines
    (this function's own line about the cache still prints). Example::

        trainer = SFTTrainer(model=model, args=config, train_dataset=examples, processing_class=tokenizer)
        model = train_or_reuse(trainer)  # about 1 s the second time, the same weights to the bit
    """
    key = warm_start_key(trainer) if reuse_enabled() else None
    entry = _entry(key) if key else None
    if entry is not None and entry.is_dir():
        record = _load(trainer, entry)
        if record is not None:
            losses = ", ".join(f"{log['loss']:.3f}" for log in record["log_history"] if "loss" in log)
            print(
                f"Reused the warm start trained on {record['created']} for {record['output_dir']} in "
                f"{record['trained_s']:.0f} s (same model, data, settings and seed; loss by step {losses}); "
                f"{REUSE_ENV}=0 trains it again."
            )
            return trainer.model
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        trainer.train()
    if key is not None:
        _store(trainer, key, time.perf_counter() - start)
    return trainer.model


def supervised_warm_start(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    train_rows: Dataset,
    *,
    preset: Preset,
    n_examples: int = 32,
    steps: int = 4,
    learning_rate: float = 3e-5,
    system_prompt: str | None = None,
    seed: int = 0,
    output_dir: str = "outputs/warm_start",
) -> PreTrainedModel:
    """Fine-tune ``model`` in place on ``n_examples`` worked solutions from ``train_rows``; return it.

    Trained once per machine: a later call with the same model, rows and settings loads the result from the
    course cache (:func:`train_or_reuse`), the same weights notebook 02's cell trains.

    The defaults are notebook 02's measured recipe for the course model: weak on purpose (about two thirds
    of greedy answers formatted, a fifth to a third when sampling), so GRPO still sees variance.
    ``train_rows`` needs ``question``, ``answer`` and ``reasoning`` columns (see ``arithmetic_problems``).
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}; to skip the warm start, do not call this function.")
    examples = worked_examples(train_rows, n=n_examples, system_prompt=system_prompt)
    config = SFTConfig(
        output_dir=output_dir,
        max_steps=steps,
        per_device_train_batch_size=8,
        learning_rate=learning_rate,
        lr_scheduler_type="constant",
        bf16=preset.bf16,
        fp16=preset.fp16,
        activation_checkpointing=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=examples, processing_class=tokenizer)
    return train_or_reuse(trainer, quiet=True)  # the per-step loss dicts are not the lesson here
