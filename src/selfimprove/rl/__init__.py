"""`selfimprove-rl`: the embedded CPU engine (real GRPO on a tiny student) behind
prime-rl's `rl` command, TOML and output contract (both dialects: the seed dialect's and main's v0.8).

    cli.py         entry point: argv -> config -> run; exit codes; "RL training finished!"
    config.py      the honoured subset of prime-rl's keys (EngineConfig), ignored-key notes
    train.py       the run, top to bottom: sample -> score -> update -> write -> eval -> checkpoint
    student.py     load / save / prompt a local HF model; model.name -> a directory; tiny Qwen3 + char tokenizer
    builtin_students.py  the registry of built-in ids (entry points `selfimprove.students`), their extras
    student_cache.py  where and how a built-in student is built or converted once (atomic, locked)
    student_check.py  is a local dir a model the engine can load (no torch)
    gguf_student.py  selfimprove/smollm2-135m: a GGUF converted once into a cached HF directory
    policy.py      sampling loop and completion log-probs (shared-prefix trick)
    rollouts.py    prompts from env splits, scoring with the env's own rubric, prime-rl records
    tasksets.py    v0.8 sources: verifiers v1 Tasksets loaded by id, replies scored by Task.score
    grpo.py        group-relative advantages and the policy-gradient step
    checkpoint.py  the output layout, atomic step dirs, save / resume / prune
    logs.py        logs/trainer.log and logs/orchestrator.log
    resources.py   project_file(): configs/ and templates/ in a checkout or a wheel
"""
