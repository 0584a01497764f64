"""One error hierarchy. Every message says what was expected, what arrived, and where."""

from __future__ import annotations

# The command line's exit statuses: 0 ok, 1 the check found a problem in its input, 2 bad input
# it could not check (unreadable, malformed campaign) or bad usage.
EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT = 0, 1, 2


class Ref2VAError(Exception):
    """Base of every error the harness raises on purpose."""


class CampaignError(Ref2VAError):
    """A campaign, lock or launch profile file is malformed or inconsistent."""


class FreezeError(Ref2VAError):
    """A campaign cannot be frozen or verified."""


class MediaError(Ref2VAError):
    """An MP4 cannot be opened or decoded."""


class MediaContentError(MediaError):
    """The file was read, and what it holds is not a complete MP4: not an MP4 at all, cut short,
    undecodable, or fewer frames than it declares. A problem found in the input (the commands
    that check an MP4 exit 1 for it), unlike a file that cannot be read at all."""


class EngineStartError(Ref2VAError):
    """An engine instance did not become healthy.

    The message is one line; the engine's last log lines travel beside it (`log_tail`), for the
    evidence to keep (sanitized) rather than for the terminal to print.
    """

    def __init__(self, message: str, *, exit_code: int | None = None, log_tail: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.log_tail = log_tail


class EngineStopError(Ref2VAError):
    """An engine instance could not be stopped cleanly."""


class TensorFileError(Ref2VAError):
    """A tensor dump (safetensors) is missing, unreadable or malformed."""


class ForeignServerError(EngineStartError):
    """The server answering on an instance's port is not that instance."""


class LocalizeError(Ref2VAError):
    """A localization pass cannot read what it needs (a capture log, a finished run's evidence)."""
