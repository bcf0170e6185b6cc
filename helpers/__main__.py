"""Command line: ``python -m helpers summarize TRACE [--json]`` and friends.

Imports neither torch nor matplotlib, so it answers in a moment on any machine.
Whatever the input, it prints a result (exit status 0) or one line that says
what is wrong (exit status 2): never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import re
import sys
from typing import Any, Callable, NoReturn

from .reader.parts import in_child
from .reader.trace import TraceError, read_trace

CHILD_FROM = 20_000  # events: from this many, summarize computes its roofline in a forked process (10-50 ms saved)


class _Parser(argparse.ArgumentParser):
    """argparse, with its complaints on one line (exit status 2, as for a bad trace)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see: {self.prog} --help)\n")


def _top(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expects a whole number of rows (0 or more), not {text!r}")
    return n


# What would start a new line in a terminal or for str.splitlines: C0 controls, DEL, NEL, the Unicode separators.
_BREAKS = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with whatever would break or garble its line (a newline in a file name) written as an escape."""
    return _BREAKS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _finite(x: Any) -> Any:
    """``x`` with every infinite or NaN float made None: JSON has no such numbers."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _json_text(obj: Any) -> str:
    # ASCII only, so any terminal prints it; strict, so any JSON parser reads it.
    return json.dumps(_finite(obj), indent=1, default=str, allow_nan=False)


def _print_json(obj: Any) -> None:
    print(_json_text(obj))


def _ranks(folder: str):
    """A folder of rank traces, read; what was skipped said on stderr, a line each."""
    from .facts.ranks import read_ranks

    return _said(read_ranks(folder))


def _said(r):
    """``r`` (Ranks), with what its reading skipped or set aside said on stderr, a line each."""
    for name, why in r.skipped:
        print(one_line(f"skipped {name}: {why}"), file=sys.stderr)
    for name, why in r.set_aside:
        print(one_line(f"note: {name}: {why}"), file=sys.stderr)
    return r


def _prepare(*modules: str) -> Callable[[], None]:
    """The imports a command needs once its trace is read (these modules, numpy for a large trace), to run while the
    reader's workers finish (read_trace's ``meanwhile``)."""
    def run() -> None:
        from .reader import vector

        for m in modules:
            importlib.import_module(m, __package__)
        vector.fast(vector.SMALL + 1)  # a file large enough for workers has more events than this
        from .facts import kernel_names

        kernel_names.compile_rules()  # the text names kernels: every rule's regex is compiled at the first name

    return run


def _read(path: str, prepare: Callable[[], None] | None = None):
    """One trace, read; the events set aside (durations no clock gives) said on stderr, in one line."""
    t = read_trace(path, meanwhile=prepare)
    if t.set_aside is not None:
        print(one_line(f"note: {t.path}: {t.set_aside.line()}"), file=sys.stderr)
    return t


def _summarize(a: argparse.Namespace) -> int:
    if os.path.isdir(a.trace):
        from .facts.ranks import ranks_text

        r = _ranks(a.trace)
        if a.json:
            _print_json(r.to_json())
        else:
            print(ranks_text(r, top=a.top))
        return 0
    t = _read(a.trace, _prepare(".facts", ".facts.text", ".facts.roofline"))
    from .facts import summarize
    from .facts.roofline import roofline

    # the roofline in a forked process beside the summary, on a trace large enough for that to pay
    later = in_child(roofline, t, worth=len(t.ts) >= CHILD_FROM)
    s = summarize(t)
    print(summary_output(s, later(), as_json=a.json, top=a.top))
    return 0


def summary_output(s, r, *, as_json: bool, top: int = 10) -> str:
    """What ``summarize`` prints for summary ``s`` and roofline ``r``: the text, or one strict-JSON object."""
    if as_json:
        out = s.to_json()
        out["roofline"] = r.to_json(top=max(top, 50))
        return _json_text(out)
    from .facts.roofline import roofline_text
    from .facts.text import summary_text

    return "\n".join([summary_text(s, top=top)] + roofline_text(r, top=top))


def _diagnose(a: argparse.Namespace) -> int:
    if os.path.isdir(a.trace):
        from .advice.diagnose import diagnose_folder, folder_text

        d = diagnose_folder(a.trace)  # each trace read once
        _said(d.ranks)
        if a.json:
            _print_json(d.to_json())
        else:
            print(folder_text(d))
        return 0
    t = _read(a.trace, _prepare(".advice.diagnose"))
    from .advice.diagnose import diagnose, text

    found = diagnose(t)
    if a.json:
        _print_json([f.to_json() for f in found])
    else:
        print(text(found))
    return 0


def _room(a: argparse.Namespace) -> int:
    from .classroom.room import RoomError, run

    try:
        return run(a.paths, html_out=a.html, only=a.question)
    except RoomError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _printable_anywhere() -> None:
    """Names the terminal cannot show (a C locale, cp1252, a lone surrogate) come out escaped, not as a traceback."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="python -m helpers", description="Read PyTorch profiler traces.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("summarize", help="print what a trace shows")
    p.add_argument("trace", help="a Chrome trace from torch.profiler (.json or .json.gz), or a folder of one per rank")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p.add_argument("--top", type=_top, default=10, metavar="N",
                   help="rows per table in the text output (default 10)")
    p.set_defaults(run=_summarize)
    d = sub.add_parser("diagnose", help="apply the cheat sheet's rules: findings, evidence, what to try")
    d.add_argument("trace", help="a Chrome trace from torch.profiler (.json or .json.gz), or a folder of one per rank")
    d.add_argument("--json", action="store_true", help="a JSON list of findings instead of text")
    d.set_defaults(run=_diagnose)
    r = sub.add_parser("room", help="the room's predictions: learners' journals per question, against the trace")
    r.add_argument("paths", nargs="+", metavar="PATH", help="journal files, or folders to search for *.json")
    r.add_argument("--html", metavar="OUT.html", help="also write the page with a bar chart per question")
    r.add_argument("--question", action="append", metavar="QID",
                   help="only this question (03.long-step) or notebook (03); repeat for more")
    r.set_defaults(run=_room)
    pf = sub.add_parser("preflight", help="run every notebook here, headless, with a table and an HTML report",
                        add_help=False)
    pf.set_defaults(run=None)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["preflight"]:  # its own options; imports nbclient, so only when asked
        from .classroom.preflight import main as preflight

        return preflight(argv[1:])
    a = ap.parse_args(argv)
    _printable_anywhere()
    try:
        return a.run(a)
    except TraceError as e:
        print(one_line(f"error: {e}"), file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head`
        return 0


def _leave(code: int) -> NoReturn:
    """Exit with ``code`` once the output is flushed, without tearing down the interpreter: freeing a large trace's
    columns and every module's objects one by one takes tens of milliseconds that a command line need not wait for."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `... | head`
        pass
    os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] in (["summarize"], ["diagnose"]):  # (nothing of theirs needs a clean-up at exit)
        _leave(main())
    sys.exit(main())
