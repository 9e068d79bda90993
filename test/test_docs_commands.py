"""Every shell command of README.md and docs/*.md, run as written (issue 31: documentation that cannot lie).

A page is read as a reader follows it: its fenced ``bash``/``sh`` blocks in order, in one working folder
(links to the repository's top-level entries and ``.venv``), on a ROS 2 domain of its own, so the pages run
in parallel.  Conventions the pages follow (README.md, last section):

- ``<!-- not run: REASON -->`` on the line before a block: its commands are reported as not run, with the
  reason.
- ``# -> TEXT`` after a command: each word of TEXT (up to two spaces) must be in the command's output;
  ``exit status N`` there is the exit status expected (else 0).
- ``source``, ``export``, ``cd`` lines set up the page's shell for the commands after them
  (``ROS_DOMAIN_ID`` stays the page's own).
- Commands that wait (``ros2 launch``, ``ros2 run`` of a node, ``robot-bridge run`` / ``view``, ``ros2 topic
  echo`` without ``--once``) are started in the background ("another shell") and must reach their first
  expected output (``# -> TEXT``, else a pattern of their kind: the description's ``robot_description after``,
  ``ready:``, ...); they run on until the next block that starts such a command, or the page ends, and are
  then stopped with Ctrl-C (SIGINT to their process group) and must not have printed a traceback.  A block
  marked ``<!-- one at a time -->`` stops each before starting the next.
- ``ros2 topic|service|param|node|action`` commands need a bridge: when none of the page's commands is
  running, the test starts ``BRIDGE`` first.  They are retried until their deadline (the nodes may
  still be coming up), so a renamed topic, node or action fails the test after that deadline.
- ``/path/to/...`` and ``my_robot.urdf.xacro`` stand for the reader's files: ``SUBSTITUTES`` says what runs
  in their place (printed in the summary).

The count of commands run and not run, with the reasons, is printed at the end of the pytest output.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fixtures import domains
from fixtures.ros2_tools import missing_reason
from fixtures.xacro_arm import PARTS, XACRO

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
SUBSTITUTES = {
    "/path/to/robot.xml": "robot_bridge/data/lwa3_gripper.robot.xml",
    "/path/to/robot.srdf": "robot_bridge/data/lwa3_gripper.srdf",
    "/path/to/arm.dae": "robot_bridge/data/lwa3_gripper.robot.xml",
    "/path/to/objects.yaml": "robot_bridge/data/objects.yaml",
    "my_robot.urdf.xacro": "my_robot.urdf.xacro (test/fixtures/xacro_arm.py: two files, argument reach)",
}
STATE = re.compile(r"^(source\s|\.\s|export\s|cd\s|cd$|deactivate\b)")
NEEDS_BRIDGE = re.compile(r"^ros2 (topic|service|param|node|action)\b")
WAITS = [   # a command that runs until stopped -> the first output that says it is up
    (re.compile(r"^ros2 launch\b(?!.*(--show-args|\s-s\b))"), r"robot_description after"),
    (re.compile(r"^ros2 run robot_bridge description_node\b"), r"robot_description after"),
    (re.compile(r"^ros2 run robot_bridge controller_node\b"), r"modules open|controller not ready"),
    (re.compile(r"^ros2 run robot_bridge (?!robot-bridge\b)\w+"), r"\[INFO\]"),
    (re.compile(r"^(\S*/)?robot-bridge run\b"), r"robot-bridge run: ready"),
    (re.compile(r"^(\S*/)?robot-bridge view\b"), r"http://"),
    (re.compile(r"^ros2 topic (echo|hz)\b(?!.*--once)"), r"(?m)^---$|average rate"),
]
COMMAND_TIMEOUT = 180.0     # s: one command that ends by itself
BRIDGE_DEADLINE = 150.0     # s: a command on the bridge, retried until then
READY_TIMEOUT = 240.0       # s: a waiting command's first expected output (a whole bridge on 2 loaded cores)
# "a running bridge", world_node too; without planner_node (seconds of imports and a model build per page):
# no page's commands on it use the planner (pages that do start their own bridge as they write it)
BRIDGE = "robot-bridge run --objects robot_bridge/data/objects.yaml --no-planner"
# pages at once (most of a page's time is waiting for a bridge to come up); fewer beside other xdist workers
WORKERS = 4 if os.environ.get("PYTEST_XDIST_WORKER") else 8


@dataclass
class Command:
    page: str
    line: int
    text: str                       # as written (continuations joined)
    expect: list[str]
    status: int = 0
    skip: str | None = None
    one_at_a_time: bool = False
    block: int = 0

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def state(self) -> bool:
        return bool(STATE.match(self.text))

    @property
    def ready(self) -> str | None:
        for kind, pattern in WAITS:
            if kind.match(self.text):
                return pattern
        return None


def _split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing comment (a ``#`` outside quotes, at the start or after a blank)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def parse(page: Path) -> list[Command]:
    lines = page.read_text(encoding="utf-8").splitlines()
    name = str(page.relative_to(REPO))
    commands, i, block = [], 0, 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent, lang, start = len(fence.group(1)), fence.group(2), i
        body, i = [], i + 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append((i + 1, lines[i][indent:]))
            i += 1
        i += 1
        if lang not in SHELLS:
            continue
        block += 1
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        skip = re.fullmatch(r"<!--\s*not run:\s*(.*?)\s*-->", before)
        one = re.fullmatch(r"<!--\s*one at a time\s*-->", before) is not None
        pending, first = "", 0
        for number, text in body:
            if pending:
                text = pending + " " + text.strip()
            else:
                first = number
            if text.rstrip().endswith("\\"):
                pending = text.rstrip()[:-1].rstrip()
                continue
            pending = ""
            command, comment = _split_comment(text.strip())
            if not command:
                continue
            expect, status = [], 0
            if comment.startswith("->"):
                wanted = comment[2:].strip().split("  ")[0]
                found = re.search(r"exit status (\d+)", wanted)
                if found:
                    status = int(found.group(1))
                    wanted = wanted.replace(found.group(0), "")
                expect = wanted.split()
            commands.append(Command(name, first, command, expect, status, skip.group(1) if skip else None,
                                    one, block))
    return commands


COMMANDS = [c for page in PAGES for c in parse(page)]


# ---------------------------------------------------------------------------------------------- running

def _ros2() -> str | None:
    venv = Path(sys.prefix) / "bin" / "ros2"
    return str(venv) if venv.is_file() else shutil.which("ros2")


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@dataclass
class Waiting:
    command: Command
    process: subprocess.Popen
    log: Path

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> str | None:
        """Ctrl-C; what went wrong, if anything."""
        children = _descendants(self.process.pid)
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                pass
        for p in [self.process, *children]:     # whatever is left of it, wherever it runs
            try:
                os.kill(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait(10)
        log = self.text()
        if "Traceback" in log:
            return f"{self.command.text}: a traceback in its output:\n{log[-3000:]}"
        return None


@dataclass
class PageRun:
    page: str
    commands: list[Command]
    domain: int
    work: Path
    results: dict = field(default_factory=dict)
    state: list[str] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)
    bridge: Waiting | None = None
    logs: int = 0
    seconds: float = 0.0

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        prefixes = [p for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
        env.update(AMENT_PREFIX_PATH=os.pathsep.join([sys.prefix, *[p for p in prefixes if p != sys.prefix]]),
                   PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                   PYTHONPATH=os.pathsep.join([str(REPO), *[p for p in env.get("PYTHONPATH", "").split(
                       os.pathsep) if p]]),
                   PYTHONUNBUFFERED="1", RCUTILS_COLORIZED_OUTPUT="0", ROS_DOMAIN_ID=str(self.domain),
                   ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        return env

    def script(self, command: str) -> str:
        keep = f"export ROS_DOMAIN_ID={self.domain} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST"
        return "\n".join(["set -e", *self.state, keep, "set +e", command])

    def substituted(self, text: str) -> str:
        for placeholder, real in SUBSTITUTES.items():
            text = text.replace(placeholder, real.split(" ")[0])
        return re.sub(r"ROS_DOMAIN_ID=\d+", f"ROS_DOMAIN_ID={self.domain}", text)

    def start(self, command: Command, text: str, pattern: str) -> Waiting:
        self.logs += 1
        log = self.work / f".doc-command-{self.logs}.log"
        with open(log, "w") as out:
            process = subprocess.Popen(["bash", "-c", self.script(text)], cwd=self.work, env=self.env(),
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        waiting = Waiting(command, process, log)
        expect = [re.escape(word) for word in command.expect]
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            output = waiting.text()
            if (all(re.search(e, output) for e in expect) if expect else re.search(pattern, output)):
                return waiting
            if process.poll() is not None or time.monotonic() > deadline:
                why = (f"exited {process.returncode}" if process.poll() is not None
                       else f"not ready after {READY_TIMEOUT:.0f} s")
                waiting.stop()
                raise AssertionError(f"{why}, expected {command.expect or pattern!r}:\n{output[-4000:]}")
            time.sleep(0.5)

    def stop_waiting(self) -> list[str]:
        problems = [p for w in self.waiting if (p := w.stop())]
        if self.bridge:
            problems += [p for p in [self.bridge.stop()] if p]
        self.waiting, self.bridge = [], None
        return problems

    def run_once(self, command: Command, text: str, timeout: float) -> tuple[bool, str]:
        try:
            done = subprocess.run(["bash", "-c", self.script(text)], cwd=self.work, env=self.env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            out = exc.output.decode(errors="replace") if isinstance(exc.output, bytes) else (exc.output or "")
            return False, f"timed out after {timeout:.0f} s:\n{out[-3000:]}"
        output = done.stdout
        if done.returncode != command.status:
            return False, f"exit status {done.returncode}, expected {command.status}:\n{output[-3000:]}"
        missing = [word for word in command.expect if word not in output]
        if missing:
            return False, f"output lacks {missing}:\n{output[-3000:]}"
        return True, output

    def run(self, command: Command, block_changed: bool) -> None:
        text = self.substituted(command.text)
        if command.state:
            self.state.append(text)
            ok, output = self.run_once(command, "true", 60)
            self.results[command.id] = ("passed", "") if ok else ("failed", output)
            return
        pattern = command.ready
        if pattern:
            if block_changed or command.one_at_a_time:
                problems = self.stop_waiting()
            else:                                       # the page's own command replaces the default bridge
                problems = [p for p in [self.bridge and self.bridge.stop()] if p]
                self.bridge = None
            if problems:
                raise AssertionError("\n".join(problems))
            self.waiting.append(self.start(command, text, pattern))
            self.results[command.id] = ("passed", "")
            return
        if NEEDS_BRIDGE.match(text) and not self.waiting and not self.bridge:
            default = Command(self.page, 0, BRIDGE, [])
            self.bridge = self.start(default, BRIDGE, r"robot-bridge run: ready")
        deadline = time.monotonic() + (BRIDGE_DEADLINE if NEEDS_BRIDGE.match(text) else 0)
        while True:
            ok, output = self.run_once(command, text, COMMAND_TIMEOUT if not NEEDS_BRIDGE.match(text) else 90)
            if ok or time.monotonic() > deadline:
                break
            time.sleep(2.0)
        self.results[command.id] = ("passed", "") if ok else ("failed", f"{text}\n{output}")

    def run_all(self) -> dict:
        block, started_in, start = None, None, time.monotonic()
        try:
            for command in self.commands:
                if command.skip:
                    continue
                changed = command.block != started_in
                if command.ready:
                    started_in = command.block
                try:
                    self.run(command, changed)
                except AssertionError as exc:
                    self.results[command.id] = ("failed", f"{command.text}\n{exc}")
                block = command.block
        finally:
            problems = self.stop_waiting()
            if problems:
                last = next((c for c in reversed(self.commands) if c.ready and not c.skip), None)
                if last is not None:
                    self.results[last.id] = ("failed", "\n".join(problems))
            if _ros2():
                subprocess.run([_ros2(), "daemon", "stop"], env=self.env(), capture_output=True, timeout=60)
        del block
        self.seconds = time.monotonic() - start
        return self.results


SUMMARY = "<summary>"          # the key of the run's summary lines among the outcomes


def _domains(count: int) -> list[int]:
    """Domains of the page runs' own, unique on this machine (another xdist worker runs beside this one)."""
    return domains.claim_many(count)


