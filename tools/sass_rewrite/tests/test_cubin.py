"""Cubins inside a library, cuobjdump's listings, and where cuobjdump is found."""
import os
import stat
import struct
import sys

from sass_rewrite import cubin


def cuda_elf(text=b"\x11" * 32, function="kern", machine=cubin.EM_CUDA):
    """A minimal 64-bit ELF: a header, .shstrtab, .text.<function>, three section headers."""
    names = b"\0.shstrtab\0.text." + function.encode() + b"\0"
    strtab_at, text_at = 64, 64 + len(names)
    shoff = text_at + len(text)
    header = b"\x7fELF\x02\x01\x01\x41" + bytes(8) + struct.pack(
        "<HHIQQQIHHHHHH", 2, machine, 1, 0, 0, shoff, 0x5A00, 64, 0, 0, 64, 3, 1)
    section = lambda name, typ, off, size: struct.pack("<IIQQQQIIQQ", name, typ, 0, 0, off, size, 0, 0, 1, 0)  # noqa: E731
    headers = section(0, 0, 0, 0) + section(1, 3, strtab_at, len(names)) + section(11, 1, text_at, len(text))
    return header + names + text + headers


def test_cubins_are_found_and_other_elves_passed_over():
    host = cuda_elf(machine=62)  # an x86-64 ELF
    image = cuda_elf()
    data = b"junk" + host + b"pad" + image + b"tail"
    [(pos, end, sections)] = cubin.cubins(data)
    assert pos == 4 + len(host) + 3 and end == len(image)
    assert sections[".text.kern"] == (64 + len(b"\0.shstrtab\0.text.kern\0"), 32)


def test_only_cubins_with_a_matching_function_are_disassembled(monkeypatch):
    data = cuda_elf(function="other") + cuda_elf(function="sgemm_x") + cuda_elf(function="sgemm_broken")
    asked = []

    def listing(cubin_bytes, cuobjdump):
        name = [n for n in ("other", "sgemm_x", "sgemm_broken") if f".text.{n}\0".encode() in cubin_bytes][0]
        asked.append(name)
        return None if name.endswith("broken") else {name: [(0, "EXIT")], "helper": [(0, "RET")]}

    monkeypatch.setattr(cubin, "listing", listing)
    unreadable = []
    found = list(cubin.functions_in(data, "sgemm_", "cuobjdump", unreadable))
    assert asked == ["sgemm_x", "sgemm_broken"]
    [(pos, _size, name, base, lines)] = found
    assert name == "sgemm_x" and base == pos + 64 + len(b"\0.shstrtab\0.text.sgemm_x\0") and lines == [(0, "EXIT")]
    assert unreadable == [2 * len(cuda_elf(function="other")) + 2]


def test_listing_is_parsed():
    sass = """
        code for sm_90
                Function : f
        /*0000*/                   MOV R1, c[0x0][0x28] ;                  /* 0x00000a00ff017b82 */
        /*0010*/               @P0 BRA 0x0 ;
                Function : g
        /*0000*/                   EXIT ;
"""
    assert cubin.parse_listing(sass) == [("f", [(0, "MOV R1, c[0x0][0x28]"), (0x10, "@P0 BRA 0x0")]), ("g", [(0, "EXIT")])]


def executable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_cuobjdump_is_found_on_path_then_in_the_toolkit_then_in_triton(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    fake_triton = tmp_path / "site" / "triton"
    (fake_triton / "__init__.py").parent.mkdir(parents=True)
    (fake_triton / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    assert cubin.find_cuobjdump() is None
    in_triton = executable(fake_triton / "backends" / "nvidia" / "bin" / "cuobjdump")
    assert cubin.find_cuobjdump() == in_triton
    in_toolkit = executable(tmp_path / "cuda" / "bin" / "cuobjdump")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert cubin.find_cuobjdump() == in_toolkit
    monkeypatch.delenv("CUDA_HOME")
    assert cubin.find_cuobjdump(cuda_home=str(tmp_path / "cuda")) == in_toolkit
    on_path = executable(tmp_path / "path" / "cuobjdump")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    assert cubin.find_cuobjdump(cuda_home=str(tmp_path / "cuda")) == on_path


def test_write_library_keeps_the_mode(tmp_path):
    like = tmp_path / "lib.so"
    like.write_bytes(b"old")
    os.chmod(like, 0o755)
    cubin.write_library(b"new", str(like), str(like))
    assert like.read_bytes() == b"new" and stat.S_IMODE(os.stat(like).st_mode) == 0o755
    assert not (tmp_path / "lib.so.tmp").exists()
