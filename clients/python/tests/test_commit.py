"""Commit against a real berthd: a container's filesystem becomes an image that runs."""
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


def test_commit_and_run_committed(client, busybox, cleanup):
    name = unique("commit")
    cleanup.append(name)
    repo = "berth-client-test/" + unique("committed")
    client.containers.run(busybox, ["sh", "-c", "echo committed-content > /marker"], name=name, labels=LABELS)
    try:
        image = client.containers.get(name).commit(repository=repo, tag="v1", message="from the Python client",
                                                   changes=['CMD ["cat", "/marker"]'])
        assert image.id.startswith("sha256:") and repo + ":v1" in image.tags
        assert image.attrs["Config"]["Cmd"] == ["cat", "/marker"]
        assert image.attrs["Comment"] == "from the Python client"
        assert client.containers.run(repo + ":v1", remove=True, pull=False, labels=LABELS) == b"committed-content\n"
    finally:
        try:
            client.images.remove(repo + ":v1", force=True)
        except berth_client.APIError:
            pass
