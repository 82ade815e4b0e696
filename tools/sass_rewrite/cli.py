"""Command line: rewrite loops, list them with their fingerprints, and the SASS analyses."""
import argparse
import glob
import json
import os
import shutil
import sys

from . import analysis, validated as validated_data
from .cubin import disassemble, find_cuobjdump, functions_in, instruction_words, parse_listing
from .loop import ffma_loops
from .ordering import ORDERS
from .rewrite import REWRITTEN, Options, fingerprint, rewrite_library

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cuobjdump(args):
    path = args.cuobjdump or find_cuobjdump()
    if path is None:
        raise SystemExit("no cuobjdump: not on PATH, in CUDA_HOME/bin or in triton's wheel (--cuobjdump PATH)")
    return path


def _options(args):
    return Options(order_from=args.order, beam=args.beam, conflict_weight=args.conflict_weight,
                   per_bank=args.cache == "bank", reuse_on=not args.no_reuse)


def cmd_rewrite(args):
    data = validated_data.load(args.data)
    options = _options(args)
    if args.validated and options != Options():
        raise SystemExit("--validated takes each loop's options from the data: give no rewrite options")
    function = args.function or data.function_pattern
    report = rewrite_library(args.path, args.out, data if args.validated else None, function, options,
                             _cuobjdump(args))
    for outcome in report.loops:
        print(outcome.describe())
        if outcome.state == REWRITTEN and not args.validated:
            entry = {"input_fingerprint": outcome.input, "output_fingerprint": outcome.output,
                     "options": options.to_dict()}
            print(f"  as validated data: {json.dumps(entry)}")
    for pos in report.unreadable_cubins:
        print(f"cubin at {pos:#x}: cuobjdump cannot read it, left alone")
    if args.validated:
        for record in validated_data.summarize(data, report):
            print(f"{record['kernel']}: {record['state']}" + (f" ({record['reason']})" if record["reason"] else ""))
    done = sum(o.state == REWRITTEN for o in report.loops)
    if not report.written and os.path.abspath(args.path) != os.path.abspath(args.out):
        shutil.copy(args.path, args.out)
    print(f"{done} loops rewritten, read back as intended -> {args.out}")


def cmd_loops(args):
    data = validated_data.load(args.data)
    inputs, outputs = data.by_input, {loop.output: loop for loop in data.loops}
    with open(args.path, "rb") as f:
        buffer = f.read()
    for _pos, _size, name, base, lines in functions_in(buffer, args.function or data.function_pattern,
                                                       _cuobjdump(args)):
        body = instruction_words(buffer, base, lines)
        for bounds in ffma_loops(body):
            fp = fingerprint(body, bounds)
            what = (f"validated ptxas output: {inputs[fp].kernel}" if fp in inputs
                    else f"validated rewrite: {outputs[fp].kernel}" if fp in outputs else "not validated")
            print(f"{name}\n  loop at {body[bounds[1]][0]:#x}: {bounds[0]} FFMAs, fingerprint {fp} ({what})")


def cmd_report(args):
    lib = args.path or (glob.glob(os.path.join(REPO, "torch_vecgemm", "_C*.so")) or [None])[0]
    if lib is None:
        raise SystemExit("no library: build torch_vecgemm or name one")
    print("\n".join(analysis.count_table(analysis.instruction_counts(lib, _cuobjdump(args)))))


def cmd_banks(args):
    try:
        with open(args.path) as f:
            sass = f.read()
    except UnicodeDecodeError:
        sass = disassemble(args.path, _cuobjdump(args))
    for name, body in parse_listing(sass):
        if args.function in name:
            for line in analysis.bank_report(name, body, args.banks):
                print(line)


def parser():
    ap = argparse.ArgumentParser(prog="sass_rewrite", description=__doc__.split("\n")[0])
    ap.add_argument("--cuobjdump", help="default: on PATH, in CUDA_HOME/bin, or triton's")
    sub = ap.add_subparsers(dest="command", required=True)

    rw = sub.add_parser("rewrite", help="rewrite the main loops of a library (or cubin) into a copy")
    rw.add_argument("path", help="a shared library or a cubin")
    rw.add_argument("--out", required=True, help="where the result goes (may be path)")
    rw.add_argument("--validated", action="store_true",
                    help="as the build does: only validated loops, with their options, into their validated rewrite")
    rw.add_argument("--function", help="functions whose mangled name matches this regex (default: the validated loops')")
    rw.add_argument("--order", choices=ORDERS, default="model",
                    help="the FFMA order: searched under the cache model, ptxas' first K step, or a fixed walk")
    rw.add_argument("--beam", type=int, default=32, help="the search's beam width")
    rw.add_argument("--conflict-weight", type=int, default=100,
                    help="the search's price of two register-file reads in one bank, in reads")
    rw.add_argument("--cache", choices=["bank", "slot"], default="bank",
                    help="reuse cache model: an entry per (slot, bank), or one per slot")
    rw.add_argument("--no-reuse", action="store_true", help="no .reuse flags (a control)")
    rw.set_defaults(run=cmd_rewrite)

    lp = sub.add_parser("loops", help="the FFMA main loops of a library with their fingerprints")
    lp.add_argument("path")
    lp.add_argument("--function", help="functions whose mangled name matches this regex (default: the validated loops')")
    lp.set_defaults(run=cmd_loops)

    rp = sub.add_parser("report", help="FFMA, LDS, LDG, STS, STG and spill instructions per kernel")
    rp.add_argument("path", nargs="?", help="default: torch_vecgemm/_C*.so of this checkout")
    rp.set_defaults(run=cmd_report)

    bk = sub.add_parser("banks", help="the main loop's operand reuse, register banks and load distances")
    bk.add_argument("path", help="cuobjdump -sass text, or a cubin / shared library")
    bk.add_argument("--function", default="", help="only functions whose name contains this")
    bk.add_argument("--banks", type=int, default=2)
    bk.set_defaults(run=cmd_banks)
    for p in (rw, lp):
        p.add_argument("--data", default=validated_data.DATA, help="the validated loops (default: validated.json)")
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    args.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
