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
WHEELS_DISTRO=${WHEELS_DISTRO:-kilted}
ROS2_TOOLS_REQUIREMENTS=${ROS2_TOOLS_REQUIREMENTS:-requirements-ros2-tools.txt}
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

# Built interface packages are kept per distribution in $ROBOT_BRIDGE_CACHE/interfaces/<distro>/ (empty: no
# cache), keyed by the package's hash, the toolchain and the build-relevant wheels, so the set-up of another
# clone (or a re-made venv) copies them instead of running cmake (tools/interface_cache.py; the venv's path
# in the installed files is rewritten).
CACHE_ROOT=${ROBOT_BRIDGE_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/robot_bridge}
toolchain_tag=""
set_toolchain_tag() {  # once the wheels are installed: what a build's output depends on besides its sources
    [[ -n $CACHE_ROOT && -z $toolchain_tag ]] || return 0
    toolchain_tag=$( { "$VPY" - <<'PY'
import importlib.metadata as md, platform, sys
print(sys.version, sys.base_prefix, platform.machine())
names = sorted(f"{d.metadata['Name'].lower().replace('_', '-')}=={d.version}" for d in md.distributions())
print(*(n for n in names if n.startswith(("ros-", "numpy=", "empy=", "lark=", "catkin-pkg="))))
PY
        "$CMAKE" --version | head -n 1; "$CC" --version | head -n 1; "$CXX" --version | head -n 1
    } | sha256sum | cut -c1-8)
}
cache_entry() {  # NAME HASH -> the entry's folder (empty without a cache)
    [[ -n $CACHE_ROOT ]] || return 0
    echo "$CACHE_ROOT/interfaces/$WHEELS_DISTRO/$1-$2-${toolchain_tag:?set_toolchain_tag first}"
}

importable() {  # PKG: its messages (or, for a package of services only, its services) import
    "$VPY" -c "import $1.msg" >/dev/null 2>&1 || "$VPY" -c "import $1.srv" >/dev/null 2>&1
}

# build_iface NAME SOURCE_DIR HASH [CMAKE_ARG ...]: an interface package into the venv, as colcon would install
# it; nothing when its stamp holds HASH, copied from the cache when there.
build_iface() {
    local pkg=$1 src=$2 hash=$3 entry build_dir="$VENV_ABS/.build/$1"
    shift 3
    if [[ "$(cat "$build_dir.stamp" 2>/dev/null)" == "$hash" ]] && importable "$pkg"; then
        note "$pkg up to date"
        return 0
    fi
    entry=$(cache_entry "$pkg" "$hash")
    if [[ -n $entry && -d $entry ]] && "$VPY" tools/interface_cache.py restore "$entry" "$VENV_ABS" \
        && importable "$pkg"; then
        note "$pkg from the cache ($entry)"
        mkdir -p "$VENV_ABS/.build" && echo "$hash" >"$build_dir.stamp"
        return 0
    fi
    note "building $pkg into $VENV (log: $build_dir/build.log)"
    rm -rf "$build_dir" && mkdir -p "$build_dir"
    if ! (
        export AMENT_PREFIX_PATH="$VENV_ABS" PATH="$VENV_ABS/bin:$PATH" CC CXX
        "$CMAKE" -S "$src" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_INSTALL_PREFIX="$VENV_ABS" -DCMAKE_PREFIX_PATH="$VENV_ABS" \
            -DPython3_EXECUTABLE="$VENV_ABS/bin/python" -DBUILD_TESTING=OFF "$@"
        "$CMAKE" --build "$build_dir" -j "$(nproc 2>/dev/null || echo 2)"
        "$CMAKE" --install "$build_dir"
    ) >"$build_dir/build.log" 2>&1; then
        tail -n 30 "$build_dir/build.log" >&2
        die "building $pkg failed (full log: $build_dir/build.log)"
    fi
    echo "$hash" >"$build_dir.stamp"
    if [[ -n $entry ]]; then
        "$VPY" tools/interface_cache.py store "$VENV_ABS" "$build_dir" "$entry" || note "warning: $pkg not cached"
    fi
}

