"""The run loop's self-pipe (study/wakeup.py): a worker that ends after the loop closed it must
neither raise nor write into whatever file has since taken the pipe's descriptor numbers."""

import os
import select
import time

from grpo_ablate.study.wakeup import Wakeup


def test_a_notify_after_close_writes_nothing_into_the_file_that_took_the_descriptor(tmp_path):
    wakeup = Wakeup()
    numbers = {wakeup.r, wakeup.w}
    wakeup.close()
    # The lowest free numbers go to the next files opened: here, the two the pipe held.
    files = [tmp_path / "a", tmp_path / "b"]
    fds = [os.open(f, os.O_CREAT | os.O_RDWR) for f in files]
    try:
        assert set(fds) == numbers, "the test needs the pipe's numbers reused"
        wakeup.notify()  # a worker finishing late: before the fix, EBADF or a NUL byte in a file
        wakeup.close()  # closing twice closes nothing of theirs
        for fd in fds:
            os.fstat(fd)  # still open
    finally:
        for fd in fds:
            os.close(fd)
    assert [f.read_bytes() for f in files] == [b"", b""]


def test_a_notify_wakes_a_wait():
    wakeup = Wakeup()
    try:
        wakeup.notify()
        start = time.monotonic()
        wakeup.wait(timeout=30.0)  # returns at once: a byte is waiting
        assert time.monotonic() - start < 20.0
        wakeup.wait(timeout=0.0)
        assert wakeup.r not in select.select([wakeup.r], [], [], 0)[0], "wait drains the pipe"
    finally:
        wakeup.close()