def _prepare(work: Path) -> None:
    for entry in REPO.iterdir():
        if entry.name not in {".git", ".venv"}:
            (work / entry.name).symlink_to(entry)
    (work / ".venv").symlink_to(sys.prefix)
    (work / "my_robot.urdf.xacro").write_text(XACRO)
    (work / "parts.xacro").write_text(PARTS)


def _units(runnable: list[Command]) -> dict[str, list[Command]]:
    """What runs in parallel: each page, and apart from it each waiting command of a block marked one at a
    time (alternatives: nothing after it uses it), after the page's set-up lines before it."""
    units: dict[str, list[Command]] = {}
    for c in runnable:
        if c.one_at_a_time and c.ready:
            setup = [s for s in runnable if s.page == c.page and s.state and s.line < c.line]
            units[c.id] = [*setup, c]
        else:
            units.setdefault(c.page, []).append(c)
    return dict(sorted(units.items(), key=lambda unit: -len(unit[1])))


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory):
    """Every page's commands run (pages in parallel); command id -> (outcome, detail)."""
    start = time.monotonic()
    results: dict[str, tuple[str, str]] = {}
    ros2 = _ros2()
    runnable = []
    unrun: dict[tuple[str, int], Command] = {}   # (page, block) -> its first command skipped for want of ros2
    for c in COMMANDS:
        if c.skip:
            results[c.id] = ("skipped", c.skip)
        elif ros2 is None and re.search(r"\bros2\b", c.text):
            results[c.id] = ("skipped", missing_reason())
            unrun.setdefault((c.page, c.block), c)
        elif (c.page, c.block) in unrun:       # e.g. it reads a file the ros2 command above it writes
            first = unrun[(c.page, c.block)]
            results[c.id] = ("skipped", f"follows {first.id} ({first.text.split()[0]} ...): "
                                        f"{missing_reason()}")
        else:
            runnable.append(c)
    units = _units(runnable)
    runs = []
    for (name, commands), domain in zip(units.items(), _domains(len(units))):
        work = tmp_path_factory.mktemp(re.sub(r"\W", "_", name))
        _prepare(work)
        runs.append(PageRun(name, commands, domain, work))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for done in pool.map(PageRun.run_all, runs):
            results.update(done)
    for c in runnable:
        results.setdefault(c.id, ("failed", "not run: an earlier command of its page stopped the page"))
    seconds = time.monotonic() - start
    ran = [c for c in COMMANDS if results[c.id][0] != "skipped"]
    failed = [c for c in ran if results[c.id][0] == "failed"]
    reasons: dict[str, list[str]] = {}
    for c in COMMANDS:
        if results[c.id][0] == "skipped":
            reasons.setdefault(results[c.id][1], []).append(c.id)
    summary = [f"{len(COMMANDS)} shell commands in README.md and docs/*.md: {len(ran)} run "
               f"({len(ran) - len(failed)} passed, {len(failed)} failed) in {len(runs)} parallel runs "
               f"(pages, alternatives) in {seconds:.0f} s; {len(COMMANDS) - len(ran)} not run:"]
    summary.append("  seconds per run: " + ", ".join(f"{r.page} {r.seconds:.0f}" for r in runs))
    summary += [f"  {len(ids)} not run: {reason} ({', '.join(ids)})" for reason, ids in reasons.items()]
    summary.append("  run in place of the reader's files: " + "; ".join(f"{k} -> {v}" for k, v in
                                                                        SUBSTITUTES.items()))
    results[SUMMARY] = ("summary", summary)
    return results


