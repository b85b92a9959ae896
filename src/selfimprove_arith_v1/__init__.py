"""`selfimprove_arith_v1`: the embedded env's verifiers v1 Taskset under a dot-free taskset id.

    [orchestrator.train.source.env.taskset]
    id = "selfimprove_arith_v1"

Why a top-level module and not `selfimprove_arith.v1`: prime-rl main resolves a taskset id with
verifiers' own loader (`verifiers.v1.utils.loaders.taskset_class`), which first calls
`importlib.util.find_spec("verifiers.v1.tasksets." + id)`. For a dotted id that call imports
`verifiers.v1.tasksets.selfimprove_arith`, which does not exist, and raises before the id itself
is tried. The Taskset stays beside the classic env (selfimprove_arith/v1.py); this module only
names it. `__all__` exports exactly one Taskset, as the loader requires.
"""

from selfimprove_arith import v1 as _arith_v1

__all__ = ["ArithTaskset"]

ArithTaskset = _arith_v1.ArithTaskset
# Held here too (outside __all__): the introspection lists the parser objects a taskset module
# holds, and the teacher's gen_dataset.py skeleton reads replies with it (REAL_TASKSET.ANSWER_PARSER).
ANSWER_PARSER = _arith_v1.ANSWER_PARSER
