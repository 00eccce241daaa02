"""Reading a log on the second core: samples parsed in a child process, records made in this one.

Reading an Inspect sample (decompress, parse, validate: ~100 us) costs about as much as making its
record (``evaluate``, writing, summarising), so on a machine of two cores the reading goes to a
forked child that sends the parsed :class:`~.imported_runs.ImportedSample` s back in batches, in
order, over a pipe.  What the child raises (an :class:`~.common.ImportSourceError` naming the file
and entry) is raised here as the same one-line error.  A consumer that stops early (a near miss that
restarts the import as a generic task, an error) ends the child.  Where ``fork`` is not available,
or for a small log, the samples are read in this process.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection

from pytest_benchaudit.importers.common import ImportSourceError

__all__ = ["BATCH", "feed"]

BATCH = 256  # samples a message: amortises the pipe's cost, bounds what is in flight
_MIN_SAMPLES = 4 * BATCH  # below this a child costs more than it saves


def _produce(make: Callable[[], Iterator[object]], conn: Connection) -> None:
    batch: list[object] = []
    try:
        for sample in make():
            batch.append(sample)
            if len(batch) >= BATCH:
                conn.send_bytes(pickle.dumps(("samples", batch), protocol=pickle.HIGHEST_PROTOCOL))
                batch = []
        conn.send_bytes(pickle.dumps(("samples", batch), protocol=pickle.HIGHEST_PROTOCOL))
        conn.send_bytes(pickle.dumps(("end", None)))
    except ImportSourceError as err:
        conn.send_bytes(pickle.dumps(("error", str(err))))
    except (BrokenPipeError, EOFError):
        pass  # the consumer stopped reading
    finally:
        conn.close()


def feed(make: Callable[[], Iterator[object]], expected: int) -> Iterator[object]:
    """The items ``make()`` yields, produced in a forked child when ``expected`` is large enough."""
    if expected < _MIN_SAMPLES or "fork" not in multiprocessing.get_all_start_methods() or os.name != "posix":
        yield from make()
        return
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_produce, args=(make, send), daemon=True, name="benchaudit-import-reader")
    child.start()
    send.close()
    try:
        while True:
            try:
                kind, payload = pickle.loads(receive.recv_bytes())
            except EOFError:
                raise ImportSourceError(
                    "the process reading the log ended without a word (killed, out of memory?)"
                ) from None
            if kind == "samples":
                yield from payload
            elif kind == "error":
                raise ImportSourceError(str(payload))
            else:
                return
    finally:
        receive.close()
        if child.is_alive():
            child.terminate()
        child.join(timeout=5)
