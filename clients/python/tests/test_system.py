"""Ping, version, negotiation and login against a real berthd."""
import base64
import json

import pytest

import berth_client
from berth_client.api import CLIENT_API_VERSION, negotiated_version


def test_from_env_ping_version(env, tmp_path):
    c = berth_client.from_env(environment={"DOCKER_HOST": env["dockerHost"], "DOCKER_CONFIG": str(tmp_path)})
    info = c.ping_info()
    assert info["OSType"] == "linux"
    assert info["ApiVersion"].startswith("1.")
    assert c.ping() is True
    v = c.version()
    assert v["ApiVersion"] == info["ApiVersion"] and v["Os"] == "linux"
    assert c.api_version == negotiated_version(info["ApiVersion"], CLIENT_API_VERSION)


def test_pinned_version_too_new(env):
    c = berth_client.from_env(environment={"DOCKER_HOST": env["dockerHost"], "DOCKER_API_VERSION": "1.99"})
    assert c.api_version == "1.99"
    with pytest.raises(berth_client.BadRequest, match="client version 1.99 is too new") as e:
        c.version()
    assert e.value.status_code == 400


def test_login_checks_and_stores_only_when_asked(env, client, tmp_path):
    for kind in ("basic", "token"):
        reg = env["registries"][kind]
        reply = client.login(username=reg["username"], password=reg["password"], registry=reg["host"])
        assert reply["Status"] == "Login Succeeded"
        with pytest.raises(berth_client.Unauthorized) as e:
            client.login(username=reg["username"], password="wrong-password", registry=reg["host"])
        assert str(e.value)
    assert not (tmp_path / "docker-config" / "config.json").exists()

    reg = env["registries"]["basic"]
    client.login(username=reg["username"], password=reg["password"], registry=reg["host"], store=True)
    data = json.loads((tmp_path / "docker-config" / "config.json").read_text())
    assert base64.b64decode(data["auths"][reg["host"]]["auth"]).decode() == reg["username"] + ":" + reg["password"]
