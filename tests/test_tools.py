"""course_utils.tools: the calculator, the ChatML tool template, the data and rewards of notebook 10, and TRL's
tool loop run for one GRPO step.

Everything is built in memory: a byte-level tokenizer (every byte one token, so any text round-trips exactly,
as TRL's parser of tool calls needs) and a one-layer Llama. A random tiny model never writes a well-formed
``<tool_call>``, so the trainer test uses :class:`ScriptedLlama`: a real Llama whose forward pass GRPO trains, and
whose ``generate`` writes scripted replies (a good call, a call that fails, a malformed call, a direct answer).
"""

import pickle
import re

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import parse_response, supports_tool_calling

from course_utils.tools import (
    NO_TOOL_SYSTEM_PROMPT,
    TOOL_SYSTEM_PROMPT,
    MemoryCalculator,
    answer_reward,
    calculator,
    calculator_problems,
    failed_call_penalty,
    final_answer,
    tool_call_examples,
    tool_reply,
    tool_rollouts,
    tool_use_report,
    use_tool_chat_template,
    wellformed_call_reward,
)

#: The course model's own template (SmolLM2): role and content only, so a tool call would vanish.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def byte_tokenizer(markers=("<|im_start|>", "<|im_end|>"), eos="<|im_end|>") -> PreTrainedTokenizerFast:
    """256 byte tokens plus the special ``markers`` and a pad token; the SmolLM2 chat template."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, chat_template=SMOLLM2_TEMPLATE)
    tokenizer.add_tokens([*markers, "<pad>"], special_tokens=True)
    tokenizer.eos_token, tokenizer.pad_token = eos, "<pad>"
    return tokenizer


def call_text(expression: str) -> str:
    return '<tool_call>\n{"name": "calculator", "arguments": {"expression": "' + expression + '"}}\n</tool_call>'


# The calculator -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [("47 + 38", "85"), ("23*7", "161"), ("90 - 95", "-5"), ("7 / 2", "3.5"), ("8 / 2", "4"), (" -(3 + 4) * 2 ", "-14"),
     ("12 × 3", "36"), (19, "19"), ("1 / 3", "0.3333333333")],
)  # fmt: skip
def test_calculator_computes_plus_minus_times_divide(expression, expected):
    assert calculator(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [("", "empty"), ("2 +", "cannot read"), ("2 ** 100", "only numbers"), ("__import__('os')", "only numbers"),
     ("abs(-3)", "only numbers"), ("x + 1", "only numbers"), ("1 / 0", "division by zero"), ("9" * 101, "longer"),
     ("1e308 * 10", "finite"), ("'3' + '4'", "only numbers"), ("True + 1", "only numbers")],
)  # fmt: skip
def test_calculator_refuses_anything_else_with_a_clear_error(expression, message):
    with pytest.raises(ValueError, match=message):
        calculator(expression)


@pytest.mark.parametrize("expression", [None, True, ["1 + 2"], {"a": 1}])
def test_calculator_refuses_arguments_that_are_not_text_or_numbers(expression):
    with pytest.raises(TypeError, match="must be a string"):
        calculator(expression)


def test_the_calculators_schema_is_read_from_its_hints_and_docstring():
    from transformers.utils import get_json_schema

    function = get_json_schema(calculator)["function"]
    assert function["name"] == "calculator"
    assert function["parameters"]["required"] == ["expression"]
    assert function["parameters"]["properties"]["expression"]["type"] == "string"
    assert "47 + 38" in function["parameters"]["properties"]["expression"]["description"]


# The chat template ------------------------------------------------------------------------------------------


def test_the_chatml_tool_template_makes_tool_calling_supported_and_parseable():
    tokenizer = byte_tokenizer()
    assert not supports_tool_calling(tokenizer)  # the course model's template drops tool calls and tool replies
    assert use_tool_chat_template(tokenizer) is tokenizer
    assert supports_tool_calling(tokenizer)
    assert tokenizer.response_template is not None

    system = {"role": "system", "content": TOOL_SYSTEM_PROMPT}
    prompt = [system, {"role": "user", "content": "What is 12 + 7?"}]
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "12 + 7"}}}
    rollout = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "calculator", "content": "19"},
        {"role": "assistant", "content": "19"},
    ]
    text = tokenizer.apply_chat_template(prompt + rollout, tools=[calculator], tokenize=False)
    assert text.startswith("<|im_start|>system\n" + TOOL_SYSTEM_PROMPT + "\n\nTools:\ncalculator(expression: string): ")
    assert "Qwen" not in text  # our system prompt, not the template's default
    assert call_text("12 + 7") + "<|im_end|>\n<|im_start|>user\n<tool_response>\n19\n</tool_response>" in text

    prefix = tokenizer.apply_chat_template(prompt, tools=[calculator], add_generation_prompt=True, tokenize=True,
                                           return_dict=False)  # fmt: skip
    reply = tokenizer(call_text("12 + 7") + "<|im_end|>", add_special_tokens=False)["input_ids"]
    assert parse_response(tokenizer, reply, prefix=prefix, tools=[calculator])["tool_calls"] == [call]
    assert "tool_calls" not in parse_response(tokenizer, reply, tools=[calculator])  # no prefix: text (notebook 10)
    broken = tokenizer('<tool_call>{"name": "calculator"</tool_call><|im_end|>', add_special_tokens=False)["input_ids"]
    assert parse_response(tokenizer, broken, prefix=prefix)["content"].startswith("<tool_call>")  # kept as text


def test_the_compact_template_is_trls_qwen_template_with_a_shorter_tool_block():
    from trl.chat_template_utils import is_chat_template_prefix_preserving, qwen2_5_chat_template

    prompt = [{"role": "system", "content": TOOL_SYSTEM_PROMPT}, {"role": "user", "content": "What is 12 + 7?"}]
    verbatim = use_tool_chat_template(byte_tokenizer(), compact=False)
    assert verbatim.chat_template == qwen2_5_chat_template
    long = verbatim.apply_chat_template(prompt, tools=[calculator], tokenize=False)
    compact = use_tool_chat_template(byte_tokenizer())
    short = compact.apply_chat_template(prompt, tools=[calculator], tokenize=False)
    assert len(short) < 0.55 * len(long)  # 541 characters against 1,008 (with SmolLM2's tokens: 150 against 275)
    assert 'for example "47 + 38"' in short  # the argument's description still reaches the model
    assert compact.response_template == verbatim.response_template  # the same parser of calls
    assert is_chat_template_prefix_preserving(compact)  # what TRL's multi-turn loop needs of a template
    default = compact.apply_chat_template(prompt[1:], tools=[calculator], tokenize=False)
    assert default.startswith("<|im_start|>system\nYou are a helpful assistant.\n\nTools:")  # not "You are Qwen"


def test_without_a_tool_the_template_renders_a_conversation_as_the_course_models_own():
    tokenizer = byte_tokenizer()
    conversation = [{"role": "system", "content": NO_TOOL_SYSTEM_PROMPT}, {"role": "user", "content": "What is 2 + 3?"}]
    before = tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    after = use_tool_chat_template(tokenizer).apply_chat_template(conversation, add_generation_prompt=True,
                                                                  tokenize=False)  # fmt: skip
    assert after == before  # so the baseline without the tool sees the same prompt either way


def test_the_tool_template_needs_single_token_chatml_markers_ending_sequences():
    with pytest.raises(ValueError, match="no single token '<\\|im_start\\|>'"):
        use_tool_chat_template(byte_tokenizer(markers=("<|im_end|>",)))
    with pytest.raises(ValueError, match="ends sequences with '<pad>'"):
        use_tool_chat_template(byte_tokenizer(eos="<pad>"))


# Data -------------------------------------------------------------------------------------------------------


def test_calculator_problems_are_seeded_disjoint_and_correct():
    data = calculator_problems(n_train=30, n_test=10, seed=3)
    assert calculator_problems(n_train=30, n_test=10, seed=3)["test"]["question"] == data["test"]["question"]
    assert not set(data["train"]["question"]) & set(data["test"]["question"])
    assert data["test"]["kind"][:4] == ["add2", "mul21", "add2", "mul21"]
    for row in data["train"]:
        a, op, b = re.fullmatch(r"What is (\d+) ([+*]) (\d+)\?", row["question"]).groups()
        assert row["answer"] == str(int(a) + int(b) if op == "+" else int(a) * int(b)) == calculator(row["expression"])
        assert row["prompt"] == [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
                                 {"role": "user", "content": row["question"]}]  # fmt: skip
    baseline = calculator_problems(n_train=0, n_test=10, seed=3, system_prompt=NO_TOOL_SYSTEM_PROMPT)["test"]
    assert baseline["question"] == data["test"]["question"]
    assert baseline["prompt"][0][0]["content"] == NO_TOOL_SYSTEM_PROMPT
    with pytest.raises(ValueError, match="Unknown kind"):
        calculator_problems(kinds=("sub2",))


def test_tool_call_examples_teach_the_call_and_nothing_after_it():
    rows = calculator_problems(n_train=4, n_test=1)["train"]
    examples = tool_call_examples(rows, n=2)
    assert set(examples.column_names) == {"prompt", "completion", "tools"}
    completion = examples[0]["completion"]
    assert len(completion) == 1 and completion[0]["role"] == "assistant"  # no tool reply, no final answer
    assert completion[0]["tool_calls"][0]["function"]["arguments"]["expression"] == rows[0]["expression"]
    tokenizer = use_tool_chat_template(byte_tokenizer())
    # What SFTTrainer trains on: the prompt rendered with the tool's schema, then the call.
    text = tokenizer.apply_chat_template(examples[0]["prompt"] + completion, tools=[calculator], tokenize=False)
    assert text.endswith("<|im_start|>assistant\n" + call_text(rows[0]["expression"]) + "<|im_end|>\n")
    with pytest.raises(ValueError, match="between 1 and the 4 rows"):
        tool_call_examples(rows, n=5)


def test_tool_call_examples_with_answers_and_direct_rows():
    """call_share of the rows call, the others answer at once; answers=True shows every row's turn after a reply."""
    rows = calculator_problems(n_train=4, n_test=1)["train"]
    examples = tool_call_examples(rows, n=4, answers=True, call_share=0.5)
    kinds = ["call" if e["completion"][0].get("tool_calls") else "after reply" if e["prompt"][-1]["role"] == "tool"
             else "direct" for e in examples]  # fmt: skip
    # rows 1 and 3 call (2 of 4, spread out); every row, calling or not, also shows what follows a reply
    assert kinds == ["direct", "after reply", "call", "after reply"] * 2
    assert examples[0]["completion"][0]["content"] == rows[0]["answer"]  # the direct path: the number, no call
    after = examples[1]  # row 0's turn after the reply: its call and the calculator's result are the prompt
    assert after["prompt"][-2]["tool_calls"][0]["function"]["arguments"] == {"expression": rows[0]["expression"]}
    reply = {"role": "tool", "name": "calculator", "content": rows[0]["answer"], "tool_calls": None}
    assert after["prompt"][-1] == reply
    assert after["completion"] == [{"role": "assistant", "content": rows[0]["answer"], "tool_calls": None}]
    tokenizer = use_tool_chat_template(byte_tokenizer())
    text = tokenizer.apply_chat_template(after["prompt"] + after["completion"], tools=[calculator], tokenize=False)
    assert text.endswith(f"<tool_response>\n{rows[0]['answer']}\n</tool_response><|im_end|>\n"
                         f"<|im_start|>assistant\n{rows[0]['answer']}<|im_end|>\n")  # fmt: skip
    assert len(tool_call_examples(rows, n=4, call_share=0.0)) == 4  # nobody calls: 4 direct answers
    with pytest.raises(ValueError, match="call_share"):
        tool_call_examples(rows, n=4, call_share=1.5)


