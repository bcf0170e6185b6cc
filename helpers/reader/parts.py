"""A large trace file read by several processes at once, each taking a part of its list of events.

Decoding JSON and building columns is work for one core at a time in Python.
On Linux, in a process with no other thread (the command line, the
benchmark: never a Jupyter kernel, which has several, nor a process that
imported torch), :class:`Split` cuts the
list of events of a plain (not gzip) UTF-8 file of at least two
:data:`MIN_PART` into as many parts as there are usable cores; a forked worker
reads each part after the first into columns of its own and sends them back
through a pipe, while this process reads the first part. The parts' columns are
joined in file order, so the trace is the same, column for column, as one
process reading the whole file (``tests/test_trace_parts.py`` checks it).

A cut is taken only where the text that leads up to it decodes as whole
events: every part's end is checked by whoever reads that part, starting from
a place known to begin an event. Whatever goes wrong in a worker (a cut that
fell inside a string, begin/end event pairs that span a cut, a fault in the
JSON, a worker killed) costs nothing but time: this process reads on from the
first part it cannot use, as if there had been no workers, so every error is
found and worded as the single-process reader words it.

``PROFILING_READ_WORKERS=1`` turns it off (any other number: at most that many
processes).
"""

from __future__ import annotations

import os
import pickle
from array import array
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .columns import ColumnBuilder
from .event_fields import Args, msgspec
from .json_events import Document, EVENT_CUT

if msgspec is not None:
    _ENCODE = msgspec.msgpack.Encoder().encode
    _DECODE = msgspec.msgpack.Decoder(list[Args]).decode
from .source import BLOCK

MIN_PART = 8 << 20  # bytes of JSON: below this a part costs more in forking and joining than it saves
_LOOK = 1 << 20  # how far past a planned cut to look for the end of an event
#: What the parent's ``meanwhile`` (the command's imports, run once its part is read) costs, in bytes of JSON read
#: in the same time (both scale with the machine's speed): the parent's part is that much shorter than a worker's,
#: so that it does not make the workers' results wait (measured: about 100 ms of imports, 6 MB of events).
MEANWHILE_BYTES = 6 << 20


