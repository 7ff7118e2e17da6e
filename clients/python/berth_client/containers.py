"""Containers: the collection (run, create, get, list) and the Container object."""
import json

from .errors import APIError, ContainerError, ImageNotFound, NotFound
from .api import quote_name
from .streams import STDOUT, demultiplex
from .transport import close_response


class Container:
    """A container, with the attributes of its last inspect in ``attrs``."""

    def __init__(self, client, attrs):
        self.client = client
        self.attrs = attrs

    def __repr__(self):
        return "<Container: {}>".format(self.short_id)

    def __eq__(self, other):
        return isinstance(other, Container) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    @property
    def id(self):
        return self.attrs.get("Id")

    @property
    def short_id(self):
        return self.id[:12]

    @property
    def name(self):
        name = self.attrs.get("Name")
        if name is None:
            names = self.attrs.get("Names") or []
            name = names[0] if names else None
        return name.lstrip("/") if name else None

    @property
    def status(self):
        state = self.attrs.get("State")
        return state.get("Status") if isinstance(state, dict) else state

    @property
    def labels(self):
        config = self.attrs.get("Config") or {}
        return config.get("Labels") or self.attrs.get("Labels") or {}

    @property
    def tty(self):
        return bool((self.attrs.get("Config") or {}).get("Tty"))

    def reload(self):
        self.attrs = self.client.api.json("GET", "/containers/{}/json".format(quote_name(self.id)))
        return self

    def start(self):
        # 304 (already running) counts as success.
        self.client.api.empty("POST", "/containers/{}/start".format(quote_name(self.id)))

    def begin_wait(self, condition=None, timeout=None):
        """Registers a wait with the daemon and returns once it has been accepted (its headers
        are in), so a start issued afterwards cannot be missed. The returned PendingWait gives
        the result ({"StatusCode": n, "Error": ...}); close() abandons it."""
        resp = self.client.api.call(
            "POST", "/containers/{}/wait".format(quote_name(self.id)), params={"condition": condition}, timeout=timeout
        )
        return PendingWait(resp)

    def wait(self, condition=None, timeout=None):
        """Blocks until the container meets the condition (not-running by default)."""
        return self.begin_wait(condition, timeout).result()

    def logs(self, stdout=True, stderr=True, stream=False, follow=None, timestamps=False, tail="all",
             since=None, until=None, demux=False):
        """The container's output. stream=True returns a generator that yields output as it
        arrives (with follow, until the container stops); otherwise the output is returned
        whole. Without a TTY the daemon multiplexes stdout and stderr: only the asked ones are
        kept, and demux=True gives (stdout, stderr) pairs instead of bytes."""
        if follow is None:
            follow = stream
        if "Config" not in self.attrs:
            self.reload()
        chunks = self.client.api.stream(
            "GET",
            "/containers/{}/logs".format(quote_name(self.id)),
            params={"stdout": stdout, "stderr": stderr, "follow": follow, "timestamps": timestamps,
                    "tail": tail, "since": since, "until": until},
        )
        gen = _tty_output(chunks, demux) if self.tty else _framed_output(chunks, demux)
        if stream:
            return gen
        if demux:
            out, err = [], []
            for o, e in gen:
                if o is not None:
                    out.append(o)
                if e is not None:
                    err.append(e)
            return (b"".join(out) if stdout else None, b"".join(err) if stderr else None)
        return b"".join(gen)

    def stop(self, timeout=None, signal=None):
        self.client.api.empty("POST", "/containers/{}/stop".format(quote_name(self.id)),
                              params={"t": timeout, "signal": signal},
                              timeout=None if timeout is None else timeout + self.client.api.timeout)

    def kill(self, signal=None):
        self.client.api.empty("POST", "/containers/{}/kill".format(quote_name(self.id)), params={"signal": signal})

    def remove(self, force=False, v=False):
        self.client.api.empty("DELETE", "/containers/{}".format(quote_name(self.id)), params={"force": force, "v": v})

    def commit(self, repository=None, tag=None, message=None, author=None, changes=None, conf=None, pause=True):
        """Makes an image of the container; returns it as an Image."""
        if isinstance(changes, str):
            changes = [changes]
        reply = self.client.api.json(
            "POST",
            "/commit",
            params={"container": self.id, "repo": repository, "tag": tag, "comment": message,
                    "author": author, "changes": changes, "pause": pause},
            body=conf,
        )
        return self.client.images.get(reply["Id"])


class PendingWait:
    """A wait the daemon has accepted; result() blocks until the condition is met."""

    def __init__(self, resp):
        self._resp = resp

    def result(self):
        try:
            body = self._resp.read(1024 * 1024).decode("utf-8", "replace")
        finally:
            self.close()
        try:
            return json.loads(body)
        except ValueError:
            raise APIError("unexpected wait reply: " + body[:2048], status_code=self._resp.status)

    def close(self):
        close_response(self._resp)


