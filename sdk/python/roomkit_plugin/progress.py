"""The shared progress page (docs/PLUGIN-WIRE.md §8.3), when the bot offers one."""

import mmap
import os
import struct
import time

FLAG_PROGRESS_PAGE = 1
# The progress page's first 28 bytes (roomkit_wire_progress, §8.3): busy_seq,
# busy_since_ns, done_seq, busy_what; crash_errno at 28.
_PROGRESS = struct.Struct("<QQQi")
BUSY_IDLE, BUSY_EVENT, BUSY_URL, BUSY_LOAD, BUSY_UNLOAD, BUSY_TIMER = 0, 1, 2, 3, 4, 5
ENOMEM = 12


class Progress:
    """The shared progress page (§8.3), when the bot offers one: which
    record is running since when, and the last one finished, as plain
    stores into shared memory. With it the bot knows exactly which events a
    crashed child had finished (none is sent twice) and which one killed it.
    Stores of whole aligned u64s; the bot reads each field on its own."""

    def __init__(self, fd: int) -> None:
        size = os.fstat(fd).st_size  # sizeof(roomkit_wire_progress): 40 bytes today
        if size < 32:
            raise OSError("the progress page has %d bytes, fewer than its fields need (32)" % size)
        self.page = mmap.mmap(fd, size)

    def busy(self, what: int, seq: int, done: int) -> None:
        _PROGRESS.pack_into(self.page, 0, seq, time.monotonic_ns(), done, what)

    def idle(self, done: int) -> None:
        _PROGRESS.pack_into(self.page, 0, 0, 0, done, BUSY_IDLE)

    def out_of_memory(self) -> None:
        struct.pack_into("<i", self.page, 28, ENOMEM)
