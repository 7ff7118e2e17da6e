"""HTTP to the daemon over a unix socket, TCP, or TCP with (mutual) TLS.

Each request gets its own connection, so a long stream (logs, a wait, a pull) never blocks
other calls; the response is returned as soon as its headers are in.
"""
import http.client
import socket

from .environment import parse_host

DEFAULT_TCP_PORT = 2375
DEFAULT_TLS_PORT = 2376


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, socket_path, timeout=None):
        # The name is a placeholder: a unix socket has no host.
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class Transport:
    def __init__(self, base_url, tls=None):
        self.base_url = base_url
        self.kind, self.address = parse_host(base_url)
        self.tls = tls
        if self.kind == "tcp" and self.address[1] is None:
            self.address = (self.address[0], DEFAULT_TLS_PORT if tls else DEFAULT_TCP_PORT)

    def _connection(self, timeout):
        if self.kind == "unix":
            return UnixHTTPConnection(self.address, timeout=timeout)
        host, port = self.address
        if self.tls is not None:
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=self.tls)
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=None):
        """Sends a request; returns the open response once its headers have arrived. The
        connection closes when the response is closed or read to its end."""
        conn = self._connection(timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        # The response owns the connection from here on.
        resp.berth_connection = conn
        return resp


def close_response(resp):
    resp.close()
    conn = getattr(resp, "berth_connection", None)
    if conn is not None:
        conn.close()


def iter_body(resp, chunk_size=65536):
    """Yields the body as it arrives (chunked or not) and closes the response at the end or
    when the consumer stops early."""
    try:
        while True:
            data = resp.read1(chunk_size)
            if not data:
                return
            yield data
    finally:
        close_response(resp)
