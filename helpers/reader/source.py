"""A trace file's text, as UTF-8, a block at a time: plain, gzip, a pipe, UTF-16.

Nothing here knows JSON. :func:`open_text` turns a path into blocks of UTF-8
bytes: it un-gzips, reads named pipes without hanging on one that nobody
writes to, and turns the other encodings that the ``json`` module accepts
(a UTF-8 byte order mark, UTF-16, UTF-32) into UTF-8, so that every parser
downstream sees the same text.
"""

from __future__ import annotations

import codecs
import os
import select
import stat
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator

BLOCK = 1 << 18  # bytes read (or un-gzipped) at a time
FIFO_WAIT_S = 3.0  # how long a named pipe may stay silent before we say nobody writes to it
_GZIP_MAGIC = b"\x1f\x8b"
#: Profiler traces un-gzip to 5 to 40 times their size (the most repetitive test trace here: 32); zlib
#: can reach about 1,000 times, on text that is one byte repeated. Past GZIP_CHECK_FROM bytes of text,
#: gzip data that has expanded more than GZIP_MAX_RATIO times is refused: such text is padding, not
#: events, and reading it would take minutes for nothing.
GZIP_MAX_RATIO = 100
GZIP_CHECK_FROM = 64 << 20


class TraceError(ValueError):
    """The input is not a readable profiler trace; the message says why."""


class Source:
    """What the blocks come from: ``plain`` once the first block shows a regular file whose bytes are the text."""

    def __init__(self, size: int) -> None:
        self.size = size  # bytes, for a regular file; 0 for a pipe
        self.plain = False  # not gzip, UTF-8 without a byte order mark: an offset in the text is one in the file
        #: gzip of UTF-8 without a byte order mark: an offset in the text is one in the un-gzipped stream
        self.gzip = False
        #: the text's size as far as it can be told before reading it (a gzip file's trailer: its last member's
        #: size, modulo 4 GiB), 0 where it cannot: what the reader plans its parts with
        self.text_size = size


def _gzip_text_size(f: Any, size: int) -> int:
    """The un-gzipped size a regular gzip file's trailer gives (0 if implausible): a plan, never trusted."""
    try:
        fd = f.fileno()
        if size < 18 or os.pread(fd, 2, 0) != _GZIP_MAGIC:
            return size
        n = int.from_bytes(os.pread(fd, 4, size - 4), "little")
    except (OSError, AttributeError, ValueError):
        return 0
    return n if n >= size else 0  # smaller than the file: several members, or over 4 GiB


