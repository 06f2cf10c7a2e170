"""NCCL's ring (paper): `build` makes the g = 1 ring from `families`, the terms the all-p proof states;
`record` the "ring" row of the table (g > 1: the flat ring)."""
