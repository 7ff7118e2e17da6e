"""berthd driven by docker-py (the `docker` package from PyPI): commit a container and run the
committed image."""
import docker

from conftest import unique

LABELS = {"berth-client-test": "compat-python"}


def test_commit_and_run_committed(client, busybox):
    repo = "berth-client-test/" + unique("compat-commit")
    c = client.containers.run(busybox, ["sh", "-c", "echo committed > /marker"], detach=True, labels=LABELS)
    try:
        assert c.wait()["StatusCode"] == 0
        image = c.commit(repository=repo, tag="v1", changes=['CMD ["cat", "/marker"]'])
        assert repo + ":v1" in image.tags
        assert client.containers.run(repo + ":v1", remove=True, labels=LABELS) == b"committed\n"
    finally:
        c.remove(force=True)
        try:
            client.images.remove(repo + ":v1", force=True)
        except docker.errors.APIError:
            pass
