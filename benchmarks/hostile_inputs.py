"""Re-run the hostile-input campaign of issue #28 against the public API of lecturekit.

Each case of ``tests/hostile/cases*.py`` (one careless or hostile call on a tiny model)
runs in its own process with a wall-clock limit and is classified:

* ``clear_error``: an exception whose message names the argument or the fix;
* ``sensible_result``: it returned, and the property the case states holds;
* ``hang``: it ran past the limit;
* ``crash``: the process died without a Python exception (``os._exit``, a signal);
* ``silent_wrong``: it returned, but the property fails (or a hostile input was accepted);
* ``obscure_error``: an exception that names neither the argument nor the fix.

Usage (from the repository root)::

    PYTHONPATH=$PWD python benchmarks/hostile_inputs.py [--jobs 2] [--only AREA] [--timeout 20]
    PYTHONPATH=$PWD python benchmarks/hostile_inputs.py --case NAME   # one case, in process

It prints one line per case, a table of counts per area, and ``RESULT hostile_<kind> <n>``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the repository (for lecturekit) and tests/ (the cases are a test asset: tests/hostile/)
for _path in (ROOT, ROOT / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from hostile.cases import AREAS, CASES, Case  # noqa: E402

MARK = "HOSTILE_OUTCOME "
KINDS = ("clear_error", "sensible_result", "hang", "crash", "silent_wrong", "obscure_error")


def classify(case: Case) -> tuple[str, str]:
    """Run ``case`` in this process; return (kind, detail). Never raises."""
    try:
        value = case.run()
    except BaseException as exc:  # noqa: BLE001 - classifying every way a call can fail
        try:
            message = f"{type(exc).__name__}: {exc}"
        except BaseException:  # noqa: BLE001 - a message that cannot be shown is obscure
            return "obscure_error", type(exc).__name__ + " (message cannot be shown)"
        named = any(word.lower() in message.lower() for word in case.words)
        return ("clear_error" if named else "obscure_error"), message[:300]
    if case.prop is None:
        return "silent_wrong", f"accepted, returned {_short(value)}"
    try:
        holds = bool(case.prop(value))
    except BaseException as exc:  # noqa: BLE001
        return "silent_wrong", f"property raised {type(exc).__name__}: {exc}"[:300]
    return ("sensible_result" if holds else "silent_wrong"), _short(value)


def _short(value: object) -> str:
    try:
        return repr(value)[:120]
    except BaseException:  # noqa: BLE001
        return type(value).__name__


def run_child(name: str) -> None:
    """``--case NAME``: run one case here and print its outcome as one JSON line."""
    import torch

    torch.set_num_threads(1)
    kind, detail = classify(CASES[name])
    sys.stdout.flush()
    print(MARK + json.dumps({"kind": kind, "detail": detail}), flush=True)


def run_isolated(case: Case, timeout: float) -> tuple[str, str, float]:
    """Run ``case`` in a fresh interpreter; return (kind, detail, seconds)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    start = time.monotonic()
    command = [sys.executable, str(Path(__file__).resolve()), "--case", case.name]
    limit = max(timeout, case.timeout or 0)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the case's own process group, children included
        proc.communicate()
        return "hang", f"no answer after {limit:g} s", time.monotonic() - start
    seconds = time.monotonic() - start
    lines = [line for line in out.splitlines() if line.startswith(MARK)]
    if not lines:
        tail = (err.strip().splitlines() or [""])[-1]
        return "crash", f"exit code {proc.returncode} without an outcome; {tail}"[:300], seconds
    outcome = json.loads(lines[-1][len(MARK) :])
    return outcome["kind"], outcome["detail"], seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", help="run one case in this process (used by the runner)")
    parser.add_argument("--only", choices=AREAS, help="run only the cases of this area")
    parser.add_argument("--jobs", type=int, default=1, help="cases run at the same time")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per case")
    args = parser.parse_args(argv)
    if args.case:
        run_child(args.case)
        return 0
    cases = [c for c in CASES.values() if args.only in (None, c.area)]
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(lambda c: (c, *run_isolated(c, args.timeout)), cases))
    table: dict[str, Counter[str]] = {}
    for case, kind, detail, seconds in outcomes:
        table.setdefault(case.area, Counter())[kind] += 1
        flag = "" if kind in KINDS[:2] else "  <--"
        print(f"{case.area:12} {case.name:42} {kind:16} {seconds:5.1f}s {detail[:110]}{flag}")
    print(f"\n{'area':12}" + "".join(f"{k:>16}" for k in KINDS))
    for area, counts in table.items():
        print(f"{area:12}" + "".join(f"{counts[k]:>16}" for k in KINDS))
    total = Counter(kind for _, kind, _, _ in outcomes)
    print(f"\n{len(outcomes)} cases in {time.monotonic() - start:.0f} s")
    print(f"RESULT hostile_cases {len(outcomes)}")
    for kind, label in [("hang", "hangs"), ("crash", "crashes"), ("silent_wrong", "silent_wrong"),
                        ("obscure_error", "obscure")]:  # fmt: skip
        print(f"RESULT hostile_{label} {total[kind]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
