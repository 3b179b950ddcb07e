"""Tool use with GRPO (notebook 10): a calculator tool, a chat template that can render it, data and rewards.

TRL's ``GRPOTrainer(tools=[calculator])`` runs the tool loop itself: it shows the tool's schema (read from the
function's type hints and docstring) in the prompt, parses each completion for
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, runs the call, appends the result as a ``tool``
message (its tokens are masked out of the loss) and lets the model continue, at most
``GRPOConfig(max_tool_calling_iterations=...)`` times. It logs ``tools/call_frequency`` and
``tools/failure_frequency``.

The course model's own chat template cannot render tools, so :func:`use_tool_chat_template` swaps in TRL's
Qwen2.5 template, which uses the same ChatML markers (``<|im_start|>``, ``<|im_end|>``), with its block that
describes the tools shortened to a line per tool (:func:`compact_tool_template`): 150 prompt tokens instead of
275, and every step's cost grows with the length of the sequence. The calls and the tool's replies are
written exactly as in TRL's template, so TRL's parser of tool calls for that template reads them. Every
prompt here starts with the course's own system message (:data:`TOOL_SYSTEM_PROMPT`).

The rewards take TRL's arguments: a completion is the list of messages of one rollout, e.g. the assistant's
call, the tool's reply and the assistant's final answer.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import random
import re
from collections.abc import Sequence
from typing import Any

from datasets import Dataset, DatasetDict
from transformers import PreTrainedTokenizerBase

from course_utils.data import distinct_draws
from course_utils.evaluation import generate_sharing_prefix, weights_precision
from course_utils.rewards import parse_number
from course_utils.trl_fixes import check_stop_padding, end_stopped_turns

#: The system prompt for the tool runs: the tool's schema is appended to it by the chat template.
TOOL_SYSTEM_PROMPT = (
    "You are a careful math assistant. Do not compute in your head: call the calculator tool with the "
    "expression. When the calculator replies, answer with only the final number."
)
#: The same task without the tool (the baseline run): the model must compute the answer itself.
NO_TOOL_SYSTEM_PROMPT = "You are a careful math assistant. Answer with only the final number."
#: The ChatML markers the course model's tokenizer and TRL's Qwen2.5 template share.
CHATML_MARKERS = ("<|im_start|>", "<|im_end|>")
#: Kinds of question :func:`calculator_problems` writes: two-digit addition, two-digit times one-digit.
PROBLEM_KINDS = ("add2", "mul21")
#: The longest expression the calculator accepts, in characters.
MAX_EXPRESSION_CHARS = 100

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_SIGNS = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with +, -, * and / on numbers, and return the result.

    Args:
        expression: The expression to evaluate, for example "47 + 38" or "23 * 7".
    """
    if isinstance(expression, bool) or not isinstance(expression, str | int | float):
        raise TypeError(f"expression must be a string such as '47 + 38', got {type(expression).__name__}")
    text = str(expression).strip()
    if not text:
        raise ValueError("expression is empty; pass one such as '47 + 38'")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text.replace("×", "*").replace("÷", "/"), mode="eval")
    except SyntaxError:
        raise ValueError(f"cannot read {text!r}: use numbers and + - * / ( ), such as '47 + 38'") from None
    value = _evaluate(tree.body, text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} overflows: the result is not a finite number")
    return _format_number(value)


def _evaluate(node: ast.AST, text: str) -> float:
    """The value of a parsed expression; anything but numbers, + - * /, signs and brackets is refused."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left, text), _evaluate(node.right, text)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError(f"division by zero in {text!r}")
        return _OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _SIGNS:
        return _SIGNS[type(node.op)](_evaluate(node.operand, text))
    raise ValueError(f"cannot evaluate {text!r}: only numbers and + - * / ( ) are allowed")


def _format_number(value: float) -> str:
    """``19`` for 19 and 19.0, ``2.5`` for 2.5; at most 10 significant digits for other fractions."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.10g}"


