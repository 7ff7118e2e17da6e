"""What the client tests run against: a berthd and seeded registries started by the project's
test harness, described by the JSON file BERTH_CLIENT_TEST_ENV names."""
import json
import os
import secrets
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import berth_client  # noqa: E402


@pytest.fixture(scope="session")
def env():
    path = os.environ.get("BERTH_CLIENT_TEST_ENV")
    if not path:
        pytest.fail("BERTH_CLIENT_TEST_ENV is not set: run the tests through scripts/test-clients.sh")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture
def client(env, tmp_path):
    c = berth_client.BerthClient(base_url=env["dockerHost"], config_dir=str(tmp_path / "docker-config"))
    yield c
    c.close()


def unique(prefix):
    return "{}-{}".format(prefix, secrets.token_hex(5))


@pytest.fixture
def busybox(env, client):
    ref = env["registries"]["open"]["host"] + "/busybox:latest"
    client.images.pull(ref)
    return ref