def processes(path: Path, size: int) -> int:
    """How many processes should read this file: 1 unless the file is large and forking is safe here."""
    wanted = os.environ.get("PROFILING_READ_WORKERS", "")
    try:
        n = int(wanted) if wanted.strip() else len(os.sched_getaffinity(0))
    except (ValueError, AttributeError):  # no sched_getaffinity outside Linux
        n = os.cpu_count() or 1
    if n < 2 or not sys.platform.startswith("linux") or not _alone():
        return 1
    return max(1, min(n, size // MIN_PART))


def _alone() -> bool:
    """No other thread in this process, as far as can be told.

    fork() copies only the calling thread: with other threads about (a
    Jupyter kernel's), a lock one of them holds would stay locked in the
    child forever. Python counts only its own threads; torch starts native
    ones (its thread pools, CUDA's), so a process that imported torch is not
    taken to be alone either.
    """
    return threading.active_count() == 1 and "torch" not in sys.modules


def file_blocks(path: Path, start: int, length: int | None = None) -> Iterator[bytes]:
    """The file's bytes from ``start`` (``length`` of them, or to the end), a block at a time."""
    with open(path, "rb") as f:
        f.seek(start)
        left = -1 if length is None else length
        while left:
            b = f.read(BLOCK if left < 0 else min(BLOCK, left))
            if not b:
                return
            if left > 0:
                left -= len(b)
            yield b


def _limited(blocks: Iterator[bytes], length: int) -> Iterator[bytes]:
    """The first ``length`` bytes of ``blocks``."""
    for b in blocks:
        if len(b) >= length:
            if length:
                yield b[:length]
            return
        length -= len(b)
        yield b


@dataclass
class How:
    """What the reader of a part does where its text was cut."""

    stop: bool = False  # a worker: its part ends here
    blocks: Iterator[bytes] | None = None  # else the text to read on from ...
    at: int = 0  # ... this offset
    list_end: int | None = None  # set: the workers read the rest of the list, which ends here


def _peak_growth_start() -> int:
    """Reset this process's peak resident size; the resident size now (bytes)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status("VmRSS")
    except OSError:
        return -1


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _fork(compute: Any) -> tuple[int, int]:
    """A forked process that sends ``compute()``'s result, pickled (None where it raised), through a pipe and
    leaves without running any of this process's clean-up; returns (its pid, the pipe's end to read)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            try:
                found: Any = compute()
            except BaseException:  # noqa: BLE001 - whatever it is, the parent does the work itself
                found = None
            with os.fdopen(w, "wb") as out:
                pickle.dump(found, out, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            os._exit(0)
    os.close(w)
    return pid, r


def _received(fd: int) -> Any:
    """What a forked process sent through ``fd`` (see :func:`_fork`), or None if nothing usable came."""
    try:
        with os.fdopen(fd, "rb") as f:
            # from the pipe as it comes: the pickle's bytes are never all held beside what they unpickle to
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError):  # EOFError: nothing came
        return None


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


class _Worker:
    """One forked process reading [start, end) of the text (to the list's end when ``end`` is None)."""

    def __init__(self, path: Path, parser: str, start: int, end: int | None) -> None:
        self.start, self.end = start, end

        def read() -> dict:
            base = _peak_growth_start()
            found = _read_part(path, parser, start, end)
            found["peak_bytes"] = _status("VmHWM") - base if base >= 0 else 0
            return found

        self.pid, self.fd = _fork(read)

    def result(self) -> dict | None:
        """What the worker read, or None if it could not read its part."""
        try:
            fd, self.fd = self.fd, -1
            return _received(fd)
        finally:
            self.reap()

    def kill(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.reap()

    def reap(self) -> None:
        if self.pid:
            _reap(self.pid)
            self.pid = 0


class _Stop:
    """A worker's part: it ends at ``end``; ``ok`` tells whether that cut fell between two events."""

    def __init__(self, end: int) -> None:
        self.end = end
        self.ok = False

    def reached(self, at: int, ok: bool) -> How:
        self.ok = ok
        return How(stop=True)


class _Returned:
    """An iterator's items, and then what it returned."""

    def __init__(self, it: Iterator) -> None:
        self.it = it
        self.value: Any = None

    def __iter__(self) -> Iterator:
        self.value = yield from self.it


def _read_part(path: Path, parser: str, start: int, end: int | None) -> dict:
    """A worker's part, read into columns."""
    stop = _Stop(end) if end is not None else None
    blocks = file_blocks(path, start, None if end is None else end - start)
    doc = Document(path, blocks, parser, part=stop)
    builder = ColumnBuilder(path)
    events = _Returned(doc.events_from(start))
    for batch, checked in events:
        builder.add(batch, checked, doc.whole_args)
    if stop is not None and not stop.ok:
        raise ValueError("the cut at the part's end is not between two events")
    if builder.paired():
        raise ValueError("begin/end pairs: read in one process, they pair across the cut")
    return {"columns": _packed(builder.c), "read": builder.i + 1,
            "list_end": None if end is not None else doc.text.base + events.value}


def _packed(c: Any) -> Any:
    """The columns, their args as MessagePack (a few times quicker to send and take in than pickled structs)."""
    raw = c.args.raw
    if msgspec is not None and raw and all(a.__class__ is Args for a in raw.values()):
        c.args_packed = (array("q", raw), _ENCODE(list(raw.values())))
        c.args.raw = {}
    return c


def _unpacked(c: Any) -> Any:
    packed = getattr(c, "args_packed", None)
    if packed is not None:
        c.args.raw = dict(zip(packed[0], _DECODE(packed[1])))
        del c.args_packed
    return c


class Split:
    """The parent's side: plans the cuts when the list of events begins, starts the workers, joins their columns."""

    def __init__(self, path: Path, parser: str, builder: ColumnBuilder, processes: int, source: Any,
                 meanwhile: Any = None) -> None:
        self.path, self.parser, self.builder, self.processes, self.source = path, parser, builder, processes, source
        self.meanwhile = meanwhile  # called once, when this part is read and the workers may still be reading
        self.end: int | None = None  # where this process's part ends, once planned
        self.workers: list[_Worker] = []
        self.worker_peak_bytes = 0  # the workers' peak resident growth, summed (what they cost at most at once)
        self.joined = 0  # parts read by workers and joined

    def begin(self, text: Any, at: int) -> bool:
        """The list of events starts at ``at``; plan the cuts and start the workers, or return False."""
        if not self.source.plain:  # gzip, another encoding: offsets in the text are not offsets in the file
            return False
        size = self.source.size
        held = text.base + len(text.data)  # this process already holds the text up to here
        cuts: list[int] = []
        n = self.processes
        # the parent's part is `ahead` bytes shorter than each worker's when it has the meanwhile to do as well
        ahead = MEANWHILE_BYTES if self.meanwhile is not None else 0
        ahead = min(ahead, (size - at) // (2 * n))  # (a small file: still a fair share for the parent)
        first = (size - at - (n - 1) * ahead) // n
        with open(self.path, "rb") as f:
            for k in range(1, n):
                planned = max(at + k * first + (k - 1) * ahead, held)
                f.seek(planned)
                m = EVENT_CUT.search(f.read(_LOOK))
                if m is not None:
                    cut = planned + m.end() - 1  # the '{' of an event, if the cut is where it seems
                    if cut - (cuts[-1] if cuts else at) >= MIN_PART // 2 and size - cut >= MIN_PART // 2:
                        cuts.append(cut)
        if not cuts:
            return False
        try:
            for k, start in enumerate(cuts):
                self.workers.append(_Worker(self.path, self.parser, start, cuts[k + 1] if k + 1 < len(cuts) else None))
        except OSError:  # no more processes: read on alone
            self.abandon()
            return False
        self.end = cuts[0]
        text.blocks = _limited(text.blocks, self.end - held)
        return True

    def reached(self, at: int, ok: bool) -> How:
        """This process's part ends at ``at``; ``ok``: its last events ended there. Joins what the workers read."""
        if self.meanwhile is not None and ok and self.workers:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()  # (a worker pays for its fork and its pipe: this process would only wait for it)
        workers, self.workers = self.workers, []
        if not ok or self.builder.paired():
            for w in workers:
                w.kill()
            return How(blocks=file_blocks(self.path, at), at=at)
        for k, w in enumerate(workers):
            found = w.result()
            if found is None:
                for rest in workers[k + 1:]:
                    rest.kill()
                return How(blocks=file_blocks(self.path, w.start), at=w.start)
            self.builder.merge(_unpacked(found["columns"]), found["read"])
            self.worker_peak_bytes += found["peak_bytes"]
            self.joined += 1
            if found["list_end"] is not None:
                return How(blocks=file_blocks(self.path, found["list_end"]), list_end=found["list_end"])
        raise AssertionError("the last worker reads to the end of the list")  # pragma: no cover

    def abandon(self) -> Iterator[bytes]:
        """The cuts are not used (the list ended first): stop the workers; the text from this part's end."""
        for w in self.workers:
            w.kill()
        self.workers = []
        return file_blocks(self.path, self.end) if self.end is not None else iter(())

    def close(self) -> None:
        for w in self.workers:
            w.kill()
        self.workers = []


def in_child(fn: Any, *args: Any, worth: bool = True) -> Any:
    """``fn(*args)`` computed in a forked process while this one goes on; returns a function that gives its result.

    The command line's ``summarize`` computes the roofline this way beside the summary: on two cores the two
    take about as long. Where forking is not safe (see :func:`_alone`), not worth it (``worth``), or the child
    fails, the result is computed here, when asked for: the same value either way (it must pickle).
    """
    if not worth or not sys.platform.startswith("linux") or not _alone():
        return lambda: fn(*args)
    try:
        pid, fd = _fork(lambda: (fn(*args),))
    except OSError:
        return lambda: fn(*args)

    def result() -> Any:
        try:
            found = _received(fd)
        finally:
            _reap(pid)
        return found[0] if found is not None else fn(*args)

    return result
