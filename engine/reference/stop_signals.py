"""The signals that stop an engine, and how a fresh process receives them.

Read before anything heavy is imported: a stop signal during start-up must end the process.
"""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def reset_inherited_signals() -> None:
    """SIGINT and SIGTERM as a fresh process has them, whatever the launcher left us.

    Dispositions set to SIG_IGN and blocked masks survive fork and exec: an engine started from a
    shell's background job has SIGINT ignored, and one started by a thread that blocks signals
    would never see SIGTERM. Until the server installs its handlers, a stop signal ends us.
    """
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
