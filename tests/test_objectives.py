"""course_utils.objectives, the GRPO family in plain PyTorch, against the installed TRL's GRPOTrainer.

As notebook 06 does for GRPO: a tiny GRPOTrainer in float64 samples and scores one batch
(``_generate_and_score_completions``), and the same batch goes through ``trainer.compute_loss`` and through
:func:`policy_loss` on :func:`per_token_logps`; the losses and every gradient entry must agree within 1e-5.
Two scenarios: "on-policy" (the batch as TRL made it: every ratio 1) and "moved", where the sampling policy's
log-probs are set so that the ratios take chosen values on both sides of every clip and cap, and the reference's
are perturbed by up to +-0.5, so that the KL term and its gradient are not zero.

The toy tests of :func:`token_weights` give the expected arithmetic beside each assertion.
"""

from __future__ import annotations

import ast
import doctest
import json
import math
from pathlib import Path

import pytest
import torch
from conftest import TINY_CHAT_TEMPLATE, TINY_WORDS
from datasets import Dataset
from repo_modules import REPO_ROOT, load
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer

from course_utils import objectives
from course_utils.objectives import group_advantages, per_token_logps, policy_loss, token_weights

TOLERANCE = 1e-5
G = 4  # completions per prompt
PROMPTS = 2
MAX_COMPLETION_LENGTH = 6
TEMPERATURE = 0.9  # not 1, so that per_token_logps must divide the logits by it
BETA = 0.04  # the KL term is in every comparison
#: The "moved" batch's ratios pi_theta / pi_old: below the clip range, inside it, above cispo's cap of 1.1,
#: between 1.2 and 1.28 (kept by DAPO's clip-higher, clipped by GRPO's 1.2), above grpo_delta's cap of 1.3.
MOVED_RATIOS = (0.7, 0.9, 1.05, 1.15, 1.25, 1.35, 1.5)

#: Each variant's GRPOConfig keywords; all but scale_rewards are also policy_loss's keywords.
VARIANTS = {
    "grpo": {"loss_type": "grpo"},
    "bnpo": {"loss_type": "bnpo"},
    "dr_grpo": {"loss_type": "dr_grpo", "scale_rewards": "none"},  # the paper's constant normaliser and raw advantages
    "dapo": {"loss_type": "dapo", "epsilon_high": 0.28},  # clip-higher with the DAPO paper's 0.28
    # GSPO as TRL's paper index sets it up (GSPO paper v2, section 5.1): sequence ratios, a very narrow clip
    "gspo": {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4},
    "cispo": {"loss_type": "cispo", "epsilon_high": 1.1},  # a cap the moved batch exceeds (TRL recommends 5.0)
    "sapo": {"loss_type": "sapo"},  # TRL's temperatures: 1.0 for positive advantages, 1.05 for the others
    "grpo_delta": {"loss_type": "grpo", "delta": 1.3},  # INTELLECT-2's cap on the unclipped ratio (> 1 + epsilon)
}


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """conftest's tiny_tokenizer, built here because a module-scoped fixture cannot use a function-scoped one."""
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(TINY_WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<|im_end|>", unk_token="<unk>",
        chat_template=TINY_CHAT_TEMPLATE,
    )  # fmt: skip


def digit_sum_reward(completion_ids, **kwargs) -> list[float]:
    """Any reward that spreads within a group will do: the sum of the token ids, modulo 7."""
    return [float(sum(ids) % 7) for ids in completion_ids]


