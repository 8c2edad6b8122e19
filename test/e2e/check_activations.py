"""Checks that one compilation's memory plan keeps fewer activations than another's.

    check_activations.py --larger PLAIN.txt --smaller REPLACED.txt

Each file is slapoc's output, whose line "rank 0 planned memory: ... activations N UNIT,
..." gives the activations kept for the backward at the peak. Exits 1 unless the second
is smaller, printing both.
"""
import argparse
import re
import sys

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def activations(path):
    with open(path) as f:
        match = re.search(r"planned memory: .*activations ([0-9.]+) (B|KiB|MiB|GiB)", f.read())
    if not match:
        sys.exit("%s: no 'planned memory' line with activations" % path)
    return float(match.group(1)) * UNITS[match.group(2)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--larger", required=True, help="slapoc's output that keeps more")
    parser.add_argument("--smaller", required=True, help="slapoc's output that keeps less")
    args = parser.parse_args()
    larger, smaller = activations(args.larger), activations(args.smaller)
    print("activations: %d bytes vs %d bytes" % (larger, smaller))
    if not smaller < larger:
        print("MISMATCH: %s does not keep fewer activations than %s" % (args.smaller, args.larger))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
