"""The composition layer: what combines the packages below it (core, bounds, verifier,
lp_models, gpu_runner) into the reports the CLI, paper_checks and benchmarks print.

Nothing below imports it (tests/project/test_layering.py keeps it so)."""
