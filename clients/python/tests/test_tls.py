"""DOCKER_HOST=tcp://, DOCKER_CERT_PATH and DOCKER_TLS_VERIFY against the real berthd behind a
mutual-TLS endpoint on 127.0.0.1 (berthd offers TCP only with TLS it does not implement yet)."""
import os
import shutil
import socket
import ssl
import subprocess
import threading

import pytest

import berth_client

MAKE_CERTS = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "make-certs.sh")


def make_certs(path):
    subprocess.run(["bash", MAKE_CERTS, str(path)], check=True)
    return path


def _pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def endpoint(env, tmp_path):
    certs = make_certs(tmp_path / "certs")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs / "server-cert.pem", certs / "server-key.pem")
    ctx.load_verify_locations(certs / "ca.pem")
    ctx.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    socket_path = env["dockerHost"][len("unix://"):]

    def serve():
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            def handle(raw=raw):
                try:
                    conn = ctx.wrap_socket(raw, server_side=True)
                except (ssl.SSLError, OSError):
                    raw.close()
                    return
                up = socket.socket(socket.AF_UNIX)
                up.connect(socket_path)
                threading.Thread(target=_pipe, args=(conn, up), daemon=True).start()
                _pipe(up, conn)
                conn.close()
                up.close()
            threading.Thread(target=handle, daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield "tcp://127.0.0.1:{}".format(listener.getsockname()[1]), certs
    stop.set()
    t.join()
    listener.close()


def test_mutual_tls_with_verification(endpoint):
    host, certs = endpoint
    c = berth_client.from_env(environment={"DOCKER_HOST": host, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(certs)})
    assert c.version()["Os"] == "linux"


def test_verification_against_another_ca_fails(endpoint, tmp_path):
    host, certs = endpoint
    other = make_certs(tmp_path / "other")
    for f in ("cert.pem", "key.pem"):
        shutil.copy(certs / f, other / f)
    c = berth_client.from_env(environment={"DOCKER_HOST": host, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(other)})
    with pytest.raises(ssl.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        c.version()
    unverified = berth_client.from_env(environment={"DOCKER_HOST": host, "DOCKER_CERT_PATH": str(other)})
    assert unverified.version()["Os"] == "linux"


def test_client_without_certificate_is_refused(endpoint, tmp_path):
    host, certs = endpoint
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(certs / "ca.pem", bare / "ca.pem")
    c = berth_client.from_env(environment={"DOCKER_HOST": host, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(bare)})
    with pytest.raises((ssl.SSLError, OSError)):
        c.version()
