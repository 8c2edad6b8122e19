#!/usr/bin/python3
"""Kills (or stops) one rank of a running job and checks that the whole job
ends.

  kill_rank.py --rank N --after TEXT --within SECONDS [--signal STOP] -- COMMAND...

Starts COMMAND (an mpirun of a rank program), waits until its output shows
TEXT (the job is training), sends SIGKILL (or --signal) to the processes of
COMMAND that OpenMPI started as rank N (OMPI_COMM_WORLD_RANK=N in their
environment), and waits at most SECONDS for COMMAND to exit. Prints
COMMAND's output, then the exit status and how long the job took to end.
Exits 0 if the job ended in time with a non-zero status, else 1. Processes
of rank N that are left (stopped ones) are killed at the end.
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as stat:
        # The command name, in parentheses, may hold spaces: the parent
        # follows the state after the last ')'.
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def ranks_of(job_pid, rank):
    """The descendants of job_pid that OpenMPI started as `rank`."""
    found = []
    marker = f"OMPI_COMM_WORLD_RANK={rank}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if marker not in environ.read().split(b"\0"):
                    continue
            ancestor = pid
            while ancestor > 1 and ancestor != job_pid:
                ancestor = parent_of(ancestor)
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
        if ancestor == job_pid:
            found.append(pid)
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True, help="the rank to kill")
    parser.add_argument("--after", required=True, help="output that says the job runs")
    parser.add_argument("--within", type=float, required=True, help="seconds the job may take to end")
    parser.add_argument("--signal", default="KILL", help="the signal for rank N: KILL, STOP, ...")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    running = threading.Event()

    def read():
        for line in job.stdout:
            lines.append(line)
            if args.after in line:
                running.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not running.wait(timeout=120):
        job.kill()
        print("".join(lines) + f"kill_rank: the job never printed {args.after!r}")
        return 1
    victims = ranks_of(job.pid, args.rank)
    if not victims:
        job.kill()
        print("".join(lines) + f"kill_rank: the job has no rank {args.rank}")
        return 1
    for pid in victims:
        os.kill(pid, getattr(signal, "SIG" + args.signal))
    killed = time.monotonic()
    try:
        status = job.wait(timeout=args.within)
    except subprocess.TimeoutExpired:
        job.kill()
        status = None
    finally:
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if status is None:
        print("".join(lines) + f"kill_rank: the job still ran {args.within} s after the kill")
        return 1
    ended = time.monotonic() - killed
    reader.join(timeout=5)
    print("".join(lines), end="")
    print(f"kill_rank: exit status {status}, ended {ended:.1f} s after the kill")
    return 0 if status != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
