"""Issue 40's reproduction loop: N lives of the controller test harness, each in a child process.

    python test/stress/harness_lives.py --lives N [--fast-path off] [--templates off] [--probe-first]
                                        [--malloc-check] [--cores DIR] [--budget SECONDS]
                                        [--goals none] [--hold-publish SECONDS] [--old-stop SECONDS]

A life is what test_controller_gripper.py and test_controller_actions.py do to the harness
(fixtures/hardware/lwa_fixture.py): ControllerNode + the probe node in one Context, spun on a thread;
GripperCommand goals (open, close on a body: stalled) and a FollowJointTrajectory goal from
action_client.py processes, as the tests send them; then the teardown (spin stopped and joined, the
controller destroyed, then the probe, then the context).  A child killed by a signal is counted with
that signal (faulthandler's traceback of every thread is kept; with ``--cores`` its core file too)
instead of ending the loop.  Prints one JSON object: lives run, crashes, their signals and tails.

``--fast-path off``: rcl not called through ctypes (the ``ROBOT_BRIDGE_TEST_RCL_LAYOUT=shifted`` hook:
the template publishers publish ``bytes`` through rclpy); ``--templates off``: no serialized templates
at all (messages built and published by rclpy); ``--probe-first``: the probe destroyed before the
controller; ``--malloc-check``: glibc's checking allocator (``MALLOC_CHECK_=3``, ``MALLOC_PERTURB_``;
glibc >= 2.34 needs ``libc_malloc_debug.so`` preloaded, done here when found), which aborts at the call
that finds the heap corrupted and fills freed memory (a read through a freed pointer then faults).  With
``--cores`` and gdb on PATH, each core's backtrace of every thread (``gdb -batch -ex bt -ex 'thread apply
all bt'``) is written beside it, and the crashing thread's frames kept in the JSON.  After its teardown a
life waits for the controller's timer thread to end: the process goes on, as pytest's does with its next
test (an exiting process freezes its daemon threads, and a window left open never closes).

``--goals none``: a life is the harness started, its state ticks and the teardown (no goals: a faster loop
for the teardown alone).  ``--hold-publish S``: the ``ROBOT_BRIDGE_TEST_HOLD_PUBLISH`` hook
(template_publishers): when the controller's destroy_node begins, a state tick is parked for S s right
before its publish through the publishers' raw rcl handles -- the hypothesised race of issue 40, made
deterministic.  ``--old-stop S``: ThreadTimers.stop as before commit 045ebec (join S s, then return with
the tick still running), emulated in the child.  ``--destroy-under-spin``: the nodes destroyed while the
executor still spins them (ros2/rclpy#663's pattern, which the harness avoids), for that crash's
signature.  ``--domain N``: the children's ROS domain (default: a random one of 1..99 each).

Results (Kilted, the 2-core machine, ``--goals none --hold-publish 2.5 --malloc-check``, 20 lives each):

- ``--old-stop 0.3`` before TemplatePublishers.close (commit 0996190): 19 SIGSEGV in 20 lives, each on
  the timer thread in the compiled publish, the main thread already past the teardown -- gdb:
  ``rcl_publisher_is_valid_except_context`` <- ``rcl_publisher_is_valid`` <-
  ``rcl_publish_serialized_message`` <- numba ``_publish_state``;
  faulthandler: ``_call`` <- ``publish_state`` <- ``_publish_sample`` <- ``ThreadTimers._run``.  Without
  ``--malloc-check`` freed memory may still read as before: a single life then got rmw's "publisher
  implementation '' does not match" from the freed publisher instead of a crash.
- ``--old-stop 0.3`` with close() in destroy_node: 0 crashes in 20 (the tick outlived stop() in all 20).
- ``--old-stop 0.3 --fast-path off`` before close(): 0 in 10 (the tick outlived stop() in all 10): rclpy's
  own publish checks its handle, so only the raw-handle publish crashes.
- main's stop, which joins the tick: 0 in 20 before close() and 0 in 20 after -- 045ebec had closed this
  window for the teardown already; close() keeps it closed for any publish that still comes.
- No hook, goals from action_client.py processes as the tests send them, after close(): 0 crashes in 20
  lives (260 s); ``--fast-path off`` 0 in 10; ``--malloc-check`` 0 in 10.
- ``--goals none --destroy-under-spin``: 0 in 5 (rmw_fastrtps survives that pattern here).

The crash CI saw (in destroy_node during this harness's teardown, once on Kilted, once on Jazzy) was
not reproduced without the hook: 0 in 40 and 0 in 10 in earlier sessions, 0 in 40 here.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST = Path(__file__).resolve().parents[1]
MALLOC_DEBUG = ("/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0", "/usr/lib/aarch64-linux-gnu/"
                "libc_malloc_debug.so.0", "/lib64/libc_malloc_debug.so.0")
LIFE_TIMEOUT = 240.0            # s: a child still running then is killed and counted as hung


# -- the child: one life --------------------------------------------------------------------------------
def _instrument_thread_timers(record: dict) -> None:
    """Count ThreadTimers.stop calls whose thread was still alive afterwards (a tick running on)."""
    from robot_bridge.ros import thread_timers

    stop = thread_timers.ThreadTimers.stop

    def timed_stop(self, *a, **k):
        started = time.monotonic()
        result = stop(self, *a, **k)
        record["stop_max_s"] = max(record.get("stop_max_s", 0.0), round(time.monotonic() - started, 3))
        if self._thread.is_alive():
            record["timer_thread_alive_after_stop"] = record.get("timer_thread_alive_after_stop", 0) + 1
        return result
    thread_timers.ThreadTimers.stop = timed_stop


def _emulate_old_stop(timeout: float) -> None:
    """ThreadTimers.stop as before 045ebec: join ``timeout`` s and return even with a tick still running."""
    import threading

    from robot_bridge.ros import thread_timers

    def stop(self, _timeout=None):
        self._stopped = True
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
    thread_timers.ThreadTimers.stop = stop


class InProcessClient:
    """action_client.py's events from an rclpy ActionClient in a Context of its own in this process."""

    def __init__(self, action_type, action: str, goal):
        import threading

        import rclpy
        from rclpy.action import ActionClient
        from rclpy.executors import SingleThreadedExecutor

        from fixtures.spinning import Spinner
        from robot_bridge.ros.actions import send_goal

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("stress_action_client", context=self.context)
        self.client = ActionClient(self.node, action_type, action)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = Spinner(self.executor, name="client-spin")
        self.accepted, self.done, self.response = threading.Event(), threading.Event(), None
        if not self.client.wait_for_server(timeout_sec=60.0):
            raise AssertionError(f"no action server {action}")

        def on_goal(future):
            handle = future.result()
            self.accepted.set()
            if handle.accepted:
                handle.get_result_async().add_done_callback(on_result)
            else:
                self.done.set()

        def on_result(future):
            self.response = future.result()
            self.done.set()
        send_goal(self.node, self.client, goal).add_done_callback(on_goal)

    def result(self, timeout: float) -> dict:
        assert self.done.wait(timeout), "no result"
        return {"status": self.response.status}

    def wait(self, _kind: str, timeout: float) -> None:
        assert self.accepted.wait(timeout), "not accepted"

    def close(self) -> None:
        self.spinner.close([self.node], self.context)


