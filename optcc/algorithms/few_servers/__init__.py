"""A lagged direct exchange between q ≤ 8 servers (derived, docs/optcc_servers.md 'Few servers'):
`build` and its counts; `record` its table row."""
