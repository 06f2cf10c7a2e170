"""Reference simulation: run a Schedule on numpy arrays and say whether every rank ends with the sum.

A fast test oracle, not the proof (the verifier proves). Each piece is represented by a short
vector of random integers per rank, so sums are exact (int64) and signed coefficients work.
Semantics are those of optcc.schedule: at one instant, landings (in posting order,
optcc.schedule.posting_order, as the runners and the verifier apply them), then local ops,
then reads.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from optcc.schedule import Schedule, posting_order
from optcc.timing import durations


@dataclass
class SimulationResult:
    inputs: npt.NDArray[np.int64]   # (p, pieces, width) int64
    final: npt.NDArray[np.int64]    # (p, pieces, width) int64
    correct: bool
    first_wrong: dict[str, int | list[int]] | None  # {"rank", "piece", "expected", "actual"} for the first wrong value

    def to_json(self) -> dict[str, object]:
        return {"correct": self.correct, "first_wrong": self.first_wrong}


def simulate(schedule: Schedule, inputs: np.ndarray | None = None, width: int = 4, seed: int = 0) -> SimulationResult:
    """Run the schedule; inputs default to random integers in [-1000, 1000]."""
    c = schedule.cluster
    n_pieces = len(schedule.pieces)
    if inputs is None:
        rng = np.random.default_rng(seed)
        inputs = rng.integers(-1000, 1001, size=(c.p, n_pieces, width), dtype=np.int64)
    values = inputs.copy()
    durs = durations(schedule)
    flows = schedule.flows
    events = []
    for n, i in enumerate(posting_order(schedule)):
        events.append((flows[i].start, 2, i, i))
        events.append((flows[i].start + durs[i], 0, n, i))
    for j, op in enumerate(schedule.local_ops):
        events.append((op.time, 1, j, j))
    events.sort()
    inflight: dict[int, np.ndarray] = {}
    for _, phase, _, i in events:
        if phase == 2:
            f = flows[i]
            inflight[i] = values[f.src, f.piece].copy()
        elif phase == 0:
            f = flows[i]
            data = inflight.pop(i)
            if f.op == "add":
                if f.coef == 1:
                    values[f.dst, f.piece] += data
                else:
                    values[f.dst, f.piece] += f.coef * data
            else:
                values[f.dst, f.piece] = data
        else:
            op = schedule.local_ops[i]
            values[op.rank, op.piece] *= op.coef
    expected = inputs.sum(axis=0)
    wrong = np.argwhere(np.any(values != expected[None, :, :], axis=2))
    first = None
    if len(wrong):
        r, k = (int(x) for x in wrong[0])
        first = {"rank": r, "piece": k, "expected": expected[k].tolist(), "actual": values[r, k].tolist()}
    return SimulationResult(inputs, values, first is None, first)
