"""Training of the generic student (student_build.py states the recipe): supervised on TRAIN rows drawn
uniformly, judged every `check_every` steps on the held-out slice, stopped by the stated rule.

The loop is tiny-arith's warm-up (selfimprove_arith/student/warmup.py) without anything per kind:
same architecture, same loss on the reply tokens only, same AdamW and schedule shape.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any, Callable

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from ..errors import BuildRefused
from ..phases.analyze import prompt_text
from ..stats import wilson_interval
from .policy import completion_logprobs, generate, pack
from .student import TINY_ARCH, build_tokenizer, render_prompt

GREEDY_CHUNK = 64  # held-out prompts decoded at once


def sized_model(tok, positions: int, seed: int) -> Qwen3ForCausalLM:
    """The tiny architecture (rl/student.py TINY_ARCH) with `positions` positions (RoPE: no extra weights)."""
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=len(tok), **{**TINY_ARCH, "max_position_embeddings": positions}))
    model.config._attn_implementation = "eager"  # measured faster than sdpa at this size on CPU
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def encode_rows(tok, rows: list[dict], fmt: str, env_id: str, max_tokens: int) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, reply ids + EOS) per row, refusing text the character tokenizer cannot write."""
    unk = tok.unk_token_id
    out = []
    for r in rows:
        prompt = render_prompt(tok, r["prompt"])
        reply = tok(fmt.format(a=r["answer"]), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        if unk in prompt or unk in reply:
            raise BuildRefused(f"env '{env_id}': example {r['example_id']} ({prompt_text(r['prompt'])[:40]!r}) has characters "
                               "the tiny student's tokenizer (printable ASCII) cannot write; use a larger model")
        if len(prompt) + len(reply) > max_tokens:
            raise BuildRefused(f"env '{env_id}': example {r['example_id']} renders to {len(prompt) + len(reply)} "
                               f"tokens (prompt + reply), over the recipe's max_seq_tokens {max_tokens}; "
                               "use a larger model for this env")
        out.append((prompt, reply))
    return out


def greedy_check(model, tok, env, rows: list[dict], encoded: list[tuple[list[int], list[int]]]) -> list[float]:
    """Each held-out row's reward for the student's greedy reply, scored by the env's own rubric."""
    from .rollouts import score_completions

    max_new = max(len(reply) for _, reply in encoded) + 4
    texts: list[str] = []
    model.eval()
    for i in range(0, len(rows), GREEDY_CHUNK):
        comps, _ = generate(model, [p for p, _ in encoded[i:i + GREEDY_CHUNK]], max_new_tokens=max_new,
                            temperature=0.0, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id)
        texts += [tok.decode(c, skip_special_tokens=True) for c in comps]
    model.train()
    return [s["reward"] for s in score_completions(env, rows, texts)]


def judge(recipe, rows: list[dict], rewards: list[float], grouping, priors: dict) -> dict[str, Any]:
    """Per group: held-out pass@1 (reward >= 0.5, the weakness measure's solved rule), its guessing prior,
    the difference, and the rule's verdict at this check."""
    groups: dict[str, list[float]] = {}
    for r, x in zip(rows, rewards):
        groups.setdefault(grouping.label(prompt_text(r["prompt"])), []).append(x)
    table = {}
    for g, xs in sorted(groups.items()):
        hits = sum(x >= 0.5 for x in xs)
        acc = hits / len(xs)
        prior = priors.get(g, {}).get("guess_prior", 0.0)
        # evidence, not a fluke: enough rows, and above the prior beyond the interval's reach
        learning = (len(xs) >= recipe.min_group_rows and acc - prior >= recipe.learning_margin
                    and wilson_interval(hits, len(xs))[0] > prior)
        table[g] = {"n": len(xs), "pass@1": round(acc, 4), "guess_prior": prior, "above_prior": round(acc - prior, 4),
                    "learning": learning, "solved": acc >= recipe.solved_from}
    learning = [g for g, t in table.items() if t["learning"]]
    unsolved = [g for g, t in table.items() if not t["solved"]]
    return {"groups": table, "learning": learning, "unsolved": unsolved, "stop": bool(learning and unsolved),
            "mean_reward": round(sum(rewards) / len(rewards), 4)}


def train(env, recipe, data: dict[str, Any], log: Callable[[str], None] = print):
    """(model, tokenizer, report): the supervised run of `recipe` on `data` (student_build.prepare)."""
    t0 = time.time()
    tok = build_tokenizer()
    fit = encode_rows(tok, data["train"], data["format"], recipe.env_id, recipe.max_seq_tokens)
    held = encode_rows(tok, data["holdout"], data["format"], recipe.env_id, recipe.max_seq_tokens)
    longest = max(len(p) + len(r) for p, r in fit + held)
    positions = max(128, -(-(longest + 16) // 64) * 64)  # room for a reply a little longer than the reference
    model = sized_model(tok, positions, recipe.seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.01)
    rng = random.Random(recipe.seed)
    seen: set[int] = set()
    checks: list[dict] = []
    stop_reason = "cap"
    step = 0
    for step in range(1, recipe.max_steps + 1):
        picks = [rng.randrange(len(fit)) for _ in range(recipe.batch)]  # uniform: nothing chosen per kind
        seen.update(picks)
        frac = (step - 1) / max(1, recipe.max_steps - 1)
        lr = recipe.lr * min(1.0, step / 30) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        packed = pack([fit[i][0] for i in picks], [fit[i][1] for i in picks], tok.pad_token_id)
        logp = completion_logprobs(model, packed)
        loss = -(logp * packed.target_mask).sum() / packed.target_mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % recipe.check_every == 0 or step == recipe.max_steps:
            verdict = judge(recipe, data["holdout"], greedy_check(model, tok, env, data["holdout"], held),
                            data["grouping"], data["priors"])
            checks.append({"step": step, "loss": round(loss.item(), 4), **verdict})
            shown = ", ".join(f"{g} {t['pass@1']:.2f}/{t['guess_prior']:.2f}" for g, t in verdict["groups"].items())
            log(f"student build step {step}/{recipe.max_steps} | loss {loss.item():.3f} | held-out mean reward "
                f"{verdict['mean_reward']:.2f} | pass@1/prior: {shown[:300]} | {time.time() - t0:.0f}s")
            if verdict["stop"]:
                stop_reason = "rule"
                break
    model.eval()
    trained_q = {prompt_text(data["train"][i]["prompt"]) for i in seen}
    memorised = sum(prompt_text(r["prompt"]) in trained_q for r in data["holdout"]) / len(data["holdout"])
    last = checks[-1]
    report = {
        "stopped_at_step": step, "stop_reason": stop_reason, "final_check": last, "checks": checks,
        "memorisation_share": round(memorised, 4),
        "memorisation_note": "share of held-out TRAIN questions whose text is also among the trained rows",
        "answer_format": data["format"], "positions": positions, "rows": data["counts"],
        "holdout_rows": len(data["holdout"]), "grouping": data["grouping"].record(),
        "distinct_trained_rows": len(seen), "build_wall_s": round(time.time() - t0, 1),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    log(f"student build stopped at step {step} ({'the rule' if stop_reason == 'rule' else 'the step cap'}): "
        f"learning {last['learning'] or 'none'}; not solved {last['unsolved'] or 'none'}; memorisation share "
        f"{memorised:.2f} (n={len(data['holdout'])} held-out TRAIN rows, seed {recipe.seed}); "
        f"{time.time() - t0:.0f}s")
    return model, tok, report
