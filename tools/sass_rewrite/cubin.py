"""The CUDA ELF images (cubins) inside a shared library: finding them, listing their
functions' SASS with cuobjdump, and writing a library back."""
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import tempfile

EM_CUDA = 190
_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def find_cuobjdump(cuda_home=None):
    """cuobjdump's path: on PATH, in the toolkit's bin (`cuda_home`, CUDA_HOME, CUDA_PATH),
    or the copy Triton's wheel ships (triton/backends/nvidia/bin); None if none is found."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for home in (cuda_home, os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and os.path.isfile(os.path.join(home, "bin", "cuobjdump")):
            return os.path.join(home, "bin", "cuobjdump")
    try:  # located without importing triton (which would import torch)
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "backends", "nvidia", "bin", "cuobjdump")
        if os.path.isfile(path):
            return path
    return None


def cubins(data):
    """(offset, end, {section name: (offset in cubin, size)}) of each embedded CUDA ELF.
    Every ELF magic is tried (no skipping by the computed size): a header that does not
    parse as a CUDA ELF is passed over."""
    out, pos = [], -1
    while True:
        pos = data.find(b"\x7fELF\x02\x01", pos + 1)
        if pos < 0:
            return out
        if struct.unpack_from("<H", data, pos + 18)[0] != EM_CUDA:
            continue
        shoff = struct.unpack_from("<Q", data, pos + 40)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, pos + 58)
        if shentsize != 64 or not 0 < shstrndx < shnum or pos + shoff + shnum * 64 > len(data):
            continue
        secs = [struct.unpack_from("<IIQQQQ", data, pos + shoff + i * 64) for i in range(shnum)]
        stroff = secs[shstrndx][4]
        names, end = {}, shoff + shnum * 64
        for name, _typ, _flags, _addr, off, size in secs:
            s = data[pos + stroff + name : data.index(b"\0", pos + stroff + name)].decode(errors="replace")
            names[s] = (off, size)
            end = max(end, off + size)
        out.append((pos, end, names))


def parse_listing(sass):
    """[(function name, [(address, instruction text)])] of a cuobjdump -sass listing."""
    out, name, body = [], None, []
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name is not None:
                out.append((name, body))
            name, body = m.group(1), []
            continue
        m = _INSTR.search(line)
        if m and name is not None:
            body.append((int(m.group(1), 16), m.group(2)))
    if name is not None:
        out.append((name, body))
    return out


def disassemble(path, cuobjdump):
    """cuobjdump -sass of a file (a library or a cubin)."""
    return subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True, check=True).stdout


def listing(cubin_bytes, cuobjdump):
    """{function: [(address, text)]} of one cubin; None if cuobjdump cannot read it."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin_bytes)
        f.flush()
        run = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True)
    if run.returncode != 0:
        return None
    return dict(parse_listing(run.stdout))


def functions_in(data, pattern, cuobjdump, unreadable=None):
    """(cubin offset, cubin size, name, offset of its code in data, [(address, text)]) for
    each function whose name matches the regex `pattern` in the cubins embedded in data.
    Only cubins holding such a function are disassembled (most of the run time); the offsets
    of those cuobjdump cannot read are appended to `unreadable`."""
    for pos, size, sections in cubins(bytes(data)):
        if not any(name.startswith(".text.") and re.search(pattern, name[6:]) for name in sections):
            continue
        funcs = listing(bytes(data[pos : pos + size]), cuobjdump)
        if funcs is None:
            if unreadable is not None:
                unreadable.append(pos)
            continue
        for name, lines in funcs.items():
            if re.search(pattern, name):
                off, _sec_size = sections[".text." + name]
                yield pos, size, name, pos + off, lines


def instruction_words(data, base, lines):
    """[(address, text, lo, hi)] of a function's listing, the words read from data at base."""
    return [(a, t, *struct.unpack_from("<QQ", data, base + a)) for a, t in lines]


def write_words(data, base, words):
    """Write instruction words [(address, lo, hi, ...)] into data, a function's code at base."""
    for addr, lo, hi, *_rest in words:
        struct.pack_into("<QQ", data, base + addr, lo, hi)


def write_library(data, like, out):
    """Write data to out atomically (a temporary file renamed), with the file mode of `like`."""
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    shutil.copymode(like, tmp)
    os.replace(tmp, out)
