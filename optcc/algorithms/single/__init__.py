"""OptCC's single-straggler construction (paper): `build` makes the schedule from `families`, the terms
the all-p proof states; `record` is its row of the algorithm table."""
