"""A rank never hangs: if one wait lasts longer than the timeout, say what was awaited and exit.

The executor calls `waiting(describe)` before every blocking wait and `beat()` after it; a
daemon thread checks the time since the last beat and, past `timeout_s`, prints a clear error
(which rank, what it waited for, for how long) and ends the process with EXIT_TIMEOUT. This is a
backstop beside the process group's own timeout, which some waits (gloo p2p) may not honour.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback

EXIT_TIMEOUT = 124
EXIT_ERROR = 3
EXIT_WRONG = 1      # the run finished and its result is wrong (worker.py)
LAUNCHER_PID_ENV = "OPTCC_LAUNCHER_PID"   # set by gpu_runner.launch: the process this rank dies with
PR_SET_PDEATHSIG = 1                      # <linux/prctl.h>


def die_with_launcher() -> bool:
    """Linux: SIGKILL this process when its parent, the launcher named by OPTCC_LAUNCHER_PID, dies
    (prctl(PR_SET_PDEATHSIG) through ctypes); exit at once if the launcher is already gone (it
    died before the call). True when armed. Without the variable (torchrun) or off Linux: no-op."""
    launcher = os.environ.get(LAUNCHER_PID_ENV, "")
    if not launcher.isdigit() or not sys.platform.startswith("linux"):
        return False
    import ctypes
    import signal
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != int(launcher):       # a forking wrapper in between, or the launcher is gone
        try:
            os.kill(int(launcher), 0)
        except ProcessLookupError:
            os._exit(EXIT_ERROR)
        except PermissionError:
            pass
    return True


class Watchdog:
    def __init__(self, rank: int, timeout_s: float, label: str = "optcc-runner"):
        self.rank = rank
        self.timeout_s = float(timeout_s)
        self.label = label
        self._last = time.monotonic()
        self._what = lambda: "start-up"
        self._enabled = True
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="optcc-watchdog", daemon=True)
        self._thread.start()

    def waiting(self, describe) -> None:
        """`describe`: a string or a zero-argument callable giving one (built only on timeout)."""
        self._what = describe

    def beat(self) -> None:
        self._last = time.monotonic()

    def phase(self, describe) -> None:
        self._what = describe
        self._last = time.monotonic()

    def disable(self) -> None:
        self._enabled = False

    def arm(self, describe) -> None:
        """Start timing from now (a disabled watchdog too): for callers that are idle between runs."""
        self._what = describe
        self._last = time.monotonic()
        self._enabled = True

    rest = disable

    def stop(self, timeout: float | None = None) -> bool:
        """End the watchdog's thread (for callers that outlive their runs, e.g. the DDP hook's close)."""
        self._enabled = False
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        period = min(1.0, max(0.05, self.timeout_s / 20))
        while not self._stopped.wait(period):
            if not self._enabled:
                continue
            idle = time.monotonic() - self._last
            # a little slack so that the process group's own (more specific) timeout reports first
            if idle > self.timeout_s * 1.05 + 0.5:
                what = self._what() if callable(self._what) else self._what
                print(f"{self.label} rank {self.rank}: error: timed out after {idle:.1f} s "
                      f"(timeout {self.timeout_s:g} s) waiting for {what}; a peer rank is dead or hung",
                      file=sys.stderr, flush=True)
                os._exit(EXIT_TIMEOUT)


def run_rank(name: str, body, args) -> int:
    """Run `body(args, rank)` in a rank process: any failure becomes one line
    `NAME rank R: error: TYPE: message` and exit EXIT_ERROR at once (os._exit: no hang in
    process-group teardown after a peer failed). OPTCC_RUNNER_TRACEBACK=1 adds the traceback."""
    rank = int(os.environ.get("RANK", "0"))
    die_with_launcher()
    try:
        return body(args, rank)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - every failure becomes one clear line and an exit
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"{name} rank {rank}: error: {type(e).__name__}: {msg}", file=sys.stderr, flush=True)
        if os.environ.get("OPTCC_RUNNER_TRACEBACK"):
            traceback.print_exc()
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(EXIT_ERROR)
