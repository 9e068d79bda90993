"""Every robot of the corpus that has a chain builds a Planner and plans one goal (issue 43: the Barrett WAM
of testwamcamera.env.xml took the whole process down with glibc heap corruption while its planner was
built).  Each robot runs in a child process (corpus_plan_worker.py), a few after one another in a process,
each announced before it starts: a crash fails the robot in progress, naming the signal, and the rest of that
process's robots run in a new one.  The children run under glibc's checking allocator where this host has it
(libc_malloc_debug preloaded, MALLOC_CHECK_=3): a write past a heap block aborts at the next free of that
block instead of corrupting the heap silently (a one-double overrun fits in malloc's slack otherwise).

Robot files: those of test/formats/test_corpus_urdf_export.py (OpenRAVE XML / COLLADA robots and scenes,
URDFs with a movable joint); a file whose robot has no joint a controller drives is skipped; mesh files absent
from the corpus (MANIFEST: not copied) are left out of the robot; robots the planner refuses with a Python
error today are listed in KNOWN with the reason (xfail; a crash or another error still fails).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.scheduling import SPLIT

pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[2] / "shared" / "corpus"
WORKER = HERE / "corpus_plan_worker.py"
BATCH = SPLIT["test/planning/test_corpus_planning.py"]    # robots per child process (~1 s of imports each)
BATCH_TIMEOUT = 900.0      # s for one child process (a robot: a few s idle, far more on a loaded host)
MALLOC_DEBUG = Path("/lib/x86_64-linux-gnu/libc_malloc_debug.so.0")   # glibc >= 2.34 (Debian / Ubuntu)

from fixtures.urdf_export import corpus_files  # noqa: E402

FILES = [str(p.relative_to(CORPUS)) for p in corpus_files()] if (CORPUS / "MANIFEST.md").is_file() else []


# Robots the planner refuses today with a Python error (never a crash: a signal always fails), by reason: the
# error must contain the reason's text, and a robot listed that plans fails the test (take it off the list).
CONTINUOUS = ("continuous joints: roboplan's configuration holds (cos, sin) for each, the planner one "
              "value per joint",
              ("PlanningError: continuous joints",))
DUPLICATE_NAMES = ("a link and a joint of the same name, which roboplan refuses",
                   ("Duplicate names for different frame types",))
MIMIC_ORDER = ("a mimic joint before the joint it follows in the tree, which pinocchio refuses",
               ("parent joint of the mimic joint is not in the kinematic tree",))
ALWAYS_IN_COLLISION = ("every sampled state in collision (a fixed link resting on a world body is checked "
                       "against it)", ("no collision-free",))
KNOWN = {
    "collada_urdf/collada_urdf/test/pr2.urdf": CONTINUOUS,
    "example-robot-data/robots/pr2_description/urdf/pr2.urdf": CONTINUOUS,
    "openrave/src/data/pa10calib.env.xml": CONTINUOUS,
    "openrave/src/data/pa10calib_envcamera.env.xml": CONTINUOUS,
    "openrave/src/data/pa10grasp.env.xml": CONTINUOUS,
    "openrave/src/data/pa10grasp2.env.xml": CONTINUOUS,
    "openrave/src/data/pr2test1.env.xml": CONTINUOUS,
    "openrave/src/data/pr2test2.env.xml": CONTINUOUS,
    "openrave/src/data/pr2wam_test1.env.xml": CONTINUOUS,
    "openrave/src/robots/mitsubishi-pa10.zae": CONTINUOUS,
    "openrave/src/robots/pa10schunk.robot.xml": CONTINUOUS,
    "openrave/src/robots/pr2-beta-sim.robot.xml": CONTINUOUS,
    "openrave/src/robots/pr2-beta-static.zae": CONTINUOUS,
    "openrave/test/testdata/bobcat.robot.xml": CONTINUOUS,
    "openrave/test/testdata/chassis_and_wheels.robot.xml": CONTINUOUS,
    "openrave/test/testdata/testconveyor.robot.xml": CONTINUOUS,
    "robot_model/urdf/test/pr2_desc.urdf": CONTINUOUS,
    "robot_model/urdf/test/test_robot.urdf": CONTINUOUS,
    "robot_state_publisher/test/two_links_moving_joint.urdf": CONTINUOUS,
    "srdfdom/test/resources/pr2_desc.urdf": CONTINUOUS,
    "example-robot-data/robots/romeo_description/urdf/romeo.urdf": MIMIC_ORDER,
    "example-robot-data/robots/talos_data/robots/talos_full_v2.urdf": MIMIC_ORDER,
    "hpp-environments/urdf/tests/baxter_simple.urdf": DUPLICATE_NAMES,
    "openrave/sandbox/mintime/robots/tridof.robot.xml": DUPLICATE_NAMES,
    "openrave/sandbox/mintime/robots/twodof.robot.xml": DUPLICATE_NAMES,
    "openrave/src/data/diffdrive_arm.env.xml": DUPLICATE_NAMES,
    "openrave/src/data/diffdrive_sample.env.xml": DUPLICATE_NAMES,
    "openrave/src/data/tridoftable.env.xml": DUPLICATE_NAMES,
    "openrave/src/robots/collisionmap.robot.xml": DUPLICATE_NAMES,
    "openrave/src/robots/diffdrive_caster.robot.xml": DUPLICATE_NAMES,
    "openrave/src/robots/diffdrive_sample.robot.xml": DUPLICATE_NAMES,
    "openrave/src/robots/tridof.robot.xml": DUPLICATE_NAMES,
    "openrave/test/ikfastrobots/fail1.dae": DUPLICATE_NAMES,
    "openrave/test/ikfastrobots/fail1.robot.xml": DUPLICATE_NAMES,
    "openrave/test/ikfastrobots/fail2.robot.xml": DUPLICATE_NAMES,
    "hpp_tutorial/urdf/kitchen_area.urdf": ALWAYS_IN_COLLISION,
    "openrave/src/data/puma.env.xml": ALWAYS_IN_COLLISION,
    "openrave/src/data/table_washer.kinbody.xml": ALWAYS_IN_COLLISION,
    "openrave/src/data/wamtest2.env.xml": ALWAYS_IN_COLLISION,
    "openrave/src/robots/man1.zae": ALWAYS_IN_COLLISION,
}


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class _Runner:
    """Results by file, filled a batch of pending files at a time (in FILES order)."""

    def __init__(self):
        self.results: dict[str, dict] = {}

    def result(self, rel: str, selected: list[str]) -> dict:
        """``rel``'s result, running it with the next of ``selected`` (the files of this pytest run)."""
        if rel not in self.results:     # its chunk of BATCH: an xdist worker's unit (fixtures/scheduling)
            first = selected.index(rel) // BATCH * BATCH
            self._run([f for f in selected[first:first + BATCH] if f not in self.results])
        if rel not in self.results:         # started after a crash at exit? never rerun in a loop
            self.results[rel] = _failure(rel, "the worker reported no result for it", "")
        return self.results[rel]

    def _run(self, batch: list[str]) -> None:
        started, done, code, stderr = self._spawn(batch)
        self.results.update(done)
        unfinished = [f for f in started if f not in done]
        if code == 0 and not unfinished and done:
            return
        how = f"timed out after {BATCH_TIMEOUT:.0f} s" if code is None else \
            f"killed by {_signal_name(code)}" if code < 0 else f"exited with status {code}"
        if not started:
            raise AssertionError(f"the worker started no robot ({how}): {stderr[-3000:]}")
        if len(started) == 1 or code is None:
            culprit = unfinished[0] if unfinished else started[-1]
            after = "" if unfinished else " after it had finished (at exit)"
            self.results[culprit] = _failure(culprit, f"the process was {how}{after}", stderr)
            return
        # several robots in the crashed process: the one in progress (or, a crash at exit, each) alone,
        # to tell its own crash from damage an earlier robot left in the heap
        suspects = unfinished[:1] or started
        for f in suspects:
            self.results.pop(f, None)
            self._run([f])
        if all(self.results[f].get("ok") or self.results[f].get("skip") for f in suspects):
            culprit = suspects[-1]
            self.results[culprit] = _failure(
                culprit, f"the process was {how} after running {started}; alone it passes (heap damage "
                "left by an earlier robot?)", stderr)

    def _spawn(self, batch: list[str]) -> tuple[list[str], dict[str, dict], int | None, str]:
        """Run the worker on ``batch``: (files started, results by file, exit status or None, stderr)."""
        env = dict(os.environ, PYTHONFAULTHANDLER="1")
        if MALLOC_DEBUG.is_file():
            env.update(LD_PRELOAD=" ".join(p for p in (str(MALLOC_DEBUG), env.get("LD_PRELOAD")) if p),
                       MALLOC_CHECK_="3")
        cmd = [sys.executable, str(WORKER), str(CORPUS), *batch]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BATCH_TIMEOUT, env=env,
                                  cwd=HERE.parents[1])
            stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            stdout, stderr, code = _text(exc.stdout), _text(exc.stderr), None
        started, done = [], {}
        for line in stdout.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("file") not in batch:
                continue
            if record.get("event") == "start":
                started.append(record["file"])
            elif record.get("event") == "done":
                done[record["file"]] = record
        return started, done, code, stderr