class Proofs:
    """One GRPOTrainer per variant, on batches TRL sampled from the same weights with the same seed; results cached."""

    def __init__(self, directory):
        self.directory = directory
        self.tokenizer = tiny_tokenizer()
        config = LlamaConfig(  # conftest's tiny_config
            vocab_size=len(self.tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=2, intermediate_size=32, max_position_embeddings=128,
            pad_token_id=self.tokenizer.pad_token_id, eos_token_id=self.tokenizer.eos_token_id, bos_token_id=None,
        )  # fmt: skip
        torch.manual_seed(0)
        # Saved, because with beta > 0 TRL loads its reference model from the policy's path.
        LlamaForCausalLM(config).save_pretrained(directory / "model")
        self.data = Dataset.from_dict({"prompt": [[{"role": "user", "content": "w1 w2 w3"}],
                                                  [{"role": "user", "content": "w4 w5"}]]})  # fmt: skip
        self.results: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}

    def trainer(self, **variant) -> tuple[GRPOTrainer, list]:
        model = LlamaForCausalLM.from_pretrained(self.directory / "model", dtype=torch.float64)
        recorded = []

        def reward(completion_ids, **kwargs):
            recorded.append(digit_sum_reward(completion_ids))
            return recorded[-1]

        config = GRPOConfig(
            output_dir=str(self.directory / "out"), per_device_train_batch_size=PROMPTS * G, num_generations=G,
            max_completion_length=MAX_COMPLETION_LENGTH, temperature=TEMPERATURE, beta=BETA, use_cpu=True,
            bf16=False, report_to="none", seed=0, **variant,
        )  # fmt: skip
        trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=self.data,
                              processing_class=self.tokenizer)  # fmt: skip
        model.eval()  # as in notebook 06: in eval mode TRL does not rescale for gradient accumulation (1 here anyway)
        return trainer, recorded

    def __call__(self, name: str) -> dict:
        if name not in self.results:
            self.results[name] = self._prove(VARIANTS[name])
        return self.results[name]

    def _batch(self, trainer: GRPOTrainer, recorded: list) -> dict:
        """TRL's batch, sampled and scored by this trainer, the same batch moved, and the rewards TRL received."""
        rows = [self.data[i] for i in range(PROMPTS) for _ in range(G)]  # as TRL's sampler repeats them
        torch.manual_seed(0)
        inputs = trainer._generate_and_score_completions(rows)
        # dapo and cispo divide by num_items_in_batch, the generation batch's tokens: this batch's, here
        assert inputs["num_items_in_batch"].item() == inputs["completion_mask"].sum().item()
        with torch.no_grad():
            current = per_token_logps(trainer.model, inputs, TEMPERATURE)
        # pi_theta / pi_old = MOVED_RATIOS, laid along diagonals: every completion meets several of them
        rows, columns = torch.meshgrid(torch.arange(current.size(0)), torch.arange(current.size(1)), indexing="ij")
        ratios = torch.tensor(MOVED_RATIOS, dtype=torch.float64)[(rows + columns) % len(MOVED_RATIOS)]
        noise = torch.rand(current.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) - 0.5
        moved = dict(inputs, old_per_token_logps=current - ratios.log())
        moved["ref_per_token_logps"] = inputs["ref_per_token_logps"] + noise  # up to +-0.5: the KL term at work
        rewards = torch.tensor(recorded[-1], dtype=torch.float64)
        return {"inputs": inputs, "moved batch": moved, "current": current, "rewards": rewards}

    def _prove(self, variant: dict) -> dict:
        trainer, recorded = self.trainer(**variant)
        model = trainer.model
        scale_rewards = variant.get("scale_rewards", "group")
        # The batch depends on scale_rewards (the advantages) and not on the loss: variants that share
        # scale_rewards share one batch, sampled by the first of them (sampling is most of the time here).
        if scale_rewards not in self.batches:
            self.batches[scale_rewards] = self._batch(trainer, recorded)
        result = dict(self.batches[scale_rewards])
        inputs, moved, mask = result["inputs"], result["moved batch"], result["inputs"]["completion_mask"]
        advantages = group_advantages(result["rewards"], G, scale_rewards)
        result["advantages"] = advantages
        result["advantage difference"] = (advantages - inputs["advantages"].double()).abs().max().item()
        loss_kwargs = {k: v for k, v in variant.items() if k != "scale_rewards"}
        for scenario, batch in (("on-policy", inputs), ("moved", moved)):
            model.zero_grad(set_to_none=True)
            trl_loss = trainer.compute_loss(model, batch)
            trl_loss.backward()
            trl_grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]

            model.zero_grad(set_to_none=True)
            logps = per_token_logps(model, batch, TEMPERATURE)
            old = batch["old_per_token_logps"] if "old_per_token_logps" in batch else logps.detach()
            our_loss = policy_loss(logps, old, batch["ref_per_token_logps"], advantages, mask, beta=BETA,
                                   max_completion_length=MAX_COMPLETION_LENGTH, **loss_kwargs)  # fmt: skip
            our_loss.backward()
            our_grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]

            assert len(our_grads) == len(trl_grads) > 0, "both losses must reach the same parameters"
            pairs = zip(trl_grads, our_grads, strict=True)
            result[scenario] = {
                "trl loss": trl_loss.item(),
                "trl gradient": torch.cat([g.flatten() for g in trl_grads]),
                "loss difference": abs(trl_loss.item() - our_loss.item()),
                "largest gradient entry": max(g.abs().max().item() for g in trl_grads),
                "gradient difference": max((a - b).abs().max().item() for a, b in pairs),
            }
        return result


