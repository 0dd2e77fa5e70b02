"""A bounded map kept in a process, its least recently used entries dropped first, safe across threads (a web worker
serves a slow request in a thread of its own: httpworker/worker.py). The caches that use it, what each keeps,
its key and what invalidates it: docs/CACHES.md."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class LRU:
    def __init__(self, size: int):
        self.size, self.lock = size, threading.Lock()
        self.answers: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key):
        """The value kept under `key` (now the most recently used), else None."""
        with self.lock:
            value = self.answers.get(key)
            if value is not None:
                self.answers.move_to_end(key)
            return value

    def put(self, key, value) -> None:
        with self.lock:
            self.answers[key] = value
            self.answers.move_to_end(key)
            if len(self.answers) > self.size:
                self.answers.popitem(last=False)