# The real launch / launch_ros / ros2cli (not on PyPI; a ROS 2 install brings its own): from ../shared/ros2-tools
# when it exists (developer and CI machines; its own stamp makes a second run a no-op), else the pinned upstream
# archives of $ROS2_TOOLS_REQUIREMENTS from GitHub.  Where neither is reachable: ONE line saying what is missing,
# the same text in $VENV/.ros2-tools-missing (the tests that need the tools skip with it), and the set-up goes on.
ROS2_TOOLS=${ROS2_TOOLS:-../shared/ros2-tools}
MISSING="$VENV_ABS/.ros2-tools-missing"
install_ros2_tools() {
    [[ $mode == wheels ]] || return 0
    if [[ -x "$ROS2_TOOLS/install.sh" ]]; then
        note "installing the ROS 2 launch and CLI tools from $ROS2_TOOLS"
        "$ROS2_TOOLS/install.sh" "$VENV" || die "$ROS2_TOOLS/install.sh failed"
        # Kilted-era sources: adapted where this venv's rclpy differs (Jazzy); a no-op on Kilted
        "$VPY" tools/ros2_tools_compat.py || die "adapting the ROS 2 tools to this rclpy failed"
        rm -f "$MISSING"
        return 0
    fi
    local req=$ROS2_TOOLS_REQUIREMENTS stamp why
    stamp="$VENV_ABS/.ros2-tools-req-$(cat "$req" tools/venv_interfaces/*.cmake | sha256sum | cut -c1-12)"
    if [[ -f $stamp && -x $VENV_ABS/bin/ros2 ]]; then
        note "ROS 2 launch and CLI tools up to date ($req)"
        return 0
    fi
    mkdir -p "$VENV_ABS/.build"
    local log="$VENV_ABS/.build/ros2-tools.log"
    set_toolchain_tag
    if why=$(reach_ros2_tools "$req" 2>&1); then
        note "installing the ROS 2 launch and CLI tools from $req (GitHub archives; log: $log)"
        if fetch_ros2_tools "$req" >"$log" 2>&1; then
            rm -f "$MISSING" "$VENV_ABS"/.ros2-tools-req-* && touch "$stamp"
            return 0
        fi
        why=$(tail -n 1 "$log")
    fi
    echo "no ros2, launch, launch_ros in $VENV: no $ROS2_TOOLS, and $req's GitHub archives failed" \
        "(${why##*$'\n'}), so \`ros2 launch|run|node|topic|service|param|action\` are unavailable and their" \
        "tests skip; make demo, make test and robot-bridge run work" >"$MISSING"
    note "$(cat "$MISSING")"
}

# reach_ros2_tools REQUIREMENTS: its first archive answers within ROS2_TOOLS_TIMEOUT seconds (else says why),
# so an unreachable GitHub fails in seconds instead of pip's minutes of retries.
reach_ros2_tools() {
    "$VPY" - "$1" "${ROS2_TOOLS_TIMEOUT:-10}" <<'PY'
import re, sys, urllib.request
req, timeout = sys.argv[1], float(sys.argv[2])
url = re.search(r"@ (\S+?)(#|\s|$)", open(req).read()).group(1)
try:
    urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
except Exception as error:
    sys.exit(f"{url}: {getattr(error, 'reason', error)}")
PY
}

