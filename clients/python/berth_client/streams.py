"""Stream readers: multiplexed stdout/stderr frames and JSON progress records."""
import json
import struct

from .errors import MultiplexError

STDOUT = 1
STDERR = 2
_HEADER = 8
# A record larger than this means a broken stream rather than something to buffer forever.
_MAX_RECORD = 16 * 1024 * 1024


def demultiplex(chunks):
    """Turns the multiplexed stream of a container without a TTY into (stream, bytes) pairs,
    stream being STDOUT or STDERR, as data arrives. Each frame is an 8-byte header (type,
    three zero bytes, big-endian length) and the payload; large frames are yielded in pieces.
    A frame cut short by the end of the stream ends it quietly."""
    header = b""
    stream = STDOUT
    remaining = 0
    system = []
    for chunk in chunks:
        view = memoryview(chunk)
        while len(view):
            if remaining == 0:
                need = _HEADER - len(header)
                header += bytes(view[:need])
                view = view[need:]
                if len(header) < _HEADER:
                    break
                kind = header[0]
                (remaining,) = struct.unpack(">I", header[4:])
                header = b""
                if kind in (0, 1):
                    stream = STDOUT
                elif kind == 2:
                    stream = STDERR
                elif kind == 3:
                    stream = 3
                    if remaining == 0:
                        raise MultiplexError("error from daemon in stream: ")
                else:
                    raise MultiplexError("unrecognized stream: {}".format(kind))
                continue
            take = min(remaining, len(view))
            data = bytes(view[:take])
            view = view[take:]
            remaining -= take
            if stream == 3:
                system.append(data)
                if remaining == 0:
                    raise MultiplexError(
                        "error from daemon in stream: " + b"".join(system).decode("utf-8", "replace")
                    )
            else:
                yield stream, data


def json_records(chunks):
    """Yields each JSON record of a newline-separated stream as soon as its line is complete."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            line = line.strip()
            if line:
                yield json.loads(line)
        if len(pending) > _MAX_RECORD:
            raise ValueError("JSON record larger than {} bytes in stream".format(_MAX_RECORD))
    if pending.strip():
        yield json.loads(pending)
