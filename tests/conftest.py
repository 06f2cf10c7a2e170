"""Shared test set-up: the helpers folder on sys.path, the tiers, module caches reset per test,
and `run_optcc` (the command line as a user runs it, in a fresh process).

Tiers (markers, `--strict-markers` refuses any other): `slow` (long; `pytest -m "not slow"` is
the fast tier, README), `gloo` (starts real torch.distributed processes; every test module
whose name ends in `_gloo` gets it here), `root` (network namespaces) and `gpu` (CUDA) skip
with a reason where the machine lacks them.

Parallel runs (pytest-xdist, `-n auto` in pyproject.toml: one worker more than cores): the tests
reading the paper-checks report share one worker (the report is computed once per worker), and a
test marked `alone` (it measures link rates or wall time) runs with every other worker paused
between tests and niced, a worker's consecutive alone tests under one hold.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pathlib
import subprocess
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
ROOT = TESTS.parent
if str(TESTS) not in sys.path:             # the shared helpers (gloo_run, *_cases) import by name
    sys.path.insert(0, str(TESTS))
if str(ROOT) not in sys.path:              # the checkout's packages, never tests/' folders of the same names
    sys.path.insert(0, str(ROOT))          # (tests/verifier alone would import as an empty namespace package)

# Module-level caches of ours (module, attribute): cleared after every test, so that no test's
# outcome or duration depends on which tests ran before it.
CACHES = (
    ("optcc.model_time", "_SLOT_CACHE"),
    ("optcc.algorithms.rails.counts", "_CACHE"),
    ("optcc.algorithms.rails.borrow", "_share_lp"),
    ("gpu_runner.proof", "_STORE.proofs"),
    ("gpu_runner.proof", "_STORE.numerics"),
    ("gpu_runner.proof", "_STORE.programs"),
)


PAPER_FIXTURES = {"paper_rows", "paper_report"}      # the report computed once per session: minutes


def measured_slow() -> set[str]:
    """Node ids of tests/slow_tests.txt (measured ≥ 3 s; tests/slow_tests.py writes it)."""
    rows = (line.split("\t") for line in (TESTS / "slow_tests.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#"))
    return {row[2] for row in rows if len(row) == 3}


def plain_nodeid(item) -> str:
    """The node id without the "@group" suffix xdist's loadgroup appends."""
    return item.nodeid.split("@", 1)[0] if item.get_closest_marker("xdist_group") else item.nodeid


@pytest.hookimpl(tryfirst=True)         # before xdist reads the xdist_group marks (and renames node ids)
def pytest_collection_modifyitems(config, items):
    slow = measured_slow()
    for item in items:
        if item.module.__name__.endswith("_gloo"):
            item.add_marker(pytest.mark.gloo)
        reads_report = bool(PAPER_FIXTURES & set(getattr(item, "fixturenames", ())))
        if item.nodeid in slow or reads_report:
            item.add_marker(pytest.mark.slow)
        if reads_report:
            item.add_marker(pytest.mark.xdist_group("paper_report"))


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than cores. About a sixth of the suite's wall time on 2 cores was
    tests waiting (a rank's timeout, a socket, a child process) with a core idle; `alone` tests
    still run with every other worker paused."""
    return (os.cpu_count() or 1) + 1


def pytest_configure(config):
    """`--dist loadgroup` groups a test by the "@group" xdist 3.8 appends to Item._nodeid; pytest 9.2
    keeps the node id in another field, so the groups would silently vanish and every worker would
    compute the paper-checks report itself (minutes of CPU): stop with the reason instead."""
    from _pytest.nodes import Node
    grouped = config.getvalue("dist") == "loadgroup" and config.getvalue("numprocesses")
    if grouped and "_nodeid" not in getattr(Node, "__slots__", ()):
        raise pytest.UsageError(f"pytest {pytest.__version__} ignores pytest-xdist's test groups (xdist_group): "
                                "install the versions pyproject.toml's dev extra names (pytest<9.2)")


@contextlib.contextmanager
def _flock(path: pathlib.Path, mode: int, turnstile: pathlib.Path | None = None):
    """Hold an flock on `path`, taken while holding `turnstile` exclusively where one is given."""
    with open(path, "a") as f:
        if turnstile is None:
            fcntl.flock(f, mode)
        else:
            with _flock(turnstile, fcntl.LOCK_EX):
                fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def run_lock(tmp_path_factory, alone: bool):
    """The run's lock under xdist: shared by every test, held exclusively by an `alone` one (and by
    `alone_fixture`); the turnstile stops new shared holders while an exclusive one waits."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    run_dir = tmp_path_factory.getbasetemp().parent          # shared by the run's workers
    mode = fcntl.LOCK_EX if alone else fcntl.LOCK_SH
    with _flock(run_dir / "optcc-alone.lock", mode, turnstile=run_dir / "optcc-turnstile.lock"):
        if not alone:
            yield
            return
        with _others_niced():
            yield


