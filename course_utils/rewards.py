"""Reward functions the course teaches, with the signature ``GRPOTrainer`` calls.

TRL calls each reward as ``reward(prompts=..., completions=..., <dataset columns>=..., **kwargs)`` and
expects one float per completion. Completions are strings (standard format) or lists of chat messages
(conversational format); every function here accepts both and returns a finite float for *any* text.

Answer checking: inside ``<answer>…</answer>`` we require exactly one number, after removing the usual
decorations (``1,234``, ``$12``, ``12.0``, ``\\boxed{5}``, a trailing full stop). We do not use math-verify
here: it takes the *last* number of ``"1 2 3"``, which pays a model for printing several candidates (a
reward hack notebook 07 shows), it reads ``1e3`` as 1, and its timeout relies on signals that fail in
threads. For the integer and decimal answers of this course, a strict parser is the safer reward.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

Completion = str | list[dict[str, Any]]

#: The system prompt that asks for the course's reasoning/answer format.
REASONING_SYSTEM_PROMPT = (
    "Think step by step inside <reasoning> </reasoning> tags, then give only the final number inside "
    "<answer> </answer> tags."
)

_FORMAT = re.compile(
    r"\A\s*<reasoning>(?P<reasoning>.*?)</reasoning>\s*<answer>(?P<answer>.*?)</answer>\s*\Z", re.DOTALL
)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_NUMBER = re.compile(r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?$", re.ASCII)
_PLACEHOLDER = re.compile(r"^[\s.…\[\]_-]*$")  # "...", "[...]", "___": the template copied, not reasoning


def completion_text(completion: Completion) -> str:
    """The text of one completion, in either TRL format."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content", "")
        return content if isinstance(content, str) else str(content)
    return ""


def extract_answer(text: str) -> str | None:
    """Content of the last ``<answer>…</answer>`` block, stripped, or None."""
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


def parse_number(text: str | None) -> float | None:
    """The single number in ``text`` (``"1,234"``, ``"$12"``, ``"12.0"``, ``"\\boxed{5}"``), else None.

    Text holding several numbers, words, or nothing gives None: a reward must not guess.
    """
    if text is None:
        return None
    s = text.strip()
    boxed = re.fullmatch(r"\\boxed\{(.*)\}", s, re.DOTALL)
    if boxed:
        s = boxed.group(1).strip()
    s = s.strip("$ ").rstrip(".").strip()
    if s.startswith(("-$", "+$")):  # a leading "$" is already stripped above
        s = s.replace("$", "", 1)
    if not _NUMBER.fullmatch(s):
        return None
    value = float(s.replace(",", ""))
    return value if math.isfinite(value) else None


def _texts(completions: Sequence[Completion]) -> list[str]:
    return [completion_text(c) for c in completions]


def strict_format_reward(completions: Sequence[Completion], **kwargs: Any) -> list[float]:
    """1.0 when the whole completion is ``<reasoning>…</reasoning><answer>N</answer>``, else 0.0.

    Pays only when the reasoning is not a copied placeholder (``...``) and the answer is one number:
    the two ways the course model was seen to game a plain format reward.
    """
    rewards = []
    for text in _texts(completions):
        match = _FORMAT.fullmatch(text)
        ok = (
            match is not None
            and not _PLACEHOLDER.fullmatch(match["reasoning"])
            and "<answer>" not in match["reasoning"]
            and parse_number(match["answer"]) is not None
        )
        rewards.append(1.0 if ok else 0.0)
    return rewards


def soft_format_reward(completions: Sequence[Completion], **kwargs: Any) -> list[float]:
    """Partial credit toward the format, in [0, 1]: gives GRPO a gradient before any completion is perfect.

    0.1 for each of the four tags appearing exactly once, 0.2 for the tags in the right order, 0.2 when the
    answer holds exactly one number, and 0.2 when nothing stands outside the tags. The last part matters:
    without it, a GRPO run on the course model kept full partial credit while moving its working in front
    of the tags (``"4 + 7 = 11\\n<reasoning>…"``), and strict format fell from 69% to 0%.
    """
    tags = ("<reasoning>", "</reasoning>", "<answer>", "</answer>")
    rewards = []
    for text in _texts(completions):
        score = 0.1 * sum(text.count(tag) == 1 for tag in tags)
        positions = [text.find(tag) for tag in tags]
        in_order = all(p >= 0 for p in positions) and positions == sorted(positions)
        if in_order:
            score += 0.2
        if parse_number(extract_answer(text)) is not None:
            score += 0.2
        if in_order and not text[: positions[0]].strip() and not text[positions[3] + len(tags[3]) :].strip():
            score += 0.2
        rewards.append(round(score, 6))
    return rewards


