"""The GRPO family as small changes to one loss, in plain PyTorch: GRPO, BNPO, Dr. GRPO, DAPO, GSPO, CISPO, SAPO.

Notebook 06 writes GRPO from scratch and checks it against TRL. This module keeps what it teaches
(:func:`group_advantages`, :func:`per_token_logps`) and puts the variants that TRL 1.16 offers beside it, each
as a few lines of :func:`policy_loss`:

* **what multiplies the advantage**: the clipped ratio (GRPO, DAPO with a higher upper clip), a clipped weight
  whose gradient is stopped (CISPO), or a soft gate (SAPO);
* **which ratio**: one per token, or one per completion, the geometric mean of its tokens' ratios (GSPO);
* **how the per-token losses are averaged** (``loss_type``): per completion then over completions (GRPO,
  SAPO), over all tokens (BNPO, DAPO, CISPO), or summed and divided by a constant (Dr. GRPO).

:func:`token_weights` returns, for every token, the coefficient :math:`w_{i,t}` of the update
:math:`\\sum_{i,t} w_{i,t}\\,\\nabla\\log\\pi_\\theta(o_{i,t})` that a loss produces: the length bias, the
one-token blow-up and what a higher clip keeps can all be read from it on toy groups.

>>> import torch
>>> mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])  # a 2-token and a 4-token completion
>>> token_weights(torch.tensor([1.0, 1.0]), mask, loss_type="grpo")  # per completion: 1/(2 x length)
tensor([[0.2500, 0.2500, 0.0000, 0.0000],
        [0.1250, 0.1250, 0.1250, 0.1250]])
>>> token_weights(torch.tensor([1.0, 1.0]), mask, loss_type="dapo")  # every token: 1/6
tensor([[0.1667, 0.1667, 0.0000, 0.0000],
        [0.1667, 0.1667, 0.1667, 0.1667]])
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

#: The ``loss_type`` values of TRL 1.16 that :func:`policy_loss` implements (GSPO is ``"grpo"`` with
#: ``importance_sampling_level="sequence"``). TRL's newer ``"luspo"`` and ``"vespo"`` are not here.
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo")


def group_advantages(rewards: Tensor, num_generations: int, scale_rewards: str = "group") -> Tensor:
    """Reward minus its group's mean, scaled as TRL's ``scale_rewards`` says (notebook 06, section 4).

    ``"group"`` divides by the group's standard deviation (unbiased, plus 1e-4), ``"batch"`` by the whole
    batch's, ``"none"`` not at all: Dr. GRPO's unscaled advantages (Liu et al. 2025, arXiv 2503.20783, which
    finds that dividing by the standard deviation weights questions by their difficulty).

    >>> group_advantages(torch.tensor([1.0, 1.0, 1.0, 0.0]), 4, "none")  # a group of 3 correct and 1 wrong
    tensor([ 0.2500,  0.2500,  0.2500, -0.7500])
    """
    grouped = rewards.view(-1, num_generations)
    centred = (grouped - grouped.mean(1, keepdim=True)).view(-1)
    if scale_rewards == "group":
        std = grouped.std(1, keepdim=True).expand_as(grouped).reshape(-1)
    elif scale_rewards == "batch":
        std = rewards.std().expand_as(rewards)
    elif scale_rewards == "none":
        return centred
    else:
        raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', got {scale_rewards!r}")
    return centred / (std + 1e-4)


def per_token_logps(model: torch.nn.Module, batch: Mapping[str, Tensor], temperature: float = 1.0) -> Tensor:
    """log pi(token) for every completion token, shape (completions, completion length) (notebook 06, section 5).

    ``batch`` holds ``prompt_ids``/``prompt_mask`` (left-padded) and ``completion_ids``/``completion_mask``, as
    TRL's ``_generate_and_score_completions`` returns them. The logits at position p predict token p + 1, and
    are divided by the sampling temperature.
    """
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    prompt_len = batch["prompt_ids"].size(1)
    logits = logits[:, prompt_len - 1 : -1] / temperature  # position p predicts token p + 1
    logps = logits.log_softmax(-1)
    return logps.gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)


def importance_ratio(logps: Tensor, old_logps: Tensor, mask: Tensor, level: str = "token") -> Tensor:
    """pi_theta / pi_old: per token, shape (B, T), or per completion, shape (B, 1), for GSPO.

    GSPO's sequence-level ratio (Zheng et al. 2025, "Group Sequence Policy Optimization", arXiv 2507.18071) is
    the ratio of whole-completion likelihoods to the power 1/|o_i|: the exponential of the *mean* per-token
    log-ratio over the completion's tokens. One token whose probability moved a lot moves it by
    1/|o_i| of its log-ratio only.
    """
    log_ratio = logps - old_logps
    if level == "token":
        return torch.exp(log_ratio)
    if level == "sequence":
        mask = mask.to(log_ratio.dtype)
        return torch.exp((log_ratio * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1.0))
    raise ValueError(f"importance_sampling_level must be 'token' or 'sequence', got {level!r}")


def policy_loss(
    logps: Tensor,
    old_logps: Tensor,
    ref_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    *,
    loss_type: str = "dapo",
    importance_sampling_level: str = "token",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    beta: float = 0.0,
    max_completion_length: int | None = None,
    num_items_in_batch: float | Tensor | None = None,
    delta: float | None = None,
    sapo_temperature_pos: float = 1.0,
    sapo_temperature_neg: float = 1.05,
    bias_corrected_kl: bool = True,
) -> Tensor:
    """The loss of one GRPO-family objective, from per-token log-probs (B, T), advantages (B,) and the mask (B, T).

    The arguments are named and defaulted as in TRL 1.16's ``GRPOConfig``. What each ``loss_type`` changes:

    * ``"grpo"``: the clipped surrogate, each completion's tokens averaged, then the completions (Shao et al.
      2024, "DeepSeekMath", arXiv 2402.03300, the GRPO objective).
    * ``"dapo"``: the same surrogate, averaged over every token of the generation batch, so a long completion's
      tokens weigh as much as a short one's; with ``epsilon_high > epsilon`` the upper clip is raised
      (Yu et al. 2025, "DAPO", arXiv 2503.14476, sections "Clip-Higher" and "Token-Level Policy Gradient
      Loss"; TRL's help for ``epsilon_high`` quotes the paper's 0.28). TRL divides by the generation batch's
      token count across processes (``num_items_in_batch``); by default here, this batch's.
    * ``"bnpo"``: as ``"dapo"``, divided by this (local) batch's token count.
    * ``"dr_grpo"``: the token sum divided by the constant completions x ``max_completion_length``; use it
      with ``group_advantages(..., scale_rewards="none")`` (Liu et al. 2025, "Understanding R1-Zero-Like
      Training: A Critical Perspective", arXiv 2503.20783, its "Dr. GRPO" objective: no 1/|o_i|, no std).
    * GSPO: ``"grpo"`` with ``importance_sampling_level="sequence"``: one ratio per completion, clipped as a
      whole (Zheng et al. 2025, arXiv 2507.18071). See :func:`importance_ratio`.
    * ``"cispo"``: ``-sg(min(ratio, epsilon_high)) * A * log pi``: the weight is clipped and its gradient
      stopped, so no token's ``grad log pi`` is ever dropped, only scaled (MiniMax 2025, "MiniMax-M1",
      arXiv 2506.13585, the CISPO objective). As in TRL, ``epsilon_high`` is here the *absolute* cap of the
      weight (ScaleRL's epsilon_max, arXiv 2510.13786; TRL recommends 5.0), there is no lower cap, and the
      tokens are averaged as in ``"dapo"``.
    * ``"sapo"``: ``-sigmoid(tau (ratio - 1)) * 4/tau * A`` with tau = ``sapo_temperature_pos`` where A > 0 and
      ``sapo_temperature_neg`` elsewhere: a soft gate instead of the hard clip, whose gradient is the ratio's
      times ``4 sigmoid (1 - sigmoid)``, 1 on-policy, fading smoothly off-policy ("Soft Adaptive Policy
      Optimization", arXiv 2511.20347, the paper TRL's help cites). Averaged as in ``"grpo"``.

    ``delta`` (INTELLECT-2, arXiv 2505.07291) also caps the unclipped ratio of the clipped surrogates: a token
    of a negative-advantage completion whose ratio ran past ``delta`` gets a bounded loss and no gradient,
    where plain GRPO would weigh it by its whole ratio (the one-token blow-up). With ``beta > 0`` the KL
    penalty is notebook 06's k3 estimator, multiplied by the ratio unless ``bias_corrected_kl=False``.
    """
    mask = mask.to(logps.dtype)
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages  # one advantage per completion
    epsilon_high = epsilon if epsilon_high is None else epsilon_high  # TRL's default, also for cispo's cap
    ratio = importance_ratio(logps, old_logps, mask, importance_sampling_level)  # (B, T), or (B, 1) for GSPO

    if loss_type in ("grpo", "bnpo", "dr_grpo", "dapo"):
        clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)  # DAPO's clip-higher: epsilon_high > epsilon
        unclipped = ratio if delta is None else torch.clamp(ratio, max=delta)
        per_token = -torch.min(unclipped * adv, clipped * adv)
    elif loss_type == "cispo":
        per_token = -torch.clamp(ratio, max=epsilon_high).detach() * adv * logps
    elif loss_type == "sapo":
        tau = torch.where(adv > 0, sapo_temperature_pos, sapo_temperature_neg)
        per_token = -torch.sigmoid(tau * (ratio - 1)) * 4 / tau * adv
    else:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")

    if beta != 0.0:
        log_ref_ratio = ref_logps - logps
        kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1  # k3 estimator, >= 0
        per_token = per_token + beta * (kl * ratio if bias_corrected_kl else kl)

    if loss_type in ("grpo", "sapo"):  # mean over each completion's tokens, then over completions
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":  # mean over this batch's tokens
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    if loss_type in ("dapo", "cispo"):  # mean over the generation batch's tokens
        tokens = mask.sum() if num_items_in_batch is None else torch.as_tensor(num_items_in_batch, dtype=mask.dtype)
        return (per_token * mask).sum() / tokens.clamp(min=1.0)
    if max_completion_length is None:
        raise ValueError("loss_type='dr_grpo' divides by max_completion_length: pass it")
    return (per_token * mask).sum() / (per_token.size(0) * max_completion_length)  # dr_grpo


def token_weights(
    advantages: Tensor, mask: Tensor, *, log_ratio: Tensor | None = None, **loss_kwargs: object
) -> Tensor:
    """Per token, the coefficient w of grad log pi in the update that :func:`policy_loss` makes: -d loss / d log pi.

    ``log_ratio`` (B, T) is log pi_theta - log pi_old of each token (default 0: on-policy, every ratio 1);
    ``loss_kwargs`` are :func:`policy_loss`'s keywords (``loss_type``, ``importance_sampling_level``,
    ``epsilon_high``, ...). The KL term is left out (``beta`` is 0): these are the weights the advantages put
    on the tokens. A weight of 0 is a token the objective ignores (clipped); a positive weight pushes the
    token's probability up.

    >>> mask = torch.ones(1, 3)
    >>> token_weights(torch.tensor([-1.0]), mask, log_ratio=torch.tensor([[0.0, 0.0, 3.0]]), loss_type="dapo")
    tensor([[-0.3333, -0.3333, -6.6952]])
    """
    mask = mask.to(advantages.dtype)
    log_ratio = torch.zeros_like(mask) if log_ratio is None else log_ratio.to(advantages.dtype)
    logps = torch.zeros_like(mask, requires_grad=True)  # any value: the gradient depends on the ratios alone
    loss = policy_loss(logps, logps.detach() - log_ratio, None, advantages, mask, **{**loss_kwargs, "beta": 0.0})
    (grad,) = torch.autograd.grad(loss, logps)
    return 0.0 - grad  # not -grad, which prints the masked and clipped tokens' zeros as -0.0
