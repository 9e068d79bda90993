# robot_bridge developer commands.  `make test` sets up .venv first when needed.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
CMAKE ?= cmake
VENV := .venv
VPY := $(VENV)/bin/python
export PYTHON CMAKE CC CXX VENV

# The setup is redone only when one of its inputs changes (the stamp name carries their hash).
# ../shared/ros2-tools/install.sh keeps its own stamp.
SETUP_INPUTS := setup.py setup.cfg requirements-ros.txt tools/setup_venv.sh tools/venv_ros_prefix.py \
	$(shell find tools/venv_interfaces -type f 2>/dev/null | LC_ALL=C sort) \
	$(wildcard ../shared/ros2-tools/install.sh)
SETUP_HASH := $(shell cat $(SETUP_INPUTS) | sha256sum | cut -c1-16)
STAMP := $(VENV)/.setup-stamp-$(SETUP_HASH)
LINT_PATHS := $(wildcard robot_bridge test bench)

.PHONY: help setup lint test demo clean distclean

help:
	@echo "make setup      create/update $(VENV): ROS 2 wheels (or the sourced ROS 2), tools/venv_interfaces, robot_bridge"
	@echo "make test       ruff + the whole pytest suite on a fresh ROS_DOMAIN_ID (runs setup if needed)"
	@echo "make demo       run the bridge in sim mode with a small master client (report + demo_out/demo.png)"
	@echo "make lint       ruff only"
	@echo "make clean      remove build and test caches (keeps $(VENV))"
	@echo "make distclean  clean + remove $(VENV)"

# The venv's ROS 2 prefix links (share/robot_bridge, lib/robot_bridge) follow added or removed launch/config
# files and executables on every run (an edited one needs nothing: the links point at it).
setup: $(STAMP)
	@$(VPY) tools/venv_ros_prefix.py $(VENV)

$(STAMP):
	@tools/setup_venv.sh
	@rm -f $(VENV)/.setup-stamp-* && touch $@

lint: setup
	$(VPY) -m ruff check $(LINT_PATHS)

# Lint and tests both run so CI reports both; the target fails if either does. pytest exits 5 when it
# collects no tests: like any non-zero status, that fails the target.
test: setup
	@status=0; \
	$(VPY) -m ruff check $(LINT_PATHS) || status=$$?; \
	ROS_DOMAIN_ID=$$(( RANDOM % 100 + 1 )) $(VPY) -m pytest test || status=$$?; \
	exit $$status

# The bridge in sim mode on the embedded robot and world, a master client, a report and demo_out/demo.png.
demo: setup
	$(VPY) -m robot_bridge.demo --out demo_out

clean:
	rm -rf build install log .pytest_cache .ruff_cache .hypothesis *.egg-info demo_out
	find robot_bridge test bench -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
