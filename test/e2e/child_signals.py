"""What the e2e helpers that signal their commands share."""
import signal


def default_signal_actions():
    """Run in a child before exec: a test runner may start its tests ignoring
    SIGINT, which their children would inherit; they get the default actions
    of the signals the helpers send back."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
