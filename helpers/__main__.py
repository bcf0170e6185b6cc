"""Command line: ``python -m helpers summarize TRACE [--json]`` and friends.

Imports neither torch nor matplotlib, so it answers in a moment on any machine.
"""

from __future__ import annotations

import argparse
import json
import sys

from .trace import TraceError, read_trace


def _summarize(a: argparse.Namespace) -> int:
    from .facts import summarize
    from .report import summary_text

    s = summarize(read_trace(a.trace))
    if a.json:
        print(json.dumps(s.to_json(), indent=1, default=str))
    else:
        print(summary_text(s, top=a.top))
    return 0


def _diagnose(a: argparse.Namespace) -> int:
    from dataclasses import asdict

    from .diagnose import diagnose, text

    found = diagnose(read_trace(a.trace))
    if a.json:
        print(json.dumps([asdict(f) for f in found], indent=1))
    else:
        print(text(found))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers", description="Read PyTorch profiler traces.")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summarize", help="print what a trace shows")
    p.add_argument("trace", help="a Chrome trace from torch.profiler (.json or .json.gz)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p.add_argument("--top", type=int, default=10, help="rows per table in the text output (default 10)")
    p.set_defaults(run=_summarize)
    d = sub.add_parser("diagnose", help="apply the cheat sheet's rules: findings, evidence, what to try")
    d.add_argument("trace", help="a Chrome trace from torch.profiler (.json or .json.gz)")
    d.add_argument("--json", action="store_true", help="a JSON list of findings instead of text")
    d.set_defaults(run=_diagnose)
    pf = sub.add_parser("preflight", help="run every notebook here, headless, with a table and an HTML report",
                        add_help=False)
    pf.set_defaults(run=None)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["preflight"]:  # its own options; imports nbclient, so only when asked
        from .preflight import main as preflight

        return preflight(argv[1:])
    a = ap.parse_args(argv)
    try:
        return a.run(a)
    except TraceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
