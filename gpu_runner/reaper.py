"""Clean up after a launcher that could not (SIGKILL, a crash): kill its workers, remove its folders.

gpu_runner.launch starts this file once per process, as `python -I -S reaper.py`, in its own
session, with a pipe on stdin. The launcher writes one line per fact: `group PGID` / `ungroup PGID`
(a worker's process group, started / reaped) and `dir PATH` / `undir PATH` (a private temporary
folder, made / removed). When the pipe ends (the launcher exited, however it died) every group
still listed gets SIGKILL and every folder still listed is removed. Standard library only, so that
it starts in milliseconds and needs no PYTHONPATH.
"""
import os
import shutil
import signal
import sys


def main() -> int:
    groups: set[int] = set()
    dirs: set[str] = set()
    for line in sys.stdin:           # blocks until a line comes or the launcher's end closes
        verb, _, arg = line.rstrip("\n").partition(" ")
        if verb == "group":
            groups.add(int(arg))
        elif verb == "ungroup":
            groups.discard(int(arg))
        elif verb == "dir":
            dirs.add(arg)
        elif verb == "undir":
            dirs.discard(arg)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
