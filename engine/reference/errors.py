"""The engine's error hierarchy: profile errors at launch, API errors per request."""

from __future__ import annotations

from http import HTTPStatus


class ReferenceEngineError(Exception):
    """Base of every error the reference engine raises on purpose."""


class ProfileError(ReferenceEngineError):
    """A launch profile that cannot be used; the message names the file and the field."""


class ApiError(ReferenceEngineError):
    """A request-scoped failure, rendered in vLLM's ``{"error": {...}}`` shape.

    ``error_type`` mirrors what vLLM puts in ``error.type``: the HTTP reason phrase for an
    ``HTTPException`` raised by a route, ``BadRequestError`` for a pydantic validation failure of
    the request model (vLLM's generic handler maps ``ValueError`` to that name).
    """

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        error_type: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.error_type = error_type or HTTPStatus(status_code).phrase
        self.param = param


def bad_request(message: str, *, param: str | None = None) -> ApiError:
    """An HTTPException-style 400, as the real server's form parser raises them."""
    return ApiError(HTTPStatus.BAD_REQUEST.value, message, param=param)


def invalid_field(message: str, *, param: str | None = None) -> ApiError:
    """A 400 for what the real server rejects in its pydantic request model."""
    return ApiError(
        HTTPStatus.BAD_REQUEST.value, message, error_type="BadRequestError", param=param
    )


class GenerationCancelled(ReferenceEngineError):
    """Raised inside a generation when its cancel flag is seen between steps."""


class CaptureStopped(ReferenceEngineError):
    """Raised out of a generation the engine stopped on purpose once its module capture was whole
    (a capture block with ``stop``), after writing its points and ``enabled_path.json``: the
    routes answer ``CAPTURE_STOPPED_STATUS`` with its message, not a failure's 500."""
