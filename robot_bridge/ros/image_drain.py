"""The sensor bridge's image relay as a compiled drain (``fast_relay``): no Python per image.

A camera stream repeats its image shape.  Once the Python handler has validated and relayed an image,
its shape (height, width, encoding, step, data size) is learned; from then on the drain relays every
image of exactly that shape -- such an image is valid for the same reasons -- by writing the output
header (the image's encapsulation and stamp, the bridge's frame_id) in front of ``height`` in the take
buffer's headroom, as ``conversions.rewrite_serialized_header_in_place`` does, and publishing from
there.  Anything else (another shape, a short or foreign-encoded message, a restamp or rate limit to
apply) is left to the Python handler, which judges, counts and reports it.

Compiled code is cached in a folder per version of the kernels' sources (:mod:`robot_bridge.jit`).
"""

from __future__ import annotations

import logging

import numpy as np

from .. import jit
from . import fast_relay
from .conversions import SerializedImage

# ImageDrain.shape slots
LEARNED, HEIGHT, WIDTH, ENCODING_LENGTH, STEP, DATA_LENGTH = range(6)
MAX_ENCODING = 64                               # bytes of encoding name (incl. NUL) a drain compares
_log = logging.getLogger(__name__)


def _u32(msg, at):  # pragma: no cover  (compiled)
    return np.int64(msg[at]) | (np.int64(msg[at + 1]) << 8) | (np.int64(msg[at + 2]) << 16) \
        | (np.int64(msg[at + 3]) << 24)


def _image_rest(msg, start, length, shape, encoding):  # pragma: no cover  (compiled)
    """Offset of ``height`` in the little-endian CDR Image at ``msg[start:length]`` when its fields equal
    the learned ``shape`` and ``encoding``; -1 otherwise (positions relative to the message, as the
    Python parser counts them)."""
    if length - start < 16 or msg[start] != 0 or (msg[start + 1] != 1 and msg[start + 1] != 3):
        return -1
    rest = (16 + _u32(msg, start + 12) + 3) & ~3
    at = rest
    if start + at + 12 > length:
        return -1
    if _u32(msg, start + at) != shape[HEIGHT] or _u32(msg, start + at + 4) != shape[WIDTH] \
            or _u32(msg, start + at + 8) != shape[ENCODING_LENGTH]:
        return -1
    at += 12
    characters = shape[ENCODING_LENGTH] - 1
    if start + at + characters + 2 > length:
        return -1
    for i in range(characters):
        if msg[start + at + i] != encoding[i]:
            return -1
    at = (at + characters + 2 + 3) & ~3          # NUL, is_bigendian, aligned to 4
    if start + at + 8 > length or _u32(msg, start + at) != shape[STEP] \
            or _u32(msg, start + at + 4) != shape[DATA_LENGTH]:
        return -1
    if start + at + 8 + shape[DATA_LENGTH] > length:
        return -1
    return rest


def _drain_images(take_fn, publish_fn, read_fn, ints, words, output, control, generation,  # pragma: no cover
                  msg, headroom, shape, encoding, tail):
    """Relay each image of the learned shape: its first 12 bytes (encapsulation, stamp) and ``tail``
    (frame_id length, characters, padding) written to end where ``height`` starts, published from
    there (``output``: the RelayIO's output message words)."""
    head = np.empty(12, np.uint8)
    while True:
        got = _next_message(take_fn, read_fn, ints, words, control, generation)
        if got != fast_relay.MESSAGE_TAKEN:
            return got
        length = headroom + np.int64(words[1])
        rest = _image_rest(msg, headroom, length, shape, encoding)
        if rest < 0:
            return fast_relay.DRAIN_PENDING
        start = headroom + rest - 12 - tail.shape[0]
        if start < 0:
            return fast_relay.DRAIN_PENDING
        for i in range(12):
            head[i] = msg[headroom + i]
        for i in range(12):
            msg[start + i] = head[i]
        for i in range(tail.shape[0]):
            msg[start + 12 + i] = tail[i]
        output[0] = np.uint64(np.int64(words[0]) - headroom + start)
        output[1] = output[2] = np.uint64(length - start)
        control[fast_relay.HANDLED] += 1
        if not _publish_output(publish_fn, ints, control):
            return fast_relay.DRAIN_PUBLISH_ERROR


_next_message = _publish_output = None      # fast_relay.compiled_io(), set by _drainer()
_drainer_state: list = []


def _drainer():
    """The compiled ``_drain_images`` (numba cache), None without numba."""
    global _next_message, _publish_output, _u32, _image_rest
    if not _drainer_state:
        io = fast_relay.compiled_io()
        if io is None:
            _drainer_state.append(None)
        else:
            _next_message, _publish_output = io
            _u32 = jit.njit(nogil=True, inline="always")(_u32)
            _image_rest = jit.njit(nogil=True)(_image_rest)
            _drainer_state.append(jit.njit(nogil=True)(_drain_images))
    return _drainer_state[0]


class ImageDrain:
    """One image stream's drain: ``learn`` each image the Python handler relayed; ``__call__`` is the
    relay's ``drain`` while ``enabled()`` (no restamp, no rate limit: the stream's rules in Python)."""

    def __init__(self, frame_id: str, enabled):
        frame = frame_id.encode() + b"\0"
        tail = len(frame).to_bytes(4, "little") + frame
        self.tail = np.frombuffer(tail + bytes(-(12 + len(tail)) % 4), np.uint8).copy()
        self.shape = np.zeros(6, np.int64)
        self.encoding = np.zeros(MAX_ENCODING, np.uint8)
        self.enabled = enabled
        self._warm()

    def _warm(self) -> None:
        """Compile (or load) the drain now, not on the relay thread when the first image is waiting."""
        drain = _drainer()
        if drain is None:
            return
        try:
            fast_relay.warm(drain, self.shape, self.encoding, self.tail)
        except Exception as exc:  # numba present but unable to compile here: the Python handler relays
            _log.warning("compiled image relay unavailable (%s); relaying in Python", exc)
            _drainer_state[:] = [None]

    def learn(self, image: SerializedImage) -> None:
        """``image`` was valid and relayed: relay images of its shape without Python from now on."""
        name = image.encoding.encode("ascii", errors="replace")
        if len(name) + 1 > MAX_ENCODING:
            return
        if self.shape[LEARNED] and (image.height, image.width, len(name) + 1, image.step, image.data_len) \
                == tuple(self.shape[1:]) and bytes(self.encoding[:len(name)]) == name:
            return
        self.shape[LEARNED] = 0                             # not read half-written (one writer thread)
        self.encoding[:len(name)] = np.frombuffer(name, np.uint8)
        self.shape[1:] = (image.height, image.width, len(name) + 1, image.step, image.data_len)
        self.shape[LEARNED] = 1

    def __call__(self, io, buffer: np.ndarray, headroom: int) -> int:
        drain = _drainer()
        if drain is None:
            return fast_relay.DRAIN_UNAVAILABLE
        generation = io.generation                          # before the stream's rules are read
        if not self.shape[LEARNED] or not self.enabled():
            return fast_relay.DRAIN_UNAVAILABLE
        return drain(*io.prefix(generation, buffer, headroom), self.shape, self.encoding, self.tail)