# Rewards ----------------------------------------------------------------------------------------------------


def rollout(expression=None, reply="5", final="5", malformed=False):
    """One rollout as TRL hands it to a reward: the call (parsed, or left as text), the tool's reply, the answer."""
    if malformed:
        return [{"role": "assistant", "content": '<tool_call>{"name": "calculator"</tool_call>'}]
    if expression is None:
        return [{"role": "assistant", "content": final}]
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expression}}}
    messages = [{"role": "assistant", "content": "", "tool_calls": [call]}]
    if reply is not None:
        messages.append({"role": "tool", "name": "calculator", "content": reply})
    if final is not None:
        messages.append({"role": "assistant", "content": final})
    return messages


def test_answer_reward_pays_the_last_message_when_it_is_the_number():
    completions = [
        rollout("2 + 3"),  # called, then answered 5: 1.0
        rollout(final="5."),  # answered 5 without the tool: 1.0 (the tool is not required)
        rollout("2 + 3", final="The answer is 5."),  # not only the number: 0.0
        rollout("2 + 3", final=None),  # ended on the tool's reply: 0.0
        rollout(final="6"),  # wrong: 0.0
        rollout(malformed=True),  # a broken call and nothing else: 0.0
        "5",  # the standard (non-chat) format works too: 1.0
    ]
    assert answer_reward(completions, answer=["5"] * 7) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert final_answer(rollout("2 + 3", final=None)) is None
    with pytest.raises(ValueError, match="2 completions but 1 answers"):
        answer_reward([rollout(), rollout()], answer=["5"])


