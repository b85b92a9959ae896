"""The model an arm recommends is a directory `transformers` loads, in main's layout (no weights/).

prime-rl main writes no HF weights; the tool assembles `<arm>/model/step_F` from the final filesystem
broadcast (HF-named safetensors, as the CPU engine and main's trainer write it) and the base model's
config and tokenizer (phases/hf_model.py). Cheap: the shipped tiny student stands in for a trained one.
"""

from __future__ import annotations

from pathlib import Path


from selfimprove.phases.evals import checkpoint_path
from selfimprove.phases.hf_model import build_v1_model, model_dir
from selfimprove.rundir import MAIN_LAYOUT, SEED_LAYOUT, ArmDir

TINY = "selfimprove/tiny-arith"


def _v1_arm(tmp_path: Path, step: int, *, perturb: float) -> tuple[ArmDir, dict]:
    """An arm whose prime_out holds what main leaves: configs/trainer.toml naming the base model, a final
    broadcast `broadcasts/step_F/{model.safetensors, STABLE}` (tied lm_head left out, as the engine does)."""
    from safetensors.torch import load_file, save_file

    from selfimprove.rl import builtin_students

    base = builtin_students.find(TINY).on_disk()
    state = {k: v + perturb for k, v in load_file(str(base / "model.safetensors")).items() if k != "lm_head.weight"}
    arm = ArmDir(tmp_path, "run_c_real_from_iter0", MAIN_LAYOUT)
    (arm.prime_out / "configs").mkdir(parents=True)
    (arm.prime_out / "configs" / "trainer.toml").write_text(f'[model]\nname = "{TINY}"\n')
    arm.broadcast(step).mkdir(parents=True)
    save_file(state, str(arm.broadcast(step) / "model.safetensors"), metadata={"format": "pt"})
    (arm.broadcast(step) / "STABLE").write_text("")
    return arm, state


def test_the_v1_checkpoint_loads_with_transformers_and_holds_the_final_policy(tmp_path: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    arm, state = _v1_arm(tmp_path, 8, perturb=0.01)
    assert not (arm.prime_out / "weights").exists()
    path = checkpoint_path(arm, 8)
    assert path == str(model_dir(arm, 8)) and (Path(path) / "config.json").is_file()
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    loaded = model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in state.items())  # the broadcast's weights, not the base's
    ids = tok.apply_chat_template([{"role": "user", "content": "1+1"}], add_generation_prompt=True, return_tensors="pt")
    ids = ids["input_ids"] if not torch.is_tensor(ids) else ids
    assert model.generate(ids, max_new_tokens=2, do_sample=False).shape[1] == ids.shape[1] + 2


def test_no_loadable_model_without_a_final_broadcast(tmp_path: Path):
    """No STABLE final broadcast (NCCL writes none): nothing is assembled; the trainer checkpoint is named."""
    arm, _ = _v1_arm(tmp_path, 8, perturb=0.0)
    (arm.broadcast(8) / "STABLE").unlink()
    assert build_v1_model(arm, 8) is None
    arm.trainer_ckpt(8).mkdir(parents=True)
    assert checkpoint_path(arm, 8) == str(arm.trainer_ckpt(8))
    seed_arm = ArmDir(tmp_path, "iter_1", SEED_LAYOUT)  # the seed's own HF save is the model
    seed_arm.weights(4).mkdir(parents=True)
    assert checkpoint_path(seed_arm, 4) == str(seed_arm.weights(4))
