"""Connection settings from the environment, as the docker CLI reads them."""
import os
import ssl

DEFAULT_HOST = "unix:///run/berth/berth.sock"


def config_dir(environ=None):
    environ = os.environ if environ is None else environ
    return environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")


def parse_host(host):
    """Returns ("unix", path) or ("tcp", (hostname, port)) for a DOCKER_HOST value."""
    if host.startswith("/"):
        return "unix", host
    scheme, sep, rest = host.partition("://")
    if not sep:
        raise ValueError('unable to parse docker host "{}"'.format(host))
    if scheme == "unix":
        if not rest.startswith("/"):
            raise ValueError('unix host "{}" needs an absolute socket path'.format(host))
        return "unix", rest
    if scheme in ("tcp", "http", "https"):
        hostport, _, path = rest.partition("/")
        if path:
            raise ValueError('docker host "{}" must not carry a path'.format(host))
        if hostport.startswith("["):
            name, _, port = hostport[1:].partition("]")
            port = port.lstrip(":")
        else:
            name, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
        if not name:
            raise ValueError('docker host "{}" has no host name'.format(host))
        return "tcp", (name, int(port) if port else None)
    raise ValueError('unsupported protocol "{}" in docker host "{}"'.format(scheme, host))


def tls_context(cert_path, verify):
    """An SSL context for mutual TLS from ca.pem, cert.pem and key.pem in cert_path."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca = os.path.join(cert_path, "ca.pem")
    cert = os.path.join(cert_path, "cert.pem")
    key = os.path.join(cert_path, "key.pem")
    if verify:
        ctx.check_hostname = True
        ctx.verify_mode = ssl.CERT_REQUIRED
        if os.path.exists(ca):
            ctx.load_verify_locations(ca)
        else:
            ctx.load_default_certs()
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if os.path.exists(cert) != os.path.exists(key):
        raise ValueError("{} must hold both cert.pem and key.pem for mutual TLS, or neither".format(cert_path))
    if os.path.exists(cert):
        ctx.load_cert_chain(cert, key)
    return ctx


def settings_from_env(environ=None):
    """A dict of BerthClient keyword arguments from DOCKER_HOST, DOCKER_TLS_VERIFY,
    DOCKER_CERT_PATH, DOCKER_API_VERSION and DOCKER_CONFIG."""
    environ = os.environ if environ is None else environ
    settings = {"base_url": environ.get("DOCKER_HOST") or DEFAULT_HOST, "config_dir": config_dir(environ)}
    verify = bool(environ.get("DOCKER_TLS_VERIFY"))
    cert_path = environ.get("DOCKER_CERT_PATH")
    if cert_path or verify:
        settings["tls"] = tls_context(cert_path or config_dir(environ), verify)
    if environ.get("DOCKER_API_VERSION"):
        settings["version"] = environ["DOCKER_API_VERSION"].lstrip("v")
    return settings