def correctness_reward(completions: Sequence[Completion], answer: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 when the number in the last ``<answer>`` tag equals the dataset's ``answer`` column, else 0.0.

    TRL passes the ``answer`` column as a keyword argument, one entry per completion.
    """
    if len(answer) != len(completions):
        raise ValueError(
            f"correctness_reward got {len(completions)} completions but {len(answer)} answers; the dataset "
            "needs an 'answer' column (TRL passes dataset columns to rewards by name)."
        )
    rewards = []
    for text, truth in zip(_texts(completions), answer, strict=True):
        got, expected = parse_number(extract_answer(text)), parse_number(str(truth))
        rewards.append(1.0 if got is not None and expected is not None and abs(got - expected) < 1e-6 else 0.0)
    return rewards


def make_length_reward(
    target_chars: int,
    max_completion_length: int | None = None,
    truncation_penalty: float = 100.0,
    truncated_reward: float | None = None,
    off_topic_reward: float | None = None,
    eos_token_id: int | None = None,
) -> Callable[..., list[float]]:
    """Notebook 01's reward: minus the distance, in characters, from ``target_chars``.

    With ``max_completion_length`` set, a completion whose ``completion_ids`` (passed by TRL) reached that
    budget was cut off, not finished, and loses ``truncation_penalty`` more: without it the course model
    learned to fill the budget with tiny tokens that happened to add up to the target length.
    With ``truncated_reward`` set, a cut-off completion scores that constant instead, whatever its length: a
    group whose completions were all cut off then has equal rewards and teaches nothing, where the distance
    would rank cut-off completions by how many characters their tokens happen to hold. Pick a value below
    any finished completion's reward.
    With ``off_topic_reward`` set, a finished completion that does not name its prompt's topic (the dataset's
    ``topic`` column, :func:`mentions_topic`) scores that constant: notebook 07's fix for the generic reply
    ("I'm glad I could help!"), which a length reward alone pays for any question.
    With ``eos_token_id`` set, a completion that reached the budget *with* that token as its last one finished
    just in time and is not cut off: TRL's own rule (``completions/clipped_ratio``). Without it every completion
    that reached the budget counts as cut off.
    The reward is named ``length_reward`` (TRL logs ``rewards/length_reward/mean``) and can be pickled.

    >>> make_length_reward(5, max_completion_length=3, truncated_reward=-300.0)(["Hi.", "Far too long"],
    ...                                                                        completion_ids=[[1, 2], [1, 2, 3]])
    [-2.0, -300.0]
    >>> make_length_reward(5, 3, truncated_reward=-300.0, off_topic_reward=-300.0, eos_token_id=2)(
    ...     ["Bee.", "Hello.", "Bees buzz."], completion_ids=[[1, 2], [1, 2], [1, 1, 2]], topic=["bees"] * 3)
    [-1.0, -300.0, -5.0]
    """
    if target_chars < 0:
        raise ValueError(f"target_chars must be >= 0, got {target_chars}.")
    for name, value in (("truncated_reward", truncated_reward), ("eos_token_id", eos_token_id)):
        if value is not None and max_completion_length is None:
            raise ValueError(
                f"make_length_reward({name}=...) needs max_completion_length, the token budget that tells a "
                "cut-off completion from a finished one; pass the GRPOConfig's max_completion_length."
            )
    if off_topic_reward is not None and not math.isfinite(off_topic_reward):
        raise ValueError(f"off_topic_reward must be a finite number, got {off_topic_reward!r}.")
    return _LengthReward(
        target_chars, max_completion_length, truncation_penalty, truncated_reward, off_topic_reward, eos_token_id
    )


class _LengthReward:
    # A callable class rather than a closure, as TRL's own reward factories are, so the reward can be
    # pickled (a process that runs rewards elsewhere, such as TRL's async rollout worker, pickles them).
    # ``__name__`` is what TRL names the logged metric after: the closure this replaced was ``length_reward``.
    __name__ = "length_reward"

    def __init__(
        self,
        target_chars: int,
        max_completion_length: int | None,
        truncation_penalty: float,
        truncated_reward: float | None = None,
        off_topic_reward: float | None = None,
        eos_token_id: int | None = None,
    ):
        self.target_chars = target_chars
        self.max_completion_length = max_completion_length
        self.truncation_penalty = truncation_penalty
        self.truncated_reward = truncated_reward
        self.off_topic_reward = off_topic_reward
        self.eos_token_id = eos_token_id

    def __call__(
        self,
        completions: Sequence[Completion],
        completion_ids: Sequence[Sequence[int]] | None = None,
        topic: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        texts = _texts(completions)
        rewards = [-float(abs(len(text) - self.target_chars)) for text in texts]
        cut_off = [False] * len(rewards)
        if self.max_completion_length is not None:
            if completion_ids is None:
                raise ValueError("length_reward needs completion_ids (GRPOTrainer passes them) to detect truncation.")
            if len(completion_ids) != len(rewards):
                got = f"{len(rewards)} completions but {len(completion_ids)} completion_ids"
                raise ValueError(f"length_reward got {got}.")
            budget, eos = self.max_completion_length, self.eos_token_id
            cut_off = [len(ids) >= budget and not (len(ids) and ids[-1] == eos) for ids in completion_ids]
            if self.truncated_reward is not None:
                rewards = [self.truncated_reward if cut else r for r, cut in zip(rewards, cut_off, strict=True)]
            else:
                rewards = [r - self.truncation_penalty if cut else r for r, cut in zip(rewards, cut_off, strict=True)]
        if self.off_topic_reward is not None:
            if topic is None:
                raise ValueError(
                    "length_reward(off_topic_reward=...) needs the dataset's 'topic' column (TRL passes dataset "
                    "columns to rewards by name); course_utils.data.length_prompts has one."
                )
            if len(topic) != len(texts):
                raise ValueError(f"length_reward got {len(texts)} completions but {len(topic)} topics.")
            rewards = [
                r if cut or mentions_topic(text, t) else self.off_topic_reward
                for r, cut, text, t in zip(rewards, cut_off, texts, topic, strict=True)
            ]
        return rewards

    def __repr__(self) -> str:
        extra = "".join(
            f", {name}={value}"
            for name in ("truncated_reward", "off_topic_reward", "eos_token_id")
            if (value := getattr(self, name)) is not None
        )
        return (
            f"make_length_reward(target_chars={self.target_chars}, max_completion_length={self.max_completion_length},"
            f" truncation_penalty={self.truncation_penalty}{extra})"
        )


def mentions_topic(text: str, topic: str) -> bool:
    """Whether ``text`` names ``topic``: one of its words, matched by stem ("bees" ~ "bee"), as notebook 07 writes it.

    >>> mentions_topic("A bee is small.", "bees"), mentions_topic("I'm glad I could help!", "the moon")
    (True, False)
    """
    words = [w for w in topic.lower().split() if w not in {"the", "a", "an"}]
    tokens = re.findall(r"[a-z]+", text.lower())
    return any(t.startswith(w[:5]) or (len(t) >= 3 and w.startswith(t)) for w in words for t in tokens)


def make_topic_reward(penalty: float = 100.0) -> Callable[..., list[float]]:
    """Notebook 07's fix for the generic reply: 0 for an answer that names its prompt's topic, ``-penalty`` else.

    A length reward alone pays "I'm glad I could help!" for any question; pass this one next to it (TRL adds
    the rewards of ``reward_funcs``). It reads the dataset's ``topic`` column, which TRL passes by name, and is
    named ``topic_reward`` in TRL's logs. Picklable, as :func:`make_length_reward`'s reward.

    >>> make_topic_reward(100.0)(["Bees make honey.", "I'm glad I could help!"], topic=["bees", "bees"])
    [0.0, -100.0]
    """
    if not (isinstance(penalty, int | float) and math.isfinite(penalty) and penalty >= 0):
        raise ValueError(f"penalty must be a finite number >= 0 (0 turns the topic reward off), got {penalty!r}.")
    return _TopicReward(float(penalty))


class _TopicReward:
    __name__ = "topic_reward"  # a class, not a closure, so it pickles (see _LengthReward)

    def __init__(self, penalty: float):
        self.penalty = penalty

    def __call__(
        self, completions: Sequence[Completion], topic: Sequence[str] | None = None, **kwargs: Any
    ) -> list[float]:
        if topic is None:
            raise ValueError(
                "topic_reward needs the dataset's 'topic' column (TRL passes dataset columns to rewards by name); "
                "course_utils.data.length_prompts has one."
            )
        texts = _texts(completions)
        if len(topic) != len(texts):
            raise ValueError(f"topic_reward got {len(texts)} completions but {len(topic)} topics.")
        return [0.0 if mentions_topic(text, t) else -self.penalty for text, t in zip(texts, topic, strict=True)]

    def __repr__(self) -> str:
        return f"make_topic_reward(penalty={self.penalty})"
