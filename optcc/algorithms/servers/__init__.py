"""OptCC for one straggler server of g GPUs (derived, docs/optcc_servers.md): the NIC instance on q =
p/g nodes (`shape`) lifted over the g rails (`families`, `lift`), NVLink lead and tail (`build`);
`arrays` the same schedule as EventArrays; `record` its table row."""
