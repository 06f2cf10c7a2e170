"""The application layer of optcc, above every other package of ours.

`optcc_app.compose` puts several layers together (the compare and demo tables, timing and bound
reports); `optcc_app.cli` and `optcc_app.commands` are the `optcc` command line, which parses,
calls one layer, and prints. Nothing of ours imports this package but paper_checks (compose only).
"""
