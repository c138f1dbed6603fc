"""``python -m tests.fuzz --examples N --seed S``: fuzz spmdcheck against execution and print the summary.

Run from the repository root. Judges N distinct generated programs (the same search as
tests/test_fuzz.py: hypothesis seeded S, S+1, ... until N distinct programs) and prints programs,
flagged, precision, soundness violations (each class with its smallest program) and the
false-positive classes (one example each). ``--shrink`` then minimises the first violation with
hypothesis (the same search again, stopping at it) and prints it; ``--save DIR`` also writes it
there as a regression fixture (fixtures/fuzz_regressions/). Exit status 1 when there are violations.

``python -m tests.fuzz --idioms [--examples N] [--fixtures K|all] [--families a,b]``: the idiom rewrites of
issue 20 instead (tests/fuzz/idioms.py): N generated programs and K fixtures per family (default 20; ``all``:
every fixture a family applies to) rewritten by every family, and the table of verdicts preserved per family.
Exit status 1 when a rewrite changes a verdict.
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
    ap.add_argument("--idioms", action="store_true",
                    help="the idiom rewrites of issue 20 (no execution): verdicts preserved per rewrite family")
    ap.add_argument("--fixtures", default="20", help="with --idioms: fixtures per family, or `all` (default 20)")
    ap.add_argument("--families", help="with --idioms: comma-separated rewrite families (default: all)")
    args = ap.parse_args(argv)
    if args.idioms:
        return idioms_main(args, ap)
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


def idioms_main(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    from spmdcheck.api import load_registry

    from .idiom_survey import survey
    from .idioms import FAMILIES

    families = tuple(f.strip() for f in args.families.split(",")) if args.families else FAMILIES
    if set(families) - set(FAMILIES):
        ap.error(f"unknown rewrite families: {sorted(set(families) - set(FAMILIES))}; known: {', '.join(FAMILIES)}")
    per_family = None if args.fixtures == "all" else int(args.fixtures)
    result = survey(args.examples, args.seed, per_family, load_registry(()), families)
    print(result.summary())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({f: {"programs": len(result.results[f]), "programs_preserved": len(result.results[f])
                           - len(result.failures(f)), "fixtures": len(result.fixtures[f]),
                           "fixtures_preserved": len(result.fixtures[f]) - len(result.fixture_failures(f)),
                           "fixture_failures": [c.report() for c in result.fixture_failures(f)],
                           "program_failures": [c.report() for c in result.failures(f)]}
                       for f in families}, fh, indent=1)
    changed = any(result.failures(f) or result.fixture_failures(f) for f in families)
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
