"""Preflight: check a GRPO run's inputs before training, and say in one line what to change.

``GRPOTrainer`` accepts a lot before it fails, and when it fails the error often comes from deep inside
TRL, transformers or torch, minutes into a run. :func:`preflight` runs the checks below in a second,
before the trainer is built, and raises :class:`PreflightError` listing every problem it found:

- the dataset: a ``prompt`` column in standard or chat format, no empty rows, and every column a reward
  function asks for by name (e.g. ``answer``) present and filled;
- the length budget: the longest prompt plus ``max_completion_length`` fits the model's context;
- the batch arithmetic: groups of at least 2, and whole groups in every generation batch;
- the precision: ``bf16``/``fp16`` only where the device supports it;
- the tokenizer: a pad token, or an end-of-sequence token TRL can pad with;
- experiment tracking: each ``report_to`` backend installed, and never a login prompt mid-run.
"""

from __future__ import annotations

import importlib.util
import inspect
import netrc
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from datasets import Dataset

from course_utils.data import DatasetFormatError, validate_prompt_dataset
from course_utils.hardware import Hardware, detect_hardware
from course_utils.presets import split_batch

#: Keyword arguments GRPOTrainer passes to every reward function itself; any other named parameter of a
#: reward function is filled from the dataset column of that name.
TRL_REWARD_ARGUMENTS = frozenset(
    {"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
)


class PreflightError(ValueError):
    """A GRPO run's inputs cannot work; the message says what to change."""


def reward_columns(reward_funcs: Callable[..., Any] | Sequence[Callable[..., Any]]) -> dict[str, list[str]]:
    """Dataset columns each reward function needs: its named parameters TRL does not supply itself.

    Parameters with a default value are optional and not listed. Reward *models* (anything that is not a
    plain callable with a signature, such as a model id string) need no column and are skipped.
    """
    funcs = [reward_funcs] if callable(reward_funcs) or isinstance(reward_funcs, str) else list(reward_funcs)
    needs: dict[str, list[str]] = {}
    for func in funcs:
        if isinstance(func, str) or not callable(func):
            continue
        try:
            parameters = inspect.signature(func).parameters.values()
        except (TypeError, ValueError):  # a builtin or C callable: nothing to read
            continue
        needs[getattr(func, "__name__", repr(func))] = [
            p.name
            for p in parameters
            if p.name not in TRL_REWARD_ARGUMENTS
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.default is p.empty
        ]
    return needs


def check_dataset(dataset: Dataset, reward_funcs: Callable[..., Any] | Sequence[Callable[..., Any]] = ()) -> None:
    """The prompt column and every column a reward function reads; raises :class:`PreflightError`."""
    needs = reward_columns(reward_funcs)
    for name, columns in needs.items():
        missing = [c for c in columns if c not in dataset.column_names]
        if missing:
            raise PreflightError(
                f"Reward function {name!r} takes {missing} from the dataset, but the dataset has only "
                f"{dataset.column_names}: add the column, or give the parameter a default value."
            )
    required = sorted({c for columns in needs.values() for c in columns})
    try:
        validate_prompt_dataset(dataset, required_columns=required)
    except DatasetFormatError as error:
        raise PreflightError(str(error)) from None


def check_batch(
    num_generations: int,
    per_device_train_batch_size: int,
    steps_per_generation: int = 1,
    num_processes: int = 1,
) -> None:
    """:func:`course_utils.presets.split_batch`'s rule for a per-device batch, raising :class:`PreflightError`.

    ``GRPOConfig`` itself refuses a batch that breaks it; this says the same in terms of the settings, with the fix.
    """
    try:
        split_batch(per_device_train_batch_size * num_processes, num_generations, num_processes, steps_per_generation)
    except ValueError as error:
        raise PreflightError(str(error)) from None


def check_precision(bf16: bool, fp16: bool, hardware: Hardware | None = None) -> None:
    """``bf16``/``fp16`` only where the device supports them (GRPOConfig's ``bf16`` defaults to True)."""
    hardware = hardware or detect_hardware()
    if bf16 and fp16:
        raise PreflightError("bf16=True and fp16=True: choose one (bf16 on Ampere or newer, fp16 on a T4).")
    if fp16 and hardware.kind == "cpu":
        raise PreflightError("fp16=True needs a CUDA GPU, and none was found: pass fp16=False on the CPU.")
    if bf16 and hardware.kind == "t4":
        raise PreflightError(
            f"bf16=True, but {hardware.name} has no bfloat16 support (GRPOConfig turns bf16 on by default): "
            "pass bf16=False, fp16=True."
        )


def check_pad_token(tokenizer: Any) -> None:
    """Batched generation pads prompts: the tokenizer needs a pad token, or an EOS token to pad with."""
    if getattr(tokenizer, "pad_token", None) is None and getattr(tokenizer, "eos_token", None) is None:
        raise PreflightError(
            "The tokenizer has neither a pad token nor an end-of-sequence token, so prompts cannot be batched: "
            "tokenizer.add_special_tokens({'pad_token': '<pad>'}) and model.resize_token_embeddings(len(tokenizer))."
        )


#: report_to backends the course knows how to check: the package each needs.
TRACKING_PACKAGES = {"wandb": "wandb", "trackio": "trackio", "tensorboard": "tensorboard", "mlflow": "mlflow"}


def _wandb_logged_in() -> bool:
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_MODE", "").lower() in {"offline", "disabled", "dryrun"}:
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


def check_tracking(report_to: str | Sequence[str] | None) -> None:
    """Each ``report_to`` backend is installed, and wandb will not stop the lesson to ask for a login."""
    backends = [report_to] if isinstance(report_to, str) or report_to is None else list(report_to)
    for backend in backends:
        if backend in (None, "none"):
            continue
        if backend == "all":
            raise PreflightError('report_to="all" logs to every tracker installed: name the one you want, or "none".')
        package = TRACKING_PACKAGES.get(backend)
        if package is None:
            continue  # a backend transformers knows and the course does not check
        if importlib.util.find_spec(package) is None:
            raise PreflightError(
                f'report_to="{backend}" needs the {package} package: pip install {package}, or use "none".'
            )
        if backend == "wandb" and not _wandb_logged_in():
            raise PreflightError(
                'report_to="wandb" would stop training to ask for a login: run `wandb login` before the lesson, '
                'set WANDB_MODE=offline, or use report_to="trackio" (local, no account) or "none".'
            )


def prompt_token_counts(dataset: Dataset, tokenizer: Any) -> list[int]:
    """Tokens in each row's prompt as the model will see it (chat template applied to chat prompts)."""
    counts = []
    for prompt in dataset["prompt"]:
        if isinstance(prompt, list):
            prompt = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        counts.append(len(tokenizer(prompt, add_special_tokens=False)["input_ids"]))
    return counts


def check_length_budget(
    dataset: Dataset, tokenizer: Any, max_completion_length: int, context_length: int | None
) -> int:
    """The longest prompt plus ``max_completion_length`` must fit ``context_length``; returns the longest prompt.

    Current TRL does not truncate prompts (``max_prompt_length`` is gone), so a prompt that leaves no room
    fails inside generation, or silently produces completions cut off after a few tokens.
    """
    counts = prompt_token_counts(dataset, tokenizer)
    longest = max(counts)
    if context_length is not None and longest + max_completion_length > context_length:
        row = counts.index(longest)
        raise PreflightError(
            f"Row {row}: the prompt has {longest} tokens, and with max_completion_length={max_completion_length} "
            f"that exceeds the model's context of {context_length} tokens. Shorten or drop long prompts "
            f"(filter rows with more than {context_length - max_completion_length} prompt tokens), or lower "
            "max_completion_length."
        )
    return longest


def context_length(model: Any = None, tokenizer: Any = None) -> int | None:
    """The model's context window, from its config (else the tokenizer's limit); None when unknown."""
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    if value is None and tokenizer is not None:
        value = getattr(tokenizer, "model_max_length", None)
    if value is None or value > 10_000_000:  # tokenizers without a limit report a huge sentinel
        return None
    return int(value)


def preflight(
    args: Any,
    train_dataset: Dataset,
    tokenizer: Any,
    reward_funcs: Callable[..., Any] | Iterable[Callable[..., Any]],
    model: Any = None,
    hardware: Hardware | None = None,
) -> str:
    """Run every check for a ``GRPOConfig`` and its inputs; raise :class:`PreflightError` listing all problems.

    Returns a one-line summary when everything is in order. Call it just before ``GRPOTrainer(...)``.
    """
    reward_funcs = [reward_funcs] if callable(reward_funcs) else list(reward_funcs)
    problems: list[str] = []
    longest = None

    def attempt(check: Callable[..., Any], *check_args: Any) -> Any:
        try:
            return check(*check_args)
        except PreflightError as error:
            problems.append(str(error))
            return None

    attempt(check_dataset, train_dataset, reward_funcs)
    dataset_ok = not problems
    attempt(
        check_batch,
        args.num_generations,
        args.per_device_train_batch_size,
        args.steps_per_generation or args.gradient_accumulation_steps,
        getattr(args, "world_size", 1),
    )
    attempt(check_precision, bool(args.bf16), bool(args.fp16), hardware)
    attempt(check_pad_token, tokenizer)
    attempt(check_tracking, args.report_to)
    if dataset_ok:
        longest = attempt(
            check_length_budget, train_dataset, tokenizer, args.max_completion_length, context_length(model, tokenizer)
        )
    if problems:
        listed = "\n".join(f"  {i}. {p}" for i, p in enumerate(problems, 1))
        raise PreflightError(f"{len(problems)} problem(s) before training:\n{listed}")
    return (
        f"preflight ok: {len(train_dataset)} prompts (longest {longest} tokens + {args.max_completion_length} "
        f"completion tokens), groups of {args.num_generations}, "
        f"{'bf16' if args.bf16 else 'fp16' if args.fp16 else 'float32'}, "
        f"reward columns {sorted({c for cs in reward_columns(reward_funcs).values() for c in cs}) or 'none'}"
    )
