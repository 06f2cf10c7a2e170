"""Lost NICs named the way operators see them (server S lost C of its g NICs) mapped to the
per-GPU slowdowns ℓ the rest of the project works with. docs/failures.md gives the derivation.

- PXN pooling (default; what NCCL does): the server's g GPUs share its g − C surviving NICs
  evenly over NVLink, so every GPU of the server gets ℓ = g/(g − C). paper: PAPER.md "losing
  1 of 8 NICs gives ℓ = 8/7 ≈ 1.14, losing half gives ℓ = 2" is this formula at C = 1, 4.
- No pooling (derived): the C GPUs whose NIC died are local GPUs 0..C−1; GPU i borrows the
  surviving NIC C + (i mod (g − C)), and a NIC used by m GPUs gives each of them 1/m of its
  bandwidth (a static fair share), so every GPU that uses it has ℓ = m. C ≤ g/2: 2C GPUs at
  ℓ = 2 and g − 2C at ℓ = 1.
Both keep the server's total NIC bandwidth at (g − C)·B, the derived bound's b_j.
"""
from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from optcc.errors import OptccError


def server_slowdowns(g: int, count: int, pooling: bool = True) -> list[Fraction]:
    """ℓ of local GPUs 0..g−1 of a server that lost `count` of its g NICs (module docstring)."""
    if pooling:
        return [Fraction(g, g - count)] * g
    alive = g - count
    users = [1] * alive                               # surviving NIC j = local GPU count + j
    for i in range(count):
        users[i % alive] += 1
    ells = [Fraction(users[i % alive]) for i in range(count)]
    ells += [Fraction(u) for u in users]
    return ells


def apply_failed_nics(p: int, g: int, failed: Iterable[Any] | None, slowdown: list[Fraction], explicit: set[int],
                      pooling: bool = True, prefix: str = "") -> tuple[tuple[int, int], ...]:
    """Validate `failed` ((server, count) pairs) and write their ℓ into `slowdown` in place.

    `explicit` holds the ranks given as stragglers; a server is described one way only.
    Returns the normalised pairs. Errors name "failed_nics[i].server" / ".count"."""
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    for i, pair in enumerate(failed or ()):
        where = f"{prefix}failed_nics[{i}]"
        try:
            server, count = pair
        except (TypeError, ValueError):
            raise OptccError(where, f"expected (server, count), got {pair!r}") from None
        server = _int(server, where + ".server")
        count = _int(count, where + ".count")
        if not 0 <= server < p // g:
            raise OptccError(where + ".server", f"server {server} is out of range 0..{p // g - 1}")
        if server in seen:
            raise OptccError(where + ".server", f"server {server} is given twice")
        seen.add(server)
        if count < 1:
            raise OptccError(where + ".count", f"a failure loses at least 1 NIC, got {count}")
        if count >= g:
            raise OptccError(where + ".count", f"server {server} has {g} NICs; losing {count} leaves none "
                                               f"(at most {g - 1}, or the server is gone)")
        ranks = range(server * g, (server + 1) * g)
        if explicit.intersection(ranks):
            raise OptccError(where + ".server", f"server {server} also has straggler ranks; describe its "
                                                f"GPUs one way (lost NICs or per-GPU ℓ)")
        for rank, ell in zip(ranks, server_slowdowns(g, count, pooling)):
            slowdown[rank] = ell
        out.append((server, count))
    return tuple(sorted(out))


def parse_failed_nics(text: str, field: str = "failed_nics") -> tuple[int, int]:
    """Parse 'SERVER:COUNT'."""
    if not isinstance(text, str) or text.count(":") != 1:
        raise OptccError(field, f"expected SERVER:COUNT such as 0:1, got {text!r}")
    a, b = text.split(":")
    try:
        return int(a), int(b)
    except ValueError:
        raise OptccError(field, f"server and count must be integers in {text!r}") from None


def _int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptccError(field, f"expected an integer, got {value!r}")
    return value
