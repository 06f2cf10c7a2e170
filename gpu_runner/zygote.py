"""Start local ranks by forking a process that has imported torch once, not p fresh interpreters.

`import torch` costs about 2 s of CPU; a launch of p local ranks paid it p times. gpu_runner.launch
starts this module once per launcher process (`python -m gpu_runner.zygote`, in its own session,
environment of the ranks with OMP_NUM_THREADS=1 so that it holds no thread and forking is safe)
and asks it, one JSON line on stdin per rank, to fork a rank: the child starts a new session,
takes the rank's environment, working directory and log files, and runs `python -m gpu_runner
ARGS` as a fresh interpreter would (its own gpu_runner imports, PYTHONPATH entries added), then
exits with its code. `ps` shows a rank as `optcc-rankR` (its comm; its command line and
/proc/PID/environ stay the zygote's). The zygote answers `{"pid": N}` for each request and `{"exit": N, "code": C}`
(Popen's convention: −signal when killed) when a child ends. It dies with its launcher (the
kernel's parent-death signal), and its children with it, so nothing outlives a killed launcher;
it exits when its stdin closes and its children are done.

Standard library and torch only at import; `OPTCC_ZYGOTE=0` makes the launcher start every rank
as its own interpreter instead (gpu_runner.launch).
"""
import json
import os
import select
import signal
import sys

POLL_S = 0.02          # policy: how often the zygote looks for ended children between requests
START_S = 120.0        # policy: the zygote's own start (one torch import) on a loaded machine
FORK_S = 60.0          # policy: the answer to one fork request


def _die_with_parent() -> None:
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _name(name: str) -> None:
    """The name ps and top show (comm, 15 bytes): the cmdline stays the zygote's."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(15, name.encode()[:15], 0, 0, 0)   # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _send(message: dict) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def _child(request: dict) -> None:
    """In the forked child: become the rank and run it; never returns."""
    code = 3
    try:
        zygote = os.getppid()
        _die_with_parent()                 # the zygote's death ends its ranks, as the launcher's ends it
        if os.getppid() != zygote:         # it died before the call
            os._exit(code)
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, target in ((null, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("launch_key"):      # the launcher's key on a pipe of this rank's own, never in env
            from gpu_runner.proof import LAUNCH_KEY_FD_ENV, key_pipe
            os.environ[LAUNCH_KEY_FD_ENV] = str(key_pipe(request["launch_key"]))
        _name(f"optcc-rank{request['env'].get('RANK', '')}")
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:1] = [request["cwd"], *[p for p in extra if p not in sys.path]]
        sys.argv = ["-m", *request["argv"]]
        import runpy
        try:
            runpy.run_module("gpu_runner", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - as the interpreter would: traceback, exit 1
            import traceback
            traceback.print_exc()
            code = 1
        import atexit
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class ForkedRank:
    """What gpu_runner.launch needs of a Popen, for a rank the zygote forked (not our child: its
    exit comes from the zygote)."""

    def __init__(self, pid: int, zygote: "Zygote"):
        self.pid, self._zygote, self.returncode = pid, zygote, None

    def poll(self):
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout=None):
        import subprocess
        import time
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"rank pid {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Zygote:
    """The launcher's side: one zygote per launcher process and environment key, started on first use."""

    def __init__(self, env: dict):
        import subprocess
        import threading
        self.proc = subprocess.Popen([sys.executable, "-m", "gpu_runner.zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     start_new_session=True)
        self._lock = threading.Lock()
        self._pids: list = []
        self._exits: dict = {}
        self._got = threading.Condition()
        self._alive = True
        self._reader = threading.Thread(target=self._read, daemon=True, name="optcc-zygote-reader")
        self._reader.start()
        with self._got:
            if not self._got.wait_for(lambda: self._pids or not self._alive, timeout=START_S) or not self._alive:
                raise OSError("the rank zygote did not start")
            self._pids.pop(0)                     # its "ready"

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self._got:
                if "exit" in msg:
                    self._exits[msg["exit"]] = msg["code"]
                else:
                    self._pids.append(msg.get("pid", msg.get("ready")))
                self._got.notify_all()
        with self._got:
            self._alive = False
            self._got.notify_all()

    def alive(self) -> bool:
        return self._alive and self.proc.poll() is None

    def spawn(self, argv: list, env: dict, stdout: str, stderr: str, launch_key: str | None = None) -> ForkedRank:
        """Fork a rank; `launch_key` (the launcher's attestation key) reaches it on a pipe."""
        request = {"argv": argv, "env": env, "cwd": os.getcwd(), "stdout": stdout, "stderr": stderr,
                   "launch_key": launch_key}
        with self._lock, self._got:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            if not self._got.wait_for(lambda: self._pids or not self._alive, timeout=FORK_S) or not self._pids:
                raise OSError("the rank zygote did not fork the rank")
            return ForkedRank(self._pids.pop(0), self)

    def exit_code(self, pid: int):
        with self._got:
            if pid in self._exits:
                return self._exits.pop(pid)
            if not self._alive:            # the zygote is gone, and with it (parent-death signal) its ranks
                return -signal.SIGKILL
            return None


def main() -> int:
    _die_with_parent()
    _name("optcc-zygote")
    import torch  # noqa: F401 - the point of this process: imported once, shared by every fork
    import torch.distributed  # noqa: F401
    children: set[int] = set()
    buf = b""
    reading = True
    _send({"ready": os.getpid()})
    while reading or children:
        ready, _, _ = select.select([0] if reading else [], [], [], POLL_S)
        if ready:
            data = os.read(0, 1 << 16)
            if not data:
                reading = False
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(request)
                children.add(pid)
                _send({"pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            children.discard(pid)
            _send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