def test_pages_have_commands_and_markers_parse():
    """The extraction itself: the README's own-robot block, a not-run reason, an expectation."""
    ids = {c.id: c for c in COMMANDS}
    assert len(COMMANDS) > 30, len(COMMANDS)
    readme = [c for c in COMMANDS if c.page == "README.md"]
    assert any(c.text.startswith("ros2 launch robot_bridge bridge.launch.py robot:=") for c in readme)
    assert any(c.skip and "test_demo.py" in c.skip for c in readme)
    node_list = next(c for c in readme if c.text == "ros2 node list")
    assert node_list.expect == ["/controller_node", "/description_node", "/sensor_bridge"]
    assert all(c.skip is None or c.skip.strip() for c in ids.values())
    # the two commands the issue found wrong, as the pages now write them
    echo = [c.text for c in COMMANDS
            if c.text.startswith("ros2 topic echo --once") and "/robot_description" in c.text]
    assert echo and all("--full-length" in t for t in echo if ">" in t), echo
    goals = [c.text for c in COMMANDS if c.page == "docs/moveit.md" and "FollowJointTrajectory" in c.text]
    assert goals and all("/controller_node/arm/follow_joint_trajectory" in t for t in goals)


INDENTED_COMMAND = re.compile(r"^ {4}(\S*/)?(\.venv\S*/bin/|make |ros2 |robot-bridge |python|colcon |"
                              r"source |cd )")


