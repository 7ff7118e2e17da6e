"""Parts that need no daemon: host parsing, environment, stream readers, credentials."""
import base64
import json
import os
import stat
import struct

import pytest

from berth_client import MultiplexError, auth, demultiplex, json_records
from berth_client.api import negotiated_version
from berth_client.environment import DEFAULT_HOST, parse_host, settings_from_env


def test_parse_host():
    assert parse_host("unix:///run/berth/berth.sock") == ("unix", "/run/berth/berth.sock")
    assert parse_host("/tmp/x.sock") == ("unix", "/tmp/x.sock")
    assert parse_host("tcp://127.0.0.1:2375") == ("tcp", ("127.0.0.1", 2375))
    assert parse_host("tcp://[::1]:4000") == ("tcp", ("::1", 4000))
    assert parse_host("tcp://example.test") == ("tcp", ("example.test", None))
    for bad in ("ssh://host", "unix://relative", "nonsense"):
        with pytest.raises(ValueError):
            parse_host(bad)


def test_settings_from_env(tmp_path):
    plain = settings_from_env({"HOME": str(tmp_path)})
    assert plain["base_url"] == DEFAULT_HOST
    assert "tls" not in plain and "version" not in plain
    pinned = settings_from_env({"DOCKER_HOST": "tcp://h:1", "DOCKER_API_VERSION": "1.41"})
    assert pinned["base_url"] == "tcp://h:1" and pinned["version"] == "1.41"
    (tmp_path / "cert.pem").write_text("x")
    with pytest.raises(ValueError):
        settings_from_env({"DOCKER_CERT_PATH": str(tmp_path)})


def test_negotiated_version():
    assert negotiated_version("1.44", "1.55") == "1.44"
    assert negotiated_version("1.56", "1.55") == "1.55"
    assert negotiated_version("1.9", "1.10") == "1.9"
    assert negotiated_version(None) == "1.24"


def frame(kind, payload):
    return struct.pack(">BxxxI", kind, len(payload)) + payload


def test_demultiplex_every_split():
    data = frame(1, b"out one\n") + frame(2, b"err\n") + frame(0, b"stdin-as-out") + frame(1, b"")
    for step in range(1, len(data) + 1):
        chunks = [data[i : i + step] for i in range(0, len(data), step)]
        got = list(demultiplex(chunks))
        assert b"".join(d for s, d in got if s == 1) == b"out one\nstdin-as-out", step
        assert b"".join(d for s, d in got if s == 2) == b"err\n", step


def test_demultiplex_errors():
    with pytest.raises(MultiplexError, match="^error from daemon in stream: log file gone$"):
        list(demultiplex([frame(1, b"a") + frame(3, b"log file gone")]))
    with pytest.raises(MultiplexError, match="unrecognized stream: 7"):
        list(demultiplex([frame(7, b"x")]))


def test_demultiplex_is_incremental():
    big = frame(1, b"x" * 100000)
    gen = demultiplex(iter([big[:1000], big[1000:]]))
    stream, first = next(gen)
    assert stream == 1 and len(first) == 992


def test_json_records():
    chunks = [b'{"status":"a"}\r\n{"sta', b'tus":"b"}\n\n', b'{"status":"c"}']
    assert list(json_records(chunks)) == [{"status": "a"}, {"status": "b"}, {"status": "c"}]


def test_references_and_header():
    assert auth.split_reference("busybox") == ("busybox", None)
    assert auth.split_reference("127.0.0.1:5000/a/b:1.0") == ("127.0.0.1:5000/a/b", "1.0")
    assert auth.split_reference("x@sha256:ab") == ("x", "sha256:ab")
    assert auth.registry_host("busybox") == "docker.io"
    assert auth.registry_host("127.0.0.1:5000/x") == "127.0.0.1:5000"
    assert auth.host_of_key("https://index.docker.io/v1/") == "docker.io"
    enc = auth.encode_header({"username": "u", "password": ">>>???", "email": ""})
    assert "+" not in enc and "/" not in enc
    assert json.loads(base64.urlsafe_b64decode(enc)) == {"username": "u", "password": ">>>???"}


def install_helper(tmp_path, monkeypatch, name, table):
    """A real docker-credential-<name> program answering `get` from a fixed table and
    appending `store` input to a file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    lines = ["#!/bin/sh", 'if [ "$1" = store ]; then cat >> "$0.stored"; exit 0; fi', "read url", 'case "$url" in']
    for url, (user, secret) in table.items():
        lines.append(
            "{}) printf '{{\"ServerURL\":\"%s\",\"Username\":\"{}\",\"Secret\":\"{}\"}}' \"$url\";;".format(url, user, secret)
        )
    lines += ["*) echo 'credentials not found in native keychain'; exit 1;;", "esac", ""]
    script = bin_dir / ("docker-credential-" + name)
    script.write_text("\n".join(lines))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ["PATH"])
    return script


def test_resolve_credentials(tmp_path, monkeypatch):
    install_helper(tmp_path, monkeypatch, "berthtest", {
        "helped.example:5000": ("helper-user", "helper-pass"),
        "https://index.docker.io/v1/": ("<token>", "refresh-token"),
    })
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "config.json").write_text(json.dumps({
        "auths": {
            "plain.example:5000": {"auth": b64("alice:s3cret:with:colons")},
            "https://schemed.example/v1/": {"auth": b64("bob:pw")},
        },
        "credHelpers": {"helped.example:5000": "berthtest", "docker.io": "berthtest"},
    }))
    assert auth.resolve(str(cfg), "plain.example:5000") == {
        "serveraddress": "plain.example:5000", "username": "alice", "password": "s3cret:with:colons"}
    assert auth.resolve(str(cfg), "schemed.example")["username"] == "bob"
    assert auth.resolve(str(cfg), "helped.example:5000") == {
        "username": "helper-user", "password": "helper-pass", "serveraddress": "helped.example:5000"}
    assert auth.resolve(str(cfg), "docker.io") == {"identitytoken": "refresh-token", "serveraddress": "https://index.docker.io/v1/"}
    assert auth.resolve(str(cfg), "unknown.example") is None


def test_store_credentials(tmp_path, monkeypatch):
    cfg = tmp_path / "fresh"
    auth.store(str(cfg), "docker.io", {"username": "dave", "password": "pw"})
    data = json.loads((cfg / "config.json").read_text())
    assert data["auths"] == {"https://index.docker.io/v1/": {"auth": base64.b64encode(b"dave:pw").decode()}}
    assert auth.resolve(str(cfg), "docker.io")["password"] == "pw"

    script = install_helper(tmp_path, monkeypatch, "berthstore", {})
    helped = tmp_path / "helped"
    helped.mkdir()
    (helped / "config.json").write_text(json.dumps({"credsStore": "berthstore", "detachKeys": "ctrl-x"}))
    auth.store(str(helped), "r.example", {"username": "e", "password": "f"})
    data = json.loads((helped / "config.json").read_text())
    assert data["auths"] == {"r.example": {}} and data["detachKeys"] == "ctrl-x"
    assert json.loads(open(str(script) + ".stored").read()) == {"ServerURL": "r.example", "Username": "e", "Secret": "f"}
