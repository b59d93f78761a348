"""Timers served in the plugin's own process, on its one thread.

A timer fires between frames, never while a handler runs, so a plugin
needs no locks. The loop asks ``timeout()`` how long it may sleep and calls
``run_due()`` when it wakes.
"""

import heapq
import time
from typing import Any, Callable, Dict, List, Optional, Tuple


class Timers:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heap: List[Tuple[float, int]] = []
        self._live: Dict[int, Tuple[int, Callable[[], Any]]] = {}  # id -> (repeat_ms, callback)
        self._next_id = 0

    def add(self, delay_ms: int, repeat_ms: int, callback: Callable[[], Any]) -> int:
        if not callable(callback):
            raise TypeError("callback must be callable")
        if delay_ms < 0 or repeat_ms < 0:
            raise ValueError("delay_ms and repeat_ms must be >= 0")
        self._next_id += 1
        timer_id = self._next_id
        self._live[timer_id] = (int(repeat_ms), callback)
        heapq.heappush(self._heap, (self._clock() + delay_ms / 1000.0, timer_id))
        return timer_id

    def cancel(self, timer_id: int) -> None:
        self._live.pop(timer_id, None)

    def clear(self) -> None:
        self._live.clear()
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._live)

    def timeout(self) -> Optional[float]:
        """Seconds until the next timer is due (0 if one is), None when there is none."""
        while self._heap and self._heap[0][1] not in self._live:
            heapq.heappop(self._heap)
        if not self._heap:
            return None
        return max(0.0, self._heap[0][0] - self._clock())

    def run_due(self, call: Callable[[str, Callable[[], Any]], Any]) -> int:
        """Runs every timer due now through ``call(what, callback)`` (which
        handles exceptions); returns how many ran. A repeating timer is
        rescheduled from its due time (or from now when it is
        more than one period late), a one-shot one forgotten."""
        now = self._clock()
        ran = 0
        while self._heap and self._heap[0][0] <= now:
            due, timer_id = heapq.heappop(self._heap)
            entry = self._live.get(timer_id)
            if entry is None:
                continue
            repeat_ms, callback = entry
            if repeat_ms > 0:
                period = repeat_ms / 1000.0
                following = due + period
                if following <= now:  # late (a slow handler): skip the missed turns
                    following = now + period
                heapq.heappush(self._heap, (following, timer_id))
            else:
                del self._live[timer_id]
            call("timer %d" % timer_id, callback)
            ran += 1
        return ran
