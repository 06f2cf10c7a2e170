"""`torchrun --nproc-per-node P -m gpu_runner --schedule FILE ...`: one rank of a run."""
import sys

from gpu_runner.worker import main

sys.exit(main())
