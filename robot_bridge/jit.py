"""numba for robot_bridge's kernels: imported on first use, compiled code cached in a user folder.

Every kernel is compiled through :func:`njit`, which caches the machine code in :func:`cache_dir` --
``$NUMBA_CACHE_DIR`` when set, else ``$ROS_HOME/robot_bridge/numba_cache`` when ``ROS_HOME`` is set, else
``$XDG_CACHE_HOME/robot_bridge/numba`` (``~/.cache/robot_bridge/numba``) -- so only the first process after
an install or an upgrade compiles (seconds per kernel); later ones load it.  The cache goes into a subfolder
named by a digest of :data:`KERNEL_SOURCES`: numba checks a cached function against its own file only, and a
kernel inlines helpers of other files (``fast_relay``'s take and publish), so code compiled from other
sources is never loaded.  A folder that cannot be created or written (a read-only home, a sandbox) means no
cache at all: kernels are compiled in each process and nothing is written anywhere else (numba's own
fallbacks would write beside the installed modules).  The folder is safe to delete.

numba is optional (``pip install robot_bridge[raycast]``): without it :data:`AVAILABLE` is False and
:func:`load` returns None; callers then use their numpy or Python path.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Optional

AVAILABLE = importlib.util.find_spec("numba") is not None
_log = logging.getLogger(__name__)
_lock = threading.Lock()
_loaded: dict = {}                  # "numba": the module, "cache": whether kernels are cached
# every module with compiled functions (and the files their compiled callees are in), package-relative
KERNEL_SOURCES = ("kinematics/fk_kernel.py", "ros/fast_relay.py", "ros/joint_state_tf.py",
                  "ros/image_drain.py", "ros/template_publishers.py", "sim/raster.py")


def cache_root() -> Path:
    """The folder of every version's kernel cache (see the module notes); not created here."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"]).expanduser()
    if os.environ.get("ROS_HOME"):
        return Path(os.environ["ROS_HOME"]).expanduser() / "robot_bridge" / "numba_cache"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "robot_bridge" / "numba"


def cache_dir() -> Path:
    """This version's kernel cache: :func:`cache_root` / a digest of :data:`KERNEL_SOURCES`."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in KERNEL_SOURCES:
        try:
            digest.update((package / name).read_bytes())
        except OSError:            # not installed (a partial package): nothing of it can be cached wrong
            digest.update(name.encode())
    return cache_root() / digest.hexdigest()[:16]


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def load():
    """numba, imported with its cache folder set (once per process); None without numba."""
    if not AVAILABLE:
        return None
    with _lock:
        if "numba" not in _loaded:
            folder = cache_dir()
            cache = _writable(folder)
            import numba
            import numba.core.config

            if cache:       # numba's own setting (not the environment: other threads may be reading it)
                numba.core.config.CACHE_DIR = str(folder)
            else:
                _log.info("numba kernel cache folder %s is not writable: kernels are compiled in each "
                          "process", folder)
            _loaded.update(numba=numba, cache=cache)
    return _loaded["numba"]


def caching() -> bool:
    """True when kernels are cached (numba loaded and its folder writable)."""
    return load() is not None and _loaded["cache"]


def njit(*args, **options):
    """``numba.njit`` with ``cache`` set as :func:`caching` says (numba must be available)."""
    numba = load()
    if numba is None:
        raise ImportError("numba is not installed")
    return numba.njit(*args, cache=_loaded["cache"], **options)


def imported() -> Optional[object]:
    """numba if :func:`load` already ran in this process, else None (without importing it)."""
    return _loaded.get("numba")
