"""xdist workers on other hosts: execnet gateways (``-d --tx socket=HOST:PORT``, ``--tx ssh=HOST``).

pytest-xdist hands each worker the controller's command line and a small ``workerinput``;
the worker parses the options again on its own host, in its gateway's working directory.
So each worker already resolves its own data directory (``--data-dir`` relative to its
working directory, else its own ``$BENCHAUDIT_DATA``, else its user's cache), its own
generation cache (``--cache-dir``, else its ``$XDG_CACHE_HOME``) and its own API keys (from
its environment: a :class:`~pytest_benchaudit.inference.backend.ModelSpec` holds the *name*
of the key variable; ``workerinput`` carries no key of a user's, and the per-run keys of servers
the run launches go to workers on this host only, since launched models are refused with other
gateways).  Records ride on the
reports to the controller, which alone writes the run directory.

What this module adds, on the controller (:class:`RemoteWorkers`) and on workers
(:class:`WorkerFacts`):

* **Which workers are elsewhere.**  127.0.0.1 on two processes names the same sockets
  when both run on the same kernel (its boot id) in the same network namespace
  (``/proc/self/ns/net``); a hostname says neither (a container on this host has its own
  loopback).  Each gateway that is not a plain ``popen`` is asked once for that identity
  (``_PROBE``, a few lines run there); ``$BENCHAUDIT_HOST_ID`` in a host's environment
  replaces it (platforms without ``/proc``; tests that make a gateway on this host look remote).
* **Launched models** (``local``, ``vllm:``) with any gateway that is not a plain ``popen``:
  one usage error before any gateway is made or server started.  Starting one on each
  remote worker would mean one server per *worker*, not per host (``--tx 4*ssh=gpu1``: four
  vLLMs on one GPU), the model and its runtime on every host, a start-up per worker, and a
  run.json that cannot say which endpoint answered; a server the user starts once per host
  and names with ``--model NAME@http://HOST:PORT/v1`` has none of these problems.
* **``--model NAME@http://127.0.0.1:PORT/v1`` with workers elsewhere**: one warning line per
  model, naming them (a warning, not an error: a vLLM on each host's own loopback, or an SSH
  tunnel, is a sound set-up).
* **Path arguments xdist cannot map onto the workers** (a path that exists here and is not
  under a ``--rsyncdir``): one usage error naming it, instead of xdist's internal error.
* **A worker whose own options fail** (:func:`refuse_worker`; on another host: a named model its
  ``pyproject.toml`` lacks, a ``replay:`` directory it does not have): it collects nothing and the
  controller prints the error and exits with status 4.  Raising it there would hang xdist.
* **Per worker, in run.json ``workers``**: gateway, host, data directory and where it came
  from, cache directory; data files whose checksums differ between workers: one warning
  line and run.json ``worker_data_conflicts`` (the run then mixes two datasets).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from typing_extensions import TypedDict

from pytest_benchaudit.inference.backend import ModelSpec
from pytest_benchaudit.pytest_plugin._xdist import unmapped_path_args
from pytest_benchaudit.pytest_plugin.launched import LAUNCHED
from pytest_benchaudit.pytest_plugin.options import RunOptions
from pytest_benchaudit.runs.run_meta import WorkerInfo

__all__ = [
    "HOST_ID_ENV",
    "WORKER_KEY",
    "RemoteWorkers",
    "WorkerFacts",
    "host_identity",
    "is_local_spec",
    "loopback_urls",
    "mask_tx",
    "refuse_worker",
]

HOST_ID_ENV = "BENCHAUDIT_HOST_ID"  # a host's environment: replaces its loopback identity
WORKER_KEY = "benchaudit_worker"  # workeroutput: what the worker resolved on its host

_LOOPBACK_HOSTS = {"localhost", "::1", "ip6-localhost"}


class GatewayHost(TypedDict, total=False):
    """What the controller knows of a gateway's host: the probe's answer, whether it is another host, its spec."""

    hostname: str
    loopback: str
    cwd: str
    elsewhere: bool
    tx: str  # the gateway spec, secrets masked (gateways to other hosts)


class WorkerReport(TypedDict):
    """What a worker says of its host at its end (``workeroutput[WORKER_KEY]``; run.json ``workers``)."""

    hostname: str
    cwd: str
    data_dir: str
    data_dir_origin: str
    cache_dir: str | None


class WorkersMeta(TypedDict, total=False):
    """What run.json records of the workers (:meth:`RemoteWorkers.run_meta`)."""

    workers: list[WorkerInfo]
    worker_data_conflicts: dict[str, dict[str, str]]


# Sent to a gateway as source (execnet runs it there, ``channel`` given): its host's loopback
# identity.  Standard library only, no names from here: it runs on the other host.
_PROBE = f"""
import os, socket
try:
    netns = os.readlink("/proc/self/ns/net")
