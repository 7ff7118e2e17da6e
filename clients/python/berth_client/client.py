"""The client: connection settings, version negotiation, and the operations."""
from . import auth
from .api import APICaller, DEFAULT_TIMEOUT
from .containers import ContainerCollection
from .environment import DEFAULT_HOST, config_dir as default_config_dir, settings_from_env
from .images import ImageCollection


class BerthClient:
    """A client for Berth or another Docker Engine API daemon.

    base_url: unix:///path or tcp://host:port (Berth's socket by default); version: "auto"
    negotiates through /_ping on first use, anything else pins it; tls: an ssl.SSLContext."""

    def __init__(self, base_url=DEFAULT_HOST, version="auto", timeout=DEFAULT_TIMEOUT, tls=None, config_dir=None):
        self.api = APICaller(base_url, version=version, tls=tls, timeout=timeout)
        self.config_dir = config_dir or default_config_dir()
        self.containers = ContainerCollection(self)
        self.images = ImageCollection(self)

    @classmethod
    def from_env(cls, environment=None, **overrides):
        """Configured from DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, DOCKER_API_VERSION
        and DOCKER_CONFIG."""
        settings = settings_from_env(environment)
        settings.update(overrides)
        return cls(**settings)

    @property
    def api_version(self):
        return self.api.api_version

    def ping(self):
        """True when the daemon answers; the details are in ping_info()."""
        return self.api.ping() is not None

    def ping_info(self):
        return self.api.ping()

    def version(self):
        return self.api.json("GET", "/version")

    def login(self, username=None, password=None, email=None, registry=None, identitytoken=None, store=False):
        """Checks credentials against a registry through the daemon (POST /auth). Nothing is
        stored unless store=True (then config.json, or the credential helper it names)."""
        body = {k: v for k, v in {"username": username, "password": password, "email": email,
                                  "serveraddress": registry, "identitytoken": identitytoken}.items() if v}
        reply = self.api.json("POST", "/auth", body=body)
        if store:
            kept = dict(body)
            if reply.get("IdentityToken"):
                kept = {"username": username or "", "identitytoken": reply["IdentityToken"]}
            auth.store(self.config_dir, auth.host_of_key(registry), kept)
        return reply

    def close(self):
        """Nothing stays open between calls; kept for symmetry with other clients."""


def from_env(**kwargs):
    return BerthClient.from_env(**kwargs)