def _parents() -> dict[int, int]:
    """Every process's parent pid, from /proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    out[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return out


def _sibling_tasks() -> list[int]:
    """The thread ids of the other xdist workers (children of this worker's parent) and of every
    process below them: a nice value belongs to a thread, and a solver's threads or a test's child
    processes compute as much as the worker's main thread."""
    me, parents = os.getpid(), _parents()
    tree = {pid for pid, ppid in parents.items() if ppid == os.getppid() and pid != me}
    grew = True
    while grew:
        below = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= below
        grew = bool(below)
    tasks = []
    for pid in tree:
        try:
            tasks += [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
    return tasks


@contextlib.contextmanager
def _others_niced():
    """While an `alone` test runs, the other workers (every thread, child processes included) at the
    lowest CPU priority: between tests they wait on the lock, but a session fixture set up before
    any test's lock (the paper-checks report, minutes of CPU) keeps computing, and it read as a
    slower link in the testbed tests. Restored after (root only: otherwise nothing is changed)."""
    if os.geteuid() != 0 or not os.path.isdir("/proc"):
        yield
        return
    before = {}
    for tid in _sibling_tasks():
        try:
            before[tid] = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, 19)
        except OSError:
            before.pop(tid, None)
    try:
        yield
    finally:
        for tid, nice in before.items():
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:
                pass


NEXT_ITEM = pytest.StashKey[object]()   # the test this worker runs after the one it is stashed on
_EXCLUSIVE: list = []                    # the exclusive hold, kept while alone tests follow each other


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[NEXT_ITEM] = nextitem
    yield


def _let_go_of_a_kept_hold() -> None:
    """Release the exclusive hold kept for an alone test that was skipped before its fixtures ran
    (a non-root machine skips the testbed's): this process would otherwise wait on its own hold."""
    while _EXCLUSIVE:
        _EXCLUSIVE.pop().close()


@pytest.fixture(autouse=True)
def _alone_or_shared(request, tmp_path_factory):
    """Every test holds the run's lock, shared, or exclusively where it is marked `alone`; a worker
    keeps the exclusive hold from one alone test to the next it runs (the testbed's are a group),
    so the other workers are not let in, and waited out again, between them."""
    if not request.node.get_closest_marker("alone"):
        _let_go_of_a_kept_hold()
        with run_lock(tmp_path_factory, False):
            yield
        return
    if not _EXCLUSIVE:
        hold = contextlib.ExitStack()
        hold.enter_context(run_lock(tmp_path_factory, True))
        _EXCLUSIVE.append(hold)
    try:
        yield
    finally:
        nxt = request.node.stash.get(NEXT_ITEM, None)
        if nxt is None or not nxt.get_closest_marker("alone"):
            _EXCLUSIVE.pop().close()


@contextlib.contextmanager
def alone_fixture(tmp_path_factory):
    """For a module- or session-scoped fixture that measures wall time: it is set up before any
    test's own lock is taken, so it takes the run's lock exclusively itself (`with alone_fixture(…)`)."""
    _let_go_of_a_kept_hold()
    with run_lock(tmp_path_factory, True):
        yield


def cache_in(module, attr: str):
    """CACHES' attribute `attr` (dotted: an object's field) of `module`."""
    return functools.reduce(getattr, attr.split("."), module)


@pytest.fixture(autouse=True)
def _fresh_module_caches():
    yield
    for module_name, attr in CACHES:
        module = sys.modules.get(module_name)
        if module is None:                 # not imported by any test yet: nothing cached
            continue
        cache = cache_in(module, attr)
        if hasattr(cache, "cache_clear"):
            cache.cache_clear()
        else:
            cache.clear()


@pytest.fixture
def run_optcc():
    """`python -m optcc ARGS` in a fresh process with this checkout on the path; returns the
    CompletedProcess (text output)."""
    def run(*args, timeout=180, cwd=None, env=None):
        env = dict(os.environ if env is None else env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        return subprocess.run([sys.executable, "-m", "optcc", *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd, env=env)
    return run


@pytest.fixture(scope="session")
def paper_rows():
    """The Row objects of paper_checks.claims.all_checks(), computed once per test session (the
    slowest computation of the suite; tests/test_paper_checks*.py and the CLI test read it)."""
    from paper_checks import claims
    return claims.all_checks()


@pytest.fixture(scope="session")
def paper_report(paper_rows):
    from paper_checks.report import run_paper_checks
    return run_paper_checks(rows=paper_rows)


def torchrun_path() -> str:
    """torchrun of this interpreter's environment; skips the test (with the reason) without it."""
    import shutil
    pytest.importorskip("torch")
    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("torchrun is not installed")
    return torchrun


def torchrun_two_nodes(path: str, env_of_node=lambda node: {}) -> dict:
    """Run `python -m gpu_runner --schedule path` as two torchrun 'nodes' of 2 processes each
    (static rendezvous on localhost, this checkout first on the path); node 0's result JSON.
    Skips where torch or torchrun is missing; fails (killing both) after 120 s."""
    import json
    torchrun = torchrun_path()
    from gpu_runner.launch import free_port
    port = str(free_port())
    procs = []
    for node in (0, 1):
        env = dict(os.environ, OMP_NUM_THREADS="1", **env_of_node(node))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
        procs.append(subprocess.Popen(
            [torchrun, "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "2", "--master-addr",
             "127.0.0.1", "--master-port", port, "-m", "gpu_runner", "--schedule", path,
             "--size", "8008", "--dtype", "int64", "--json", "--timeout", "30"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=120))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("torchrun did not finish in 120 s")
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    return json.loads(outs[0][0].strip().splitlines()[-1])