def one_life(args, Harness, embedded_robot, record: dict) -> dict:
    from control_msgs.action import FollowJointTrajectory, GripperCommand

    if args.clients == "process":
        from fixtures.hardware.controller import Client

        def gripper_client(position, effort):
            return Client({"position": position, "max_effort": effort}, "/controller_node/gripper_cmd",
                          "--gripper")

        def arm_client(action, joints, target):
            return Client({"joint_names": joints, "points": [{"positions": target,
                                                              "velocities": [0.0] * len(joints),
                                                              "time_from_start": 0.6}]}, action)
    else:
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectoryPoint

        def gripper_client(position, effort):
            goal = GripperCommand.Goal()
            goal.command.position, goal.command.max_effort = float(position), float(effort)
            return InProcessClient(GripperCommand, "/controller_node/gripper_cmd", goal)

        def arm_client(action, joints, target):
            goal = FollowJointTrajectory.Goal()
            goal.trajectory.joint_names = list(joints)
            goal.trajectory.points = [JointTrajectoryPoint(positions=target, velocities=[0.0] * len(joints),
                                                           time_from_start=Duration(nanosec=600_000_000))]
            return InProcessClient(FollowJointTrajectory, action, goal)

    h = Harness(embedded_robot(box=True), state_rate=50.0)
    clients = []
    templates = h.node._templates[2] if h.node._templates else None
    outcome = {"publishing": "compiled" if templates is not None and templates.compiled else
               "templates" if templates is not None else "messages"}
    try:
        if args.goals == "all":
            for position, effort in ((0.04, 0.0), (0.0, 30.0), (0.04, 0.0)):
                clients.append(gripper_client(position, effort))
                outcome.setdefault("gripper", []).append(clients[-1].result(timeout=120.0)["status"])
            ctl = h.node.controllers[0]
            action = "/controller_node/" + ctl.prefix[2:] + "follow_joint_trajectory"
            clients.append(arm_client(action, ctl.joints, [0.2 * (-1) ** i for i in range(len(ctl.joints))]))
            outcome["trajectory"] = clients[-1].result(timeout=120.0)["status"]
            # one goal left running at the teardown, as a test that fails mid-goal leaves it
            clients.append(gripper_client(0.0, 0.0))
            clients[-1].wait("accepted", timeout=60.0)
    finally:
        for c in clients:
            c.close()
        if args.destroy_under_spin:                     # rclpy#663's pattern: nodes destroyed, then the spin
            try:                                        # stopped (the harness stops it first)
                h.node.destroy_node()
                h.probe.destroy_node()
            finally:
                try:
                    h.spinner.stop()
                finally:
                    h.context.try_shutdown()
        elif args.probe_first:                          # the same steps, the probe's destroy first
            h.spinner.stop()
            h.probe.destroy_node()
            h.node.destroy_node()
            h.context.try_shutdown()
        else:
            h.close()
        if templates is not None and templates.hold is not None:
            outcome["held"] = templates.hold.parked.is_set()     # a publish was parked in the window
        # the process goes on, as pytest's does with its next test: a tick still under way gets to run
        # (a process that exits at once freezes its daemon threads, and the window never closes)
        timers = h.node._thread_timers
        if timers is not None:
            timers._thread.join(60.0)
    return outcome


