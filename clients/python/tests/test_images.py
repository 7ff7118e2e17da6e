"""Image operations against a real berthd pulling from real registries (open, Basic, token)."""
import base64
import json
import os
import re
import stat

import pytest

import berth_client
from conftest import push_broken_image, unique


def remove_quietly(client, ref):
    try:
        client.images.remove(ref, force=True)
    except berth_client.APIError:
        pass


def test_pull_progress_list_get(env, client):
    ref = env["registries"]["open"]["host"] + "/busybox:latest"
    remove_quietly(client, ref)
    records = list(client.images.pull_progress(ref))
    assert len(records) >= 2
    assert any(re.match(r"^Digest: sha256:[0-9a-f]{64}$", r.get("status", "")) for r in records), records
    listed = client.images.list(name=ref)
    assert len(listed) == 1 and ref in listed[0].tags
    image = client.images.get(ref)
    assert image.id == listed[0].id and image.attrs["Os"] == "linux"


def test_pull_progress_is_a_stream(env, client):
    ref = env["registries"]["open"]["host"] + "/layered:latest"
    remove_quietly(client, ref)
    gen = client.images.pull_progress(ref)
    first = next(gen)
    assert first.get("status")
    gen.close()  # stops reading and closes the connection
    assert client.ping()
    remove_quietly(client, ref)


@pytest.mark.parametrize("kind", ["basic", "token"])
def test_pull_with_explicit_credentials(env, client, kind):
    reg = env["registries"][kind]
    ref = reg["host"] + "/busybox:latest"
    remove_quietly(client, ref)
    with pytest.raises(berth_client.APIError):
        client.images.pull(ref, auth_config=False)
    image = client.images.pull(ref, auth_config={"username": reg["username"], "password": reg["password"]})
    assert ref in image.tags
    client.images.remove(ref)


def test_pull_with_stored_credentials(env, client, tmp_path, monkeypatch):
    basic, token = env["registries"]["basic"], env["registries"]["token"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helper = bin_dir / "docker-credential-berthtest"
    helper.write_text(
        "#!/bin/sh\nread url\n"
        'if [ "$1" = get ] && [ "$url" = "{h}" ]; then '
        "printf '{{\"ServerURL\":\"%s\",\"Username\":\"{u}\",\"Secret\":\"{p}\"}}' \"$url\"; exit 0; fi\n"
        "echo 'credentials not found in native keychain'; exit 1\n".format(h=token["host"], u=token["username"], p=token["password"])
    )
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ["PATH"])
    cfg = tmp_path / "docker-config"
    cfg.mkdir()
    pair = "{}:{}".format(basic["username"], basic["password"]).encode()
    (cfg / "config.json").write_text(json.dumps({
        "auths": {basic["host"]: {"auth": base64.b64encode(pair).decode()}},
        "credHelpers": {token["host"]: "berthtest"},
    }))
    for reg in (basic, token):
        ref = reg["host"] + "/busybox:1.35"
        remove_quietly(client, ref)
        assert ref in client.images.pull(ref).tags
        client.images.remove(ref)


def test_tag_remove_not_found(env, client, busybox):
    target = "berth-client-test/{}:v1".format(unique("tag"))
    try:
        image = client.images.get(busybox)
        assert image.tag(target) is True
        assert client.images.get(target).id == image.id
        assert client.images.remove(target) == [{"Untagged": target}]
        with pytest.raises(berth_client.ImageNotFound, match="No such image"):
            client.images.get(target)
        with pytest.raises((berth_client.NotFound, berth_client.StreamError)):
            client.images.pull(env["registries"]["open"]["host"] + "/" + unique("absent"))
    finally:
        remove_quietly(client, target)


def test_error_inside_the_pull_stream_raises(env, client):
    ref = push_broken_image(env["registries"]["open"]["host"])
    seen = []
    with pytest.raises(berth_client.StreamError) as e:
        for record in client.images.pull_progress(ref):
            seen.append(record)
    assert str(e.value) and e.value.status_code == 200
    assert seen, "progress records came before the error"
    with pytest.raises(berth_client.StreamError):
        client.images.pull(ref)
