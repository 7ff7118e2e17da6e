"""Images: the collection (list, get, pull, remove) and the Image object."""
import json

from . import auth
from .api import quote_name
from .errors import ImageNotFound, NotFound, StreamError
from .streams import json_records


class Image:
    """An image, with the attributes of its last inspect in ``attrs``."""

    def __init__(self, client, attrs):
        self.client = client
        self.attrs = attrs

    def __repr__(self):
        return "<Image: {}>".format(", ".join("'{}'".format(t) for t in self.tags) or self.short_id)

    def __eq__(self, other):
        return isinstance(other, Image) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    @property
    def id(self):
        return self.attrs.get("Id")

    @property
    def short_id(self):
        return self.id[:19] if self.id.startswith("sha256:") else self.id[:12]

    @property
    def tags(self):
        return [t for t in (self.attrs.get("RepoTags") or []) if t != "<none>:<none>"]

    @property
    def labels(self):
        return (self.attrs.get("Config") or {}).get("Labels") or self.attrs.get("Labels") or {}

    def reload(self):
        self.attrs = self.client.images.get(self.id).attrs
        return self

    def tag(self, repository, tag=None):
        """Names the image repository:tag (tag defaults to latest)."""
        if tag is None:
            repository, tag = auth.split_reference(repository)
        self.client.api.empty("POST", "/images/{}/tag".format(quote_name(self.id)),
                              params={"repo": repository, "tag": tag or "latest"})
        return True


class ImageCollection:
    def __init__(self, client):
        self.client = client

    def get(self, name):
        try:
            return Image(self.client, self.client.api.json("GET", "/images/{}/json".format(quote_name(name))))
        except NotFound as e:
            raise ImageNotFound(str(e), status_code=e.status_code) from e

    def list(self, name=None, all=False, filters=None):
        filters = dict(filters or {})
        if name:
            filters["reference"] = [name]
        params = {"all": all, "filters": json.dumps(filters) if filters else None}
        return [Image(self.client, e) for e in self.client.api.json("GET", "/images/json", params=params)]

    def pull_progress(self, repository, tag=None, auth_config=None, platform=None):
        """Starts a pull and yields the daemon's progress records (dicts) as they arrive. A
        record carrying "error"/"errorDetail" raises StreamError. Credentials: auth_config
        ({"username": ..., "password": ...}), else those stored in config.json; pass
        auth_config=False for none."""
        repo, ref_tag = auth.split_reference(repository)
        tag = tag or ref_tag or "latest"
        headers = {}
        credentials = auth_config
        if credentials is None:
            credentials = auth.resolve(self.client.config_dir, auth.registry_host(repo))
        if credentials:
            headers["X-Registry-Auth"] = auth.encode_header(credentials)
        chunks = self.client.api.stream(
            "POST", "/images/create", params={"fromImage": repo, "tag": tag, "platform": platform}, headers=headers
        )
        return _checked(json_records(chunks))

    def pull(self, repository, tag=None, auth_config=None, platform=None):
        """Pulls an image to the end and returns it."""
        repo, ref_tag = auth.split_reference(repository)
        tag = tag or ref_tag or "latest"
        for _ in self.pull_progress(repo, tag=tag, auth_config=auth_config, platform=platform):
            pass
        sep = "@" if tag.startswith("sha256:") else ":"
        return self.get(repo + sep + tag)

    def remove(self, image, force=False, noprune=False):
        return self.client.api.json("DELETE", "/images/{}".format(quote_name(image)), params={"force": force, "noprune": noprune})


def _checked(records):
    for record in records:
        if "error" in record or "errorDetail" in record:
            detail = record.get("errorDetail") or {}
            raise StreamError(detail.get("message") or record.get("error") or "unknown error", code=detail.get("code"))
        yield record
