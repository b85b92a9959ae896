"""Does a rebuild of the built-in student from its recipe reproduce the shipped one? Not a test.

    .venv/bin/python bench/rebuild_student.py        # ~10 min (AVX512) to ~30 min (AVX2) on 2 cores

Runs `shipped.build_and_save` (the same code as `selfimprove student build`) into a temporary
directory, then compares with src/selfimprove_arith/student/tiny-arith/: are the weights
bit-identical, and if not, how far each kind's greedy / pass@16 profile drifted (100 problems per
kind) and whether every kind stayed in its band (solved / learnable / hopeless), which is what the
loop depends on. Prints and writes bench/out/rebuild_student.txt.

Why a bench and not a test: the rebuild is 2000 optimizer steps (544 s on the AVX512 host that built
the shipped weights, 1679 s on an AVX2 CI host), over a third of the suite's budget. The suite keeps
what is cheap and must always hold: the recipe hash is current, and one host's warm-up is
deterministic (tests/test_shipped_student.py). Known result (2026-12-07): on AVX2 hosts the rebuild
is not bit-identical to the AVX512-built weights and drifts per kind up to ~0.47; the bands hold.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from _out import save  # bench/_out.py (this directory is sys.path[0])

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see selfimprove/rl/cli.py


def main() -> int:
    import json

    from selfimprove_arith.student import shipped

    ref_dir = shipped.shipped_dir("selfimprove/tiny-arith")
    reference = json.loads((ref_dir / shipped.PROFILE_FILE).read_text())
    recipe = json.loads((ref_dir / shipped.RECIPE_FILE).read_text())
    with tempfile.TemporaryDirectory(prefix="si-rebuild-") as tmp:
        out = Path(tmp) / "tiny-arith"
        built = shipped.build_and_save(out, profile=False, log=lambda s: print(s, flush=True))
        identical = shipped.weights_identical(out, ref_dir)
        # bit-identical weights sampled with the profile's fixed seed give the shipped profile by construction
        profile = reference if identical else shipped.measure_profile(out)
    same_recipe = built["recipe"]["recipe_hash"] == recipe["recipe_hash"]
    drift = shipped.compare_profiles(profile, reference, greedy_tol=0.10, pass_k_tol=0.15)
    bands = shipped.compare_bands(profile, reference)
    lines = [
        f"rebuild of selfimprove/tiny-arith (recipe {built['recipe']['recipe_hash']}; "
        f"same as shipped: {same_recipe}) in {built['recipe']['build_wall_s']:.0f} s",
        f"shipped: torch {recipe['torch']}, {recipe['threads']} threads, cpu {recipe.get('cpu', 'not recorded')}",
        f"here:    torch {built['recipe']['torch']}, {built['recipe']['threads']} threads, cpu {built['recipe']['cpu']}",
        f"weights bit-identical: {identical}",
        "per-kind drift beyond 0.10 greedy / 0.15 pass@16 (100 problems per kind): " + ("; ".join(drift) or "none"),
        "kinds that changed band: " + ("; ".join(bands) or "none"),
    ]
    text = "\n".join(lines)
    print(text)
    print(f"written to {save('rebuild_student.txt', text)}")
    return 0 if same_recipe and not bands and (drift == [] or not identical) else 1


if __name__ == "__main__":
    sys.exit(main())
