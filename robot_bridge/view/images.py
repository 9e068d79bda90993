"""Camera images as the page shows them: a sensor_msgs/Image (any object with its fields) as an RGB array."""

from __future__ import annotations

from typing import Optional

import numpy as np

from .page import depth_to_rgb

MAX_IMAGE_PIXELS = 16 << 20


def image_array(msg) -> tuple[Optional[np.ndarray], str]:
    """(RGB uint8 array, "") or (None, why not) of a sensor_msgs/Image; depth encodings as grey levels."""
    h, w, enc = int(msg.height), int(msg.width), msg.encoding.lower()
    if h * w == 0 or h * w > MAX_IMAGE_PIXELS:
        return None, f"{w}x{h} pixels (expected 1..{MAX_IMAGE_PIXELS})"
    channels = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1, "8uc1": 1, "8uc3": 3}
    data = memoryview(msg.data).cast("B") if not isinstance(msg.data, (bytes, bytearray)) else msg.data
    step = int(msg.step)
    try:
        if enc in channels:
            c = channels[enc]
            rows = np.frombuffer(bytes(data), dtype=np.uint8)[: step * h].reshape(h, step)[:, : w * c]
            img = rows.reshape(h, w, c)
            if c == 1:
                return np.repeat(img, 3, axis=2), ""
            if enc.startswith("bgr"):
                img = img[..., 2::-1]
            return np.ascontiguousarray(img[..., :3]), ""
        if enc in ("32fc1", "16uc1", "mono16"):
            dtype = np.dtype("<f4" if enc == "32fc1" else "<u2")
            if msg.is_bigendian:
                dtype = dtype.newbyteorder(">")
            rows = np.frombuffer(bytes(data), dtype=np.uint8)[: step * h].reshape(h, step)
            rows = rows[:, : w * dtype.itemsize]
            depth = rows.copy().view(dtype).reshape(h, w).astype(float)
            if enc != "32fc1":
                depth *= 0.001                                  # mm -> m
            return depth_to_rgb(depth), ""
    except ValueError as exc:
        return None, f"data does not fit {w}x{h} {msg.encoding} with step {step}: {exc}"
    return None, f"encoding {msg.encoding!r} is not shown (rgb8, bgr8, rgba8, bgra8, mono8, 32FC1, 16UC1)"
