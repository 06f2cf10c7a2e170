"""`torchrun --nproc-per-node P -m gpu_runner --schedule FILE ...`: one rank of a run;
`python -m gpu_runner probe ...`: one rank of `optcc probe` (as `-m gpu_runner.probe ...`)."""
import sys

if sys.argv[1:2] == ["probe"]:
    from gpu_runner.probe import main as probe_main
    sys.exit(probe_main(sys.argv[2:]))

from gpu_runner.worker import main  # noqa: E402

sys.exit(main())