# fetch_ros2_tools REQUIREMENTS: pip-installs its archives (--no-deps) and builds its `# cmake:` packages; on
# failure its last line says why.
fetch_ros2_tools() {
    local req=$1 timeout=${ROS2_TOOLS_TIMEOUT:-10} line name url sub src hash
    "$VPY" -m pip install -q --timeout "$timeout" --retries 1 --no-deps -r "$req" \
        || { echo "pip install -r $req failed"; return 1; }
    while read -r line; do
        [[ $line =~ ^#\ cmake:\ ([A-Za-z0-9_]+)\ @\ ([^#]+)#subdirectory=(.+)$ ]] || continue
        name=${BASH_REMATCH[1]} url=${BASH_REMATCH[2]} sub=${BASH_REMATCH[3]}
        src="$VENV_ABS/.build/src/$name"
        rm -rf "$src" && mkdir -p "$src"
        "$VPY" - "$url" "$src" "$timeout" <<'PY' || { echo "downloading $url failed"; return 1; }
import io, sys, tarfile, urllib.request
url, dest, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
data = urllib.request.urlopen(url, timeout=timeout).read()
with tarfile.open(fileobj=io.BytesIO(data)) as archive:
    if hasattr(tarfile, "data_filter"):
        archive.extraction_filter = tarfile.data_filter
    archive.extractall(dest)
PY
        hash=$( { echo "$line"; cat "$REQUIREMENTS" tools/venv_interfaces/*.cmake; } | sha256sum | cut -c1-16)
        ( build_iface "$name" "$(echo "$src"/*/"$sub")" "$hash" \
            -DCMAKE_PROJECT_INCLUDE="$PWD/tools/venv_interfaces/upstream_include_dirs.cmake" ) \
            || { echo "building $name failed (log: $VENV_ABS/.build/$name/build.log)"; return 1; }
    done <"$req"
}

if [[ ${1:-} == ros2-tools ]]; then     # `make setup` retrying the tools after a set-up without them
    install_ros2_tools
    exit 0
fi

if [[ $mode == wheels ]]; then
    note "installing ROS 2 wheels ($REQUIREMENTS)"
    "$VPY" -m pip install -q -r "$REQUIREMENTS"
    set_toolchain_tag

    # Every interface package in tools/venv_interfaces (tf2_msgs, control_msgs, vision_msgs, ...), or those named
    # in VENV_INTERFACES (space-separated; their local dependencies come along), each rebuilt
    # only when its own files, the shared cmake or the wheels change.  The wheels provide every dependency they have.
    # In dependency order (moveit_msgs after octomap_msgs and object_recognition_msgs); a package's hash covers
    # the local packages it depends on, so a changed dependency rebuilds its dependents.
    while read -r pkg deps; do
        iface_hash=$(cat "$REQUIREMENTS" "$IFACE_SRC"/*.cmake \
            $(for d in $deps "$pkg"; do find "$IFACE_SRC/$d" -type f; done | LC_ALL=C sort) \
            | sha256sum | cut -c1-16)
        build_iface "$pkg" "$IFACE_SRC/$pkg" "$iface_hash"
    done < <("$VPY" tools/venv_interfaces/build_order.py "$IFACE_SRC" $VENV_INTERFACES)
fi

note "installing robot_bridge (editable) with the test, raycast and planning extras"
# One at a time per clone: the Kilted and Jazzy set-ups may run side by side (.ci/run), and this writes
# robot_bridge.egg-info into the clone.
exec 9>"${TMPDIR:-/tmp}/robot_bridge-editable-$(pwd | sha256sum | cut -c1-12).lock"
command -v flock >/dev/null 2>&1 && flock 9
"$VPY" -m pip install -q -e '.[test,raycast,planning,view]'
exec 9>&-

"$VPY" -c 'import rclpy; from tf2_msgs.msg import TFMessage; from sensor_msgs.msg import LaserScan' \
    || die "the venv cannot import rclpy / tf2_msgs / sensor_msgs after setup"
"$VPY" -c 'from control_msgs.action import FollowJointTrajectory, GripperCommand' 2>/dev/null \
    || note "warning: control_msgs is not importable: controller_node needs it (on a ROS 2 install: apt install ros-\$ROS_DISTRO-control-msgs)"
"$VPY" -c 'from vision_msgs.msg import Detection3DArray' 2>/dev/null \
    || note "warning: vision_msgs is not importable: world_node needs it (on a ROS 2 install: apt install ros-\$ROS_DISTRO-vision-msgs)"

# The venv as a ROS 2 prefix for robot_bridge (ament index, share/, lib/, AMENT_PREFIX_PATH on activate).
"$VPY" tools/venv_ros_prefix.py "$VENV" || die "making $VENV a ROS 2 prefix failed"

install_ros2_tools
note "done in $((SECONDS - start)) s"
