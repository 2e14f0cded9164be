#!/usr/bin/env python3
"""Mutation testing for fusebox: plant one-line bugs one at a time, see which
the tests catch.

Each mutant of tools/mutation/mutants.json names a file, an exact snippet of
it (which must occur exactly once: otherwise the mutant is "stale" and the
list needs updating), its replacement, the CMake targets to rebuild and the
ctest regex of the tests that cover it. A mutant marked "equivalent" (with
the reason) cannot change behaviour and is not run.

The mutants are applied, one at a time, to a scratch copy of the working tree
(tracked and untracked-but-not-ignored files, so uncommitted work counts),
configured with the release preset in its own build directory; the covering
targets are rebuilt (ccache makes the unmutated files cache hits) and the
covering tests run. A mutant is:
  killed        a covering test failed (or timed out);
  compile       the mutant did not build (with -Werror, usually a replacement
                that leaves a variable unused): says nothing of the tests, so
                it is left out of the score and listed to be fixed;
  survived      every covering test passed: a missing test, or an
                equivalent mutant not yet marked;
  equivalent    marked so in the list (not run);
  stale         its snippet does not occur exactly once (not run).
The score is killed / (killed + survived).

  tools/mutation/run.py                     # every mutant; report in build/mutation/
  tools/mutation/run.py --only registry     # mutants whose id matches a regex
  tools/mutation/run.py --check             # only look for stale mutants
  make mutation                             # the same as the first line, niced

The report (markdown) lists every mutant with its result, the totals, the
score and the wall time. Not part of CI: a full run takes about an hour on
two cores.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIST = Path(__file__).resolve().parent / "mutants.json"


def load(path):
    with open(path, encoding="utf-8") as f:
        mutants = json.load(f)
    seen = set()
    for m in mutants:
        for k in ("id", "file", "original", "replacement", "targets", "tests"):
            if k not in m:
                sys.exit(f"{path}: mutant {m.get('id', '?')}: missing '{k}'")
        if m["id"] in seen:
            sys.exit(f"{path}: duplicate mutant id {m['id']}")
        if m["original"] == m["replacement"]:
            sys.exit(f"{path}: mutant {m['id']}: replacement equals the original")
        seen.add(m["id"])
    return mutants


def occurrences(tree, m):
    try:
        text = (tree / m["file"]).read_text(encoding="utf-8")
    except FileNotFoundError:
        return 0
    return text.count(m["original"])


def run(cmd, cwd, log, timeout=None, env=None):
    """Runs `cmd`, appending its output to `log`; returns (exit code, timed out)."""
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        try:
            p = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                               timeout=timeout, env=env)
            return p.returncode, False
        except subprocess.TimeoutExpired:
            out.write(f"\n(timed out after {timeout} s)\n")
            return 1, True


def copy_tree(dst):
    """Copies what git knows of the working tree (not build/, not ignored files)."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, stdout=subprocess.PIPE).stdout.split(b"\0")
    wanted = set()
    for f in files:
        if not f:
            continue
        rel = f.decode()
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the working tree
        wanted.add(rel)
        target = dst / rel
        if target.is_file() and target.read_bytes() == src.read_bytes():
            continue  # unchanged: keep its mtime, so ninja does not rebuild it
        target.parent.mkdir(parents=True, exist_ok=True)
        # A changed file gets the time of the copy, not the source's: the
        # scratch may hold objects built after the source last changed (by a
        # mutant of an earlier run), and ninja must see the file as newer.
        shutil.copyfile(src, target)
        shutil.copymode(src, target)
    return wanted


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", default=str(LIST), help="the mutant list (JSON)")
    ap.add_argument("--only", default="", help="regex: run the mutants whose id matches")
    ap.add_argument("--scratch", default="/tmp/fusebox-mutation/tree",
                    help="the scratch copy (reused between runs: only changed files are copied)")
    ap.add_argument("--report", default=str(ROOT / "build" / "mutation" / "report.md"))
    ap.add_argument("--jobs", type=int, default=2, help="build and ctest parallelism")
    ap.add_argument("--test-timeout", type=int, default=120,
                    help="seconds for one covering test (a hang counts as killed)")
    ap.add_argument("--check", action="store_true", help="only check for stale mutants")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip running the covering tests unmutated first")
    args = ap.parse_args()

    # SIGTERM unwinds as Ctrl-C does: the mutated file is restored, the
    # running build or test is killed, the report keeps what was done.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    mutants = load(args.list)
    if args.only:
        mutants = [m for m in mutants if re.search(args.only, m["id"])]
    stale = [m for m in mutants if occurrences(ROOT, m) != 1]
    for m in stale:
        print(f"stale: {m['id']}: {m['file']}: the snippet occurs {occurrences(ROOT, m)} times, "
              "not once", file=sys.stderr)
    if args.check:
        print(f"{len(mutants)} mutants, {len(stale)} stale")
        return 1 if stale else 0

    start = time.monotonic()
    scratch = Path(args.scratch).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    report = Path(args.report).resolve()
    report.parent.mkdir(parents=True, exist_ok=True)
    log = report.with_suffix(".log")
    log.write_text("")
    copy_tree(scratch)

    env = dict(os.environ)
    env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
    env.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")
    # Paths relative to / and no working directory in the hash: the scratch
    # copy's objects are the same cache entries as the working tree's when
    # both build directories are as deep (/tmp/fusebox-mutation/tree/build/
    # release and a worktree's build/release at the same depth).
    env.setdefault("CCACHE_BASEDIR", "/")
    env.setdefault("CCACHE_NOHASHDIR", "1")

    results = []
    rc, _ = run(["cmake", "--preset", "release"], scratch, log, env=env)
    targets = sorted({t for m in mutants for t in m["targets"]})
    if rc == 0:
        rc, _ = run(["cmake", "--build", "--preset", "release", "-j", str(args.jobs), "--target",
                     *targets], scratch, log, env=env)
    if rc != 0:
        print(f"the unmutated copy does not build: see {log}", file=sys.stderr)
        return 2

    def ctest(regex):
        return run(["ctest", "--test-dir", "build/release", "-R", regex, "-j", str(args.jobs),
                    "--timeout", str(args.test_timeout), "--no-tests=error"],
                   scratch, log, timeout=args.test_timeout * 10, env=env)

    # A regex that names no test would count every mutant it covers as
    # killed (ctest --no-tests=error): such mutants are stale.
    uncovered = set()
    for regex in sorted({m["tests"] for m in mutants}):
        listed = subprocess.run(["ctest", "--test-dir", "build/release", "-N", "-R", regex],
                                cwd=scratch, stdout=subprocess.PIPE, text=True).stdout
        found = re.search(r"Total Tests: (\d+)", listed)
        if not found or int(found.group(1)) == 0:
            print(f"stale: no test matches '{regex}'", file=sys.stderr)
            uncovered.add(regex)
    stale += [m for m in mutants if m["tests"] in uncovered and m not in stale]

    # The covering tests must pass on the unmutated copy, or nothing below
    # means anything. (One regex per ctest run: CMake's regular expressions
    # allow only 10 groups, so they cannot be joined into one.)
    regexes = sorted({m["tests"] for m in mutants if not m.get("equivalent") and m not in stale})
    for regex in [] if args.no_baseline else regexes:
        rc, _ = ctest(regex)
        if rc != 0:
            print(f"baseline: tests '{regex}' fail without a mutant: see {log}", file=sys.stderr)
            return 2
    baseline = time.monotonic() - start
    print(f"baseline built and passing in {baseline:.0f} s", flush=True)

    for i, m in enumerate(mutants, 1):
        t0 = time.monotonic()
        if m in stale:
            result = "stale"
        elif m.get("equivalent"):
            result = "equivalent"
        else:
            path = scratch / m["file"]
            original = path.read_text(encoding="utf-8")
            path.write_text(original.replace(m["original"], m["replacement"], 1), encoding="utf-8")
            try:
                with open(log, "a", encoding="utf-8") as out:
                    out.write(f"\n==== {m['id']} ({m['file']})\n")
                rc, _ = run(["cmake", "--build", "--preset", "release", "-j", str(args.jobs),
                             "--target", *m["targets"]], scratch, log, env=env)
                if rc != 0:
                    result = "compile"
                else:
                    rc, timed_out = ctest(m["tests"])
                    result = "killed" if rc != 0 else "survived"
            finally:
                path.write_text(original, encoding="utf-8")
        secs = time.monotonic() - t0
        results.append((m, result, secs))
        print(f"[{i}/{len(mutants)}] {result:10} {m['id']} ({secs:.0f} s)", flush=True)
        write_report(report, results, len(mutants), time.monotonic() - start, baseline)

    write_report(report, results, len(mutants), time.monotonic() - start, baseline)
    print(f"report: {report}")
    return 0


