"""Clusters where every GPU is slow (derived): `build` scales time by ℓ_min onto a cluster with a
healthy GPU; `record` its table row over a given dispatcher."""
