"""Workers on other hosts through execnet gateways, tested on loopback.

Two ``execnet.script.socketserver`` processes, each started by the venv's python from its own
temporary working directory with its own environment (data directory, cache directory, API
key), stand for two hosts; a real ``pytest -d --tx socket=...`` run (a subprocess) spreads a
small suite over them against the scripted loopback server.  One of the two is made to look
like another host (``$BENCHAUDIT_HOST_ID``), so both paths of "is 127.0.0.1 the same here
and there" are taken in one run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_benchaudit.inference.backend import parse_model_spec
from pytest_benchaudit.pytest_plugin.remote import (
    HOST_ID_ENV,
    WORKER_KEY,
    RemoteWorkers,
    host_identity,
    is_local_spec,
    loopback_urls,
    mask_tx,
)
from pytest_benchaudit.testing.runs import only_run_dir, read_run
from pytest_benchaudit.testing.scripted_server import ScriptedServer
from pytest_benchaudit.testing.toy import TOY_QUESTIONS, toy_script, write_toy

CONTROLLER_KEY = "sk-controller-canary-5f1e2d3c4b5a69788796"
# Runs on the controller only (the suites are the only thing sent to the workers): what each worker gets.
DUMP_WORKERINPUT = '''
import json, pytest

@pytest.hookimpl(trylast=True)
def pytest_configure_node(node):
    with open("workerinput-" + node.gateway.id + ".json", "w") as fh:
        json.dump(node.workerinput, fh, default=str)
'''


class Host:
    """One execnet socket server: a 'host' with its own working directory and environment."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.cwd = root / "cwd"
        self.cwd.mkdir(parents=True)
        self.log = root / "socketserver.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", "-m", "execnet.script.socketserver", "127.0.0.1:0"],
                cwd=self.cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.port = self._port()

    def _port(self) -> int:
        deadline = time.monotonic() + 120  # a bound against a hang only (a dead server ends the wait at once)
        while time.monotonic() < deadline:
            found = re.search(r"Entering Accept loop \('127\.0\.0\.1', (\d+)\)", self.log.read_text())
            if found:
                return int(found.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        pytest.skip(
            f"execnet's socket server did not start (python -m execnet.script.socketserver): "
            f"{self.log.read_text()[-300:]!r}"
        )

    @property
    def tx(self) -> str:
        return f"socket=127.0.0.1:{self.port}"

    def connections(self) -> int:
        return self.log.read_text().count("got new connection")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Callable[..., Host]]:
    """Start socket servers (each in its own folder under tmp_path); all killed at teardown."""
    started: list[Host] = []

    def start(name: str, **env: str) -> Host:
        root = tmp_path / name
        base = {k: v for k, v in os.environ.items() if k not in ("BENCHAUDIT_DATA", HOST_ID_ENV, "OPENAI_API_KEY")}
        host = Host(root, {**base, "XDG_CACHE_HOME": str(root / "cache"), **env})
        started.append(host)
        return host

    yield start
    for host in started:
        host.stop()


def _controller(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The controller's project: the suites, no data (the workers read their own), its own key."""
    proj = tmp_path / "controller"
    write_toy(proj)
    shutil.rmtree(proj / "data")
    (proj / "conftest.py").write_text(DUMP_WORKERINPUT)
    (proj / "pytest.ini").write_text("[pytest]\n")  # rootdir (so the conftest loads) on the controller only
    env = {k: v for k, v in os.environ.items() if k not in ("BENCHAUDIT_DATA", HOST_ID_ENV)}
    env["OPENAI_API_KEY"] = CONTROLLER_KEY
    return proj, env


def _pytest(proj: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-W",
            "ignore::DeprecationWarning",
            *args,
        ],  # xdist deprecates --rsyncdir (4.0 drops it)
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a bound against a hang only: two gateways' pytest start-ups on a loaded machine
    )


def _host_with_data(hosts: Callable[..., Host], tmp_path: Path, name: str, **env: str) -> Host:
    data = write_toy(tmp_path / f"{name}-files")[1]  # this host's own copy of the toy data
    return hosts(name, BENCHAUDIT_DATA=str(data), OPENAI_API_KEY=f"sk-{name}-worker-key", **env)