def _text(out) -> str:
    return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")


def _failure(rel: str, error: str, stderr: str) -> dict:
    """A crashed (or timed out) robot's result; the child's stderr (faulthandler's Python stack) without its
    list of modules."""
    lines = [line for line in stderr.splitlines() if not line.startswith("Extension modules:")]
    return {"event": "done", "file": rel, "ok": False, "crashed": True, "error": error,
            "traceback": "\n".join(lines)[-4000:]}


_RUNNER = _Runner()


@pytest.mark.timeout(BATCH_TIMEOUT * 2 + 60)
@pytest.mark.parametrize("rel", FILES)
def test_corpus_robot_plans(rel, corpus, request):
    selected = [item.callspec.params["rel"] for item in request.session.items
                if getattr(item, "function", None) is test_corpus_robot_plans]
    result = _RUNNER.result(rel, selected or [rel])
    if result.get("skip"):
        pytest.skip(result["skip"])
    if rel in KNOWN:
        reason, texts = KNOWN[rel]
        assert not result["ok"], f"{rel} plans now: take it off KNOWN ({reason})"
        if not result.get("crashed") and any(t in result["error"] for t in texts):
            pytest.xfail(f"known: {reason}: {result['error']}")
    assert result["ok"], f"{rel}: {result['error']}\n{result.get('traceback', '')}"
