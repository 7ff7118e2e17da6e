"""Container operations against a real berthd running real containers from the seeded busybox."""
import time

import pytest

import berth_client
from conftest import unique

LABELS = {"berth-client-test": "python"}


@pytest.fixture
def cleanup(client):
    made = []
    yield made
    for ref in made:
        try:
            client.containers.get(ref).remove(force=True)
        except berth_client.APIError:
            pass


def test_run_foreground_returns_stdout(client, busybox):
    assert client.containers.run(busybox, ["echo", "hello world"], remove=True, labels=LABELS) == b"hello world\n"


def test_run_pulls_missing_image(env, client):
    ref = env["registries"]["open"]["host"] + "/busybox:1.35"
    try:
        client.images.remove(ref, force=True)
    except berth_client.APIError:
        pass
    assert client.containers.run(ref, "echo pulled", remove=True, labels=LABELS) == b"pulled\n"


def test_run_non_zero_exit_raises_container_error(client, busybox, cleanup):
    name = unique("fail")
    cleanup.append(name)
    with pytest.raises(berth_client.ContainerError) as e:
        client.containers.run(busybox, ["sh", "-c", "echo to-out; echo to-err >&2; exit 3"], name=name, labels=LABELS)
    assert e.value.exit_status == 3
    assert e.value.stderr == b"to-err\n"


def test_logs_demultiplexed(client, busybox, cleanup):
    c = client.containers.create(busybox, ["sh", "-c", "echo out1; echo err1 >&2; echo out2"], labels=LABELS)
    cleanup.append(c.id)
    c.start()
    assert c.wait()["StatusCode"] == 0
    assert c.logs(stdout=True, stderr=False) == b"out1\nout2\n"
    assert c.logs(stdout=False, stderr=True) == b"err1\n"
    assert c.logs(demux=True) == (b"out1\nout2\n", b"err1\n")


def test_tty_logs_are_raw(client, busybox, cleanup):
    c = client.containers.create(busybox, ["sh", "-c", "echo tty-out; echo tty-err >&2"], tty=True, labels=LABELS)
    cleanup.append(c.id)
    c.start()
    c.wait()
    out = c.logs().replace(b"\r\n", b"\n")
    assert b"tty-out\n" in out and b"tty-err\n" in out


def test_follow_logs_stream(client, busybox, cleanup):
    c = client.containers.run(busybox, ["sh", "-c", "echo first; sleep 2; echo second"], detach=True, labels=LABELS)
    cleanup.append(c.id)
    start = time.monotonic()
    arrivals = [(chunk, time.monotonic() - start) for chunk in c.logs(stream=True, follow=True)]
    assert b"".join(x for x, _ in arrivals) == b"first\nsecond\n"
    first_at = next(t for x, t in arrivals if b"first" in x)
    second_at = next(t for x, t in arrivals if b"second" in x)
    assert second_at - first_at >= 1.0, "the log stream was buffered"


def test_background_list_stop_kill_remove(client, busybox, cleanup):
    name = unique("bg")
    cleanup.append(name)
    c = client.containers.run(busybox, ["sleep", "300"], detach=True, name=name, labels=dict(LABELS, run=name))
    assert c.status == "running" and c.name == name
    listed = client.containers.list(filters={"label": ["run=" + name]})
    assert [x.id for x in listed] == [c.id]
    with pytest.raises(berth_client.Conflict, match="stop the container before removing"):
        c.remove()
    with pytest.raises(berth_client.Conflict, match="already in use"):
        client.containers.create(busybox, ["true"], name=name)
    c.stop(timeout=1)
    assert c.reload().status == "exited"
    assert client.containers.list(filters={"label": ["run=" + name]}) == []
    assert len(client.containers.list(all=True, filters={"label": ["run=" + name]})) == 1
    c.start()
    c.kill()
    assert c.wait()["StatusCode"] == 137
    c.remove()
    with pytest.raises(berth_client.NotFound, match="No such container: " + name):
        client.containers.get(name)


def test_create_with_missing_image(client):
    with pytest.raises(berth_client.ImageNotFound, match="No such image"):
        client.containers.create("berth-client-test/" + unique("absent"), ["true"])
