"""Shared fixtures for the docker-py compatibility tests (docker from PyPI, current release)."""
import json
import os
import secrets

import docker
import pytest


@pytest.fixture(scope="session")
def env():
    path = os.environ.get("BERTH_CLIENT_TEST_ENV")
    if not path:
        pytest.fail("BERTH_CLIENT_TEST_ENV is not set: run the tests through scripts/test-clients.sh")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture
def docker_config(tmp_path, monkeypatch):
    """An empty DOCKER_CONFIG so no credentials of the machine leak into a test."""
    d = tmp_path / "docker-config"
    d.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(d))
    return d


@pytest.fixture
def client(env, docker_config, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", env["dockerHost"])
    for k in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT"):
        monkeypatch.delenv(k, raising=False)
    c = docker.from_env()
    yield c
    c.close()


@pytest.fixture
def busybox(env, client):
    ref = env["registries"]["open"]["host"] + "/busybox:latest"
    client.images.pull(ref)
    return ref


def unique(prefix):
    return "{}-{}".format(prefix, secrets.token_hex(5))
