"""``python -m tests.fuzz --examples N --seed S``: fuzz spmdcheck against execution and print the summary.

Run from the repository root. Judges N distinct generated programs (the same search as
tests/test_fuzz.py: hypothesis seeded S, S+1, ... until N distinct programs) and prints programs,
flagged, precision, soundness violations (each class with its smallest program) and the
false-positive classes (one example each). ``--shrink`` then minimises the first violation with
hypothesis (the same search again, stopping at it) and prints it; ``--save DIR`` also writes it
there as a regression fixture (fixtures/fuzz_regressions/). Exit status 1 when there are violations.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from ground_truth.harness import Harness

    from spmdcheck.api import load_registry

    from .programs import ALL_MUTATIONS, MUTATIONS
    from .runner import SoundnessViolation, Stats, fuzz

    ap = argparse.ArgumentParser(prog="python -m tests.fuzz")
    ap.add_argument("--examples", type=int, default=500, help="distinct programs to judge (default 500)")
    ap.add_argument("--seed", type=int, default=20250, help="hypothesis seed (default 20250, the CI seed)")
    ap.add_argument("--kinds", help="comma-separated mutation kinds to aim for (default: all): "
                    + ", ".join(MUTATIONS))
    ap.add_argument("--branches", action="store_true",
                    help="also if/else and in-place steps (and their mutation kinds: "
                    + ", ".join(k for k in ALL_MUTATIONS if k not in MUTATIONS) + ")")
    ap.add_argument("--shrink", action="store_true", help="minimise the first soundness violation and print it")
    ap.add_argument("--save", metavar="DIR", help="with --shrink: write the minimal program there as a fixture")
    ap.add_argument("--json", metavar="OUT", help="write the numbers and every flagged or violating program here")
    ap.add_argument("--quiet", action="store_true", help="no progress marks")
    args = ap.parse_args(argv)
    kinds = tuple(k.strip() for k in args.kinds.split(",")) if args.kinds else None
    unknown = set(kinds or ()) - set(ALL_MUTATIONS if args.branches else MUTATIONS)
    if unknown:
        ap.error(f"unknown mutation kinds: {sorted(unknown)}")

    registry = load_registry(())
    harness = Harness()
    stats = Stats()
    t0 = time.perf_counter()

    def progress(o) -> None:  # noqa: ANN001
        if args.quiet:
            return
        print("!" if o.violation else ("x" if o.flagged else "."), end="", flush=True)
        if stats.programs % 100 == 0:
            print(f" {stats.programs} ({time.perf_counter() - t0:.0f}s)", flush=True)

    try:
        fuzz(harness, stats, args.examples, args.seed, registry, kinds, progress=progress,
             branches=args.branches)
        if not args.quiet:
            print()
        print(stats.report())
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump({**stats.as_dict(), "programs_detail": [
                    {"path": o.path, "source": o.program.source, "mutations": o.program.mutations,
                     "diagnostics": o.diagnostics, "execution": o.verdict.summary(), "violation": o.violation,
                     "false_positive": o.false_positive}
                    for o in stats.outcomes if o.flagged or o.violation or not o.matches]}, fh, indent=1)
        if args.shrink and stats.violations:
            again = Stats()
            try:
                fuzz(harness, again, args.examples, args.seed, registry, kinds, stop_at_violation=True,
                     branches=args.branches)
            except SoundnessViolation as exc:
                minimal = exc.outcome
                print("\nminimal soundness violation (shrunk by hypothesis):")
                print(minimal.summary())
                print(minimal.program.source)
                if args.save:
                    from .regressions import save_fixture

                    print(f"saved as {save_fixture(minimal, args.save)}")
    finally:
        harness.close()
    return 1 if stats.violations else 0


if __name__ == "__main__":
    sys.exit(main())