#: How the compact template writes the tools into the system prompt, in place of the Qwen2.5 template's block
#: (a paragraph of instructions and each tool's whole JSON schema, 217 of the 275 tokens of notebook 10's
#: prompt). One line per tool, its signature, description and argument descriptions, then the call format.
_COMPACT_TOOLS_BLOCK = """{{- "\\n\\nTools:" }}
    {%- for tool in tools %}
        {%- set function = tool.function if tool.function is defined else tool %}
        {{- "\\n" ~ function.name ~ "(" }}
        {%- for name, spec in function.parameters.properties.items() %}
            {{- name ~ ": " ~ (spec.type if spec.type is defined else "any") }}
            {%- if not loop.last %}{{- ", " }}{%- endif %}
        {%- endfor %}
        {{- "): " ~ function.description }}
        {%- for name, spec in function.parameters.properties.items() %}
            {%- if spec.description is defined %}{{- " " ~ name ~ ": " ~ spec.description }}{%- endif %}
        {%- endfor %}
    {%- endfor %}
    {{- "\\nCall a tool as <tool_call>\\n{\\"name\\": <tool>, \\"arguments\\": {<argument>: <value>}}\\n</tool_call>" }}
    {{- "<|im_end|>\\n" }}
"""


def compact_tool_template() -> str:
    """TRL's Qwen2.5 chat template with the tools written in a few lines instead of JSON schemas.

    Everything else is TRL's text verbatim: the turns, the ``<tool_call>`` blocks the model writes and the
    ``<tool_response>`` turns, so TRL's parser for the Qwen family reads the calls. Only the block that
    describes the tools in the system prompt is shorter, and the default system prompt (which names another
    model) says "You are a helpful assistant." instead.
    """
    from trl.chat_template_utils import qwen2_5_chat_template

    start = qwen2_5_chat_template.find('{{- "\\n\\n# Tools')
    end = qwen2_5_chat_template.find("{%- else %}", start)
    default = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    if start < 0 or end < 0 or default not in qwen2_5_chat_template:
        raise RuntimeError("TRL's Qwen2.5 template changed; re-read trl.chat_template_utils.qwen2_5_chat_template.")
    template = qwen2_5_chat_template[:start] + _COMPACT_TOOLS_BLOCK + qwen2_5_chat_template[end:]
    return template.replace(default, "You are a helpful assistant.")


def use_tool_chat_template(tokenizer: PreTrainedTokenizerBase, *, compact: bool = True) -> PreTrainedTokenizerBase:
    """Give ``tokenizer`` a ChatML template that can render tools, and TRL's parser of tool calls; return it.

    The course model's template renders only role and content, so tools and tool calls would vanish from
    the prompt (TRL's ``supports_tool_calling`` is False and ``GRPOTrainer(tools=...)`` refuses it). TRL's
    Qwen2.5 template wraps turns in the same ``<|im_start|>``/``<|im_end|>`` markers, which must already be
    single tokens of ``tokenizer`` (nothing is added to the vocabulary), and ``<|im_end|>`` must be its
    end-of-sequence token, so that generation stops at the end of each turn. With ``compact=True`` (the
    default) the tools are written as :func:`compact_tool_template` does; ``compact=False`` keeps TRL's
    template verbatim. Either way the parser is the one TRL attaches to the Qwen2.5 template.

    Start every conversation with a system message (:data:`TOOL_SYSTEM_PROMPT`).

    Example:
        >>> use_tool_chat_template(tokenizer)  # doctest: +SKIP
        >>> tokenizer.apply_chat_template(prompt, tools=[calculator], tokenize=False)  # doctest: +SKIP

    Raises:
        ValueError: the tokenizer lacks the ChatML markers, or ends sequences with another token.
    """
    from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template, supports_tool_calling

    for marker in CHATML_MARKERS:
        ids = tokenizer.convert_tokens_to_ids(marker)
        if ids is None or ids == tokenizer.unk_token_id or tokenizer.encode(marker, add_special_tokens=False) != [ids]:
            raise ValueError(
                f"The tokenizer has no single token {marker!r}, so the ChatML tool template would spell it out as "
                "text. Use a model whose chat format is ChatML (SmolLM2, Qwen2.5) or write a template for its own."
            )
    if tokenizer.eos_token != CHATML_MARKERS[1]:
        raise ValueError(
            f"The tokenizer ends sequences with {tokenizer.eos_token!r}, not {CHATML_MARKERS[1]!r}: generation would "
            "not stop at the end of a turn. Set tokenizer.eos_token = '<|im_end|>' if the model was trained on ChatML."
        )
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.response_template = None  # add_response_schema sets the one that matches TRL's template
    add_response_schema(tokenizer)  # TRL recognises its templates by their exact text, so before the swap below
    if compact:
        tokenizer.chat_template = compact_tool_template()
    if not supports_tool_calling(tokenizer):  # a check that TRL still renders the whole exchange with it
        raise RuntimeError("The tool template no longer renders tool calls; re-read trl.chat_template_utils.")
    return tokenizer