def _tty_output(chunks, demux):
    for data in chunks:
        yield (data, None) if demux else data


def _framed_output(chunks, demux):
    for stream, data in demultiplex(chunks):
        if demux:
            yield (data, None) if stream == STDOUT else (None, data)
        else:
            yield data


#: run()/create() keyword arguments that map straight onto the create body.
_CONFIG_KEYS = {
    "hostname": "Hostname",
    "user": "User",
    "tty": "Tty",
    "stdin_open": "OpenStdin",
    "environment": "Env",
    "entrypoint": "Entrypoint",
    "working_dir": "WorkingDir",
    "labels": "Labels",
    "stop_signal": "StopSignal",
    "healthcheck": "Healthcheck",
    "domainname": "Domainname",
}
_HOST_CONFIG_KEYS = {
    "auto_remove": "AutoRemove",
    "network_mode": "NetworkMode",
    "privileged": "Privileged",
    "read_only": "ReadonlyRootfs",
    "cap_add": "CapAdd",
    "cap_drop": "CapDrop",
    "binds": "Binds",
    "extra_hosts": "ExtraHosts",
    "mem_limit": "Memory",
    "restart_policy": "RestartPolicy",
    "tmpfs": "Tmpfs",
}


def _create_body(image, command, kwargs):
    body = {"Image": image}
    if command is not None:
        body["Cmd"] = command.split() if isinstance(command, str) else list(command)
    host_config = dict(kwargs.pop("host_config", None) or {})
    for key, field in _CONFIG_KEYS.items():
        if key in kwargs:
            value = kwargs.pop(key)
            if key == "environment" and isinstance(value, dict):
                value = ["{}={}".format(k, v) for k, v in value.items()]
            if key == "entrypoint" and isinstance(value, str):
                value = value.split()
            body[field] = value
    for key, field in _HOST_CONFIG_KEYS.items():
        if key in kwargs:
            host_config[field] = kwargs.pop(key)
    if host_config:
        body["HostConfig"] = host_config
    if kwargs:
        raise TypeError("unsupported container options: " + ", ".join(sorted(kwargs)))
    return body


class ContainerCollection:
    def __init__(self, client):
        self.client = client

    def create(self, image, command=None, name=None, platform=None, **kwargs):
        """Creates a container. Keyword arguments: environment, tty, labels, entrypoint,
        working_dir, user, hostname, auto_remove, network_mode, host_config={...}..."""
        body = _create_body(image, command, kwargs)
        try:
            reply = self.client.api.json("POST", "/containers/create", params={"name": name, "platform": platform}, body=body)
        except NotFound as e:
            raise ImageNotFound(str(e), status_code=e.status_code) from e
        return self.get(reply["Id"])

    def get(self, container_id):
        """A container by ID, ID prefix or name."""
        attrs = self.client.api.json("GET", "/containers/{}/json".format(quote_name(container_id)))
        return Container(self.client, attrs)

    def list(self, all=False, limit=None, filters=None, sparse=False):
        """Containers (running ones unless all=True). With sparse=True the list entries are
        used as they are, without inspecting each container."""
        params = {"all": all, "limit": limit, "filters": json.dumps(filters) if filters else None}
        entries = self.client.api.json("GET", "/containers/json", params=params)
        if sparse:
            return [Container(self.client, e) for e in entries]
        found = []
        for e in entries:
            try:
                found.append(self.get(e["Id"]))
            except NotFound:
                pass  # removed between list and inspect
        return found

    def run(self, image, command=None, stdout=True, stderr=False, remove=False, detach=False,
            auth_config=None, pull=True, **kwargs):
        """Runs a container. In the foreground (the default) it creates (pulling the image when
        it is missing), starts, waits, and returns the output as bytes (stdout, plus stderr when
        asked); a non-zero exit raises ContainerError with the exit status and stderr.
        detach=True starts the container and returns it."""
        name = kwargs.pop("name", None)
        platform = kwargs.pop("platform", None)
        try:
            container = self.create(image, command, name=name, platform=platform, **dict(kwargs))
        except ImageNotFound:
            if not pull:
                raise
            self.client.images.pull(image, auth_config=auth_config, platform=platform)
            container = self.create(image, command, name=name, platform=platform, **dict(kwargs))
        if detach:
            container.start()
            return container.reload()
        try:
            pending = container.begin_wait(condition="next-exit")
            try:
                container.start()
            except BaseException:
                pending.close()
                raise
            status = pending.result()
            if (status.get("Error") or {}).get("Message"):
                raise APIError(status["Error"]["Message"], status_code=500)
            output = container.logs(stdout=stdout, stderr=stderr) if (stdout or stderr) else b""
            code = status.get("StatusCode", 0)
            if code != 0:
                err = container.logs(stdout=False, stderr=True)
                raise ContainerError(container, code, command, image, err)
            return output
        finally:
            if remove:
                try:
                    container.remove(force=True)
                except APIError:
                    pass