@pytest.fixture(scope="module")
def proofs(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors this small only lose to threads: 6 times slower on two busy cores
    yield Proofs(tmp_path_factory.mktemp("objectives"))
    torch.set_num_threads(threads)


# The proof: loss and gradients against TRL ----------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["on-policy", "moved"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_loss_and_gradients_match_trl(proofs, name, scenario):
    # TRL 1.16 computes log-probs with a fused, chunked LM head whose log-softmax runs in float32 whatever the
    # model's dtype (trl/kernels/chunked_logprob.py), and its advantages and reference log-probs come back in
    # float32: so the differences here are about 1e-8, not float64's 1e-15. Still 1000 times under the tolerance.
    r = proofs(name)[scenario]
    assert r["largest gradient entry"] > 1e-3, "a vanishing gradient would make the comparison trivial"
    assert r["loss difference"] <= TOLERANCE, r
    assert r["gradient difference"] <= TOLERANCE, r


@pytest.mark.parametrize("name", ["grpo", "dr_grpo"])
def test_group_advantages_match_trl(proofs, name):
    """scale_rewards="group" (grpo) and "none" (dr_grpo): from the rewards TRL received, the advantages it used."""
    assert proofs(name)["advantage difference"] <= TOLERANCE


#: What each variant is set beside so that one change tells them apart (bnpo and dapo are the same aggregation
#: on one process, with all of the generation batch in one step).
BASELINES = {
    "bnpo": "grpo",  # the aggregation
    "dr_grpo": "grpo",  # the aggregation and the unscaled advantages
    "dapo": "bnpo",  # clip-higher alone
    "gspo": "grpo",  # the sequence ratio (and its narrow clip range)
    "cispo": "bnpo",  # the stopped-gradient weight instead of the clipped surrogate
    "sapo": "grpo",  # the soft gate instead of the clip
    "grpo_delta": "grpo",  # the cap on the unclipped ratio alone
}


@pytest.mark.parametrize("name", list(BASELINES))
def test_each_variant_changes_the_loss_and_gradients_on_the_moved_batch(proofs, name):
    """Same completions, one change: TRL's losses and gradients differ, so the proof above could not pass by
    computing the same objective for two variants (on a batch where the change does not act, for example)."""
    baseline, variant = proofs(BASELINES[name]), proofs(name)
    assert torch.equal(variant["inputs"]["completion_ids"], baseline["inputs"]["completion_ids"])
    assert abs(variant["moved"]["trl loss"] - baseline["moved"]["trl loss"]) > 100 * TOLERANCE
    assert (variant["moved"]["trl gradient"] - baseline["moved"]["trl gradient"]).abs().max() > 100 * TOLERANCE


def test_the_moved_batch_reaches_every_clip_and_cap(proofs):
    r = proofs("grpo")
    mask = r["inputs"]["completion_mask"].bool()
    log_ratio = r["current"] - r["moved batch"]["old_per_token_logps"]
    ratio = log_ratio.exp()
    advantage = r["advantages"][:, None].expand_as(ratio)
    assert ((ratio - 1).abs() > 0.2)[mask].float().mean() > 0.3  # grpo's clip, on a good share of the tokens
    assert ((ratio < 0.8) & (advantage < 0))[mask].any()  # the lower clip, where it acts
    assert ((ratio > 1.2) & (ratio <= 1.28) & (advantage > 0))[mask].any()  # kept by DAPO's clip-higher only
    assert ((ratio > 1.1) & (advantage != 0))[mask].float().mean() > 0.3  # cispo's cap of 1.1
    assert ((ratio > 1.3) & (advantage < 0))[mask].any()  # grpo_delta's cap, where it acts: a negative advantage
    m = mask.double()
    sequence_ratio = ((log_ratio * m).sum(1) / m.sum(1)).exp()
    assert ((sequence_ratio - 1).abs() > 4e-4).all()  # every completion outside GSPO's narrow clip range
    assert (r["advantages"] != 0).all()  # every completion carries a signal
    lengths = r["inputs"]["completion_mask"].sum(1)
    assert (lengths < MAX_COMPLETION_LENGTH).any() and (lengths == MAX_COMPLETION_LENGTH).any()  # lengths matter


def test_trl_caps_cispo_weights_at_epsilon_when_epsilon_high_is_not_set(proofs):
    """For loss_type="cispo", TRL reads epsilon_high as the absolute cap of the weight and, left unset, uses
    epsilon (0.2): every weight then sits at 0.2 or below, a fifth of an on-policy update. Set epsilon_high."""
    trainer, _ = proofs.trainer(loss_type="cispo")
    assert trainer.epsilon_high == 0.2
    w = token_weights(torch.tensor([1.0]), torch.ones(1, 2), loss_type="cispo")
    assert torch.allclose(w, torch.tensor([[0.1, 0.1]]))  # min(ratio 1, cap 0.2) x A 1 / 2 tokens


def test_the_module_examples_run():
    assert doctest.testmod(objectives).failed == 0


# token_weights on toy groups: the weight w of grad log pi that each objective gives each token -------------------

ONE = torch.tensor([1.0])


def lengths_mask(*lengths: int, width: int = 30) -> torch.Tensor:
    return (torch.arange(width) < torch.tensor(lengths)[:, None]).long()


def test_length_bias_grpo_against_dapo_and_dr_grpo():
    mask, advantages = lengths_mask(5, 30), torch.tensor([1.0, 1.0])
    grpo = token_weights(advantages, mask, loss_type="grpo")
    assert grpo[0, 0] == pytest.approx(1 / (2 * 5))  # A / (completions x its length) = 1/10
    assert grpo[1, 0] == pytest.approx(1 / (2 * 30))  # 1/60: a token of the long completion weighs 6 times less
    dapo = token_weights(advantages, mask, loss_type="dapo")
    assert torch.allclose(dapo[mask.bool()], torch.tensor(1 / 35))  # A / tokens in the batch (5 + 30)
    dr_grpo = token_weights(advantages, mask, loss_type="dr_grpo", max_completion_length=32)
    assert torch.allclose(dr_grpo[mask.bool()], torch.tensor(1 / 64))  # A / (2 completions x 32), whatever the lengths
    # With a negative advantage, grpo punishes each token of a long wrong answer 6 times less than a short one's.
    grpo_wrong = token_weights(-advantages, mask, loss_type="grpo")
    assert grpo_wrong[0, 0] / grpo_wrong[1, 0] == pytest.approx(6.0)


def test_dapo_divides_by_the_generation_batch_and_bnpo_by_this_batch():
    mask = lengths_mask(5, 30)
    bnpo = token_weights(torch.tensor([1.0, 1.0]), mask, loss_type="bnpo")
    dapo = token_weights(torch.tensor([1.0, 1.0]), mask, loss_type="dapo", num_items_in_batch=70)
    assert bnpo[0, 0] == pytest.approx(1 / 35)  # this micro-batch's 35 tokens
    assert dapo[0, 0] == pytest.approx(1 / 70)  # e.g. a generation batch of 70 tokens split in two steps


def test_one_unlikely_token_token_ratio_against_sequence_ratio():
    # A 10-token completion with a negative advantage; its last token is now e^3 = 20.1 times likelier than
    # when it was sampled. The clipped surrogate does not clip a negative advantage's large ratio.
    mask, wrong = torch.ones(1, 10), torch.tensor([-1.0])
    log_ratio = torch.zeros(1, 10)
    log_ratio[0, -1] = 3.0
    token = token_weights(wrong, mask, log_ratio=log_ratio, loss_type="grpo")
    assert token[0, 0] == pytest.approx(-1 / 10)  # ratio 1: A / length
    assert token[0, -1] == pytest.approx(-math.exp(3) / 10)  # -2.01: this one token outweighs the other nine together
    # GSPO: one ratio for the completion, exp(mean log-ratio) = exp(3/10) = 1.35, shared by its tokens
    sequence = token_weights(wrong, mask, log_ratio=log_ratio, loss_type="grpo", importance_sampling_level="sequence")
    assert torch.allclose(sequence, torch.tensor(-math.exp(0.3) / 10))  # -0.135 for every token
    # The caps: CISPO's weight min(20.1, 5) and INTELLECT-2's delta min(20.1, 2)
    cispo = token_weights(wrong, mask, log_ratio=log_ratio, loss_type="cispo", epsilon_high=5.0)
    assert cispo[0, -1] == pytest.approx(-5 / 10)  # and -1/10 for the others: their ratio 1 is under the cap
    delta = token_weights(wrong, mask, log_ratio=log_ratio, loss_type="grpo", delta=2.0)
    assert delta[0, -1] == pytest.approx(0.0)  # capped at a constant: the ratio's gradient is gone, not bounded
    assert delta[0, 0] == pytest.approx(-1 / 10)


def test_a_rare_token_of_a_good_answer_clipped_by_grpo_kept_by_cispo():
    # Positive advantage, the token's ratio e^3 > 1 + epsilon: GRPO's clip zeroes its gradient (MiniMax-M1's
    # rare "fork" tokens); CISPO keeps grad log pi with the weight capped: min(20.1, 5) x A / 10 tokens.
    mask, good = torch.ones(1, 10), torch.tensor([1.0])
    log_ratio = torch.zeros(1, 10)
    log_ratio[0, -1] = 3.0
    assert token_weights(good, mask, log_ratio=log_ratio, loss_type="grpo")[0, -1] == 0.0
    cispo = token_weights(good, mask, log_ratio=log_ratio, loss_type="cispo", epsilon_high=5.0)
    assert cispo[0, -1] == pytest.approx(0.5)


def test_clip_higher_keeps_what_the_symmetric_clip_drops():
    # Positive advantage, ratio 1.25: above 1 + 0.2, under 1 + 0.28. One 4-token completion, A = 1.
    mask, good = torch.ones(1, 4), torch.tensor([1.0])
    log_ratio = torch.full((1, 4), math.log(1.25))
    symmetric = token_weights(good, mask, log_ratio=log_ratio, loss_type="dapo")
    higher = token_weights(good, mask, log_ratio=log_ratio, loss_type="dapo", epsilon_high=0.28)
    assert torch.all(symmetric == 0)  # clipped: no gradient
    assert torch.allclose(higher, torch.tensor(1.25 / 4))  # ratio x A / 4 tokens = 0.3125
    # Clip-higher moves only the upper bound: a negative advantage's ratio of 0.75 is still clipped (below 0.8).
    low = torch.full((1, 4), math.log(0.75))
    assert torch.all(token_weights(-good, mask, log_ratio=low, loss_type="dapo", epsilon_high=0.28) == 0)


def test_sapo_gate_is_grpo_on_policy_and_fades_smoothly_off_policy():
    mask, good = torch.ones(1, 4), torch.tensor([1.0])
    on = token_weights(good, mask, loss_type="sapo")
    assert torch.allclose(on, torch.tensor(1 / 4))  # 4 sigmoid(0) (1 - sigmoid(0)) = 1: GRPO's A / length
    # ratio 1.5, tau 1: d/dlogp of sigmoid(r - 1) x 4 = 4 s (1 - s) r, s = sigmoid(0.5) = 0.6225
    s = 1 / (1 + math.exp(-0.5))
    off = token_weights(good, mask, log_ratio=torch.full((1, 4), math.log(1.5)), loss_type="sapo")
    assert torch.allclose(off, torch.tensor(4 * s * (1 - s) * 1.5 / 4))  # 1.41 / 4 = 0.3525, where grpo gives 0
    # ratio 6: 4 s (1 - s) 6 with s = sigmoid(5) = 0.9933: 0.16 / 4, fading without a cliff
    s6 = 1 / (1 + math.exp(-5))
    far = token_weights(good, mask, log_ratio=torch.full((1, 4), math.log(6.0)), loss_type="sapo")
    assert torch.allclose(far, torch.tensor(4 * s6 * (1 - s6) * 6 / 4))
    # A negative advantage uses tau_neg = 1.05: 4 s (1 - s) r x A with s = sigmoid(1.05 x 0.5)
    s_neg = 1 / (1 + math.exp(-1.05 * 0.5))
    bad = token_weights(-good, mask, log_ratio=torch.full((1, 4), math.log(1.5)), loss_type="sapo")
    assert torch.allclose(bad, torch.tensor(-4 * s_neg * (1 - s_neg) * 1.5 / 4))


@pytest.mark.parametrize("loss_type", objectives.LOSS_TYPES)
def test_a_group_that_is_all_correct_teaches_nothing(loss_type):
    advantages = group_advantages(torch.tensor([1.0, 1.0, 1.0, 1.0]), 4)  # (1 - mean 1) / (std 0 + 1e-4) = 0
    assert torch.all(advantages == 0)
    log_ratio = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))  # whatever the ratios
    w = token_weights(advantages, torch.ones(4, 5), log_ratio=log_ratio, loss_type=loss_type, max_completion_length=5)
    assert torch.all(w == 0)  # every weight is A x something = 0


