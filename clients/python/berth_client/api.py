"""Versioned calls to the Engine API: the version (pinned, negotiated once through /_ping, or
the client default), query and JSON encoding, and typed errors with the daemon's message."""
import json
import threading
import urllib.parse

from .errors import error_for_status
from .transport import Transport, close_response, iter_body

#: The newest Engine API version this client was written against.
CLIENT_API_VERSION = "1.55"
#: Assumed for a daemon whose ping carries no Api-Version header (it predates negotiation).
FALLBACK_API_VERSION = "1.24"
DEFAULT_TIMEOUT = 60


def _version_tuple(v):
    return tuple(int(p) for p in v.split("."))


def negotiated_version(server_version, client_version=CLIENT_API_VERSION):
    if not server_version:
        return FALLBACK_API_VERSION
    return server_version if _version_tuple(server_version) < _version_tuple(client_version) else client_version


def encode_query(params):
    """Query string; None values are left out, booleans become 1/0, lists repeat the key."""
    pairs = []
    for key, value in (params or {}).items():
        if value is None:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, bool):
                v = "1" if v else "0"
            pairs.append((key, str(v)))
    return "?" + urllib.parse.urlencode(pairs) if pairs else ""


def quote_name(name):
    """An ID or image name as a path part: "/", ":" and "@" stay readable."""
    if not name:
        raise ValueError("empty name or ID")
    return urllib.parse.quote(name, safe="/:@")


class APICaller:
    def __init__(self, base_url, version="auto", tls=None, timeout=DEFAULT_TIMEOUT):
        self.transport = Transport(base_url, tls)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._version = None if version in (None, "auto") else str(version).lstrip("v")

    @property
    def api_version(self):
        """The version calls use; negotiated through /_ping on first use when set to auto."""
        with self._lock:
            if self._version is None:
                self._version = negotiated_version(self.ping()["ApiVersion"])
            return self._version

    def ping(self):
        """HEAD /_ping, then GET when HEAD is refused. Returns the daemon's headers of interest."""
        try:
            resp = self.call("HEAD", "/_ping", versioned=False)
        except Exception:
            resp = self.call("GET", "/_ping", versioned=False)
        try:
            resp.read()
        finally:
            close_response(resp)
        h = resp.headers
        return {
            "ApiVersion": h.get("Api-Version"),
            "OSType": h.get("Ostype"),
            "Experimental": h.get("Docker-Experimental") == "true",
            "BuilderVersion": h.get("Builder-Version"),
            "Swarm": h.get("Swarm"),
        }

    def call(self, method, path, params=None, body=None, headers=None, timeout="default", versioned=True):
        """Sends a call; returns the open response (headers read). Statuses >= 400 raise."""
        prefix = "/v" + self.api_version if versioned else ""
        hdrs = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        hdrs["Content-Length"] = str(len(data)) if data is not None else "0"
        resp = self.transport.request(
            method,
            prefix + path + encode_query(params),
            body=data,
            headers=hdrs,
            timeout=self.timeout if timeout == "default" else timeout,
        )
        if resp.status >= 400:
            try:
                raise error_for_status(resp.status, _error_message(resp))
            finally:
                close_response(resp)
        return resp

    def json(self, method, path, **kwargs):
        resp = self.call(method, path, **kwargs)
        try:
            text = resp.read().decode("utf-8")
        finally:
            close_response(resp)
        return json.loads(text) if text.strip() else None

    def empty(self, method, path, **kwargs):
        resp = self.call(method, path, **kwargs)
        try:
            resp.read()
        finally:
            close_response(resp)
        return resp.status

    def stream(self, method, path, **kwargs):
        """The body as a generator of byte chunks, read as they arrive (no timeout)."""
        kwargs.setdefault("timeout", None)
        return iter_body(self.call(method, path, **kwargs))


def _error_message(resp):
    raw = resp.read(1024 * 1024)
    text = raw.decode("utf-8", "replace").strip()
    if not text:
        return "{} {}".format(resp.status, resp.reason)
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
            return parsed["message"]
    except ValueError:
        pass
    return text
