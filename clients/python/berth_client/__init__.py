"""Client for Berth and other Docker Engine API daemons, standard library only."""
from .client import BerthClient, from_env
from .containers import Container, ContainerCollection
from .images import Image, ImageCollection
from .errors import (
    APIError,
    BadRequest,
    BerthError,
    Conflict,
    ContainerError,
    CredentialHelperError,
    Forbidden,
    ImageNotFound,
    MultiplexError,
    NotFound,
    ServerError,
    StreamError,
    Unauthorized,
)
from .streams import demultiplex, json_records
from .api import CLIENT_API_VERSION

__all__ = [
    "BerthClient", "from_env", "Container", "ContainerCollection", "Image", "ImageCollection",
    "APIError", "BadRequest", "BerthError", "Conflict", "ContainerError", "CredentialHelperError",
    "Forbidden", "ImageNotFound", "MultiplexError", "NotFound", "ServerError", "StreamError",
    "Unauthorized", "demultiplex", "json_records", "CLIENT_API_VERSION",
]