def test_wellformed_call_reward_is_the_share_of_attempts_parsed():
    two_calls_one_broken = rollout("2 + 3") + rollout(malformed=True) + rollout("5 * 1")
    completions = [rollout("2 + 3"), rollout(malformed=True), rollout(final="5"), two_calls_one_broken]
    # 1 parsed of 1; 0 of 1; no attempt; 2 parsed of 3 attempts
    assert wellformed_call_reward(completions) == [1.0, 0.0, 0.0, pytest.approx(2 / 3)]


def test_wellformed_call_reward_pays_only_an_exchange_that_ends_on_a_number():
    calls_again = rollout("2 + 3", final=None) + rollout("5", reply=None, final=None)  # what seed 202 learned
    echo = rollout("2 + 3", final="<tool_response>\n5\n</tool_response>")  # seeds 101 and 404 at 5e-5
    # a wrong number still completes the exchange: 1 of 1 (answer_reward gives it 0); the others end on no number
    assert wellformed_call_reward([rollout("2 + 3", final="6"), calls_again, echo, rollout("2 + 3", final=None)]) == [
        1.0, 0.0, 0.0, 0.0]  # fmt: skip


def test_wellformed_call_reward_pays_no_call_whose_turn_also_writes_text():
    stutter = rollout("2 + 3")
    stutter[0]["content"] = "</tool_call>\n</tool_call>"  # what GRPO taught seed 707's policy to write after a call
    clean_then_stutter = rollout("2 + 3") + stutter
    whitespace = rollout("2 + 3")
    whitespace[0]["content"] = "\n"
    # 0 clean of 1 parsed; 1 clean of 2 parsed; whitespace is nothing: 1 of 1
    assert wellformed_call_reward([stutter, clean_then_stutter, whitespace]) == [0.0, 0.5, 1.0]


