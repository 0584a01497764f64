"""One error hierarchy. Every message says what was expected, what arrived, and where."""

from __future__ import annotations


class Ref2VAError(Exception):
    """Base of every error the harness raises on purpose."""


class CampaignError(Ref2VAError):
    """A campaign, lock or launch profile file is malformed or inconsistent."""


class FreezeError(Ref2VAError):
    """A campaign cannot be frozen or verified."""


class MediaError(Ref2VAError):
    """An MP4 cannot be opened or decoded."""


class EngineStartError(Ref2VAError):
    """An engine instance did not become healthy."""


class EngineStopError(Ref2VAError):
    """An engine instance could not be stopped cleanly."""


class TensorFileError(Ref2VAError):
    """A tensor dump (safetensors) is missing, unreadable or malformed."""


class ForeignServerError(EngineStartError):
    """The server answering on an instance's port is not that instance."""
