"""optcc core: the shared vocabulary (Cluster, Schedule) and the algorithms that emit Schedules.

Every other package of the project (bounds, lp_models, verifier, gpu_runner, paper_checks)
depends on this core and on nothing else of ours.
"""
from optcc.errors import OptccError
from optcc.cluster import Cluster
from optcc.schedule import Flow, LocalOp, Schedule

__all__ = ["OptccError", "Cluster", "Flow", "LocalOp", "Schedule"]
__version__ = "0.1.0"