def test_wellformed_call_reward_with_questions_pays_only_calls_on_the_question_numbers():
    asked = "What is 59 + 67?"
    swapped, spaced = rollout("67 + 59", final="126"), rollout("59+67", final="126")
    constant, example = rollout("1", final="1"), rollout("47 + 38", final="85")  # seeds 2020 and 1515 learned these
    extra, fewer = rollout("59 + 67 + 1", final="127"), rollout("59", final="59")
    second_off = rollout("59 + 67", final=None) + rollout("126", reply="126", final="126")  # 2 clean, 1 off topic
    no_call = rollout(final="126")
    completions = [swapped, spaced, constant, example, extra, fewer, second_off, no_call]
    # the same numbers in any order or spacing: 1 of 1; any other number set in any call: 0.0; no call: 0.0
    assert wellformed_call_reward(completions, question=[asked] * 8) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert wellformed_call_reward(completions)[:4] == [1.0, 1.0, 1.0, 1.0]  # without questions, any clean call pays
    wrong_arguments = [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "calculator", "arguments": "59 + 67"}}]}, *no_call]  # fmt: skip
    assert wellformed_call_reward([wrong_arguments], question=[asked]) == [0.0]  # arguments that are not a dict
    with pytest.raises(ValueError, match="2 completions but 1 questions"):
        wellformed_call_reward([swapped, spaced], question=[asked])


def test_failed_call_penalty_is_minus_the_share_of_calls_that_fail():
    wrong_tool = [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "calc", "arguments": {"expression": "2 + 3"}}}]}]  # fmt: skip
    wrong_argument = [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "calculator", "arguments": {"x": "2 + 3"}}}]}]  # fmt: skip
    completions = [
        rollout("2 + 3"),  # runs: 0.0
        rollout("2 +"),  # cannot be read: -1.0
        rollout("2 + 3") + rollout("1 / 0"),  # one of two fails: -0.5
        wrong_tool,  # no such tool: -1.0
        wrong_argument,  # calculator() got an unexpected keyword argument: -1.0
        rollout(final="5"),  # no call: 0.0
    ]
    assert failed_call_penalty(completions) == [0.0, -1.0, -0.5, -1.0, -1.0, 0.0]


