"""``python -m tests.ground_truth [FILTER...] [--json OUT]``: sweep the fixtures and print each verdict.

Run from the repository root (or ``python -m ground_truth`` from tests/).
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from .corpus import discover, doc_table
    from .harness import Harness
    from .sweep import sweep

    ap = argparse.ArgumentParser(prog="ground_truth")
    ap.add_argument("filters", nargs="*", help="substrings of fixture paths to run")
    ap.add_argument("--json", help="write the records here")
    ap.add_argument("--no-checker", action="store_true", help="skip spmd-types' runtime checker")
    ap.add_argument("--programs", action="store_true",
                    help="run the whole programs of fixtures/programs/ (packages) instead of the single files")
    args = ap.parse_args(argv)
    if args.programs:
        return _programs(args.filters)
    fixtures = [f for f in discover() if not args.filters or any(s in f.rel for s in args.filters)]
    h = Harness()
    t0 = time.perf_counter()
    explained = {**doc_table("Mesh-size-dependent programs"), **doc_table("Claims execution cannot see"),
                 **doc_table("Open disagreements")}

    def show(rec) -> None:  # noqa: ANN001
        fx = rec.fixture
        flag = {True: "ok  ", False: "DISAGREE", None: "-   "}[rec.agrees]
        if rec.agrees is False and fx.rel in explained:
            flag = "doc'd"
        checker = rec.checker.outcome if rec.checker else "-"
        print(f"{flag} {fx.rel:70s} {rec.seconds:5.2f}s spmdcheck: {fx.spmdcheck_summary()}", flush=True)
        print(f"       exec: {rec.execution}", flush=True)
        print(f"       spmd-types: {checker} {rec.checker.message[:160] if rec.checker else ''}", flush=True)

    try:
        records = sweep(h, fixtures, checker=not args.no_checker, progress=show)
    finally:
        stats = h.stats()
        h.close()
    total = time.perf_counter() - t0
    runnable = sum(r.runnable for r in records)
    disagree = [r for r in records if r.agrees is False and r.fixture.rel not in explained]
    pairs = [r for r in records if r.checker_pair]
    print(f"\n{len(records)} fixtures, {runnable} runnable, {len(disagree)} undocumented disagreements, "
          f"{len(pairs)} runtime-checker differences, {total:.1f}s")
    for k, s in stats.items():
        print(f"  pool {k}: {s.programs} programs, {s.started} starts ({s.start_seconds:.1f}s), {s.hangs} rebuilds, "
              f"{s.run_seconds:.1f}s running")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([{
                "fixture": r.fixture.rel, "spmdcheck": r.fixture.spmdcheck_summary(),
                "execution": r.execution, "agrees": r.agrees,
                "output_types_from": r.verdict.output_types_from if r.verdict else None,
                "checker": r.checker.outcome if r.checker else None,
                "checker_message": r.checker.message if r.checker else None,
                "checker_pair": r.checker_pair, "seconds": r.seconds,
            } for r in records], fh, indent=1)
    return 0


def _programs(filters: list[str]) -> int:
    """One verdict per program package: ok ones must match their reference, bug ones must be wrong."""
    from .harness import Harness
    from .packages import discover_packages, judge_package

    h = Harness()
    t0 = time.perf_counter()
    bad = 0
    try:
        for pkg in discover_packages():
            if filters and not any(s in pkg.name for s in filters):
                continue
            t = time.perf_counter()
            verdict, twin = judge_package(h, pkg)
            good = verdict.wrong and (twin is None or twin.matches) if pkg.is_bug else verdict.matches
            bad += not good
            print(f"{'ok  ' if good else 'BAD '} {pkg.name:40s} {time.perf_counter() - t:5.2f}s {verdict.summary()}",
                  flush=True)
    finally:
        h.close()
    print(f"{bad} program(s) whose execution contradicts their expectations, {time.perf_counter() - t0:.1f}s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
