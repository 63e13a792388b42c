"""A warning that repeats at most once per interval, with the count of those it held back.

Why: a push consumer's listener that throws on every message, or a cluster that is away for
a minute, would otherwise write a line (or a traceback) per message or per pull. The first
occurrence is logged at once, in full; later ones within ``interval_s`` are counted, and the
next line that goes out says how many were held back. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time


class RateLimitedLog:
    """Log one kind of warning at most once per ``interval_s`` (see the module)."""

    def __init__(self, logger: logging.Logger, interval_s: float = 30.0) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._last_logged_s: float | None = None
        self._held_back = 0

    def warning(self, message: str, *args: object, exc_info: bool = False) -> bool:
        """Log ``message % args`` unless one went out within the interval; True if logged."""
        now_s = time.monotonic()
        with self._lock:
            if self._last_logged_s is not None and now_s - self._last_logged_s < self._interval_s:
                self._held_back += 1
                return False
            held_back, self._held_back = self._held_back, 0
            self._last_logged_s = now_s
        if held_back:
            message += f" (and {held_back} more like it in the last {self._interval_s:g} s)"
        self._logger.warning(message, *args, exc_info=exc_info)
        return True