def test_rewards_are_named_and_picklable():
    for reward in (answer_reward, wellformed_call_reward, failed_call_penalty):
        assert pickle.loads(pickle.dumps(reward)) is reward
        assert reward.__name__ in {"answer_reward", "wellformed_call_reward", "failed_call_penalty"}


# One GRPO step through TRL's tool loop ------------------------------------------------------------------------


def tiny_config(tokenizer) -> LlamaConfig:
    """A one-layer Llama over the byte tokenizer: fast, and long enough for a tool-call rollout."""
    return LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )  # fmt: skip


class ScriptedLlama(LlamaForCausalLM):
    """A tiny Llama whose ``generate`` follows a script; its forward pass (what GRPO scores and trains) is real.

    First turn, by row of the batch: 0, a good call; 1, a call the calculator refuses; 2, a malformed call
    (TRL cannot parse it, so nothing runs); 3, the answer without the tool. After a tool's reply: the number
    the calculator returned, or "I do not know" after an error. Each cut to the ``max_new_tokens`` it is given.
    """

    script_tokenizer = None
    replies: list[str] = []
    stutter = False  # row 0's good call writes "</tool_call>" three times, as seed 2222's policy learned to

    def generate(self, input_ids, attention_mask=None, **kwargs):
        tokenizer = self.script_tokenizer
        config = kwargs.get("generation_config")
        stops = kwargs.get("stop_strings") or getattr(config, "stop_strings", None) or []
        if stops and kwargs.get("tokenizer") is None:  # as transformers: it finds stop strings with the tokenizer
            raise ValueError("When generating with stop strings, you must pass the model's tokenizer")
        rows = []
        for i, (ids, mask) in enumerate(zip(input_ids, attention_mask, strict=True)):
            text = tokenizer.decode(ids[mask.bool()])
            if "<tool_response>" in text:
                result = text.rsplit("<tool_response>\n", 1)[1].split("\n</tool_response>")[0]
                reply = result if re.fullmatch(r"-?\d+", result) else "I do not know"
            else:
                expression = re.findall(r"What is (.+?)\?", text)[-1]
                reply = [call_text(expression), call_text(expression.split()[0] + " +"),
                         call_text(expression)[:-len("}\n</tool_call>")] + "\n</tool_call>",
                         calculator(expression)][i % 4]  # fmt: skip
                reply += "\n</tool_call>" * 2 if self.stutter and i % 4 == 0 else ""
            self.replies.append(reply)
            ends = [reply.index(stop) + len(stop) for stop in stops if stop in reply]
            # as transformers stops: the text up to the first stop string, then padding; else the end of turn
            ids = tokenizer(reply[: min(ends)] if ends else reply + "<|im_end|>", add_special_tokens=False)["input_ids"]
            rows.append(ids[: kwargs["generation_config"].max_new_tokens] if "generation_config" in kwargs else
                        ids[: kwargs.get("max_new_tokens", len(ids))])  # fmt: skip
        width = max(map(len, rows))
        new = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
        return torch.cat([input_ids, new.to(input_ids.device)], dim=1)


