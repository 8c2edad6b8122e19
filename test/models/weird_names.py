"""A tiny model whose parameter, buffer and submodule names contain a double quote, a newline,
`*/`, a backslash, a tab and non-ASCII characters: a stress test for whatever the compiler
derives from TorchScript attribute names (symbol names, comments, string attributes, files).

Paths (Python strings; state_dict keys are these joined with '.'):
  BLOCK + '.weight' [4,4], BLOCK + '.bias' [4]     BLOCK = 'bl"ock\\n*/é'     (nn.Linear)
  PARAM [4]                                       PARAM = 'w"\\\\\\n*/ü'      (w " \\ newline * / ü)
  SUB + '.' + INNER + '.weight' [4,4], '.bias'    SUB = 'sub "€" \\\\ */',  INNER = "lin'\\t2 名"
  BUFFER [4] (persistent buffer)                  BUFFER = 'scale */ \\\\ "β"\\n'

Both torch.jit.script and torch.jit.trace accept these: the forward reaches every attribute
through getattr(self, <string literal>), which TorchScript compiles to prim::GetAttr.

torch 1.13 bug: torch.jit.save writes such names into the archive's code/*.py so that
torch.jit.load (Python or C++) cannot parse them back:
  * the class header (`__parameters__ = [...]`, `__buffers__ = [...]`, `__annotations__["..."]`)
    holds the names raw, unescaped (a `"` or a newline ends the literal early);
  * code bodies escape bytes >= 0x80 through a signed char, producing garbage "octal" such as
    `\\0)+\\/.)` for é (c10::printQuotedString); the same garbage shows in printed graphs.
fix_saved_file() therefore rewrites each of these literals (found by exact match, for the names
this module uses) into a correct TorchScript literal (backslash escapes, octal bytes for non-ASCII)
and drops the *.debug_pkl records, whose source offsets no longer match.  After that the file
loads and every name comes back exactly.
"""

import os

import torch
import torch.nn as nn

from common import InputSpec, ModelSpec, init_params_

BLOCK = 'bl"ock\n*/é'
PARAM = 'w"\\\n*/ü'
SUB = 'sub "€" \\ */'
INNER = "lin'\t2 名"
BUFFER = 'scale */ \\ "β"\n'


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module(INNER, nn.Linear(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(getattr(self, "lin'\t2 名")(x))


class WeirdNames(nn.Module):
    """forward(x f32[2,4]) -> f32[2,4]"""

    def __init__(self):
        super().__init__()
        self.add_module(BLOCK, nn.Linear(4, 4))
        self.register_parameter(PARAM, nn.Parameter(torch.empty(4)))
        self.add_module(SUB, Inner())
        self.register_buffer(BUFFER, torch.linspace(0.5, 2.0, 4))
        init_params_(self, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The literals must equal BLOCK, PARAM, SUB and BUFFER (TorchScript needs literals here).
        h = getattr(self, 'bl"ock\n*/é')(x) * getattr(self, 'w"\\\n*/ü')
        h = getattr(self, 'sub "€" \\ */')(h)
        return h * getattr(self, 'scale */ \\ "β"\n')


NAMES = (BLOCK, PARAM, SUB, INNER, BUFFER)

_SIMPLE_ESCAPES = {"\\": "\\\\", "'": "\\'", '"': '\\"', "\a": "\\a", "\b": "\\b",
                   "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def torch_quoted(name: str) -> str:
    """The literal torch 1.13's c10::printQuotedString writes for name (bug included)."""
    out = ['"']
    for b in name.encode("utf-8"):
        ch = chr(b)
        if ch in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[ch])
        elif 0x1f < b < 0x7f:
            out.append(ch)
        else:
            s = b - 256 if b >= 128 else b  # C++ char is signed here
            digits = [0, 0, 0]
            for i in (2, 1):
                digits[i] = int(s - 8 * int(s / 8))  # C++ % and / truncate toward zero
                s = int(s / 8)
            digits[0] = s
            out.append("\\" + "".join(chr(ord("0") + d) for d in digits))
    out.append('"')
    return "".join(out)


def correct_quoted(name: str) -> str:
    """An ASCII TorchScript string literal that parses back to name."""
    out = ['"']
    for b in name.encode("utf-8"):
        ch = chr(b)
        if ch in _SIMPLE_ESCAPES and ch != "\r":  # the parser knows no \r
            out.append(_SIMPLE_ESCAPES[ch])
        elif 0x1f < b < 0x7f:
            out.append(ch)
        else:
            out.append("\\%03o" % b)
    out.append('"')
    return "".join(out)


def fix_saved_file(path: str, names=NAMES) -> None:
    """Rewrites the TorchScript archive at path so that torch.jit.load accepts names (see the
    module docstring).  Raises RuntimeError if a name is found nowhere."""
    reader = torch._C.PyTorchFileReader(path)
    records = {}
    for rec in reader.get_all_records():
        records[rec] = bytes(reader.get_record(rec))
    del reader
    seen = set()
    for rec in list(records):
        if not rec.startswith("code/"):
            continue
        if rec.endswith(".debug_pkl"):
            del records[rec]
            continue
        text = records[rec].decode("utf-8")
        for name in names:
            good = correct_quoted(name)
            for bad in (torch_quoted(name), '"%s"' % name):
                if bad != good and bad in text:
                    text = text.replace(bad, good)
                    seen.add(name)
            if good in text:
                seen.add(name)
        records[rec] = text.encode("utf-8")
    missing = [n for n in names if n not in seen]
    if missing:
        raise RuntimeError("weird_names: names not found in the saved code: %r" % missing)
    version = int(records.pop("version", b"3").decode().strip())
    tmp = path + ".tmp"
    writer = torch._C.PyTorchFileWriter(tmp)
    writer.set_min_version(version)
    for rec, data in records.items():
        writer.write_record(rec, data, len(data))
    writer.write_end_of_file()
    del writer
    os.replace(tmp, path)


SPECS = [
    ModelSpec("weird_names", WeirdNames, [InputSpec("x", torch.float32, [2, 4])],
              post_save=fix_saved_file),
]
