"""Registry credentials: the docker CLI's config.json ($DOCKER_CONFIG or ~/.docker), its
credential helpers (docker-credential-<name>), and the X-Registry-Auth encoding.

Lookup order for a registry: the helper named in credHelpers, else credsStore, else the
`auths` entry written by a login."""
import base64
import json
import os
import subprocess
import tempfile

from .errors import CredentialHelperError

DOCKER_HUB = "docker.io"
DOCKER_HUB_AUTH_KEY = "https://index.docker.io/v1/"
_TOKEN_USERNAME = "<token>"


def split_reference(ref):
    """("repo", "tag-or-digest" or None) of an image reference."""
    if "@" in ref:
        repo, _, digest = ref.partition("@")
        return repo, digest
    colon = ref.rfind(":")
    if colon > ref.rfind("/"):
        return ref[:colon], ref[colon + 1 :]
    return ref, None


def _normalize(host):
    return DOCKER_HUB if host in ("index.docker.io", "registry-1.docker.io") else host


def registry_host(repository):
    """The registry host of a repository: its first component when that names a host."""
    first, slash, _ = repository.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return _normalize(first)
    return DOCKER_HUB


def host_of_key(key):
    """Reduces a config.json key or login address ("https://host:5000/v1/") to a host."""
    if not key:
        return DOCKER_HUB
    if "://" in key:
        key = key.split("://", 1)[1]
    return _normalize(key.split("/", 1)[0])


def auth_key(host):
    return DOCKER_HUB_AUTH_KEY if host == DOCKER_HUB else host


def encode_header(auth_config):
    """X-Registry-Auth: base64url (with padding) of the credentials JSON, empty fields left out."""
    clean = {k: v for k, v in auth_config.items() if v not in (None, "")}
    return base64.urlsafe_b64encode(json.dumps(clean).encode("utf-8")).decode("ascii")


def load_config(config_dir):
    path = os.path.join(config_dir, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    return json.loads(text) if text.strip() else {}


def _helper_for(config, host):
    for key, helper in (config.get("credHelpers") or {}).items():
        if host_of_key(key) == host and helper:
            return helper
    return config.get("credsStore") or None


def _run_helper(helper, action, data):
    try:
        proc = subprocess.run(
            ["docker-credential-" + helper, action],
            input=data.encode("utf-8"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            check=False,
        )
    except OSError as e:
        raise CredentialHelperError("cannot run docker-credential-{}: {}".format(helper, e)) from e
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        msg = (out + proc.stderr.decode("utf-8", "replace")).strip()
        if "credentials not found" in msg.lower():
            return None
        raise CredentialHelperError("docker-credential-{} {} failed: {}".format(helper, action, msg or proc.returncode))
    return out


def helper_get(helper, server_url):
    out = _run_helper(helper, "get", server_url)
    if out is None:
        return None
    reply = json.loads(out)
    if reply.get("Username") == _TOKEN_USERNAME:
        return {"identitytoken": reply.get("Secret", ""), "serveraddress": server_url}
    if not reply.get("Username") and not reply.get("Secret"):
        return None
    return {"username": reply.get("Username", ""), "password": reply.get("Secret", ""), "serveraddress": server_url}


def helper_store(helper, server_url, auth_config):
    if auth_config.get("identitytoken"):
        body = {"ServerURL": server_url, "Username": _TOKEN_USERNAME, "Secret": auth_config["identitytoken"]}
    else:
        body = {"ServerURL": server_url, "Username": auth_config.get("username", ""), "Secret": auth_config.get("password", "")}
    if _run_helper(helper, "store", json.dumps(body)) is None:
        raise CredentialHelperError("docker-credential-{} store failed".format(helper))


def _entry_for(config, host):
    auths = config.get("auths") or {}
    if auth_key(host) in auths:
        return auths[auth_key(host)]
    for key, entry in auths.items():
        if host_of_key(key) == host:
            return entry
    return None


def resolve(config_dir, host):
    """Stored credentials for a registry host ("docker.io", "127.0.0.1:5000"), or None."""
    config = load_config(config_dir)
    key = auth_key(host)
    helper = _helper_for(config, host)
    if helper:
        found = helper_get(helper, key)
        if found:
            return found
    entry = _entry_for(config, host)
    if not entry:
        return None
    auth = {"serveraddress": key}
    if entry.get("auth"):
        user, sep, password = base64.b64decode(entry["auth"]).decode("utf-8").partition(":")
        if not sep:
            raise ValueError("invalid auth entry for {} in config.json".format(key))
        auth.update(username=user, password=password)
    elif entry.get("username"):
        auth.update(username=entry["username"], password=entry.get("password", ""))
    for field in ("identitytoken", "registrytoken", "email"):
        if entry.get(field):
            auth[field] = entry[field]
    if not (auth.get("username") or auth.get("identitytoken") or auth.get("registrytoken")):
        return None
    return auth


def store(config_dir, host, auth_config):
    """Keeps credentials after a login: in the registry's helper when config.json names one
    (config.json then records only the registry), else in `auths`."""
    config = load_config(config_dir)
    key = auth_key(host)
    helper = _helper_for(config, host)
    auths = dict(config.get("auths") or {})
    if helper:
        helper_store(helper, key, auth_config)
        auths[key] = {}
    elif auth_config.get("identitytoken"):
        user = auth_config.get("username", "")
        auths[key] = {"identitytoken": auth_config["identitytoken"], "auth": base64.b64encode((user + ":").encode()).decode()}
    else:
        pair = "{}:{}".format(auth_config.get("username", ""), auth_config.get("password", ""))
        auths[key] = {"auth": base64.b64encode(pair.encode("utf-8")).decode("ascii")}
    config["auths"] = auths
    os.makedirs(config_dir, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="config.json.", dir=config_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(config, f, indent="\t")
            f.write("\n")
        os.replace(tmp, os.path.join(config_dir, "config.json"))
    except BaseException:
        os.unlink(tmp)
        raise