def _question(kind: str, rng: random.Random) -> tuple[str, str, int]:
    """One question, the expression to give the calculator, and the integer answer."""
    if kind == "add2":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        return f"What is {a} + {b}?", f"{a} + {b}", a + b
    if kind == "mul21":
        a, b = rng.randint(10, 99), rng.randint(2, 9)
        return f"What is {a} * {b}?", f"{a} * {b}", a * b
    raise ValueError(f"Unknown kind {kind!r}; choose from {PROBLEM_KINDS}.")


def calculator_problems(
    n_train: int = 200,
    n_test: int = 40,
    seed: int = 0,
    kinds: Sequence[str] = PROBLEM_KINDS,
    system_prompt: str | None = TOOL_SYSTEM_PROMPT,
) -> DatasetDict:
    """Seeded arithmetic questions a 135M model cannot reliably answer alone, with a ``prompt`` for GRPO.

    Kinds alternate row by row (``add2``: two-digit addition; ``mul21``: two-digit times one-digit). Columns:
    ``prompt`` (system and user messages), ``question``, ``expression`` (what a good calculator call passes),
    ``answer`` (the integer, as a string) and ``kind``. No test question appears in the training split.
    Pass ``system_prompt=NO_TOOL_SYSTEM_PROMPT`` for the baseline run without the tool.
    """
    for kind in kinds:
        if kind not in PROBLEM_KINDS:
            raise ValueError(f"Unknown kind {kind!r}; choose from {PROBLEM_KINDS}.")
    if not kinds:
        raise ValueError(f"kinds is empty; choose from {PROBLEM_KINDS}.")
    rng = random.Random(f"calculator-{seed}")

    def draw(drawn: int) -> tuple[str, dict[str, Any]]:
        kind = kinds[drawn % len(kinds)]  # kinds alternate row by row
        question, expression, answer = _question(kind, rng)
        return question, {"question": question, "expression": expression, "answer": str(answer), "kind": kind}

    rows = [row for _, row in distinct_draws(draw, n_train + n_test, f"Kinds {list(kinds)}")]
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for row in rows:
        row["prompt"] = [*system, {"role": "user", "content": row["question"]}]
    test, train = rows[:n_test], rows[n_test:]
    return DatasetDict({"train": Dataset.from_list(train), "test": Dataset.from_list(test)})