except OSError:
    netns = ""
try:
    with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
        boot = fh.read().strip()
except OSError:
    boot = ""
hostname = socket.gethostname()
loopback = os.environ.get({HOST_ID_ENV!r}) or (boot + " " + netns if boot and netns else "host " + hostname)
channel.send({{"hostname": hostname, "loopback": loopback, "cwd": os.getcwd()}})
"""


class _Box:
    """Stands in for an execnet channel when this process asks itself."""

    def __init__(self) -> None:
        self.value: GatewayHost = {}

    def send(self, value: GatewayHost) -> None:
        self.value = value


def host_identity() -> GatewayHost:
    """This process's hostname, loopback identity and working directory (what ``_PROBE`` sends)."""
    box = _Box()
    exec(_PROBE, {"channel": box})  # the very code a gateway runs, so the two always compare alike
    return box.value


def is_local_spec(spec: Any) -> bool:
    """A plain ``popen`` gateway (``-n N``, ``--tx popen``): a process on this host, no proxy."""
    return bool(getattr(spec, "popen", False)) and not getattr(spec, "via", None)


def _is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in _LOOPBACK_HOSTS or host.startswith("127.")


def loopback_urls(models: list[ModelSpec | None]) -> list[tuple[str, str]]:
    """(model label, URL) of every endpoint of ``models`` on a loopback address."""
    out = []
    for m in models:
        if m is None or m.kind != "endpoint":
            continue
        for url in dict.fromkeys([*(m.endpoints or ()), *([m.base_url] if m.base_url else [])]):
            if _is_loopback(url):
                out.append((m.label, url))
    return out


_TX_ENV = re.compile(r"(//env:[^=/]+=)(?:(?!//).)*")  # the value runs to the next "//" (a key may hold "/")


def mask_tx(spec: str) -> str:
    """A gateway spec as run files and messages show it: ``//env:NAME=VALUE`` values masked (they
    may be keys), without the ``execmodel=`` xdist adds to every spec."""
    return _TX_ENV.sub(r"\1***", re.sub(r"^execmodel=[^/]*//", "", spec))


def _launched(opts: RunOptions) -> list[str]:
    return [
        ("local" if m.kind == "local" else f"vllm:{m.model_id}")
        for m in [*opts.models, opts.judge]
        if m is not None and m.kind in LAUNCHED
    ]


