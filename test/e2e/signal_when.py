#!/usr/bin/python3
"""Sends a signal to a command once a path shows that it is at work.

  signal_when.py --exists GLOB --signal NAME [--delay SECONDS] -- COMMAND...

Starts COMMAND, waits (at most 120 s) until a path matching GLOB exists,
sleeps SECONDS, sends signal NAME (INT, TERM, KILL, ...) to COMMAND's process
and waits for it to end. Prints how it ended; exits 0 if the signal ended it
or it failed, 1 if it succeeded anyway or never created the path.
"""
import argparse
import glob
import signal
import subprocess
import sys
import time

from child_signals import default_signal_actions


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--exists", required=True, help="glob of a path the command creates")
    parser.add_argument("--signal", required=True, help="INT, TERM, KILL, ...")
    parser.add_argument("--delay", type=float, default=0, help="seconds to wait after the path exists")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    job = subprocess.Popen(command, preexec_fn=default_signal_actions)
    deadline = time.monotonic() + 120
    while not glob.glob(args.exists):
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            print(f"signal_when: {args.exists} never existed (exit status {job.wait()})")
            return 1
        time.sleep(0.01)
    time.sleep(args.delay)
    job.send_signal(getattr(signal, "SIG" + args.signal))
    status = job.wait()
    print(f"signal_when: SIG{args.signal} sent; exit status {status}")
    return 0 if status != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
