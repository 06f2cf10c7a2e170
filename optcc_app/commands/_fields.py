"""Which flag sets which model field: the library names fields ("g", "stragglers[0].ell",
"segments"), the CLI shows the user the flag they typed. One table, used by optcc_app.cli.main."""
from __future__ import annotations

FIELD_FLAGS = {
    "p": "--p",
    "g": "--g",
    "stragglers": "--straggler",
    "straggler": "--straggler",
    "failed_nics": "--failed-nics",
    "pxn": "--no-pxn",
    "bandwidth": "--bandwidth",
    "nvlink_bandwidth": "--nvlink-bandwidth",
    "alpha": "--alpha",
    "overhead": "--overhead",
    "issue_delay": "--issue-delay",
    "latency": "--latency",
    "latency_model": "--latency-model",
    "segments": "--segments",
    "algo": "--algo",
    "solver": "--solver",
    "ilp.pieces": "--ilp-pieces",
    "nproc": "--nproc",
    "certificate": "--certificate",
    "max_steps": "--max-steps",
    "runner": "--runner",
    "delay_ms": "--delay-ms",
    "sizes": "--sizes",
    "sweep.end": "-e",
    "sweep.factor": "-f",
    "sweep.step": "-i",
}


def flag_for(field: str) -> str:
    """The flag for a model field ("stragglers[1].rank" → "--straggler"); other fields (paths
    inside a JSON file such as "cluster.p" or "flows[3].src", flags already) pass unchanged."""
    if field.startswith("stragglers["):
        return "--straggler"
    if field.startswith("failed_nics["):
        return "--failed-nics"
    return FIELD_FLAGS.get(field, field)
