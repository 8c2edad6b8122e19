#!/usr/bin/python3
"""Kills a training run at random moments while it saves, then finishes it.

  kill_during_save.py --kills N --seed S --save DIR --log FILE --then M
                      --final-step FILE -- COMMAND...

COMMAND runs a rank program, without --steps, that saves every step into DIR
(--save DIR --save-every 1) and logs every step to the --log FILE
(--log-json FILE). It is started N times with more steps than it can reach,
from DIR's latest checkpoint once there is one (--resume DIR); each time,
once it has logged a random number of steps (2 to --steps-per-run), it is
ended after a further random delay, up to the time one step and its save
took so far (so that the kill lands anywhere in them however fast the
machine), by SIGKILL, SIGTERM or SIGINT. Then it runs once more, resumed, M
steps past DIR's latest checkpoint; the step it ends at is written to the
--final-step FILE. Prints each kill; exits with the last run's status, or 125
if a run ended before its kill.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import time

from child_signals import default_signal_actions

UNREACHABLE_STEP = 10**9


def logged_steps(log):
    try:
        with open(log) as lines:
            return sum(1 for _ in lines)
    except FileNotFoundError:
        return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", required=True, help="the run's --save directory")
    parser.add_argument("--log", required=True, help="the run's --log-json file")
    parser.add_argument("--steps-per-run", type=int, default=5, help="steps before a kill, at most")
    parser.add_argument("--then", type=int, required=True, help="steps of the last run")
    parser.add_argument("--final-step", required=True, help="where to write the last run's last step")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    rng = random.Random(args.seed)
    latest = os.path.join(args.save, "latest")

    def resumed(steps):
        return command + ["--steps", str(steps)] + (["--resume", args.save] if os.path.exists(latest) else [])

    for kill in range(args.kills):
        if os.path.exists(args.log):
            os.remove(args.log)
        steps = rng.randint(2, args.steps_per_run)
        fraction = rng.random()
        sig = rng.choice([signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
        run = subprocess.Popen(resumed(UNREACHABLE_STEP), preexec_fn=default_signal_actions)
        while logged_steps(args.log) < 1 and run.poll() is None:
            time.sleep(0.0005)
        first = time.monotonic()
        while logged_steps(args.log) < steps and run.poll() is None:
            time.sleep(0.0005)
        delay = fraction * (time.monotonic() - first) / (steps - 1)
        time.sleep(delay)
        if run.poll() is not None:
            print(f"kill_during_save: run {kill + 1} ended before its kill (exit status {run.returncode})")
            return 125
        run.send_signal(sig)
        run.wait()
        print(f"kill_during_save: run {kill + 1} ended by {sig.name} {delay * 1000:.1f} ms after step {steps} of its own")
    with open(latest) as text:
        final = int(text.readline().strip().split("-")[1]) + args.then
    with open(args.final_step, "w") as out:
        out.write(f"{final}\n")
    return subprocess.call(resumed(final))


if __name__ == "__main__":
    sys.exit(main())