def life(args) -> int:
    """``args.per_child`` lives in this process, one after the other (as a pytest process runs tests)."""
    import faulthandler

    faulthandler.enable(all_threads=True)
    sys.path.insert(0, str(TEST))            # a script, not a test module: the fixtures package
    if args.templates == "off":
        from robot_bridge.ros.cdr_template import TemplateUnavailable

        def unavailable(*_args, **_kwargs):
            raise TemplateUnavailable("harness_lives --templates off")
        import robot_bridge.nodes.controller as controller
        controller.TemplatePublishers = unavailable
    from fixtures.hardware.controller import embedded_robot
    from fixtures.hardware.lwa_fixture import Harness

    if args.old_stop:
        _emulate_old_stop(args.old_stop)
    record: dict = {}
    _instrument_thread_timers(record)
    for _ in range(args.per_child):
        outcome = one_life(args, Harness, embedded_robot, record)
        print(json.dumps({**outcome, **record}), flush=True)
    return 0


# -- the parent: the loop --------------------------------------------------------------------------------
def run_child(args, index: int, lives: int, cores: Path | None) -> dict:
    """``lives`` lives in one child process; its return code, the lives it finished, and on a failure
    the tail of its stderr (faulthandler's tracebacks) and its core files."""
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(args.domain or random.randrange(1, 100))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if args.fast_path == "off":
        env["ROBOT_BRIDGE_TEST_RCL_LAYOUT"] = "shifted"
    if args.hold_publish:
        env["ROBOT_BRIDGE_TEST_HOLD_PUBLISH"] = str(args.hold_publish)
    if args.malloc_check:
        env.update(MALLOC_CHECK_="3", MALLOC_PERTURB_="165")
        debug = next((p for p in MALLOC_DEBUG if os.path.exists(p)), None)
        if debug:
            env["LD_PRELOAD"] = ":".join(filter(None, [debug, env.get("LD_PRELOAD")]))
    command = [sys.executable, __file__, "--child", "--templates", args.templates, "--clients", args.clients,
               "--per-child", str(lives), "--goals", args.goals, "--old-stop", str(args.old_stop)]
    if args.probe_first:
        command.append("--probe-first")
    if args.destroy_under_spin:
        command.append("--destroy-under-spin")
    workdir = Path(tempfile.mkdtemp(prefix=f"child{index}-", dir=cores)) if cores else None

    def limits():
        if cores is not None:
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        os.setsid()
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               cwd=workdir, preexec_fn=limits)
    try:
        out, err = process.communicate(timeout=LIFE_TIMEOUT * lives)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGABRT)      # faulthandler prints every thread
        out, err = process.communicate()
        hung = True
    outcomes = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    result = {"child": index, "returncode": process.returncode, "lives": len(outcomes),
              "seconds": round(time.monotonic() - started, 1), "outcome": outcomes[-1] if outcomes else None}
    if hung:
        result["hung"] = True
    if process.returncode != 0:
        result["signal"] = signal.Signals(-process.returncode).name if process.returncode < 0 else None
        result["stderr_tail"] = err[-8000:]
        fatal = err.find("Fatal Python error")              # faulthandler: every thread's Python stack
        if fatal >= 0:
            result["faulthandler"] = err[fatal:err.find("Extension modules", fatal)][:8000]
        if workdir is not None:
            result["cores"] = sorted(glob.glob(str(workdir / "core*")))
            backtraces = [backtrace(core) for core in result["cores"]]
            result["gdb"] = [b for b in backtraces if b]
    elif workdir is not None:
        for leftover in workdir.iterdir():
            leftover.unlink()
        workdir.rmdir()
    return result


