"""A large trace file read by several processes at once, each taking a part of its list of events.

Decoding JSON and building columns is work for one core at a time in Python.
On Linux, in a process with no other thread (the command line, the
benchmark: never a Jupyter kernel, which has several, nor a process that
imported torch), :class:`Split` cuts the
list of events of a UTF-8 file (plain or gzip) of at least two
:data:`MIN_PART` of text into as many parts as there are usable cores; a forked
worker reads each part after the first into columns of its own and sends them
back through a pipe, while this process reads the first part. A worker of a
gzip file un-gzips the text before its part and drops it (a quarter of what
reading it would cost), and finds its cut in its own text as this process
finds it in its: the same bytes, the same search, the same cut. The parts' columns are
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
from itertools import chain
from typing import Any, Callable, Iterator

from .columns import ColumnBuilder
from .event_fields import Args, msgspec
from .json_events import Document, EVENT_CUT

if msgspec is not None:
    _ENCODE = msgspec.msgpack.Encoder().encode
    _DECODE = msgspec.msgpack.Decoder(list[Args]).decode
from .source import BLOCK

MIN_PART = 8 << 20  # bytes of JSON: below this a part costs more in forking and joining than it saves
_LOOK = 1 << 20  # how far past a planned cut to look for the end of an event
_TAIL_MAX = 16 << 20  # what follows a gzip file's list of events, sent back by the worker that reads to it
#: What the parent's ``meanwhile`` (the command's imports, run once its part is read) costs, in bytes of JSON read
#: in the same time (both scale with the machine's speed): the parent's part is that much shorter than a worker's,
#: so that it does not make the workers' results wait (measured: about 100 ms of imports, 6 MB of events).
MEANWHILE_BYTES = 6 << 20
#: What un-gzipping a byte of text and dropping it costs a worker, against reading it into columns: a gzip worker's
#: part is shorter by that much of what lies before it (HTA's 35 MB gzip test trace: 0.03 s to un-gzip it all,
#: 0.22 s to read it; 0.25 rather than 0.12 because a worker also packs and sends what it read; the command's
#: time was the same at 0.5 and worse at 0.8).
GZIP_SKIP = 0.25


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


def text_blocks(path: Path, start: int, gz: bool, length: int | None = None) -> Iterator[bytes]:
    """The text from offset ``start`` (``length`` bytes of it, or to the end): the file's bytes, or for a gzip
    file the un-gzipped text, what comes before ``start`` un-gzipped and dropped."""
    if not gz:
        return file_blocks(path, start, length)
    return _gzip_blocks(path, start, length)


def _gzip_blocks(path: Path, start: int, length: int | None) -> Iterator[bytes]:
    from .source import open_text

    blocks, close, _ = open_text(path)
    try:
        at = 0
        for b in blocks:
            if at + len(b) <= start:
                at += len(b)
                continue
            rest = chain([b[start - at:]], blocks)
            yield from (rest if length is None else _limited(rest, length))
            return
    finally:
        close()


def _take(blocks: Iterator[bytes], n: int) -> tuple[bytes, Iterator[bytes]]:
    """The next ``n`` bytes of ``blocks`` (fewer at their end), and the blocks after them."""
    got: list[bytes] = []
    have = 0
    for b in blocks:
        if have + len(b) >= n:
            k = n - have
            got.append(b[:k])
            return b"".join(got), chain([b[k:]], blocks) if k < len(b) else blocks
        got.append(b)
        have += len(b)
    return b"".join(got), iter(())


def _cut_in(window: bytes) -> int | None:
    """Where in ``window`` (the text from a planned cut) the next event seems to start: its '{'."""
    m = EVENT_CUT.search(window)
    return None if m is None else m.end() - 1


def until_cut(blocks: Iterator[bytes], at: int, planned: int,
              found: Callable[[int, Iterator[bytes]], None]) -> Iterator[bytes]:
    """``blocks`` (the text from offset ``at``) up to the first cut between two events past ``planned``; then
    ``found(cut, the text from the cut)``. Without a cut in the :data:`_LOOK` bytes from ``planned``, all of it."""
    for b in blocks:
        if at + len(b) <= planned:
            at += len(b)
            yield b
            continue
        k = planned - at
        if k:
            yield b[:k]
        window, rest = _take(chain([b[k:]], blocks), _LOOK)
        cut = _cut_in(window)
        if cut is None:
            yield window
            yield from rest
            return
        if cut:
            yield window[:cut]
        found(planned + cut, chain([window[cut:]], rest))
        return


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
    """One forked process reading [start, end) of the text (to the list's end when ``end`` is None); of a gzip
    file, from the cut past ``start`` to the cut past ``end``, each found in its own text."""

    def __init__(self, path: Path, parser: str, start: int, end: int | None, gz: bool = False) -> None:
        self.start, self.end = start, end

        def read() -> dict:
            base = _peak_growth_start()
            found = _read_part(path, parser, start, end, gz)
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
    """A worker's part: it ends at ``end`` (of a gzip file: once its text has found it); ``ok`` tells whether that
    cut fell between two events."""

    def __init__(self, end: int | None) -> None:
        self.end = end
        self.ok = False

    def begin(self, text: Any, at: int) -> bool:
        return True  # the part is planned already

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


def _read_part(path: Path, parser: str, start: int, end: int | None, gz: bool = False) -> dict:
    """A worker's part, read into columns."""
    stop = _Stop(end if not gz else None) if end is not None else None
    tail: bytes | None = None
    if not gz:
        blocks = file_blocks(path, start, None if end is None else end - start)
    else:
        window, rest = _take(text_blocks(path, start, True), _LOOK)
        cut = _cut_in(window)
        if cut is None:
            raise ValueError("no cut between two events where the part was planned")
        blocks = chain([window[cut:]], rest)
        start += cut
        if stop is not None:
            def found(at: int, after: Iterator[bytes]) -> None:
                stop.end = at

            blocks = until_cut(blocks, start, end, found)
    doc = Document(path, blocks, parser, part=stop)
    builder = ColumnBuilder(path)
    events = _Returned(doc.events_from(start))
    packer = _Packer()
    for batch, checked in events:
        builder.add(batch, checked, doc.whole_args)
        if len(builder.c.args.raw) >= _PACK_EVERY:
            packer.take(builder.c.args)
    if stop is not None and not stop.ok:
        raise ValueError("the cut at the part's end is not between two events")
    if builder.paired():
        raise ValueError("begin/end pairs: read in one process, they pair across the cut")
    list_end = None if end is not None else doc.text.base + events.value
    if gz and list_end is not None:
        # what follows the list (the trace's last fields), sent along: the parent would un-gzip the file again
        left = doc.text.data[events.value:]
        tail = left + b"".join(_limited(doc.text.blocks, _TAIL_MAX)) if len(left) < _TAIL_MAX else None
        if tail is not None and len(tail) >= _TAIL_MAX:
            tail = None
    return {"columns": _packed(builder.c, packer), "read": builder.i + 1, "start": start,
            "end": stop.end if stop is not None else None, "list_end": list_end, "tail": tail}


_PACK_EVERY = 1024  # a worker packs its kept args this many at a time, as it reads: the structs never all at once


class _Packer:
    """A worker's kept args as MessagePack (a few times quicker to send and take in than pickled structs, and
    half their memory), packed as the worker reads: its peak holds the packed args and a thousand structs."""

    def __init__(self) -> None:
        self.events = array("q")
        self.chunks: list[bytes] = []
        self.on = msgspec is not None

    def take(self, args: Any) -> None:
        """Pack what ``args`` holds and empty it; from the first that is not a plain ``Args``, keep all as is."""
        raw = args.raw
        if not (self.on and raw):
            return
        if not all(a.__class__ is Args for a in raw.values()):
            self.on = False  # (the rest stays unpacked, after the packed ones: the events stay ascending)
            return
        self.events.extend(array("q", raw))
        self.chunks.append(_ENCODE(list(raw.values())))
        args.raw = {}


def _packed(c: Any, packer: _Packer | None = None) -> Any:
    """The columns, their args packed (:class:`_Packer`), what is left of them too when it can be."""
    packer = packer or _Packer()
    packer.take(c.args)
    if packer.chunks:
        c.args_packed = (packer.events, packer.chunks)
    return c


def _unpacked(c: Any) -> Any:
    packed = getattr(c, "args_packed", None)
    if packed is not None:
        left = c.args.raw
        c.args.raw = dict(zip(packed[0], chain.from_iterable(map(_DECODE, packed[1]))))
        c.args.raw.update(left)
        del c.args_packed
    return c


class Split:
    """The parent's side: plans the cuts when the list of events begins, starts the workers, joins their columns."""

    def __init__(self, path: Path, parser: str, builder: ColumnBuilder, processes: int, source: Any,
                 meanwhile: Any = None) -> None:
        self.path, self.parser, self.builder, self.processes, self.source = path, parser, builder, processes, source
        self.meanwhile = meanwhile  # called once, when this part is read and the workers may still be reading
        self.end: int | None = None  # where this process's part ends, once planned (of a gzip file: once found)
        self.gz = False
        self._after: Iterator[bytes] | None = None  # a gzip file: the text from self.end on, not read yet
        self.workers: list[_Worker] = []
        self.worker_peak_bytes = 0  # the workers' peak resident growth, summed (what they cost at most at once)
        self.joined = 0  # parts read by workers and joined

    def _plan(self, at: int, size: int, ahead: int, skip: float) -> list[int]:
        """Where the parts should start so that all take about as long: the parent reads from ``at`` and then
        has ``ahead`` bytes' worth of other work; a worker also pays ``skip`` a byte for the text before its part."""
        n = self.processes
        # each start is a + b * T, T the time every process takes (in bytes read): c1 = at + T - ahead, then
        # c[k+1] = c[k] + T - skip * c[k]; the last part ends at the text's end: size = c[n] + T - skip * c[n]
        a, b = 1.0, float(at - ahead)
        starts = [(a, b)]
        for _ in range(n - 2):
            a, b = a * (1 - skip) + 1, b * (1 - skip)
            starts.append((a, b))
        t = (size - b * (1 - skip)) / (a * (1 - skip) + 1)
        return [int(a * t + b) for a, b in starts]

    def begin(self, text: Any, at: int) -> bool:
        """The list of events starts at ``at``; plan the cuts and start the workers, or return False."""
        self.gz = gz = self.source.gzip
        if not (self.source.plain or gz):  # another encoding: offsets in the text are in neither file nor stream
            return False
        size = self.source.text_size
        held = text.base + len(text.data)  # this process already holds the text up to here
        # the parent's part is shorter by `ahead` bytes when it has the meanwhile to do as well
        ahead = MEANWHILE_BYTES if self.meanwhile is not None else 0
        ahead = min(ahead, (size - at) // (2 * self.processes))  # (a small file: still a fair share for the parent)
        planned = [max(c, held) for c in self._plan(at, size, ahead, GZIP_SKIP if gz else 0.0)]
        cuts: list[int] = []
        if gz:  # each part starts at the first cut past its planned start, which its reader finds in its own text
            for c in planned:
                if c - (cuts[-1] if cuts else at) >= MIN_PART // 2 and size - c >= MIN_PART // 2:
                    cuts.append(c)
        else:
            with open(self.path, "rb") as f:
                for c in planned:
                    f.seek(c)
                    cut = _cut_in(f.read(_LOOK))
                    if cut is not None:
                        cut += c  # the '{' of an event, if the cut is where it seems
                        if cut - (cuts[-1] if cuts else at) >= MIN_PART // 2 and size - cut >= MIN_PART // 2:
                            cuts.append(cut)
        if not cuts:
            return False
        try:
            for k, start in enumerate(cuts):
                self.workers.append(_Worker(self.path, self.parser, start, cuts[k + 1] if k + 1 < len(cuts) else None,
                                            gz))
        except OSError:  # no more processes: read on alone
            self.abandon()
            return False
        if gz:
            def found(cut: int, after: Iterator[bytes]) -> None:
                self.end, self._after = cut, after

            text.blocks = until_cut(text.blocks, held, cuts[0], found)
        else:
            self.end = cuts[0]
            text.blocks = _limited(text.blocks, self.end - held)
        return True

    def _from(self, at: int) -> Iterator[bytes]:
        """The text from offset ``at``, for this process to read on alone."""
        if self.gz and at == self.end and self._after is not None:
            after, self._after = self._after, None
            return after
        return text_blocks(self.path, at, self.gz)

    def reached(self, at: int, ok: bool) -> How:
        """This process's part ends at ``at``; ``ok``: its last events ended there. Joins what the workers read."""
        if self.meanwhile is not None and ok and self.workers:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()  # (a worker pays for its fork and its pipe: this process would only wait for it)
        workers, self.workers = self.workers, []
        if not ok or self.builder.paired():
            for w in workers:
                w.kill()
            return How(blocks=self._from(at), at=at)
        for k, w in enumerate(workers):
            found = w.result()
            if found is None or found["start"] != at:  # (a gzip worker's cut is found by both: the same, or none)
                for rest in workers[k + 1:]:
                    rest.kill()
                return How(blocks=self._from(at), at=at)
            self.builder.merge(_unpacked(found["columns"]), found["read"])
            self.worker_peak_bytes += found["peak_bytes"]
            self.joined += 1
            if found["list_end"] is not None:
                end = found["list_end"]
                tail = found.get("tail")
                blocks = iter([tail]) if tail is not None else text_blocks(self.path, end, self.gz)
                return How(blocks=blocks, list_end=end)
            at = found["end"]
        raise AssertionError("the last worker reads to the end of the list")  # pragma: no cover

    def abandon(self) -> Iterator[bytes]:
        """The cuts are not used (the list ended first): stop the workers; the text from this part's end."""
        for w in self.workers:
            w.kill()
        self.workers = []
        return self._from(self.end) if self.end is not None else iter(())

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
