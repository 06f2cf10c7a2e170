"""OptCC for m ≥ 2 stragglers on g = 1 (derived, docs/optcc_multi.md): `build` from `pattern`, `fill`
and `drain`; `arrays` the same schedule as EventArrays; `record` its table row."""