def test_run_spread_over_two_socket_gateways(hosts, tmp_path: Path) -> None:
    here = _host_with_data(hosts, tmp_path, "h1")
    far = _host_with_data(hosts, tmp_path, "h2", **{HOST_ID_ENV: "another-host"})
    proj, env = _controller(tmp_path)
    with ScriptedServer(toy_script()) as server:
        result = _pytest(
            proj,
            env,
            str(proj / "suites" / "toy"),
            "--rsyncdir",
            str(proj / "suites"),
            f"--model=m@{server.url}",
            "--report-dir=out",
            "--max-retries=2",
            "-d",
            "--tx",
            here.tx,
            "--tx",
            far.tx,
        )
        keys = [c.headers.get("authorization") for c in server.calls]
        url = server.url
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output[-3000:]
    run = read_run(only_run_dir(proj / "out"))
    # Every question recorded exactly once, at the controller.
    recorded = [(r["task"], r["question_id"]) for r in run["records"]]
    assert sorted(recorded) == sorted([("mcq", q) for q, _, _ in TOY_QUESTIONS] + [("extra", "x1")])
    assert set(run["run"]["pipeline_cards"]) == {"toy.mcq", "toy.extra"}
    assert set(run["run"]["dataset_checksums"]) == {"toy/toy.jsonl", "toy/extra.jsonl"}
    # Both workers asked, each with the key of its own environment; the controller's never travelled.
    assert set(keys) == {"Bearer sk-h1-worker-key", "Bearer sk-h2-worker-key"}
    for dump in proj.glob("workerinput-*.json"):
        assert CONTROLLER_KEY not in dump.read_text()
    assert len(list(proj.glob("workerinput-*.json"))) == 2
    for path in (p for p in (proj / "out").rglob("*") if p.is_file()):
        assert CONTROLLER_KEY not in path.read_text()
    # Each worker resolved its own data directory and cache, on its host.
    workers = {w["id"]: w for w in run["run"]["workers"]}
    assert set(workers) == {"gw0", "gw1"}
    for gw, host in (("gw0", here), ("gw1", far)):
        assert workers[gw]["data_dir"] == str((tmp_path / f"{host.root.name}-files" / "data").resolve())
        assert workers[gw]["data_dir_origin"] == "$BENCHAUDIT_DATA"
        assert workers[gw]["cache_dir"] == str((host.root / "cache" / "benchaudit").resolve())
        assert any((host.root / "cache" / "benchaudit").iterdir())  # its generation cache was written there
        assert workers[gw]["cwd"].startswith(str(host.cwd))
        assert workers[gw]["tx"] == host.tx
    assert "worker_data_conflicts" not in run["run"]
    # 127.0.0.1: the same sockets for the gateway on this host, not for the one that looks remote.
    assert (workers["gw0"]["elsewhere"], workers["gw1"]["elsewhere"]) == (False, True)
    warnings = [line for line in output.splitlines() if "is a loopback address" in line]
    assert len(warnings) == 1, output[-3000:]
    assert "gw1" in warnings[0] and "gw0" not in warnings[0] and url in warnings[0]
    # --resume: the run directory is the controller's alone (out/... is not there on the workers' side);
    # nothing is asked again.
    run_dir = only_run_dir(proj / "out")
    with ScriptedServer(toy_script()) as server:
        again = _pytest(
            proj,
            env,
            str(proj / "suites" / "toy"),
            "--rsyncdir",
            str(proj / "suites"),
            f"--model=m@{server.url}",
            "--report-dir=out",
            f"--resume=out/{run_dir.name}",
            "-d",
            "--tx",
            here.tx,
            "--tx",
            far.tx,
        )
        assert not server.calls
    # Nothing left to ask; the run holds the wrong answers recorded the first time, so its status is
    # the first run's (a resumed run's exit status is the whole run's records').
    assert again.returncode == pytest.ExitCode.TESTS_FAILED, (again.stdout + again.stderr)[-3000:]
    assert len(read_run(run_dir)["records"]) == len(recorded)


def test_launched_model_refused_before_any_gateway(hosts, tmp_path: Path) -> None:
    one, two = hosts("h1"), hosts("h2")
    proj, env = _controller(tmp_path)
    result = _pytest(
        proj,
        env,
        str(proj / "suites" / "toy"),
        "--rsyncdir",
        str(proj / "suites"),
        "--model",
        "local",
        "--report-dir=out",
        "-d",
        "--tx",
        one.tx,
        "--tx",
        two.tx,
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--model local: a launched model" in errors[0], result.stderr
    assert one.tx in errors[0] and "execmodel" not in errors[0]
    assert one.connections() == two.connections() == 0  # no gateway made, no llama server started
    assert not (proj / "out").exists()


def test_path_xdist_cannot_map_is_one_usage_error(tmp_path: Path) -> None:
    proj, env = _controller(tmp_path)
    (proj / "out").mkdir()
    result = _pytest(
        proj,
        env,
        "suites/toy",
        "--model=m@http://127.0.0.1:9/v1",
        "--report-dir",
        "out",
        "-d",
        "--tx",
        "socket=127.0.0.1:9",
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout + result.stderr
    assert "ERROR: 'suites/toy': a path on this host that pytest-xdist cannot hand to workers" in result.stderr


# -- the pieces ------------------------------------------------------------------------------


def test_host_identity_and_its_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HOST_ID_ENV, raising=False)
    plain = host_identity()
    assert plain["loopback"] and plain["hostname"] and plain["cwd"] == os.getcwd()
    monkeypatch.setenv(HOST_ID_ENV, "elsewhere")
    assert host_identity()["loopback"] == "elsewhere"


def test_which_specs_are_local_and_which_urls_loopback() -> None:
    import execnet

    assert is_local_spec(execnet.XSpec("popen"))
    assert not is_local_spec(execnet.XSpec("popen//via=proxy"))
    assert not is_local_spec(execnet.XSpec("socket=127.0.0.1:8888"))
    assert not is_local_spec(execnet.XSpec("ssh=gpu1"))
    models = [
        parse_model_spec(s)
        for s in ("a@http://127.0.0.1:8000/v1", "b@http://gpu1:8000/v1", "c@http://localhost:1/v1,http://10.0.0.2:1/v1")
    ]
    assert loopback_urls([*models, None]) == [("a", "http://127.0.0.1:8000/v1"), ("c", "http://localhost:1/v1")]


def test_tx_env_values_are_masked(tmp_path: Path) -> None:
    from pytest_benchaudit.pytest_plugin.runmeta import clean_argv

    spec = "execmodel=main_thread_only//socket=gpu1:8888//env:OPENAI_API_KEY=sk-live/123//chdir=/srv/x"
    assert mask_tx(spec) == "socket=gpu1:8888//env:OPENAI_API_KEY=***//chdir=/srv/x"
    assert "live" not in " ".join(clean_argv(["--tx", spec.split("//", 1)[1]]))


class _Node:
    def __init__(self, gw: str, checksums: dict[str, str]) -> None:
        self.gateway = type("G", (), {"id": gw})()
        self.workeroutput: dict[str, Any] = {
            "benchaudit": {"checksums": checksums},
            WORKER_KEY: {"hostname": gw, "data_dir": f"/{gw}"},
        }


def test_data_that_differ_between_workers_are_recorded() -> None:
    remote = RemoteWorkers.__new__(RemoteWorkers)
    remote.hosts, remote.workers, remote.conflicts, remote._seen = {}, [], {}, {}
    remote.pytest_testnodedown(_Node("gw0", {"a.jsonl": "1" * 64, "b.jsonl": "2" * 64}), None)
    remote.pytest_testnodedown(_Node("gw1", {"a.jsonl": "1" * 64, "b.jsonl": "3" * 64}), None)
    meta = remote.run_meta()
    assert [w["id"] for w in meta["workers"]] == ["gw0", "gw1"]
    assert meta["worker_data_conflicts"] == {"b.jsonl": {"gw0": "2" * 64, "gw1": "3" * 64}}
    lines: list[str] = []
    remote.pytest_terminal_summary(type("R", (), {"write_line": lambda self, text, **kw: lines.append(text)})())
    assert len(lines) == 1 and "b.jsonl differs between workers" in lines[0]
    json.dumps(meta)


def test_a_workers_own_usage_error_is_the_controllers_exit_4(hosts, tmp_path: Path) -> None:
    """A named model in the controller's pyproject.toml that the worker's host lacks (no
    --rsyncdir for it): the worker cannot raise (xdist would hang); the controller says why."""
    host = _host_with_data(hosts, tmp_path, "h1")
    proj, env = _controller(tmp_path)
    (proj / "pyproject.toml").write_text(
        '[tool.benchaudit.models.mine]\nendpoint = "http://127.0.0.1:9/v1"\nmodel = "x"\n'
    )
    result = _pytest(
        proj,
        env,
        str(proj / "suites" / "toy"),
        "--rsyncdir",
        str(proj / "suites"),
        "--model=mine",
        "--report-dir=out",
        "-d",
        "--tx",
        host.tx,
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, (result.stdout + result.stderr)[-2000:]
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--model mine: unknown model" in errors[0] and "on the xdist worker" in errors[0]
    assert not (proj / "out").exists()


# A stand-in for the `ssh` client, put first on PATH: execnet's ssh gateway runs
# `ssh -C [-F CONFIG] DEST '<python> -c "<bootstrap>"'` and talks to the remote interpreter over
# its stdin/stdout.  This one runs the remote command as a non-interactive login on DEST would:
# in DEST's home directory, with DEST's own environment (its data, cache and key), and nothing of
# the controller's.  Only the transport (encryption, authentication) is missing.
FAKE_SSH = '''#!{python}
import json, os, sys
hosts = json.loads({hosts!r})
args = sys.argv[1:]
while args and args[0].startswith("-"):
    option = args.pop(0)
    if option in ("-F", "-o", "-p", "-i", "-l"):
        args.pop(0)
dest, command = args[0], " ".join(args[1:])
host = hosts[dest.split("@")[-1]]
with open(os.path.join(host["home"], "ssh.log"), "a") as log:
    log.write(dest + "\\n")
os.chdir(host["home"])
os.execve("/bin/sh", ["sh", "-c", command], host["env"])
'''


def test_run_spread_over_two_ssh_gateways(tmp_path: Path) -> None:
    hosts: dict[str, dict[str, Any]] = {}
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("BENCHAUDIT_DATA", HOST_ID_ENV, "OPENAI_API_KEY", "PYTEST_ADDOPTS", "PYTHONPATH")
    }
    for name, extra in (("cpu1", {}), ("cpu2", {HOST_ID_ENV: "another-host"})):
        home = tmp_path / name / "home"
        home.mkdir(parents=True)
        data = write_toy(tmp_path / f"{name}-files")[1]
        hosts[name] = {
            "home": str(home),
            "data": data,
            "env": {
                **base,
                "HOME": str(home),
                "BENCHAUDIT_DATA": str(data),
                "XDG_CACHE_HOME": str(tmp_path / name / "cache"),
                "OPENAI_API_KEY": f"sk-{name}-worker-key",
                **extra,
            },
        }
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(
        FAKE_SSH.format(
            python=sys.executable, hosts=json.dumps({n: {"home": h["home"], "env": h["env"]} for n, h in hosts.items()})
        )
    )
    ssh.chmod(0o755)
    proj, env = _controller(tmp_path)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    with ScriptedServer(toy_script()) as server:
        result = _pytest(
            proj,
            env,
            str(proj / "suites" / "toy"),
            "--rsyncdir",
            str(proj / "suites"),
            f"--model=m@{server.url}",
            "--report-dir=out",
            "--max-retries=2",
            "-d",
            "--tx",
            f"ssh=me@cpu1//python={sys.executable}",
            "--tx",
            f"ssh=me@cpu2//python={sys.executable}",
        )
        keys = {c.headers.get("authorization") for c in server.calls}
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output[-3000:]
    for name, host in hosts.items():  # each gateway went through "ssh" to its own host
        assert (Path(host["home"]) / "ssh.log").read_text().split() == [f"me@{name}"]
    run = read_run(only_run_dir(proj / "out"))
    recorded = [(r["task"], r["question_id"]) for r in run["records"]]
    assert sorted(recorded) == sorted([("mcq", q) for q, _, _ in TOY_QUESTIONS] + [("extra", "x1")])
    assert keys == {"Bearer sk-cpu1-worker-key", "Bearer sk-cpu2-worker-key"}
    for path in (p for p in (proj / "out").rglob("*") if p.is_file()):
        assert CONTROLLER_KEY not in path.read_text()
    workers = {w["id"]: w for w in run["run"]["workers"]}
    for gw, name in (("gw0", "cpu1"), ("gw1", "cpu2")):
        host = hosts[name]
        assert workers[gw]["data_dir"] == str((host["data"]).resolve())
        assert workers[gw]["cache_dir"] == str((tmp_path / name / "cache" / "benchaudit").resolve())
        assert workers[gw]["cwd"].startswith(host["home"])  # xdist's pyexecnetcache under the remote home
        assert workers[gw]["tx"] == f"ssh=me@{name}//python={sys.executable}"
    assert (workers["gw0"]["elsewhere"], workers["gw1"]["elsewhere"]) == (False, True)
    warnings = [line for line in output.splitlines() if "is a loopback address" in line]
    assert len(warnings) == 1 and "gw1" in warnings[0], output[-3000:]