def tool_call_examples(
    rows: Dataset,
    n: int,
    tools: Sequence[Any] = (calculator,),
    *,
    answers: bool = False,
    call_share: float = 1.0,
) -> Dataset:
    """Supervised examples of the tool-call *format*, for ``SFTTrainer`` (prompt-completion), from ``n`` rows.

    Each row gives the assistant's first turn: for ``call_share`` of the rows, a well-formed call with the
    row's ``expression`` and nothing after it; for the others, the number at once, without a call. So the
    warm start shows both paths, and GRPO has to learn which one pays. With ``answers=True`` every row also
    gives a second example: the conversation up to the tool's reply (the call and its result) as the prompt,
    and the bare number as the completion, so the model knows what to do with a reply once it has called
    (the loss never covers the tool's reply, which the model must not learn to write). ``tools`` travels as
    JSON schemas in a ``tools`` column, which ``SFTTrainer`` renders into each prompt as ``GRPOTrainer`` does.
    """
    from transformers.utils import get_json_schema

    if not 1 <= n <= len(rows):
        raise ValueError(f"n must be between 1 and the {len(rows)} rows, got {n}.")
    if not 0.0 <= call_share <= 1.0:
        raise ValueError(f"call_share is the share of rows that call the tool, between 0 and 1; got {call_share}.")
    schemas = json.dumps([get_json_schema(tool) if callable(tool) else tool for tool in tools])
    calls = round(call_share * n)
    examples = []
    for i, row in enumerate(rows.select(range(n))):
        call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": row["expression"]}}}
        turn = {"role": "assistant", "content": "", "tool_calls": [call]}
        calls_here = i * calls // n != (i + 1) * calls // n  # spreads the calling rows evenly over the n rows
        first = [turn] if calls_here else [{"role": "assistant", "content": row["answer"]}]
        examples.append({"prompt": row["prompt"], "completion": first, "tools": schemas})
        if answers:
            reply = tool_reply(call["function"], tools)
            answer = [{"role": "assistant", "content": reply["content"]}]
            examples.append({"prompt": [*row["prompt"], turn, reply], "completion": answer, "tools": schemas})
    return Dataset.from_list(examples)


# Rewards -----------------------------------------------------------------------------------------------------
# A rollout is a list of messages: {"role": "assistant", "content": ..., "tool_calls": [...]} when the model
# called a tool (TRL parsed the call), {"role": "tool", ...} for each reply, and a last assistant message. A call
# TRL could not parse stays as text, "<tool_call>" included, in the assistant's content.

_CALL_OPEN = "<tool_call>"


def _messages(completion: Any) -> list[dict[str, Any]]:
    if isinstance(completion, str):
        return [{"role": "assistant", "content": completion}]
    return [m for m in completion if isinstance(m, dict)]


def _calls(completion: Any) -> list[dict[str, Any]]:
    """The tool calls TRL parsed in a rollout, as ``{"name": ..., "arguments": ...}``."""
    calls = []
    for message in _messages(completion):
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                calls.append(call.get("function", call) if isinstance(call, dict) else {})
    return calls


def _unparsed_calls(completion: Any) -> int:
    """How many ``<tool_call>`` openings were left as text (TRL could not parse them, so nothing ran)."""
    return sum(
        str(m.get("content") or "").count(_CALL_OPEN) for m in _messages(completion) if m.get("role") == "assistant"
    )


def _run_call(call: dict[str, Any], tools: Sequence[Any] = (calculator,)) -> tuple[Any, bool]:
    """Run one parsed call as TRL's loop runs it: ``(result, False)``, or ``({"error": ...}, True)`` when it fails."""
    by_name = {tool.__name__: tool for tool in tools}
    name = call.get("name", "unknown")
    try:  # the failures TRL catches: unknown tool, wrong argument names or types, the tool's own errors
        if name not in by_name:
            raise ValueError(f"Tool {name} not found.")
        return by_name[name](**call.get("arguments", {})), False
    except Exception as error:  # noqa: BLE001 - TRL returns {"error": str(exception)} to the model
        return {"error": str(error)}, True


def call_fails(call: dict[str, Any], tools: Sequence[Any] = (calculator,)) -> bool:
    """Whether running this parsed call fails as it failed in TRL's loop: unknown tool, wrong arguments, bad input."""
    return _run_call(call, tools)[1]


def final_answer(completion: Any) -> float | None:
    """The number the rollout ends on: its last message, from the assistant, holding exactly one number."""
    messages = _messages(completion)
    if not messages or messages[-1].get("role") != "assistant" or messages[-1].get("tool_calls"):
        return None
    return parse_number(str(messages[-1].get("content") or ""))


