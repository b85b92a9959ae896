"""The GRPO update, in the spirit of nanochat's scripts/chat_rl.py:

1. advantage of a rollout = (reward - mean of its group) / (std of its group + 1e-4),
   where a group is the rollouts_per_example samples of one prompt;
2. groups whose rewards are all equal carry no gradient: they are left out of
   the forward/backward (the loss is still normalised by the WHOLE batch's
   completion tokens, so the result equals the full-batch loss, only cheaper);
3. token-level policy-gradient loss over completion tokens (DAPO-style
   normalisation), written with the clipped PPO ratio; with one update per
   batch the ratio is exactly 1, so the clip never binds (kept for clarity);
4. optional k3 KL to the start-of-run weights (kl_coef, off by default);
5. AdamW step after clipping the gradient norm (1.0).
"""

from __future__ import annotations

import torch

from .policy import completion_logprobs, pack


def group_advantages(rewards: list[float], group: int) -> tuple[list[float], float]:
    """(advantage per rollout, share of groups with zero reward variance)."""
    r = torch.tensor(rewards, dtype=torch.float64).view(-1, group)
    mean, std = r.mean(dim=1, keepdim=True), r.std(dim=1, keepdim=True, unbiased=False)
    adv = ((r - mean) / (std + 1e-4)).masked_fill(std < 1e-9, 0.0)
    return adv.view(-1).tolist(), float((std.view(-1) < 1e-9).float().mean())


def grpo_step(model, opt, records: list[dict], group: int, *, pad_id: int, max_norm: float = 1.0,
              clip_eps: float = 0.2, kl_coef: float = 0.0, ref_model=None, micro_batch: int = 256) -> dict:
    """One update from `records` (grouped by prompt, `group` rollouts each); sets record["advantage"]
    (and the private record["_trained"] on the rollouts the update uses)."""
    adv, zero_var = group_advantages([r["reward"] for r in records], group)
    for rec, a in zip(records, adv):
        rec["advantage"] = a
        rec["is_filtered"] = False
    total_tokens = sum(len(r["_ids"][1]) for r in records)
    active = [i for i, a in enumerate(adv) if a != 0.0] if kl_coef == 0 else list(range(len(records)))
    for i in active:
        records[i]["_trained"] = True  # prime-rl main's "effective" train episodes are the ones trained on
    stats = {"zero_var": zero_var, "active": len(active), "loss": 0.0, "grad_norm": 0.0, "kl": 0.0}
    if not active or total_tokens == 0:
        return stats  # no signal: no optimizer step at all (AdamW would still decay weights)

    model.train()
    opt.zero_grad(set_to_none=True)
    for start in range(0, len(active), micro_batch):
        idx = active[start : start + micro_batch]
        packed = pack([records[i]["_ids"][0] for i in idx], [records[i]["_ids"][1] for i in idx], pad_id)
        a = torch.tensor([adv[i] for i in idx], dtype=torch.float32)[:, None]
        logp = completion_logprobs(model, packed)
        mask = packed.target_mask.float()
        ratio = torch.exp(logp - logp.detach())
        pg = -torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + clip_eps) * a)
        loss_tok = pg
        if kl_coef > 0 and ref_model is not None:
            with torch.no_grad():
                ref = completion_logprobs(ref_model, packed)
            kl = torch.exp(ref - logp) - (ref - logp) - 1  # k3 estimator
            loss_tok = loss_tok + kl_coef * kl
            stats["kl"] += float((kl * mask).sum()) / total_tokens
        loss = (loss_tok * mask).sum() / total_tokens
        loss.backward()
        stats["loss"] += float(loss)
    stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
    opt.step()
    return stats