def open_text(path: Path) -> tuple[Iterator[bytes], Callable[[], None], Source]:
    """The file's JSON text as UTF-8 blocks, a function that closes the file, and what the text comes from."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror or e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(f"{path}: is a directory, not a trace file")
    try:
        f = _open_pipe(path) if stat.S_ISFIFO(st.st_mode) else open(path, "rb")
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror or e})") from None
    source = Source(st.st_size if stat.S_ISREG(st.st_mode) else 0)
    if source.size:
        source.text_size = _gzip_text_size(f, source.size)
    blocks = _utf8(path, _raw_blocks(path, f, source), source)

    def close() -> None:
        blocks.close()
        f.close()

    return blocks, close, source


def _open_pipe(path: Path) -> Any:
    """A pipe opened for reading, without an endless wait on a named pipe that nothing writes to.

    ``<(zcat t.json.gz)`` is an anonymous pipe: its writer was there from the
    start, and reading waits for it as long as it writes. A named pipe
    (``mkfifo``) would block ``open`` and ``read`` forever without a writer:
    it gets FIFO_WAIT_S seconds to bring its first bytes.
    """
    if not hasattr(os, "O_NONBLOCK"):  # pragma: no cover - Windows has no named pipes in the file system
        return open(path, "rb")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # returns at once, writer or not
    try:
        try:
            anonymous = os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
        except OSError:  # no /proc: take it for a named pipe
            anonymous = False
        if not anonymous:
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLHUP)
            if not poller.poll(int(FIFO_WAIT_S * 1000)):
                raise TraceError(f"{path}: nothing was written to this named pipe for {FIFO_WAIT_S:g} s: "
                                 "start the program that writes the trace first (or pass <(command) instead)")
        os.set_blocking(fd, True)  # from here on, wait for the writer's data as for a file's
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _raw_blocks(path: Path, f: Any, source: Source) -> Iterator[bytes]:
    """The file's bytes, un-gzipped when they are gzip, about BLOCK bytes at a time."""
    try:
        first = f.read(BLOCK)
        if first[:2] != _GZIP_MAGIC:
            if path.suffix == ".gz":
                raise TraceError(f"{path}: the name ends in .gz but the file is not gzip-compressed")
            source.plain = source.size > 0  # _utf8 takes it back for another encoding
            block = first
            while block:
                yield block
                block = f.read(BLOCK)
            return
        source.gzip = source.size > 0  # _utf8 takes it back for another encoding
        d = zlib.decompressobj(31)
        pending = first
        read = len(first)  # compressed bytes read so far
        out_total = 0  # and what they expanded to
        while True:
            if d.eof:  # the end of one gzip member: another may follow
                rest = d.unused_data
                while len(rest) < 2:
                    more = f.read(BLOCK)
                    if not more:
                        break
                    read += len(more)
                    rest += more
                if not rest.strip(b"\0"):
                    if not f.read(BLOCK).strip(b"\0"):
                        return
                    raise zlib.error("data after the end of the gzip stream")
                if rest[:2] != _GZIP_MAGIC:
                    raise zlib.error("data after the end of the gzip stream")
                d = zlib.decompressobj(31)
                pending = rest
            if not pending:
                pending = f.read(BLOCK)
                read += len(pending)
                if not pending:
                    tail = d.flush()
                    if tail:
                        yield tail
                    if not d.eof:
                        raise EOFError("the compressed stream ends before its end marker")
                    return
            out = d.decompress(pending, BLOCK)
            pending = d.unconsumed_tail
            if out:
                out_total += len(out)
                if out_total > GZIP_CHECK_FROM and out_total > GZIP_MAX_RATIO * read:
                    raise TraceError(
                        f"{path}: gzip data that expands more than {GZIP_MAX_RATIO} times ({out_total >> 20} MiB from "
                        f"{_kib(read)} so far) is not a profiler trace, whose JSON expands 5 to 40 times; if it is "
                        "one, un-gzip it and pass the JSON file")
                yield out
    except (zlib.error, EOFError) as e:
        raise TraceError(f"{path}: gzip data is damaged or cut short ({e})") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror or e})") from None


def _kib(n: int) -> str:
    return f"{n:,} bytes" if n < 1 << 10 else f"{n >> 10:,} KiB"


def _encoding(head: bytes) -> str:
    """The encoding of JSON text from its first bytes, as ``json.loads`` decides it for bytes."""
    if head.startswith((codecs.BOM_UTF32_BE, codecs.BOM_UTF32_LE)):
        return "utf-32"
    if head.startswith((codecs.BOM_UTF16_BE, codecs.BOM_UTF16_LE)):
        return "utf-16"
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if len(head) >= 4:
        if not head[0]:
            return "utf-16-be" if head[1] else "utf-32-be"
        if not head[1]:
            return "utf-16-le" if head[2] or head[3] else "utf-32-le"
    elif len(head) == 2:
        if not head[0]:
            return "utf-16-be"
        if not head[1]:
            return "utf-16-le"
    return "utf-8"


def _utf8(path: Path, blocks: Iterator[bytes], source: Source) -> Iterator[bytes]:
    """The text as UTF-8: a byte order mark dropped, UTF-16 and UTF-32 re-encoded, as the json module reads them."""
    head = b""
    for head in blocks:
        if len(head) >= 4:
            break
        more = next(blocks, b"")
        head += more
        if not more or len(head) >= 4:
            break
    enc = _encoding(head)
    if enc != "utf-8":
        source.plain = source.gzip = False
    if enc == "utf-8":
        if head:
            yield head
        yield from blocks
        return
    if enc == "utf-8-sig":
        yield head[3:]
        yield from blocks
        return
    # A text of zero bytes reads as UTF-32 here, as in the json module: it fails at its first character.
    dec = codecs.getincrementaldecoder(enc)("surrogatepass")
    try:
        for b in _chain(head, blocks):
            yield dec.decode(b).encode("utf-8", "surrogatepass")
        yield dec.decode(b"", final=True).encode("utf-8", "surrogatepass")
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: the file is not valid {enc.upper()} text ({e.reason})") from None


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest
