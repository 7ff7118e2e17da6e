"""berthd driven by docker-py (the `docker` package from PyPI): run in the foreground and in the
background, list, stop, logs with stdout and stderr apart."""
import time

import docker
import pytest

from conftest import unique

LABELS = {"berth-client-test": "compat-python"}


def test_run_foreground(client, busybox):
    assert client.containers.run(busybox, ["echo", "hello world"], remove=True, labels=LABELS) == b"hello world\n"


def test_run_foreground_failure_carries_stderr(client, busybox):
    name = unique("compat-fail")
    try:
        with pytest.raises(docker.errors.ContainerError) as e:
            client.containers.run(busybox, ["sh", "-c", "echo bad >&2; exit 4"], name=name, labels=LABELS)
        assert e.value.exit_status == 4
        assert b"bad" in e.value.stderr
    finally:
        try:
            client.containers.get(name).remove(force=True)
        except docker.errors.NotFound:
            pass


def test_run_background_list_stop_logs(client, busybox):
    c = client.containers.run(busybox, ["sh", "-c", "echo out; echo err >&2; sleep 300"], detach=True, labels=LABELS)
    try:
        deadline = time.monotonic() + 10
        while b"out" not in c.logs(stdout=True, stderr=False) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.id in [x.id for x in client.containers.list(filters={"label": "berth-client-test=compat-python"})]
        assert c.logs(stdout=True, stderr=False) == b"out\n"
        assert c.logs(stdout=False, stderr=True) == b"err\n"
        c.stop(timeout=1)
        c.reload()
        assert c.status == "exited"
        assert c.id not in [x.id for x in client.containers.list()]
    finally:
        c.remove(force=True)