def answer_reward(completions: Sequence[Any], answer: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 when the rollout's last message is the single number in the ``answer`` column, else 0.0.

    "The answer is 57." gets 0.0 (the system prompt asks for only the number), and so does a rollout that
    ends on a tool call or a tool's reply. Whether the tool was used does not matter here.
    """
    if len(answer) != len(completions):
        raise ValueError(f"answer_reward got {len(completions)} completions but {len(answer)} answers.")
    rewards = []
    for completion, truth in zip(completions, answer, strict=True):
        got, expected = final_answer(completion), parse_number(str(truth))
        rewards.append(1.0 if got is not None and expected is not None and abs(got - expected) < 1e-6 else 0.0)
    return rewards


def _numbers(text: Any) -> list[str]:
    """The integers written in a text, sorted: ``"47 + 38"`` and ``"What is 38 + 47?"`` both give ``["38", "47"]``."""
    return sorted(re.findall(r"\d+", str(text)))


def _about_the_question(call: dict[str, Any], question: str) -> bool:
    """Whether a parsed call's ``expression`` holds exactly the numbers of the question, no more, no fewer."""
    arguments = call.get("arguments")
    expression = arguments.get("expression", "") if isinstance(arguments, dict) else ""
    return _numbers(expression) == _numbers(question)


def wellformed_call_reward(
    completions: Sequence[Any], question: Sequence[str] | None = None, **kwargs: Any
) -> list[float]:
    """The share of the rollout's tool-call attempts that came out clean, paid only when the rollout then ends on
    a bare number, right or wrong (:func:`answer_reward` judges which), and, when the dataset has a ``question``
    column, only when every parsed call computes with the question's own numbers; 0.0 when it tried none.

    A call is clean when TRL parsed it from a turn that holds nothing else. A ``<tool_call>`` left as text is
    an attempt that failed, and so is every call of a turn that also writes text: a policy that learned to
    stutter ``</tool_call>`` after its call (seen on seed 707) gets no credit for that call. Two clean
    calls and one ``<tool_call>`` left as text give 2 / 3; a parsed call followed by ``</tool_call>`` gives 0 / 1.
    The reward pays for the exchange the system prompt asks for, a call and then a number, not for calls alone:
    a policy that calls again instead of answering (seed 202, 2026-12-05), echoes the tool's reply (seeds 101 and
    404 at 5e-5) or runs out of tokens gets 0.0, so GRPO cannot climb this small reward while answers collapse.
    Nor can it climb it with a fixed call: for "What is 59 + 67?" a call of ``"1"`` (seed 2020) or of the tool
    docstring's ``"47 + 38"`` (seed 1515) gets 0.0, and ``"67 + 59"`` or ``"59+67"`` get full credit.
    """
    if question is not None and len(question) != len(completions):
        raise ValueError(f"wellformed_call_reward got {len(completions)} completions but {len(question)} questions.")
    rewards = []
    for i, completion in enumerate(completions):
        clean = attempts = 0
        for message in _messages(completion):
            if message.get("role") != "assistant":
                continue
            parsed, text = len(message.get("tool_calls") or []), str(message.get("content") or "")
            unparsed = text.count(_CALL_OPEN)
            attempts += parsed + unparsed
            clean += parsed if not text.strip() else 0
        about = question is None or all(_about_the_question(call, question[i]) for call in _calls(completion))
        rewards.append(clean / attempts if attempts and about and final_answer(completion) is not None else 0.0)
    return rewards


def failed_call_penalty(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """Minus the share of the rollout's parsed calls that failed when run (see :func:`call_fails`); 0.0 with none.

    A failed call costs the model a turn and shows it an error: one failure in two calls gives -0.5.
    """
    rewards = []
    for completion in completions:
        calls = _calls(completion)
        rewards.append(-sum(call_fails(c) for c in calls) / len(calls) if calls else 0.0)
    return rewards


# An environment: tools with state ---------------------------------------------------------------------------
# GRPOTrainer(environment_factory=MemoryCalculator) keeps a pool of instances (as many as run at once), reuses them
# across batches and calls reset(**row) before every rollout, so reset must clear all state; it shows the model every
# public method but reset (and get_reward) as a tool.

_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")  # a name in an expression; the "e" of 1e5 is not one


class MemoryCalculator:
    """The calculator with a memory that lasts one rollout: ``calculate``, then ``remember`` the result by name.

    >>> env = MemoryCalculator()
    >>> env.calculate("12 * 7"), env.remember("product"), env.calculate("product + 5")
    ('84', 'stored product = 84', '89')
    """

    def __init__(self) -> None:
        self.memory: dict[str, str] = {}
        self.last: str | None = None

    def reset(self, **row: Any) -> None:
        """Forget everything: TRL calls this with the dataset row before each rollout."""
        self.memory, self.last = {}, None

    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression with +, -, * and /, in which stored names stand for their values.

        Args:
            expression: The expression to evaluate, for example "47 + 38" or "product + 5".
        """
        if isinstance(expression, str):
            unknown = sorted({n for n in _NAME.findall(expression) if n not in self.memory})
            if unknown:
                raise ValueError(f"unknown name(s) {unknown}: store a result first with remember, or use numbers")
            expression = _NAME.sub(lambda m: f"({self.memory[m.group(0)]})", expression)
        self.last = calculator(expression)
        return self.last

    def remember(self, name: str) -> str:
        """Store the last result under a name, to use in later calculations.

        Args:
            name: A short name of letters, for example "total".
        """
        if self.last is None:
            raise ValueError("nothing to remember yet: call calculate first")
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                f"name must be letters, digits or _, starting with a letter, such as 'total'; got {name!r}"
            )
        self.memory[name] = self.last
        return f"stored {name} = {self.last}"


# Rollouts outside training -----------------------------------------------------------------------------------
# GRPOTrainer runs the tool loop only while it trains. To measure a model before and after, the course runs the
# same exchange itself: the first turn, parsed by TRL's parser; each call run as TRL runs it; one more turn.


def tool_reply(call: dict[str, Any], tools: Sequence[Any] = (calculator,)) -> dict[str, Any]:
    """The ``tool`` message TRL's loop appends for one parsed call: the result, or ``{'error': ...}`` as text.

    >>> tool_reply({"name": "calculator", "arguments": {"expression": "6 * 7"}})
    {'role': 'tool', 'name': 'calculator', 'content': '42'}
    """
    result, _ = _run_call(call, tools)
    return {"role": "tool", "name": call.get("name", "unknown"), "content": str(result)}


def tool_rollouts(
    model: Any,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[list[dict[str, Any]]],
    tools: Sequence[Any] = (calculator,),
    *,
    max_completion_length: int = 96,
    stop_strings: Sequence[str] = (),
    batch_size: int = 40,
) -> list[list[dict[str, Any]]]:
    """Greedy rollouts of ``prompts`` as ``GRPOTrainer(tools=...)`` runs them with ``max_tool_calling_iterations=1``.

    Each rollout is a list of messages, the shape TRL passes to reward functions: the assistant's first turn
    (parsed with TRL's ``parse_response``), and, when it holds calls, each call's :func:`tool_reply` and the
    assistant's next turn. ``max_completion_length`` is ``GRPOConfig``'s, spent as TRL's tool loop spends it: the
    first turn may take all of it; when the tools' replies would not fit, TRL drops them and the rollout ends on the
    call; the answer gets what is left. So ``answer_reward(tool_rollouts(...), answer)`` scores a model outside
    training exactly as the reward scored it inside, cut-offs included.

    >>> runs = tool_rollouts(model, tokenizer, data["test"]["prompt"], max_completion_length=96)  # doctest: +SKIP
    """
    import torch
    from trl.chat_template_utils import parse_response

    if stop_strings:
        check_stop_padding(tokenizer, [tokenizer.eos_token_id], "tool_rollouts(stop_strings=...)")
    stops = {"stop_strings": list(stop_strings), "tokenizer": tokenizer} if stop_strings else {}

    def complete(conversations: list[list[dict[str, Any]]], budgets: list[int]) -> tuple[list[dict], list[int]]:
        """Each conversation's next assistant turn, at most its budget of tokens, and how many tokens it took."""
        padding_side, tokenizer.padding_side = tokenizer.padding_side, "left"
        messages, lengths = [], []
        try:
            for start in range(0, len(conversations), batch_size):
                texts = [
                    tokenizer.apply_chat_template(c, tools=list(tools), add_generation_prompt=True, tokenize=False)
                    for c in conversations[start : start + batch_size]
                ]
                limits = budgets[start : start + batch_size]
                batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
                with torch.no_grad(), weights_precision(model):  # float32 also after a bf16/fp16 trainer
                    out = generate_sharing_prefix(  # the tool description, in every prompt, runs once
                        model, **batch, max_new_tokens=max(limits), do_sample=False, temperature=None, top_p=None,
                        top_k=None, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, **stops,
                    )  # fmt: skip
                width = batch["input_ids"].shape[1]
                rows = zip(batch["input_ids"], batch["attention_mask"], out.tolist(), limits, strict=True)
                for ids, mask, row, limit in rows:
                    new = row[width:]
                    new = new[: new.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in new else new
                    if stop_strings:  # as in training: a turn that stopped ends with the end-of-sequence token
                        (new,) = end_stopped_turns([new], tokenizer, stop_strings, max_completion_length)
                    new = new[:limit]  # greedy: the same tokens as generating at most `limit` of them
                    prefix = ids[mask.bool()].tolist()
                    messages.append(parse_response(tokenizer, new, prefix=prefix, tools=list(tools)))
                    lengths.append(len(new))
        finally:
            tokenizer.padding_side = padding_side
        return messages, lengths

    was_training = model.training
    model.eval()
    try:
        firsts, used = complete([list(p) for p in prompts], [max_completion_length] * len(prompts))
        rollouts = [[first] for first in firsts]
        called = []
        for i, rollout in enumerate(rollouts):
            if not rollout[0].get("tool_calls"):
                continue
            replies = [tool_reply(call.get("function", call), tools) for call in rollout[0]["tool_calls"]]
            used[i] += _tool_suffix_length(tokenizer, replies)
            if used[i] <= max_completion_length:  # else TRL drops the replies: the rollout ends on the call
                rollouts[i] += replies
                called.append(i)
        budgets = [max_completion_length - used[i] for i in called]
        answers, _ = complete([[*prompts[i], *rollouts[i]] for i in called], budgets)
        for i, answer in zip(called, answers, strict=True):
            rollouts[i].append(answer)
    finally:
        model.train(was_training)
    return rollouts


def _tool_suffix_length(tokenizer: PreTrainedTokenizerBase, replies: list[dict[str, Any]]) -> int:
    """Tokens TRL appends after a turn with calls: the tools' replies and the next generation prompt.

    Computed as ``GRPOTrainer._get_tool_suffix_ids`` computes them (TRL 1.16): a dummy exchange rendered with and
    without the replies, the shorter cut after its last end-of-turn token.
    """
    call = {"type": "function", "function": {"name": replies[0]["name"], "arguments": {}}}
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    prefix = tokenizer.apply_chat_template(dummy, tokenize=True, return_dict=False)
    full = tokenizer.apply_chat_template(dummy + replies, add_generation_prompt=True, tokenize=True, return_dict=False)
    ends = [i for i, token in enumerate(prefix) if token == tokenizer.eos_token_id]
    if ends:
        prefix = prefix[: ends[-1] + 1]
    return len(full) - len(prefix)


def tool_use_report(rollouts: Sequence[Any], answer: Sequence[Any]) -> dict[str, float]:
    """Shares of rollouts: exact ``accuracy`` (:func:`answer_reward`), ``calls`` (at least one parsed call),
    ``failed_calls`` (at least one call that failed) and ``unparsed_calls`` (a ``<tool_call>`` left as text)."""
    n = len(rollouts)
    if n == 0:
        raise ValueError("tool_use_report got no rollouts.")
    return {
        "accuracy": sum(answer_reward(rollouts, answer)) / n,
        "calls": sum(bool(_calls(r)) for r in rollouts) / n,
        "failed_calls": sum(any(call_fails(c) for c in _calls(r)) for r in rollouts) / n,
        "unparsed_calls": sum(_unparsed_calls(r) > 0 for r in rollouts) / n,
    }
