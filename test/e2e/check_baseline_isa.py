#!/usr/bin/python3
"""Check that a program (or library) runs on every x86-64 CPU.

  check_baseline_isa.py FILE...

Disassembles each FILE (objdump) and fails, naming the function and the instruction, if a
function uses an instruction beyond baseline x86-64 (SSE2): AVX or AVX-512 (any VEX or EVEX
instruction), BMI, FMA, SSE3, SSSE3, SSE4 or POPCNT. The runtime's kernel builds for AVX2
and AVX-512 (functions in the namespaces slapo::rt::cpu::avx2 and ::avx512, or instantiated
for them) and a program's fused loops' (SLAPO_CPU_FUSED_LOOP's BODYAvx2 and BODYAvx512),
which run only where the CPU has them, are exempt. A wider instruction elsewhere
would be a SIGILL on an older CPU: a runtime file compiled for a wider ISA, or an inline
function of a header compiled inside a kernel build's target pragma, whose copy the linker
may keep for everyone.
"""

import re
import subprocess
import sys

# Mnemonics (objdump's Intel syntax) of the extensions after SSE2. tzcnt is left out: GCC
# emits `rep bsf` for baseline count-trailing-zeros, which objdump decodes as tzcnt.
BEYOND_BASELINE = (
    r"v\w+|popcnt|lzcnt|movbe|crc32|andn|bextr|blsi|blsr|blsmsk|bzhi|pdep|pext|"
    r"[sh][ah][lr]x|rorx|pshufb|palignr|pabs[bwd]|ph(?:add|sub)\w*|pmaddubsw|pmulhrsw|"
    r"psign[bwd]|ptest|pmin(?:sb|sd|uw|ud)|pmax(?:sb|sd|uw|ud)|pmul(?:ld|dq)|pblend\w*|"
    r"blendv?p[sd]|round[sp][sd]|dpp[sd]|insertps|extractps|pinsr[bdq]|pextr[bdq]|"
    r"pmov[sz]x\w+|packusdw|pcmp(?:eq|gt)q|movntdqa|mpsadbw|phminposuw|pcmp[ei]str[im]|"
    r"h(?:add|sub)p[sd]|addsubp[sd]|mov(?:ddup|shdup|sldup)|lddqu|fisttp")
PREFIXES = r"lock|rep\w*|data16|addr32|[c-gs]s|notrack|bnd"
# An instruction line of a function's body, "  4010a0:\tvmovups zmm0,...", whose mnemonic
# (after any prefixes) is beyond the baseline.
OFFENDING = re.compile(r"^ *[0-9a-f]+:\t((?:(?:%s) +)*(?:%s)(?: .*)?)$" % (PREFIXES, BEYOND_BASELINE),
                       re.MULTILINE)
EXEMPT = re.compile(r"::avx(2|512)::|BodyAvx(2|512)\(void\* const\*, long, long\)$")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")


def offenders(path):
    """{function: first instruction beyond the baseline} of a file's functions but the
    exempt ones."""
    listing = subprocess.run(["objdump", "-d", "-C", "-M", "intel", "--no-show-raw-insn", path],
                             check=True, capture_output=True, text=True).stdout
    found = {}
    # objdump separates functions with a blank line, each starting with its name.
    for block in listing.split("\n\n"):
        header, _, body = block.partition("\n")
        function = FUNCTION.match(header)
        if not function or EXEMPT.search(function.group(1)):
            continue
        instruction = OFFENDING.search(body)
        if instruction:
            found[function.group(1)] = instruction.group(1).strip()
    return found


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    ok = True
    for path in sys.argv[1:]:
        found = offenders(path)
        for function, instruction in sorted(found.items())[:20]:
            print("%s: %s uses %s" % (path, function, instruction))
        if found:
            print("%s: %d functions use instructions beyond x86-64" % (path, len(found)))
            ok = False
        else:
            print("%s: baseline x86-64 outside the AVX2 and AVX-512 kernel builds" % path)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
