"""Job functions for tests/test_workers.py, importable by worker processes (a test module's own functions are not
when workers start from a fork server)."""

import os
import signal


def square_or_die(n: int) -> int:
    if n == 13:
        os.kill(os.getpid(), signal.SIGKILL)  # what a crash in a native parser does to its process
    return n * n


def square_or_hang(n: int) -> int:
    if n == 5:
        import time

        time.sleep(3600)  # what an endless loop in a chunker does
    return n * n


def crashed(n: int, reason: str) -> tuple:
    return ("crashed", n, reason)


def die_first(n: int) -> int:
    if n == 0:
        os.kill(os.getpid(), signal.SIGKILL)  # at once: while the pool may still be starting its other worker
    return n