def write_report(report, results, planned, elapsed, baseline):
    counts = {k: 0 for k in ("killed", "compile", "survived", "equivalent", "stale")}
    for _, r, _ in results:
        counts[r] += 1
    caught = counts["killed"]
    scored = caught + counts["survived"]
    score = f"{100.0 * caught / scored:.1f} %" if scored else "n/a"
    lines = [
        "# Mutation testing report",
        "",
        f"{len(results)} of {planned} mutants run; wall time {elapsed / 60:.1f} min "
        f"(baseline build and tests {baseline / 60:.1f} min).",
        "",
        f"- killed by a test: {counts['killed']}",
        f"- did not build (not scored; fix the replacement): {counts['compile']}",
        f"- survived: {counts['survived']}",
        f"- equivalent (not run): {counts['equivalent']}",
        f"- stale (not run): {counts['stale']}",
        f"- **score: {score}** of the non-equivalent mutants killed ({caught} / {scored})",
        "",
        "| result | id | file | tests | seconds |",
        "|---|---|---|---|---|",
    ]
    for m, r, secs in results:
        note = f" ({m['equivalent']})" if r == "equivalent" else ""
        tests = m["tests"].replace("|", "\\|")  # a table cell
        lines.append(f"| {r}{note} | {m['id']} | {m['file']} | `{tests}` | {secs:.0f} |")
    survivors = [m for m, r, _ in results if r == "survived"]
    if survivors:
        lines += ["", "## Survivors", ""]
        for m in survivors:
            lines.append(f"- {m['id']}: `{m['original']}` -> `{m['replacement']}` in {m['file']}")
    unbuilt = [m for m, r, _ in results if r == "compile"]
    if unbuilt:
        lines += ["", "## Did not build (fix the replacement so that it compiles)", ""]
        for m in unbuilt:
            lines.append(f"- {m['id']}: `{m['original']}` -> `{m['replacement']}` in {m['file']}")
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