def test_no_command_hides_outside_a_fenced_block():
    """An indented (Markdown code) block of commands is neither run nor reported as not run: the pages
    fence every command block, so each is run or says why not."""
    hidden = []
    for page in PAGES:
        fenced, previous = False, ""
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"^\s*```", line):
                fenced = not fenced
            elif not fenced and not previous.strip() and INDENTED_COMMAND.match(line):
                hidden.append(f"{page.relative_to(REPO)}:{number}: {line.strip()}")
            previous = line if not fenced else ""
    assert not hidden, hidden


def test_a_renamed_topic_fails(tmp_path):
    """A command on a name the bridge does not serve fails within its deadline instead of passing."""
    if _ros2() is None:
        pytest.skip(missing_reason())
    run = PageRun("renamed", [], _domains(1)[0], tmp_path)
    command = Command("renamed", 1, "ros2 topic echo --once /robot_descriptionX", [])
    ok, output = run.run_once(command, command.text, 8)
    assert not ok, output              # ros2 topic echo: no such topic -> exit status 1 (or a timeout)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_doc_command(command, outcomes, record_property):
    if command is COMMANDS[0]:        # the run's summary travels with one report (xdist: to the controller)
        record_property("docs_commands_summary", outcomes[SUMMARY][1])
    outcome, detail = outcomes[command.id]
    if outcome == "skipped":
        pytest.skip(f"not run: {detail}")
    assert outcome == "passed", f"{command.id}: {command.text}\n{detail}"
