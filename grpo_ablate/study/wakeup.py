"""The run loop's wake-up: a self-pipe that signals (through signal.set_wakeup_fd) and finishing workers write to,
so the loop sleeps in one select until there is something to do (study/runner.py)."""

from __future__ import annotations

import os
import select
import threading


class Wakeup:
    """A self-pipe: the signal handler (through signal.set_wakeup_fd) and finishing workers wake the main loop.

    A notify after `close` does nothing: once closed, the descriptor's number may already belong to another
    file the process opened (the study's journal among them), and a late worker must never write into it."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        self.lock = threading.Lock()
        self.closed = False

    def notify(self) -> None:
        with self.lock:
            if self.closed:
                return
            try:
                os.write(self.w, b"\0")
            except BlockingIOError:  # the pipe is full: a wake-up is pending anyway
                pass

    def wait(self, timeout: float) -> None:
        select.select([self.r], [], [], max(0.0, timeout))
        try:
            while os.read(self.r, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            os.close(self.r)
            os.close(self.w)
