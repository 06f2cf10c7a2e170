"""The house of optcc/algorithms (docs/architecture.md, "The house"): every row of the table is
defined in its construction's folder beside the builder it names, and a proved generator is a
capability of the row that runs it, linked to the folder its proof is a proof of."""
from __future__ import annotations

import importlib
import pathlib

from optcc.algorithms import registry
from optcc.cluster import Cluster
from optcc.generated import generated_form_of
from optcc.proof_sources import SOURCES, source_files

ROOT = pathlib.Path(__file__).resolve().parents[2]
OURS = [r for r in registry.table() if r.choose is None and not r.name.startswith("lp_")]


def _folder(module: str) -> str:
    """optcc.algorithms.<folder>.x -> optcc.algorithms.<folder>."""
    parts = module.split(".")
    assert parts[:2] == ["optcc", "algorithms"] and len(parts) == 4, module
    return ".".join(parts[:3])


def test_every_row_is_defined_in_the_folder_of_its_builder():
    assert {r.name for r in OURS} == {"few_servers", "optcc_servers", "optcc_rails", "all_slow", "optcc_multi",
                                      "optcc_single", "ring", "hierarchical_ring", "r2ccl", "direct"}
    for r in OURS:
        folder = _folder(r.build.__module__)
        record_module = importlib.import_module(folder + ".record")
        rows = [v for v in vars(record_module).values() if isinstance(v, registry.Algorithm)]
        defined = {v.name for v in rows} | ({"all_slow"} if folder.endswith("all_slow") else set())
        assert r.name in defined, (r.name, folder)
        assert _folder(r.slot_time.__module__) == folder, r.name


def test_a_generator_is_a_capability_of_the_row_that_runs_it():
    named = {r.generator: r for r in registry.table() if r.generator is not None}
    assert set(named) == set(SOURCES) == {"ring", "optcc"}
    for gen, r in named.items():
        assert _folder(r.build.__module__).replace(".", "/") == SOURCES[gen]
        files = source_files(gen)
        assert all(str(f.relative_to(ROOT)) in files for f in (ROOT / SOURCES[gen]).glob("*.py"))
    # the generated form follows the row that serves, whatever name the user asked for
    c = Cluster.build(5, 1, {0: 2})
    assert generated_form_of("optcc", c) == generated_form_of("optcc_single", c) == "optcc"
    assert generated_form_of("ring", c) == "ring"
    assert generated_form_of("optcc", Cluster.build(5, 1, {0: 2, 1: 2})) is None     # optcc_multi: none


def test_the_ring_row_builds_from_the_ring_folder_at_g_1():
    """The ring's row dispatches g > 1 to the flat ring (baselines); at g = 1 its schedule is the
    ring folder's builder, the one the ring generator's proof is of."""
    from optcc.algorithms.ring.build import ring_allreduce
    c = Cluster.build(4, 1, {1: 2})
    assert registry.build("ring", c, 2).to_json() == ring_allreduce(c, 2).to_json()
