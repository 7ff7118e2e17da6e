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


def push_broken_image(registry_host):
    """Pushes to an open registry an image whose only layer is random bytes (valid digests, not a
    tar): a daemon fails on it after the pull has begun, inside the stream."""
    import hashlib
    import urllib.parse
    import urllib.request

    name = unique("broken")
    base = "http://{}/v2/{}".format(registry_host, name)

    def upload(data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        with urllib.request.urlopen(urllib.request.Request(base + "/blobs/uploads/", method="POST")) as r:
            location = urllib.parse.urljoin("http://" + registry_host, r.headers["Location"])
        sep = "&" if "?" in location else "?"
        req = urllib.request.Request(location + sep + "digest=" + digest, data=data, method="PUT",
                                     headers={"Content-Type": "application/octet-stream"})
        urllib.request.urlopen(req).close()
        return digest

    layer = secrets.token_bytes(4096)
    layer_digest = upload(layer)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [layer_digest]}}).encode()
    config_digest = upload(config)
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": len(layer)}],
    }).encode()
    req = urllib.request.Request(base + "/manifests/latest", data=manifest, method="PUT",
                                 headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    urllib.request.urlopen(req).close()
    return "{}/{}:latest".format(registry_host, name)