def backtrace(core: str) -> dict | None:
    """gdb's backtrace of the crashing thread and of every thread of ``core`` (written to ``core``.bt.txt);
    None without gdb."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return None
    try:
        done = subprocess.run([gdb, "-batch", "-nx", "-ex", "bt 25", "-ex", "thread apply all bt 25",
                               sys.executable, core], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return {"core": core, "error": "gdb took over 300 s"}
    text = done.stdout + done.stderr
    Path(core + ".bt.txt").write_text(text, encoding="utf-8")
    head = []                   # the signal, the crashing thread and its first frames (gdb's first "bt")
    for line in text.splitlines():
        if line.startswith(("Program terminated", "[Current thread")) or (head and line.startswith("#")):
            head.append(line[:220])
        elif head and line.startswith("Thread "):           # "thread apply all" begins
            break
    return {"core": core, "backtraces": core + ".bt.txt", "crashing_thread": head[:24]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lives", type=int, default=10, help="harness lives in all")
    parser.add_argument("--per-child", type=int, default=1, help="lives one after the other in each child "
                                                                 "process (as a pytest process runs tests)")
    parser.add_argument("--fast-path", choices=("on", "off"), default="on")
    parser.add_argument("--templates", choices=("on", "off"), default="on")
    parser.add_argument("--probe-first", action="store_true")
    parser.add_argument("--clients", choices=("process", "inprocess"), default="process",
                        help="goals from action_client.py processes (as the tests) or from a node of this "
                             "process in a Context of its own (faster)")
    parser.add_argument("--goals", choices=("all", "none"), default="all",
                        help="none: the harness up, its ticks and the teardown only")
    parser.add_argument("--hold-publish", type=float, default=0.0,
                        help="s a state tick is parked before its raw-handle publish once destroy_node "
                             "begins (ROBOT_BRIDGE_TEST_HOLD_PUBLISH)")
    parser.add_argument("--old-stop", type=float, default=0.0,
                        help="s: ThreadTimers.stop as before 045ebec (join this long, then return)")
    parser.add_argument("--domain", type=int, default=0, help="ROS domain of the children (0: a random one "
                                                               "of 1..99 per child)")
    parser.add_argument("--destroy-under-spin", action="store_true")
    parser.add_argument("--malloc-check", action="store_true")
    parser.add_argument("--cores", default="", help="directory for the crashed children's core files")
    parser.add_argument("--budget", type=float, default=1800.0, help="s: no child started after this")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return life(args)
    cores = Path(args.cores).resolve() if args.cores else None
    if cores:
        cores.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    lives, children, failures, publishing, alive_after_stop, stop_max = 0, 0, [], set(), 0, 0.0
    held = 0                                    # lives whose teardown had a publish parked in the window
    while lives < args.lives and time.monotonic() - started < args.budget:
        result = run_child(args, children, min(args.per_child, args.lives - lives), cores)
        children += 1
        # a crashed child's interrupted life counts as run
        lives += result["lives"] + (1 if result["returncode"] != 0 else 0)
        if result["outcome"]:
            publishing.add(result["outcome"]["publishing"])
            alive_after_stop += result["outcome"].get("timer_thread_alive_after_stop", 0)
            held += bool(result["outcome"].get("held"))
            stop_max = max(stop_max, result["outcome"].get("stop_max_s", 0.0))
        if result["returncode"] != 0:
            failures.append(result)
            print(f"child {result['child']}: {result.get('signal') or result['returncode']}", file=sys.stderr,
                  flush=True)
    crashes = [f for f in failures if f.get("signal") and not f.get("hung")]
    print(json.dumps({"lives": lives, "children": children, "crashes": len(crashes),
                      "signals": [f["signal"] for f in crashes],
                      "other_failures": len(failures) - len(crashes),
                      "timer_thread_alive_after_stop": alive_after_stop, "timer_stop_max_s": stop_max,
                      "held_lives_survived": held,
                      "options": {"fast_path": args.fast_path, "templates": args.templates,
                                  "probe_first": args.probe_first, "malloc_check": args.malloc_check,
                                  "clients": args.clients, "per_child": args.per_child,
                                  "goals": args.goals, "hold_publish": args.hold_publish,
                                  "old_stop": args.old_stop, "destroy_under_spin": args.destroy_under_spin},
                      "publishing": sorted(publishing),
                      "seconds": round(time.monotonic() - started, 1), "failures": failures}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
