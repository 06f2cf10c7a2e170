"""`torchrun --nproc-per-node P -m gpu_runner --schedule FILE ...`: one rank of a run;
`python -m gpu_runner probe ...`: one rank of `optcc probe` (as `-m gpu_runner.probe ...`);
`python -m gpu_runner adaptive-train ...`: one rank of the adaptive hook's testbed scenario
(gpu_runner.adaptive_scenario)."""
import importlib
import sys

SUBCOMMANDS = {"probe": "gpu_runner.probe", "adaptive-train": "gpu_runner.adaptive_scenario"}

if sys.argv[1:2] and sys.argv[1] in SUBCOMMANDS:
    sys.exit(importlib.import_module(SUBCOMMANDS[sys.argv[1]]).main(sys.argv[2:]))

from gpu_runner.worker import main  # noqa: E402

sys.exit(main())
