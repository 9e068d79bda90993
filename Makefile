# robot_bridge developer commands.  `make test` sets up .venv first when needed.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
CMAKE ?= cmake
# The ROS 2 wheels distribution: Kilted in .venv (default), or `make setup ROS_DISTRO=jazzy` (= `make setup-jazzy`)
# for Jazzy in .venv-jazzy; both venvs live side by side.  Only a ROS_DISTRO given on the command line selects:
# a sourced ROS 2 exports ROS_DISTRO too, and then setup_venv.sh uses that install in .venv.
ifeq ($(origin ROS_DISTRO),command line)
WHEELS_DISTRO := $(ROS_DISTRO)
else
WHEELS_DISTRO := kilted
endif
ifeq ($(WHEELS_DISTRO),kilted)
VENV := .venv
REQUIREMENTS := requirements-ros.txt
ROS2_TOOLS_REQUIREMENTS := requirements-ros2-tools.txt
else ifeq ($(WHEELS_DISTRO),jazzy)
VENV := .venv-jazzy
REQUIREMENTS := requirements-ros-jazzy.txt
ROS2_TOOLS_REQUIREMENTS := requirements-ros2-tools-jazzy.txt
else
$(error ROS_DISTRO=$(WHEELS_DISTRO): the wheels setup knows kilted (default) and jazzy; for another distribution source its ROS 2 install and run `make setup` without ROS_DISTRO)
endif
VPY := $(VENV)/bin/python
# VENV_INTERFACES: the tools/venv_interfaces packages to build (space-separated, their local dependencies come
# along; default: all), e.g. a CI subset.  TESTS: what `make test` runs (pytest paths or node ids, or options such
# as -m "node or system"; default: test).  PYTEST_ARGS: added to every run (default: the 25 slowest tests listed).
# TEST_WORKERS: pytest-xdist processes (default 3: most tests wait on processes and discovery, not on a core;
# 0 runs in one process), each on its own ROS domain, each test file whole on one worker (module fixtures).
VENV_INTERFACES ?=
TESTS ?= test
PYTEST_ARGS ?= --durations=25
TEST_WORKERS ?= 3
export PYTHON CMAKE CC CXX VENV REQUIREMENTS VENV_INTERFACES WHEELS_DISTRO ROS2_TOOLS_REQUIREMENTS

# The setup is redone only when one of its inputs changes (the stamp name carries their hash).
# ../shared/ros2-tools/install.sh keeps its own stamp.  Built interface packages are also kept outside the clone,
# per distribution, in ${ROBOT_BRIDGE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/robot_bridge}/interfaces/ (see
# tools/interface_cache.py), so another clone's set-up copies them; ROBOT_BRIDGE_CACHE= (empty) builds every time.
SETUP_INPUTS := setup.py setup.cfg $(REQUIREMENTS) $(ROS2_TOOLS_REQUIREMENTS) tools/setup_venv.sh tools/venv_ros_prefix.py \
	tools/ros2_tools_compat.py tools/interface_cache.py \
	$(shell find tools/venv_interfaces -type f 2>/dev/null | LC_ALL=C sort) \
	$(wildcard ../shared/ros2-tools/install.sh)
SETUP_HASH := $(shell { cat $(SETUP_INPUTS); echo "$(VENV_INTERFACES)"; } | sha256sum | cut -c1-16)
STAMP := $(VENV)/.setup-stamp-$(SETUP_HASH)
LINT_PATHS := $(wildcard robot_bridge test bench)

.PHONY: help setup lint test demo clean distclean setup-jazzy test-jazzy

help:
	@echo "make setup      create/update $(VENV): ROS 2 wheels (or the sourced ROS 2), tools/venv_interfaces, robot_bridge"
	@echo "make test       ruff + the whole pytest suite on TEST_WORKERS=3 processes, each on a ROS domain of its own (runs setup if needed)"
	@echo "                add ROS_DISTRO=jazzy to any target (or: make setup-jazzy, make test-jazzy) for ROS 2 Jazzy in .venv-jazzy"
	@echo "                TESTS='test/ros test/nodes' runs a part; VENV_INTERFACES='tf2_msgs control_msgs' builds a subset"
	@echo "make demo       run the bridge in sim mode with a small master client (report + demo_out/demo.png)"
	@echo "make lint       ruff only"
	@echo "make clean      remove build and test caches (keeps $(VENV))"
	@echo "make distclean  clean + remove .venv and .venv-jazzy"

# The venv's ROS 2 prefix links (share/robot_bridge, lib/robot_bridge) follow added or removed launch/config
# files and executables on every run (an edited one needs nothing: the links point at it).  A venv made without
# the ROS 2 tools (no ../shared/ros2-tools, GitHub out of reach) retries them, in seconds, and says so in a line.
# (Only when the stamp was there before this run: a set-up that just ran tried them already.)
SETUP_WAS_DONE := $(wildcard $(STAMP))
setup: $(STAMP)
	@$(VPY) tools/venv_ros_prefix.py $(VENV)
	@if [[ -n "$(SETUP_WAS_DONE)" && -f $(VENV)/.ros2-tools-missing ]]; then tools/setup_venv.sh ros2-tools; fi

$(STAMP):
	@tools/setup_venv.sh
	@rm -f $(VENV)/.setup-stamp-* && touch $@

lint: setup
	$(VPY) -m ruff check $(LINT_PATHS)

setup-jazzy:
	$(MAKE) setup ROS_DISTRO=jazzy

test-jazzy:
	$(MAKE) test ROS_DISTRO=jazzy

# Lint and tests both run so CI reports both; the target fails if either does. pytest exits 5 when it
# collects no tests: like any non-zero status, that fails the target.  One pytest run: its "layers" section
# (test/fixtures/layer_report.py) gives each layer's counts and time, its last line the totals.
test: setup
	@status=0; \
	$(VPY) -m ruff check $(LINT_PATHS) || status=$$?; \
	env -u ROS_DOMAIN_ID $(VPY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS) $(TESTS) || status=$$?; \
	exit $$status

# The bridge in sim mode on the embedded robot and world, a master client, a report and demo_out/demo.png.
demo: setup
	$(VPY) -m robot_bridge.demo --out demo_out

clean:
	rm -rf build install log .pytest_cache .ruff_cache .hypothesis *.egg-info demo_out
	find robot_bridge test bench -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf .venv .venv-jazzy
