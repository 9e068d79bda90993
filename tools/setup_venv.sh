#!/usr/bin/env bash
# Create or update the development venv (called by `make setup`; see the Makefile for the variables).
#
# Without a system ROS 2: pinned ROS 2 wheels from PyPI ($REQUIREMENTS: Kilted, or Jazzy with
# requirements-ros-jazzy.txt) + the interface packages of tools/venv_interfaces
# (tf2_msgs, control_msgs, vision_msgs, ...) built into the venv.
# With a sourced system ROS 2 (rclpy and tf2_msgs import): a --system-site-packages venv that uses it.
# Then robot_bridge is installed editable with its test, raycast and planning extras. Safe to re-run.
set -euo pipefail

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
CMAKE=${CMAKE:-cmake}
CC=${CC:-cc}
CXX=${CXX:-c++}
REQUIREMENTS=${REQUIREMENTS:-requirements-ros.txt}
VENV_INTERFACES=${VENV_INTERFACES:-}      # empty: every package of tools/venv_interfaces
IFACE_SRC=tools/venv_interfaces
start=$SECONDS

die() { echo "make setup: error: $*" >&2; exit 1; }
note() { echo "make setup: $*"; }

py_version=$("$PYTHON" -c 'import platform; print(platform.python_version())' 2>/dev/null) \
    || die "cannot run the Python interpreter '$PYTHON' (set PYTHON=...)."
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$PYTHON is Python $py_version; 3.10 or newer is required."
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null \
    || die "$PYTHON cannot create virtual environments (install the python3-venv package)."

if "$PYTHON" -c 'import rclpy, tf2_msgs.msg' >/dev/null 2>&1; then
    mode=system
    note "using the sourced ROS 2 install (${ROS_DISTRO:-unknown distro}); no wheels, no interface build"
else
    mode=wheels
    # Check the interface-build toolchain before spending minutes on downloads.
    command -v "$CMAKE" >/dev/null 2>&1 \
        || die "cmake not found ('$CMAKE'); it is needed to build tf2_msgs into the venv (apt install cmake)."
    command -v "$CC" >/dev/null 2>&1 \
        || die "C compiler not found ('$CC'); it is needed to build tf2_msgs into the venv (apt install build-essential)."
    command -v "$CXX" >/dev/null 2>&1 \
        || die "C++ compiler not found ('$CXX'); it is needed to build tf2_msgs into the venv (apt install g++)."
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    note "creating $VENV"
    venv_opts=()
    [[ $mode == system ]] && venv_opts+=(--system-site-packages)
    "$PYTHON" -m venv "${venv_opts[@]}" "$VENV"
elif [[ $mode == system ]] && ! grep -qs 'include-system-site-packages = true' "$VENV/pyvenv.cfg"; then
    die "$VENV was made without --system-site-packages, so it cannot see the sourced ROS 2; remove it (rm -rf $VENV) and re-run."
fi
VPY="$VENV/bin/python"
VENV_ABS=$(cd "$VENV" && pwd)

if [[ $mode == wheels ]]; then
    note "installing ROS 2 wheels ($REQUIREMENTS)"
    "$VPY" -m pip install -q -r "$REQUIREMENTS"

    # Every interface package in tools/venv_interfaces (tf2_msgs, control_msgs, vision_msgs, ...), or those named
    # in VENV_INTERFACES (space-separated; their local dependencies come along), each rebuilt
    # only when its own files, the shared cmake or the wheels change.  The wheels provide every dependency they have.
    # In dependency order (moveit_msgs after octomap_msgs and object_recognition_msgs); a package's hash covers
    # the local packages it depends on, so a changed dependency rebuilds its dependents.
    while read -r pkg deps; do
        pkg_dir="$IFACE_SRC/$pkg/"
        iface_hash=$(cat "$REQUIREMENTS" "$IFACE_SRC"/*.cmake \
            $(for d in $deps "$pkg"; do find "$IFACE_SRC/$d" -type f; done | LC_ALL=C sort) \
            | sha256sum | cut -c1-16)
        build_dir="$VENV_ABS/.build/$pkg"
        if [[ "$(cat "$build_dir.stamp" 2>/dev/null)" == "$iface_hash" ]] \
            && "$VPY" -c "import $pkg.msg" >/dev/null 2>&1; then
            note "$pkg up to date"
            continue
        fi
        note "building $pkg into $VENV (log: $build_dir/build.log)"
        rm -rf "$build_dir" && mkdir -p "$build_dir"
        if ! (
            export AMENT_PREFIX_PATH="$VENV_ABS" PATH="$VENV_ABS/bin:$PATH" CC CXX
            "$CMAKE" -S "$pkg_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
                -DCMAKE_INSTALL_PREFIX="$VENV_ABS" -DCMAKE_PREFIX_PATH="$VENV_ABS" \
                -DPython3_EXECUTABLE="$VENV_ABS/bin/python" -DBUILD_TESTING=OFF
            "$CMAKE" --build "$build_dir" -j "$(nproc 2>/dev/null || echo 2)"
            "$CMAKE" --install "$build_dir"
        ) >"$build_dir/build.log" 2>&1; then
            tail -n 30 "$build_dir/build.log" >&2
            die "building $pkg failed (full log: $build_dir/build.log)"
        fi
        echo "$iface_hash" >"$build_dir.stamp"
    done < <("$VPY" tools/venv_interfaces/build_order.py "$IFACE_SRC" $VENV_INTERFACES)
fi

note "installing robot_bridge (editable) with the test, raycast and planning extras"
"$VPY" -m pip install -q -e '.[test,raycast,planning,view]'

"$VPY" -c 'import rclpy; from tf2_msgs.msg import TFMessage; from sensor_msgs.msg import LaserScan' \
    || die "the venv cannot import rclpy / tf2_msgs / sensor_msgs after setup"
"$VPY" -c 'from control_msgs.action import FollowJointTrajectory, GripperCommand' 2>/dev/null \
    || note "warning: control_msgs is not importable: controller_node needs it (on a ROS 2 install: apt install ros-\$ROS_DISTRO-control-msgs)"
"$VPY" -c 'from vision_msgs.msg import Detection3DArray' 2>/dev/null \
    || note "warning: vision_msgs is not importable: world_node needs it (on a ROS 2 install: apt install ros-\$ROS_DISTRO-vision-msgs)"

# The venv as a ROS 2 prefix for robot_bridge (ament index, share/, lib/, AMENT_PREFIX_PATH on activate).
"$VPY" tools/venv_ros_prefix.py "$VENV" || die "making $VENV a ROS 2 prefix failed"

# The real launch / launch_ros / ros2cli (not on PyPI) from ../shared/ros2-tools when it exists (a ROS 2
# install brings its own). Its own stamp makes a second run a no-op.
ROS2_TOOLS=${ROS2_TOOLS:-../shared/ros2-tools}
if [[ $mode == wheels && -x "$ROS2_TOOLS/install.sh" ]]; then
    note "installing the ROS 2 launch and CLI tools from $ROS2_TOOLS"
    "$ROS2_TOOLS/install.sh" "$VENV" || die "$ROS2_TOOLS/install.sh failed"
    # Kilted-era sources: adapted where this venv's rclpy differs (Jazzy); a no-op on Kilted
    "$VPY" tools/ros2_tools_compat.py || die "adapting the ROS 2 tools to this rclpy failed"
elif [[ $mode == wheels ]]; then
    note "no $ROS2_TOOLS: no ros2 / launch in $VENV (the tests that need them skip)"
fi
note "done in $((SECONDS - start)) s"
