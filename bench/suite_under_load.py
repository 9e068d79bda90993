"""The whole suite N times in a row with busy loops beside it (issue 40), prints JSON.

Runs ``make test`` (or ``--command``) ``--runs`` times while ``--busy`` child processes spin a core each
(killed at the end and on any exit), and reads each run's own closing lines: pytest's totals, the layers
report (test/fixtures/layer_report.py), and every crashed xdist worker ("[gwN] node down" / "worker 'gwN'
crashed") or signal-killed process pytest names.  One object per run: wall seconds, exit status, passed,
failed, errors, skipped, crashed workers, the FAILED lines; and the totals.

Usage: .venv/bin/python bench/suite_under_load.py [--runs 3] [--busy 2] [--log-dir DIR] [--command CMD]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

SUMMARY = re.compile(r"^=+ (.*) in [\d.]+s(?: \([\d:]+\))? =+$")
COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
CRASH = re.compile(r"(node down: Not properly terminated|worker '?gw\d+'? crashed|\[gw\d+\] node down"
                   r"|Segmentation fault|Fatal Python error)")


def read_run(text: str) -> dict:
    """Counts from a pytest run's output (its last summary line), its crashes and FAILED lines."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "xfailed": 0}
    for line in text.splitlines():
        match = SUMMARY.match(line.strip())
        if match:
            found = COUNT.findall(match.group(1))
            counts = dict(counts, **{("errors" if k.startswith("error") else k): int(n) for n, k in found})
    return dict(counts, crashes=sorted({m.group(0) for m in CRASH.finditer(text)}),
                failed_tests=list(dict.fromkeys(line for line in text.splitlines()
                                                if line.startswith(("FAILED ", "ERROR ")))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes beside the suite")
    parser.add_argument("--command", default="make test", help="the suite's command (run from the repo root)")
    parser.add_argument("--log-dir", default="bench_out/suite_under_load", help="each run's whole output")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    logs = Path(args.log_dir) if Path(args.log_dir).is_absolute() else root / args.log_dir
    logs.mkdir(parents=True, exist_ok=True)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]

    def stop_burners(*_):
        for burner in burners:
            burner.kill()
    signal.signal(signal.SIGTERM, lambda *a: (stop_burners(), sys.exit(143)))
    runs = []
    try:
        for k in range(args.runs):
            log = logs / f"run{k + 1}.log"
            started = time.monotonic()
            with open(log, "w") as out:
                status = subprocess.call(shlex.split(args.command), cwd=root, stdout=out,
                                         stderr=subprocess.STDOUT)
            runs.append(dict(run=k + 1, wall_s=round(time.monotonic() - started, 1), status=status,
                             log=str(log), **read_run(log.read_text(errors="replace"))))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    finally:
        stop_burners()
    total = {key: sum(r[key] for r in runs) for key in ("passed", "failed", "errors")}
    print(json.dumps({"busy_loops": args.busy, "command": args.command, "cores": os.cpu_count(), "runs": runs,
                      "total": dict(total, crashes=sum(len(r["crashes"]) for r in runs),
                                    all_green=all(r["status"] == 0 and not r["crashes"] for r in runs))},
                     indent=1))
    return 0 if all(r["status"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