def test_one_grpo_step_runs_the_calculator_and_logs_tool_metrics(tmp_path):
    tokenizer = use_tool_chat_template(byte_tokenizer())
    config = tiny_config(tokenizer)
    torch.manual_seed(0)
    model = ScriptedLlama(config)
    model.script_tokenizer, model.replies = tokenizer, []
    seen = []

    def recorder(completions, completion_ids, **kwargs):
        seen.append((completions, completion_ids))
        return [0.0] * len(completions)

    data = calculator_problems(n_train=2, n_test=0, seed=0)["train"]  # an addition, then a multiplication
    args = GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=256, max_tool_calling_iterations=2, reward_weights=[1.0, 0.2, 0.2, 0.0],
        logging_steps=1, save_strategy="no", report_to="none", bf16=False, use_cpu=True, seed=0,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model, reward_funcs=[answer_reward, wellformed_call_reward, failed_call_penalty, recorder], args=args,
        train_dataset=data, processing_class=tokenizer, tools=[calculator],
    )  # fmt: skip
    trainer.train()

    (completions, completion_ids), = seen  # fmt: skip
    roles = [[m["role"] for m in c] for c in completions]
    # Rows 0 and 1 called the tool: call, reply, answer. Row 2's call was malformed and row 3 answered directly.
    assert roles == [["assistant", "tool", "assistant"], ["assistant", "tool", "assistant"], ["assistant"],
                     ["assistant"]]  # fmt: skip
    good, failed = completions[0], completions[1]
    assert good[0]["tool_calls"][0]["function"]["arguments"] == {"expression": data["expression"][0]}
    assert good[1]["content"] == data["answer"][0] == good[2]["content"]
    assert failed[1]["content"].startswith("{'error': \"cannot read")  # TRL returns str({"error": str(exception)})
    assert failed[2]["content"] == "I do not know"
    assert completions[2][0]["content"].startswith("<tool_call>") and "tool_calls" not in completions[2][0]

    logged = trainer.state.log_history[0]
    assert logged["tools/call_frequency"] == 2 / 4  # two calls in four rollouts
    assert logged["tools/failure_frequency"] == 1 / 2  # one of the two calls failed
    assert logged["rewards/answer_reward/mean"] == 2 / 4  # rows 0 and 3 end on the right number
    # row 0 only: row 1's call was parsed but it answered "I do not know", and row 2's call is left as text
    assert logged["rewards/wellformed_call_reward/mean"] == 1 / 4
    assert logged["rewards/failed_call_penalty/mean"] == -1 / 4  # row 1
    # The tool's reply is masked out: a completion's length counts only the tokens the model wrote.
    written = [len(tokenizer(r + "<|im_end|>", add_special_tokens=False)["input_ids"]) for r in model.replies]
    by_row = [written[0] + written[4], written[1] + written[5], written[2], written[3]]
    assert logged["completions/mean_length"] == sum(by_row) / 4
    lengths = [len(ids) for ids in completion_ids]  # completion_ids hold the tool's reply too
    assert lengths[0] > by_row[0] and lengths[1] > by_row[1] and lengths[2:] == by_row[2:]


def test_sft_on_tool_call_examples_trains_on_the_call_only(tmp_path):
    """The warm start's loss covers the assistant's call and its end of turn, not the prompt or the tool's schema."""
    from trl import SFTConfig, SFTTrainer

    tokenizer = use_tool_chat_template(byte_tokenizer())
    config = tiny_config(tokenizer)
    torch.manual_seed(0)
    rows = calculator_problems(n_train=2, n_test=0)["train"]
    args = SFTConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_length=2048, logging_steps=1,
        save_strategy="no", report_to="none", bf16=False, use_cpu=True, seed=0,
    )  # fmt: skip
    trainer = SFTTrainer(model=LlamaForCausalLM(config), args=args, train_dataset=tool_call_examples(rows, n=2),
                         processing_class=tokenizer)  # fmt: skip
    example = trainer.train_dataset[0]
    trained = [label for label in example["labels"] if label != -100]  # -100: left out of the loss
    assert tokenizer.decode(trained) == call_text(rows[0]["expression"]) + "<|im_end|>\n"
    assert '"name": "calculator"' in tokenizer.decode(example["input_ids"])  # the schema is in the prompt
    trainer.train()
    assert trainer.state.log_history[0]["loss"] > 0


# Rollouts outside training -------------------------------------------------------------------------------------


NOT_TEXT = "expression must be a string such as '47 + 38', got list"


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ({"name": "calculator", "arguments": {"expression": "7 / 0"}}, "division by zero in '7 / 0'"),
        ({"name": "calculator", "arguments": {"x": "7"}}, "calculator() got an unexpected keyword argument 'x'"),
        ({"name": "calculator", "arguments": {"expression": [7]}}, NOT_TEXT),
        ({"name": "calculator", "arguments": {"expression": "9" * 101}}, "expression is longer than 100 characters"),
        ({"name": "abacus", "arguments": {}}, "Tool abacus not found."),
    ],
)  # fmt: skip
def test_tool_reply_shows_the_model_the_error_as_trl_does(call, error):
    # TRL's loop catches the exception and appends str({"error": str(exception)}) as the tool's message.
    assert tool_reply(call) == {"role": "tool", "name": call["name"], "content": str({"error": error})}