# Notebook 06's own loss keeps its four aggregations and sends the learner here for the rest ------------------------


def test_notebook_06_loss_names_policy_loss_and_notebook_11_for_the_other_objectives():
    """06's grpo_loss is its teaching code, not this module; a loss_type it lacks must say where the family is."""
    notebooks = Path(__file__).resolve().parent.parent / "notebooks"
    cells = json.loads((notebooks / "06_grpo_from_scratch.ipynb").read_text())["cells"]
    (source,) = ["".join(c["source"]) for c in cells if "def grpo_loss(" in "".join(c["source"])]
    namespace: dict = {"torch": torch}
    exec(source, namespace)
    mask = torch.ones(1, 2)
    for loss_type in ("cispo", "sapo", "gspo"):
        with pytest.raises(ValueError) as raised:
            namespace["grpo_loss"](torch.zeros(1, 2), torch.zeros(1, 2), None, ONE, mask, loss_type=loss_type)
        message = str(raised.value)
        assert f"loss_type={loss_type!r}" in message
        assert "course_utils.objectives.policy_loss" in message and "importance_sampling_level='sequence'" in message
        assert "notebook 11 (11_grpo_family.ipynb)" in message and (notebooks / "11_grpo_family.ipynb").is_file()
    for loss_type in ("cispo", "sapo"):  # what the message sends the learner to accepts them
        assert loss_type in objectives.LOSS_TYPES
        policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), None, ONE, mask, loss_type=loss_type)
    policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), None, ONE, mask, loss_type="grpo",
                importance_sampling_level="sequence")  # fmt: skip


def test_the_batch_probe_trains_notebook_11s_objectives():
    """benchmarks/objective_batch_probe.py copies notebook 11's OBJECTIVES; the two must not drift apart."""
    notebook = json.loads((REPO_ROOT / "notebooks" / "11_grpo_family.ipynb").read_text())
    sources = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    cell = next(s for s in sources if "OBJECTIVES = {" in s)
    assignment = next(n for n in ast.parse(cell).body if isinstance(n, ast.Assign) and n.targets[0].id == "OBJECTIVES")
    assert load("benchmarks/objective_batch_probe.py").OBJECTIVES == ast.literal_eval(assignment.value)
