"""The parts of examples/arith_teacher.py, the scripted teacher for `selfimprove-arith`.

Load the teacher through that file (`examples/arith_teacher.py:ArithTeacher`):
it puts examples/ on sys.path, imports this package, and re-exports what its
users need. Its docstring is the overview of what the teacher does; this
package holds the code, in reading order (each module imports only modules
listed before it):

- settings.py   tuning constants, the structural feature catalogue, the fixed axes
- expr.py       toolkit 1/2: parse, solve, carries/borrows, features of one expression
- rows.py       toolkit 2/2: derivations, drawing fresh instances, build_rows;
                GENERATOR_FUNCTIONS, copied verbatim into every gen_dataset.py
- observe.py    what the teacher reads: failures, train rollouts, earlier iterations
- cells.py      the planner's data (Cell, DomainPlan, Plan, PlanError), labels, stepping stones
- allocate.py   severity, weights, rows per bucket, feature choice, rebalancing to the skill's procedure's bars
- check.py      the self-check: the procedure's nine lines and the tool's gates on the planned rows
- report.py     weakness_report.md's text
- plan.py       _Planner: inputs -> structures -> domains -> buckets -> rows (a Plan)
- generator.py  gen_dataset.py's text
- teacher.py    ArithTeacher.write (plan, report, self-check, re-plan, generator) and the CLI

Modules import each other relatively (`from .expr import ...`), so the package
works wherever examples/ is (a checkout, or selfimprove/_data/examples/ in a wheel).
"""
