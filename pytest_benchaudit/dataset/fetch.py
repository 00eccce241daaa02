"""``benchaudit fetch``: download a benchmark's files from its public origin, checksum-verified.

Files land where the plugin reads them: ``<data_dir>/<data_folder>/<name>`` (``data_folder`` from
the suite's ``[benchmark]`` table, the data directory from ``--data-dir``, else
``$BENCHAUDIT_DATA``, else the per-user cache).  Each file is verified against the sha256 in the
suite config before it is put in place.

Suite config schema (in ``suites/<bench>/suite.toml``)::

    [fetch]
    # Every file's URL is base_url + its path (URL-quoted). Pin a commit, never a branch.
    base_url = "https://raw.githubusercontent.com/OWNER/REPO/COMMIT/"

    [fetch.files]
    # key: the file name under the data folder (may contain '/', never '..')
    "data.csv" = { path = "data/test/data.csv", sha256 = "<64 hex>" }
    # derived file: downloaded from `path`, converted by a named transform, then verified
    "questions-data.json" = { path = "docs/javascript/questions-data.js", sha256 = "...",
                              transform = "js_assignment_to_json" }
    # a file that cannot be fetched safely: the message tells the user what to do
    "lookup.json" = { manual = "derived from a pickle upstream; convert it by hand: ...", sha256 = "..." }

Keys per file: ``sha256`` (required unless ``manual``), ``path`` (origin path relative to
``base_url``; default: the file name), ``transform`` (one of :data:`TRANSFORMS`), ``manual``
(a reason; the file is never downloaded, only checked when present).

Behaviour, per file:

- present with the right checksum -> skipped, not rewritten;
- present with another checksum -> refused unless ``force`` (then replaced);
- downloaded with ``httpx`` (sync, with a timeout, redirects followed) into a temporary file in
  the target folder, transformed if asked, verified, then renamed over the target: a failed
  download, transform or checksum leaves no file behind and the old file (if any) untouched;
- progress goes to stderr for files over :data:`PROGRESS_MIN_BYTES`.

Transforms are a closed set of pure byte-to-byte functions; nothing is ever unpickled or
executed.  ``js_assignment_to_json`` strips a leading ``NAME = `` (optionally ``var``/``let``/
``const``) and a trailing ``;`` from a JavaScript file, parses the rest as JSON and re-serialises
it with ``json.dumps(value, indent=1, ensure_ascii=False)`` in UTF-8, no trailing newline (how
SecEval's ``questions-data.json`` and ``leaderboard-data.json`` were derived; see PROVENANCE.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

import httpx

from pytest_benchaudit.common.errors import DataError
from pytest_benchaudit.common.progress import Progress
from pytest_benchaudit.dataset.suites import Suite

__all__ = [
    "FETCH_KEY",
    "TRANSFORMS",
    "PROGRESS_MIN_BYTES",
    "FetchError",
    "FetchFile",
    "FetchPlan",
    "fetch_plan",
    "fetch_file",
    "fetch_suite",
]

FETCH_KEY = "fetch"
PROGRESS_MIN_BYTES = 4 * 1024 * 1024
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=15.0)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FILE_KEYS = frozenset({"path", "sha256", "transform", "manual"})


class FetchError(DataError):
    """A fetch config is malformed, or one file could not be fetched; the message says which."""


# ----------------------------------------------------------------------------- transforms
_JS_ASSIGNMENT = re.compile(r"^\s*(?:(?:var|let|const)\s+)?[A-Za-z_$][\w$.]*\s*=\s*")


def js_assignment_to_json(data: bytes) -> bytes:
    """``NAME = [...];`` (JavaScript) -> the JSON value, re-serialised with indent=1, UTF-8."""
    text = data.decode("utf-8-sig")
    match = _JS_ASSIGNMENT.match(text)
    if not match:
        raise ValueError("the file does not start with an assignment 'NAME = '")
    body = text[match.end() :].rstrip()
    if body.endswith(";"):
        body = body[:-1]
    try:
        value = json.loads(body)
    except json.JSONDecodeError as err:
        raise ValueError(f"the assigned value is not JSON (line {err.lineno} column {err.colno}: {err.msg})") from None
    if not isinstance(value, (list, dict)):
        raise ValueError(f"the assigned value is a {type(value).__name__}, expected an array or object")
    return json.dumps(value, indent=1, ensure_ascii=False).encode("utf-8")


TRANSFORMS: dict[str, Callable[[bytes], bytes]] = {
    "js_assignment_to_json": js_assignment_to_json,
}


# ----------------------------------------------------------------------------- config
@dataclass(frozen=True)
class FetchFile:
    name: str
    path: str
    sha256: str | None
    transform: str | None = None
    manual: str | None = None


@dataclass(frozen=True)
class FetchPlan:
    benchmark: str
    data_folder: str
    base_url: str
    files: tuple[FetchFile, ...]


def fetch_plan(suite: Suite) -> FetchPlan:
    """Read and check the suite's ``[fetch]`` table.  Raises :class:`FetchError`."""
    table = suite.own_tables.get(FETCH_KEY)
    where = f"{suite.path}: [{FETCH_KEY}]"
    if table is None:
        raise FetchError(
            f"{suite.name} has no [{FETCH_KEY}] table in {suite.path}; "
            "its files cannot be fetched automatically (see its PROVENANCE notes)"
        )
    if not isinstance(table, dict):
        raise FetchError(f"{where} must be a table")
    unknown = set(table) - {"base_url", "files"}
    if unknown:
        raise FetchError(f"{where}: unknown keys {', '.join(sorted(unknown))} (known: base_url, files)")
    base_url = table.get("base_url")
    files = table.get("files")
    if not isinstance(base_url, str) or not base_url.startswith(("https://", "http://")):
        raise FetchError(f"{where}: base_url must be an http(s) URL")
    if not isinstance(files, dict) or not files:
        raise FetchError(f"{where}: [fetch.files] must list at least one file")
    out = []
    for name, spec in files.items():
        fwhere = f"{where} file {name!r}"
        if not isinstance(spec, dict):
            raise FetchError(f"{fwhere}: expected an inline table {{ path = ..., sha256 = ... }}")
        bad = set(spec) - _FILE_KEYS
        if bad:
            raise FetchError(
                f"{fwhere}: unknown keys {', '.join(sorted(bad))} (known: {', '.join(sorted(_FILE_KEYS))})"
            )
        parts = Path(name).parts
        if not name or Path(name).is_absolute() or ".." in parts or "\\" in name:
            raise FetchError(f"{fwhere}: the name must be a relative path inside the data folder")
        sha = spec.get("sha256")
        manual = spec.get("manual")
        if manual is not None and (not isinstance(manual, str) or not manual.strip()):
            raise FetchError(f"{fwhere}: manual must be a non-empty reason")
        if sha is None and manual is None:
            raise FetchError(f"{fwhere}: sha256 is required")
        if sha is not None and (not isinstance(sha, str) or not _SHA256.match(sha)):
            raise FetchError(f"{fwhere}: sha256 must be 64 lower-case hex digits")
        transform = spec.get("transform")
        if transform is not None and transform not in TRANSFORMS:
            raise FetchError(f"{fwhere}: unknown transform {transform!r}; transforms: {', '.join(TRANSFORMS)}")
        path = spec.get("path", name)
        if not isinstance(path, str) or not path or path.startswith("/"):
            raise FetchError(f"{fwhere}: path must be a relative path under base_url")
        out.append(FetchFile(name=name, path=path, sha256=sha, transform=transform, manual=manual))
    return FetchPlan(suite.name, suite.data_folder, base_url, tuple(out))


