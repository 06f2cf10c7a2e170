"""OptCC for g GPUs per server and any set of slow GPUs (derived, docs/optcc_rails.md): one g = 1
construction per rail with NVLink lead and tail (`build`, its passes on numpy in `layout`, the
lead's bisection in `lead`, the borrowing sub-rails in `borrow`), its counts (`counts`), its array
form (`arrays`); `record` its table row."""
