"""selfimprove: a teacher/student self-improvement loop for small LLMs.

The phases (bootstrap, introspect, baseline, iterate, compare, finalize) are
plain functions in `selfimprove.phases`; the `selfimprove` CLI calls them.
"""

__version__ = "0.1.0"
