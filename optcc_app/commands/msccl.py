"""`optcc msccl verify FILE.xml` and `optcc msccl export SCHEDULE -o FILE.xml`.

verify: prove an MSCCL AllReduce XML (sum, deadlock_free, limits, deterministic); exit 0 proved,
1 refuted, 2 malformed (the line and field are named). export: prove a Schedule with the schedule
verifier, write it as an in-place AllReduce XML, prove that XML, and only then write the file.
Export of a large schedule (LOUD_FLOWS flows or more) reports each stage on stderr as it starts.
"""
from __future__ import annotations

import sys
import time

from optcc_app.commands._common import print_json, print_table
from optcc.errors import OptccError
from optcc.files import check_writable, read_text, write_text_atomic

STEP_CHOICES = (64, 256)
LOUD_FLOWS = 2000           # export reports its stages on stderr from this many flows (several seconds)


def register(sub) -> None:
    parser = sub.add_parser("msccl", help="verify MSCCL algorithm XML files, export schedules to them")
    msub = parser.add_subparsers(dest="msccl_command", metavar="SUBCOMMAND", required=True)
    v = msub.add_parser("verify", help="prove an MSCCL AllReduce XML (sum, deadlock-free, limits, deterministic)")
    v.add_argument("file", metavar="FILE.xml")
    v.add_argument("--max-steps", type=int, choices=STEP_CHOICES, default=64,
                   help="steps per thread block: 64 (RCCL, msccl-executor-nccl) or 256 (microsoft/msccl)")
    v.add_argument("--json", action="store_true", help="print JSON instead of a table")
    v.set_defaults(handler=run_verify)
    e = msub.add_parser("export", help="write a proved schedule as an in-place MSCCL AllReduce XML")
    e.add_argument("schedule", metavar="SCHEDULE")
    e.add_argument("-o", "--output", required=True, metavar="FILE.xml")
    e.add_argument("--max-steps", type=int, choices=STEP_CHOICES, default=64,
                   help="steps per thread block of the target runtime (default 64)")
    e.add_argument("--proto", choices=("Simple", "LL", "LL128"), default="Simple", help="NCCL protocol (default Simple)")
    e.add_argument("--json", action="store_true", help="print JSON instead of text")
    e.set_defaults(handler=run_export)


def _read(path: str) -> str:
    """The file's text: a regular UTF-8 file only (optcc.files; a FIFO is refused, not waited on)."""
    return read_text(path, "FILE", "an MSCCL XML file")


def run_verify(args) -> int:
    from verifier.msccl import load_program, prove_program

    text = _read(args.file)
    try:
        program = load_program(text)
    except OptccError as err:
        raise OptccError(f"{args.file} {err.field}", err.message) from None
    proof = prove_program(program, args.max_steps)
    if args.json:
        out = proof.to_json()
        print_json({k: out[k] for k in ("proved", "properties", "counterexample", "seconds", "facts", "z3_version")})
    else:
        f = proof.facts
        print(f"# {args.file}: {program.name or 'unnamed'}, {f['ranks']} ranks, {f['thread_blocks']} thread blocks, "
              f"{f['steps']} steps, D = {f['chunks_per_loop']}, {f['proto']}, {', '.join(f['modes'])}, "
              f"limit {f['max_steps']} steps per thread block")
        print_table(["property", "result"], [[n, "proved" if ok else "REFUTED"] for n, ok in proof.properties.items()])
        for name, cx in proof.counterexamples.items():
            print(f"COUNTEREXAMPLE ({name}): {cx['message']}")
        print(f"{'PROVED' if proof.proved else 'REFUTED'} in {proof.seconds:.3f} s")
    return 0 if proof.proved else 1


def run_export(args) -> int:
    from optcc.generated import load_flows
    from verifier import prove_allreduce
    from verifier.msccl import verify_xml
    from optcc.lowering.msccl import check_expressible, check_fits, export_xml

    check_writable(args.output, "--output")            # before the proofs, not after them
    schedule = load_flows(args.schedule)
    check_expressible(schedule)
    check_fits(schedule, args.max_steps)
    t0 = time.perf_counter()

    def note(message: str) -> None:
        if len(schedule.flows) >= LOUD_FLOWS:
            print(f"optcc msccl export [{time.perf_counter() - t0:6.1f} s] {message}", file=sys.stderr, flush=True)

    note(f"proving the schedule ({len(schedule.flows)} flows)")
    proof = prove_allreduce(schedule)
    if not proof.proved:
        cx = proof.counterexample or {}
        print(f"optcc: the schedule is not proved ({cx.get('property', '?')}): {cx.get('message', '')}; "
              f"nothing written")
        return 1
    note("schedule proved; laying out thread blocks")
    text, facts = export_xml(schedule, args.max_steps, args.proto, progress=note)
    note(f"proving the XML ({facts['steps']} steps, {facts['thread_blocks']} thread blocks)")
    check = verify_xml(text, args.max_steps)
    if not check.proved:      # an export bug: say so, write nothing
        print(f"optcc: internal error: the exported XML is refuted: {check.counterexample['message']}")
        return 3
    write_text_atomic(args.output, text, "--output")
    facts.update(file=args.output, schedule_seconds=round(proof.seconds, 4), xml_seconds=round(check.seconds, 4),
                 xml_properties={k: "proved" if v else "refuted" for k, v in check.properties.items()})
    if args.json:
        print_json(facts)
    else:
        print(f"wrote {args.output}: D = {facts['D']} chunks per loop (pad buffers to a multiple of D elements), "
              f"{facts['channels']} channel(s), {facts['thread_blocks']} thread blocks, {facts['steps']} steps "
              f"(at most {facts['max_tb_steps']} per thread block, limit {facts['max_steps']}), {facts['proto']}")
        print(f"schedule proved in {proof.seconds:.3f} s; XML proved (sum, deadlock_free, limits, deterministic) "
              f"in {check.seconds:.3f} s")
    return 0