class RemoteWorkers:
    """xdist controller: refuse, warn and record what workers on other hosts change."""

    def __init__(self, config: pytest.Config, opts: RunOptions) -> None:
        self.config = config
        self.opts = opts
        self.here = host_identity()
        self.hosts: dict[str, GatewayHost] = {}  # gateway id -> probe answer and spec
        self.workers: list[WorkerInfo] = []  # what each worker said at its end (run.json "workers")
        self.conflicts: dict[str, dict[str, str]] = {}  # data file -> {gateway id: checksum}
        self._seen: dict[str, tuple[str, str]] = {}  # data file -> (first gateway id, its checksum)

    # -- before any gateway ------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: Any) -> None:
        far = [s for s in specs if not is_local_spec(s)]
        launched = _launched(self.opts)
        if far and launched:
            raise pytest.UsageError(
                f"--model {', '.join(launched)}: a launched model is served on this host's 127.0.0.1 and is "
                f"not started on workers through other gateways ({', '.join(mask_tx(str(s)) for s in far)}); "
                "start the server once on a host the workers reach (e.g. `vllm serve MODEL --host 0.0.0.0 "
                "--port 8000` there) and pass --model NAME@http://HOST:8000/v1, or run local workers (-n N)"
            )
        if any(not getattr(s, "popen", False) or getattr(s, "chdir", None) for s in specs):
            self._check_args(config)  # the specs for which xdist maps path arguments onto rsync roots

    def _check_args(self, config: pytest.Config) -> None:
        """xdist rewrites each path argument that exists here relative to an rsync root, and fails
        with an internal error on one that is outside every root: say which, and how to write it."""
        unmapped = unmapped_path_args(config)
        if unmapped:
            raise pytest.UsageError(
                f"{unmapped[0]!r}: a path on this host that pytest-xdist cannot hand to workers through other "
                "gateways (it maps only paths under a --rsyncdir, given as absolute paths). Pass a suite as "
                "an absolute path under a --rsyncdir (e.g. --rsyncdir $PWD/suites $PWD/suites/seceval), "
                "and an option's value with '=' (--report-dir=out, --data-dir=DIR: then it is read on "
                "each worker, relative to its working directory)"
            )

    # -- each gateway --------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_newgateway(self, gateway: Any) -> None:
        if is_local_spec(gateway.spec):
            self.hosts[gateway.id] = {**self.here, "elsewhere": False}
            return
        answer: GatewayHost
        try:
            channel = gateway.remote_exec(_PROBE)
            answer = {**channel.receive(timeout=60)}  # the probe's {hostname, loopback, cwd}
            channel.waitclose(timeout=60)
        except Exception as err:  # noqa: BLE001 - an unknown host counts as elsewhere (the safe side)
            answer = {"hostname": f"unknown ({type(err).__name__})", "loopback": ""}
        answer["elsewhere"] = answer.get("loopback") != self.here["loopback"]
        self.hosts[gateway.id] = {**answer, "tx": mask_tx(str(gateway.spec))}

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionstart(self, session: pytest.Session) -> Any:
        result = yield  # xdist's own sessionstart makes every gateway (pytest_xdist_newgateway above)
        far = {gw: h for gw, h in self.hosts.items() if h.get("elsewhere")}
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        urls = loopback_urls([*self.opts.models, self.opts.judge]) if far else []
        if urls and reporter is not None:
            reporter.ensure_newline()  # after xdist's "bringing up nodes..."
            where = ", ".join(f"{gw} ({h.get('hostname')}, {h.get('tx')})" for gw, h in sorted(far.items()))
            for label, url in urls:
                reporter.write_line(
                    f"benchaudit: WARNING --model {label}: {url} is a loopback address; 127.0.0.1 on this host "
                    f"({self.here['hostname']}) is not 127.0.0.1 on workers {where}: each asks whatever "
                    "listens there on its own host (give an address the workers reach to ask this one)",
                    yellow=True,
                    bold=True,
                )
        return result

    # -- each worker's end ------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        out = getattr(node, "workeroutput", None) or {}
        gw = str(getattr(getattr(node, "gateway", None), "id", "?"))
        host: GatewayHost = self.hosts.get(gw, {})
        facts: WorkerReport | None = out.get(WORKER_KEY)
        worker: WorkerInfo = {"id": gw}
        if host.get("tx"):
            worker["tx"] = host["tx"]
        worker["elsewhere"] = bool(host.get("elsewhere"))
        if facts:
            worker.update(facts)
        self.workers.append(worker)
        for name, checksum in ((out.get("benchaudit") or {}).get("checksums") or {}).items():
            first = self._seen.setdefault(name, (gw, checksum))
            if first[1] != checksum:
                self.conflicts.setdefault(name, {first[0]: first[1]})[gw] = checksum

    def run_meta(self) -> WorkersMeta:
        """What run.json records of the workers (empty before any worker ended)."""
        if not self.workers:
            return {}
        meta: WorkersMeta = {"workers": sorted(self.workers, key=lambda w: str(w["id"]))}
        if self.conflicts:
            meta["worker_data_conflicts"] = self.conflicts
        return meta

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for name, by_worker in sorted(self.conflicts.items()):
            sums = ", ".join(f"{gw} {c[:12]}" for gw, c in sorted(by_worker.items()))
            terminalreporter.write_line(
                f"benchaudit: WARNING data file {name} differs between workers ({sums}): "
                "this run mixes two datasets; give every host the same files",
                red=True,
                bold=True,
            )


class WorkerFacts:
    """xdist worker: say what this worker resolved on its host (``workeroutput``)."""

    def __init__(self, config: pytest.Config, opts: RunOptions) -> None:
        self.config = config
        self.opts = opts

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is None:
            return
        ident = host_identity()
        report: WorkerReport = {
            "hostname": ident["hostname"],
            "cwd": ident["cwd"],
            "data_dir": str(self.opts.data_dir.expanduser().resolve()),
            "data_dir_origin": self.opts.data_origin,
            "cache_dir": str(self.opts.cache_dir.resolve()) if self.opts.cache_dir is not None else None,
        }
        workeroutput[WORKER_KEY] = report


def refuse_worker(config: pytest.Config, message: str) -> None:
    """An xdist worker whose options are a usage error on its host: hand the message to the
    controller (``checks.PreRunChecks`` prints it once and exits with status 4); the worker then
    collects nothing (``plugin.pytest_collect_file``)."""
    from pytest_benchaudit.pytest_plugin.prerun_checks import USAGE_ERRORS_KEY

    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput.setdefault(USAGE_ERRORS_KEY, []).append(
            f"{message} (on the xdist worker on host {host_identity()['hostname']})"
        )
