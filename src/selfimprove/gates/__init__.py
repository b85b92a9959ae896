"""Gates: pure checks over the teacher's files and the generated dataset.

Each gate returns a `GateReport` that lists EVERY failing rule (never just the
first), with generated-row indices where rows are at fault:

    report.py      weakness_report.md front matter (WeaknessReport) + skeleton
    dataset.py     row schema, report labels, the procedure's nine validation lines
    dedup.py       aliases of earlier iterations; n-gram overlap with and containment of eval questions
    decontam.py    not a gate: the generate step's own drop of rows that overlap eval questions (counts only)
    provenance.py  skeleton tags name a row of failures.jsonl; no copy or alias of a failed prompt
    diversity.py   Pillar 2: every bucket varies >= 3 of the procedure's five axes (info.axes)
    ngram_hash.py  stdlib-only eval n-gram hashing, loadable by path where eval rows are read
    roundtrip.py   the hub parser extracts every row's answer from info.reasoning (a v1 Taskset-only
                   env: the hub Task's own rewards give info.reasoning full marks)
    reward_lint.py custom reward functions (Non-negotiable 4), run in a subprocess

Rule ids are unique across gates, so reports can be merged (`merge_reports`).
"""

from .common import GateFailure, GateReport, merge_reports
from .dataset import check_dataset, check_dataset_file, load_dataset_jsonl, seed_validation_lines
from .dedup import check_eval_overlap, check_near_duplicates, template_signature
from .diversity import check_diversity
from .ngram_hash import EvalNgramIndex, eval_ngram_index
from .report import (
    Bucket,
    CustomReward,
    Domain,
    Feature,
    SubDomain,
    WeaknessReport,
    check_weakness_report,
    parse_weakness_report,
    render_report_skeleton,
)
from .provenance import check_failure_provenance
from .reward_lint import lint_reward_functions
from .roundtrip import check_reward_round_trip, check_round_trip

__all__ = [
    "GateFailure",
    "GateReport",
    "merge_reports",
    "WeaknessReport",
    "Domain",
    "SubDomain",
    "Bucket",
    "Feature",
    "CustomReward",
    "parse_weakness_report",
    "check_weakness_report",
    "render_report_skeleton",
    "check_dataset",
    "check_dataset_file",
    "load_dataset_jsonl",
    "seed_validation_lines",
    "template_signature",
    "check_near_duplicates",
    "check_eval_overlap",
    "check_failure_provenance",
    "check_diversity",
    "EvalNgramIndex",
    "eval_ngram_index",
    "check_reward_round_trip",
    "check_round_trip",
    "lint_reward_functions",
]
