"""What a command needs that the base install lacks (torch, matplotlib), checked before any work.

`require(command, *packages)` raises OptccError(command, ...) — the CLI prints one line and exits 2 —
naming the first missing package and the install command that fits. Only whether the package can be
found is checked (importlib.util.find_spec: no import, so start-up stays fast).
"""
from __future__ import annotations

import importlib.util

from optcc.errors import OptccError

DISTRIBUTION = "optcc-allreduce"   # the name pip installs this project under (pyproject.toml)
TORCH_VERSION = "2.13.0"      # the torch the README and CI install (a CPU build on machines without CUDA)

INSTALL = {
    "torch": f"pip install torch=={TORCH_VERSION}, then pip install '{DISTRIBUTION}[runner]' "
             f"(from a clone: pip install -e '.[runner]')",
    "matplotlib": "pip install matplotlib",
}
WHY = {"torch": "the torch.distributed runner", "matplotlib": "the charts"}


def missing(*packages: str) -> list[str]:
    """The packages of `packages` that cannot be imported here."""
    out = []
    for name in packages:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):          # a parent package missing, or a broken entry in sys.modules
            found = False
        if not found:
            out.append(name)
    return out


def require(command: str, *packages: str, because: str = "") -> None:
    """OptccError(command, "needs PACKAGE (...), which is not installed; install it: COMMAND")."""
    gone = missing(*packages)
    if not gone:
        return
    name = gone[0]
    why = because or WHY.get(name, name)
    raise OptccError(command, f"needs {name} ({why}), which is not installed; install it: "
                              f"{INSTALL.get(name, f'pip install {name}')}")
