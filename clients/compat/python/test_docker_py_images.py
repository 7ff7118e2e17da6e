"""berthd driven by docker-py (the `docker` package from PyPI): version negotiation, login, image
list and pull with and without credentials."""
import base64
import json

import docker
import pytest


def remove_image(client, ref):
    try:
        client.images.remove(ref, force=True)
    except docker.errors.APIError:
        pass


def test_version_auto_uses_the_daemon_version(env, client):
    v = client.version()
    assert client.api.api_version == v["ApiVersion"]
    assert client.ping() is True


def test_asking_a_newer_version_than_berthd_offers(env, docker_config):
    daemon = docker.DockerClient(base_url=env["dockerHost"], version="auto").version()["ApiVersion"]
    major, minor = (int(x) for x in daemon.split("."))
    newer = "{}.{}".format(major, minor + 1)
    c = docker.DockerClient(base_url=env["dockerHost"], version=newer)
    with pytest.raises(docker.errors.APIError) as e:
        c.version()
    assert e.value.status_code == 400
    assert "client version {} is too new".format(newer) in str(e.value)


def test_image_list_and_pull_without_credentials(env, client):
    ref = env["registries"]["open"]["host"] + "/busybox:latest"
    remove_image(client, ref)
    image = client.images.pull(ref)
    assert ref in image.tags
    assert any(ref in i.tags for i in client.images.list())


@pytest.mark.parametrize("kind", ["basic", "token"])
def test_pull_with_credentials(env, client, kind):
    reg = env["registries"][kind]
    ref = reg["host"] + "/busybox:latest"
    remove_image(client, ref)
    with pytest.raises(docker.errors.APIError):
        client.images.pull(ref)
    image = client.images.pull(ref, auth_config={"username": reg["username"], "password": reg["password"]})
    assert ref in image.tags
    remove_image(client, ref)


def test_pull_with_credentials_from_docker_config(env, client, docker_config):
    reg = env["registries"]["basic"]
    pair = "{}:{}".format(reg["username"], reg["password"]).encode()
    (docker_config / "config.json").write_text(json.dumps({"auths": {reg["host"]: {"auth": base64.b64encode(pair).decode()}}}))
    ref = reg["host"] + "/busybox:1.35"
    remove_image(client, ref)
    c = docker.from_env()  # reads the config written above
    assert ref in c.images.pull(ref).tags
    remove_image(client, ref)


def test_login(env, client):
    reg = env["registries"]["token"]
    assert client.login(username=reg["username"], password=reg["password"], registry=reg["host"])["Status"] == "Login Succeeded"
    with pytest.raises(docker.errors.APIError) as e:
        client.login(username=reg["username"], password="wrong-password", registry=reg["host"], reauth=True)
    assert e.value.status_code == 401
