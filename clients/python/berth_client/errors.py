"""Errors raised by the client. Daemon errors keep the daemon's own message."""


class BerthError(Exception):
    """Base class of everything this package raises."""


class APIError(BerthError):
    """An error response from the daemon (or an error it reported inside a stream)."""

    def __init__(self, message, status_code=None, explanation=None):
        super().__init__(message)
        self.status_code = status_code
        self.explanation = explanation if explanation is not None else message

    def is_client_error(self):
        return self.status_code is not None and 400 <= self.status_code < 500

    def is_server_error(self):
        return self.status_code is not None and self.status_code >= 500


class BadRequest(APIError):
    """400: invalid parameter, malformed body, API version outside the daemon's window."""


class Unauthorized(APIError):
    """401: registry credentials refused."""


class Forbidden(APIError):
    """403"""


class NotFound(APIError):
    """404: no such container, image or repository."""


class ImageNotFound(NotFound):
    """404 for an image (create with a missing image, inspect, pull of an unknown repository)."""


class Conflict(APIError):
    """409: name in use, container running, image in use..."""


class ServerError(APIError):
    """5xx: the daemon failed."""


class StreamError(APIError):
    """An {"error": ..., "errorDetail": ...} record inside a progress stream (pull)."""

    def __init__(self, message, code=None):
        super().__init__(message, status_code=200)
        self.code = code


class MultiplexError(BerthError):
    """A type-3 frame (an error the daemon reports mid-stream) or an unknown frame type."""


class CredentialHelperError(BerthError):
    """A docker-credential-<name> program failed."""


class ContainerError(BerthError):
    """A foreground run whose container exited with a non-zero status."""

    def __init__(self, container, exit_status, command, image, stderr):
        self.container = container
        self.exit_status = exit_status
        self.command = command
        self.image = image
        self.stderr = stderr
        err = stderr.decode("utf-8", "replace").rstrip() if isinstance(stderr, bytes) else stderr
        cmd = " '{}'".format(" ".join(command) if isinstance(command, list) else command) if command else ""
        super().__init__(
            "Command{} in image '{}' returned non-zero exit status {}: {}".format(cmd, image, exit_status, err)
        )


def error_for_status(status, message):
    cls = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict}.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else APIError
    return cls(message, status_code=status)