def test_tool_reply_returns_the_result_as_text():
    assert tool_reply({"name": "calculator", "arguments": {"expression": "6 * 7"}})["content"] == "42"


#: Rows 0 and 1 of the scripted batch at each budget: (messages in the rollout, the last one's text). With the byte
#: tokenizer a token is a character: row 0's call takes 88 tokens with its end of turn, the reply's wrapper and the next
#: generation prompt 56, "174<|im_end|>" 4 (148 in all); row 1's call 85, the error reply 132, "I do not
#: know<|im_end|>" 14 (231).
BUDGET_CUTS = {
    256: [(3, "174"), (3, "I do not know")],  # nothing cut
    225: [(3, "174"), (3, "I do not")],  # row 1: 225 - 85 - 132 = 8 tokens left for its answer
    146: [(3, "17"), (1, "")],  # row 0: 146 - 88 - 56 = 2 tokens left; row 1: 85 + 132 > 146, the reply dropped
    100: [(1, ""), (1, "")],  # 88 + 56 and 85 + 132 are both over 100: both rollouts end on their call
    60: [(1, '<tool_call>\n{"name": "calculator", "arguments": {"expression')] * 2,  # the calls cut at 60 tokens
}


@pytest.mark.parametrize("budget", BUDGET_CUTS)
def test_tool_rollouts_match_what_grpo_passes_to_the_rewards(tmp_path, budget):
    """The same scripted model gives the same rollouts in GRPOTrainer's tool loop and in tool_rollouts, also where
    ``max_completion_length`` cuts an answer short, drops a tool's reply or cuts the call itself."""
    tokenizer = use_tool_chat_template(byte_tokenizer())
    torch.manual_seed(0)
    model = ScriptedLlama(tiny_config(tokenizer))
    model.script_tokenizer, model.replies = tokenizer, []
    seen = []

    def recorder(prompts, completions, answer, **kwargs):
        seen.extend(zip([p[:2] for p in prompts], completions, answer, strict=True))  # system and user messages
        return [0.0] * len(completions)

    data = calculator_problems(n_train=2, n_test=0, seed=0)["train"]
    args = GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=budget, max_tool_calling_iterations=1, learning_rate=0.0, logging_steps=1,
        save_strategy="no", report_to="none", bf16=False, use_cpu=True, seed=0,
    )  # fmt: skip
    GRPOTrainer(model=model, reward_funcs=[recorder], args=args, train_dataset=data, processing_class=tokenizer,
                tools=[calculator]).train()  # fmt: skip
    prompts, completions, answers = zip(*seen, strict=True)  # in the trainer's (shuffled) order
    rollouts = tool_rollouts(model, tokenizer, list(prompts), max_completion_length=budget)
    assert rollouts == list(completions)
    assert [(len(r), r[-1]["content"]) for r in rollouts[:2]] == BUDGET_CUTS[budget]
    if budget == 256:  # row 0 calls well and answers; 1's call fails; 2's call is malformed; 3 answers at once
        assert tool_use_report(rollouts, answers) == {
            "accuracy": 2 / 4, "calls": 2 / 4, "failed_calls": 1 / 4, "unparsed_calls": 1 / 4,
        }  # fmt: skip