def file_url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + quote(path, safe="/")


# ----------------------------------------------------------------------------- fetching
def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download(client: httpx.Client, url: str, fh: Any, label: str, progress: TextIO) -> None:
    with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise FetchError(f"{label}: download failed: HTTP {response.status_code} from {url}")
        total = int(response.headers.get("content-length") or 0)
        bar = Progress(total or None, label, "B", stream=progress)
        show = total > PROGRESS_MIN_BYTES and not bar.enabled  # the bar replaces the quarter lines
        done, next_report = 0, 0.0
        for chunk in response.iter_bytes(1 << 16):
            fh.write(chunk)
            done += len(chunk)
            bar.update(len(chunk))
            if show and done / total >= next_report:
                print(f"  {label}: {done / 1e6:.1f} of {total / 1e6:.1f} MB", file=progress, flush=True)
                next_report += 0.25
        bar.close()
        if total and done != total:
            raise FetchError(f"{label}: download from {url} ended after {done} of {total} bytes")


def fetch_file(
    client: httpx.Client,
    plan: FetchPlan,
    spec: FetchFile,
    folder: Path,
    *,
    base_url: str | None = None,
    force: bool = False,
    progress: TextIO | None = None,
) -> str:
    """Fetch one file into ``folder``; returns what happened (``"fetched"``, ``"replaced"``,
    ``"present"``).  Raises :class:`FetchError` with one message naming the file (and URL)."""
    progress = progress or sys.stderr
    label = f"{plan.benchmark}/{spec.name}"
    try:
        target, root = (folder / spec.name).resolve(), folder.resolve()
    except (RuntimeError, OSError) as err:  # a loop of symbolic links (RuntimeError before Python 3.13)
        raise FetchError(f"{label}: {folder / spec.name} cannot be written: {err}") from None
    if not target.is_relative_to(root):
        raise FetchError(f"{label}: the file name points outside {folder}")
    existing = _sha256_file(target) if target.is_file() else None
    if existing is not None and (existing == spec.sha256 or (spec.manual and spec.sha256 is None)):
        return "present"
    if spec.manual is not None:
        state = "is missing" if existing is None else f"has sha256 {existing}, expected {spec.sha256}"
        raise FetchError(
            f"{label}: {target} {state}; it is not fetched automatically: {spec.manual}"
            + (f" (expected sha256 {spec.sha256})" if existing is None and spec.sha256 else "")
        )
    if existing is not None and not force:
        raise FetchError(
            f"{label}: {target} exists with sha256 {existing}, not the expected {spec.sha256}; "
            "refusing to overwrite it (use --force to replace it)"
        )
    url = file_url(base_url or plan.base_url, spec.path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            try:
                _download(client, url, fh, label, progress)
            except httpx.HTTPError as err:
                raise FetchError(f"{label}: download failed from {url}: {type(err).__name__}: {err}") from None
        if spec.transform:
            try:
                tmp.write_bytes(TRANSFORMS[spec.transform](tmp.read_bytes()))
            except (ValueError, UnicodeDecodeError) as err:
                raise FetchError(f"{label}: transform {spec.transform} failed on {url}: {err}") from None
        got = _sha256_file(tmp)
        if got != spec.sha256:
            raise FetchError(
                f"{label}: checksum mismatch for the file from {url}"
                f"{' after ' + spec.transform if spec.transform else ''}: "
                f"sha256 {got}, expected {spec.sha256}; nothing was written"
            )
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return "replaced" if existing is not None else "fetched"


def fetch_suite(
    suite: Suite,
    data_dir: Path,
    *,
    origin: str | None = None,
    force: bool = False,
    client: httpx.Client | None = None,
    out: TextIO | None = None,
    progress: TextIO | None = None,
) -> list[str]:
    """Fetch every file of a suite; prints one line per file and returns the error messages
    (empty when every file is in place).  A malformed ``[fetch]`` table raises :class:`FetchError`."""
    out = out or sys.stdout
    plan = fetch_plan(suite)
    folder = data_dir / plan.data_folder
    errors: list[str] = []
    own = client is None
    client = client or httpx.Client(timeout=DEFAULT_TIMEOUT, follow_redirects=True)
    try:
        for spec in plan.files:
            try:
                what = fetch_file(client, plan, spec, folder, base_url=origin, force=force, progress=progress)
            except FetchError as err:
                errors.append(str(err))
                print(f"error    {plan.data_folder}/{spec.name}", file=out)
                continue
            # The folder as it is on disk (mmlu-computer-security/), not the suite's name (mmlu_cs).
            print(f"{what:<8} {plan.data_folder}/{spec.name}", file=out)
    finally:
        if own:
            client.close()
    return errors
