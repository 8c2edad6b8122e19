#!/usr/bin/python3
"""Runs a command while another one is at work.

  run_during.py --background 'COMMAND A' --exists GLOB -- COMMAND B...

Starts COMMAND A (a shell command line), waits (at most 120 s) until a path
matching GLOB exists, runs COMMAND B to its end, then ends A with SIGTERM.
Prints B's output and exits with B's status; exits 125 if A ended, or never
created the path, before B started.
"""
import argparse
import glob
import os
import signal
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--background", required=True, help="the command that is at work")
    parser.add_argument("--exists", required=True, help="glob of a path that says it is at work")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    # Its own session: SIGTERM reaches every process it started (mpirun's).
    background = subprocess.Popen(args.background, shell=True, start_new_session=True,
                                  stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not glob.glob(args.exists):
        if background.poll() is not None or time.monotonic() > deadline:
            print(f"run_during: {args.exists} never existed while the background command ran")
            return 125
        time.sleep(0.01)
    status = subprocess.call(command)
    still_running = background.poll() is None
    if still_running:
        os.killpg(background.pid, signal.SIGTERM)
    background.wait()
    if not still_running:
        print("run_during: the background command ended before the other one did")
        return 125
    return status


if __name__ == "__main__":
    sys.exit(main())