def test_tool_rollouts_stop_each_turn_where_grpo_stops_it(tmp_path):
    """With ``stop_strings``, a call turn that writes ``</tool_call>`` again and again ends at the first one, in
    GRPOTrainer's loop (given the tokenizer by course_utils.trl_fixes) and in tool_rollouts alike."""
    tokenizer = use_tool_chat_template(byte_tokenizer())
    tokenizer.pad_token = tokenizer.eos_token  # stop strings need padding that ends a sequence
    torch.manual_seed(0)
    model = ScriptedLlama(tiny_config(tokenizer))
    model.script_tokenizer, model.replies, model.stutter = tokenizer, [], True
    seen = []

    def recorder(prompts, completions, **kwargs):
        seen.extend(zip([p[:2] for p in prompts], completions, strict=True))
        return [0.0] * len(completions)

    stops = ["</tool_call>"]
    args = GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=256, max_tool_calling_iterations=1, learning_rate=0.0, logging_steps=1,
        save_strategy="no", report_to="none", bf16=False, use_cpu=True, seed=0,
        generation_kwargs={"stop_strings": stops},
    )  # fmt: skip
    data = calculator_problems(n_train=2, n_test=0, seed=0)["train"]
    GRPOTrainer(model=model, reward_funcs=[recorder], args=args, train_dataset=data, processing_class=tokenizer,
                tools=[calculator]).train()  # fmt: skip
    prompts, completions = zip(*seen, strict=True)
    rollouts = tool_rollouts(model, tokenizer, list(prompts), max_completion_length=256, stop_strings=stops)
    assert rollouts == list(completions)
    assert model.replies[0].count("</tool_call>") == 3, "the script stuttered"
    stuttered = rollouts[0]  # stopped after its first </tool_call>: the call ran and the answer followed
    assert [m["role"] for m in stuttered] == ["assistant", "tool", "assistant"]
    expression = stuttered[0]["tool_calls"][0]["function"]["arguments"]["expression"]
    assert stuttered[0]["content"] == ""  # nothing after the call: the stutter was cut off
    assert stuttered[1]["content"] == stuttered[2]["content"] == calculator(expression)


def test_tool_rollouts_stop_strings_need_padding_that_ends_a_sequence():
    tokenizer = use_tool_chat_template(byte_tokenizer())  # pads with "<pad>", which ends nothing
    named = r"tool_rollouts\(stop_strings=\.\.\.\) needs a pad token .* pads with '<pad>'\. "
    with pytest.raises(ValueError, match=named + r"Set tokenizer\.pad_token = tokenizer\.eos_token"):
        tool_rollouts(None, tokenizer, [], stop_strings=["</tool_call>"])


# An environment ------------------------------------------------------------------------------------------------


def test_memory_calculator_keeps_state_per_instance_and_reset_clears_it():
    env, other = MemoryCalculator(), MemoryCalculator()
    assert env.calculate("12 * 7") == "84"
    assert env.remember("product") == "stored product = 84"
    assert env.calculate("product + 5") == "89"  # (84) + 5
    assert env.calculate("product * product") == "7056"  # 84 * 84
    assert env.calculate("2e3 / 4") == "500"  # the e of 2e3 is not a name
    with pytest.raises(ValueError, match=r"unknown name\(s\) \['product'\]"):
        other.calculate("product + 5")  # another rollout's instance: its memory is its own
    env.reset(question="What is 1 + 1?", answer="2")  # TRL passes the row's columns
    assert env.memory == {} and env.last is None


@pytest.mark.parametrize(
    ("steps", "error"),
    [
        ([("remember", "total")], "nothing to remember yet: call calculate first"),
        ([("calculate", "1 + 1"), ("remember", "2x")], "such as 'total'; got '2x'"),
        ([("calculate", "total + 1")], "store a result first with remember"),
        ([("calculate", ["1", "2"])], "expression must be a string"),
        ([("calculate", "1 / 0")], "division by zero"),
    ],
)
def test_memory_calculator_errors_say_what_to_change(steps, error):
    env = MemoryCalculator()
    *before, (method, argument) = steps
    for name, value in before:
        getattr(env, name)(value)
    with pytest.raises((ValueError, TypeError), match=re.escape(error)):
        getattr(env, method)(argument)


def test_grpo_trainer_shows_the_environment_methods_as_tools(tmp_path):
    """environment_factory: TRL offers calculate and remember (not reset) and renders their schema in the prompt."""
    tokenizer = use_tool_chat_template(byte_tokenizer())
    data = calculator_problems(n_train=2, n_test=0, seed=0)["train"]
    args = GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, num_generations=2,
        max_completion_length=64, max_tool_calling_iterations=2, logging_steps=1, save_strategy="no",
        report_to="none", bf16=False, use_cpu=True, seed=0,
    )  # fmt: skip
    trainer = GRPOTrainer(model=LlamaForCausalLM(tiny_config(tokenizer)), reward_funcs=[answer_reward], args=args,
                          train_dataset=data, processing_class=tokenizer,
                          environment_factory=MemoryCalculator)  # fmt: skip
    assert [tool.__name__ for tool in trainer.tools] == ["calculate", "remember"]
    text = tokenizer.apply_chat_template(data[0]["prompt"], tools=trainer.tools, tokenize=False)
    assert "\nremember(name: string): " in text and "stored names stand for their values" in text
