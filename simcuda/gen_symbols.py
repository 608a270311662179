#!/usr/bin/env python3
"""simcuda/gen_symbols.py: derive the simulated platform's export lists
from an installed CUDA PyTorch wheel and the CUDA toolkit headers.

The lists it writes into simcuda/symbols/ are committed, so the build needs
neither the wheel nor this script; run it again when the wheel changes:

    python3 simcuda/gen_symbols.py SITE_PACKAGES [CUDA_INCLUDE [OUT_DIR]]

(OUT_DIR defaults to simcuda/symbols; tests write elsewhere and compare.)

What a list holds, per library the platform replaces:
  libcudart.so.13, libcublas.so.13, libcublasLt.so.13: every symbol that any
      ELF object of the wheel (torch/, torch/lib, nvidia/**/lib) imports with
      that version node (objdump -T), because Python loads extensions with
      RTLD_NOW and glibc then demands the whole closure at load time; and
      every function NVIDIA's library of that name in the wheel exports
      under it, so any program built against it (nvcc -cudart shared)
      loads too.
  libcuda.so.1: the driver names imported unversioned by objects that NEED
      libcuda.so.1, plus the driver names the wheel looks up at run time by
      string (dlsym, cudaGetDriverEntryPointByVersion), both kept only when
      cuda.h declares them; each macro-renamed name (cuMemGetInfo ->
      cuMemGetInfo_v2) is listed under the name cuda.h maps it to.
  libnccl.so.2: the nccl* names imported unversioned by objects that NEED it.
  libnvidia-ml.so.1: the nvml* names the wheel looks up by string (dlsym in
      libc10_cuda/libtorch_cuda, ctypes in torch/cuda/*.py).
  driver_aliases: "base mapped" pairs of cuda.h's renaming macros, which the
      entry-point lookups use (cuGetProcAddress asks by base name).
"""
import os
import re
import subprocess
import sys

VERSIONED = ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13")


def elf_files(site):
    roots = [os.path.join(site, "torch"), os.path.join(site, "nvidia")]
    for root in roots:
        for d, _, files in os.walk(root):
            for f in files:
                p = os.path.join(d, f)
                if os.path.islink(p) or not (".so" in f):
                    continue
                with open(p, "rb") as fh:
                    if fh.read(4) != b"\x7fELF":
                        continue
                yield p


def dyn_undefined(path):
    """(name, version-node or None) for each undefined dynamic symbol."""
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "*UND*" not in line:
            continue
        parts = line.split()
        name = parts[-1]
        ver = parts[-2]
        if ver.startswith("(") and ver.endswith(")"):
            yield name, ver[1:-1]
        else:
            yield name, None


def dyn_functions(path, node):
    """The functions path defines under version node `node`."""
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if "*UND*" not in line and " DF " in line and len(parts) >= 2 and parts[-2] == node:
            yield parts[-1]


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out))


def cuda_h_functions(include):
    text = open(os.path.join(include, "cuda.h")).read()
    decl = set(re.findall(r"CUresult\s+CUDAAPI\s+(cu[A-Za-z0-9_]+)\s*\(", text))
    aliases = {}
    # "#define cuX cuX_v2" and the per-thread wrapped "__CUDA_API_PTDS(cuX_v2)".
    pat = r"^\s*#define\s+(cu[A-Za-z0-9]+)\s+(?:__CUDA_API_PT[DS][SZ]\()?(cu[A-Za-z0-9]+_v[0-9]+)\)?\s*$"
    for base, mapped in re.findall(pat, text, re.M):
        aliases.setdefault(base, mapped)
    # A declaration names the base; the object file carries the macro's target.
    decl |= {aliases[d] for d in decl if d in aliases}
    return decl, aliases


def main():
    site = sys.argv[1]
    include = sys.argv[2] if len(sys.argv) > 2 else "/usr/local/cuda/include"
    outdir = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "symbols")
    decl, aliases = cuda_h_functions(include)
    lists = {k: set() for k in VERSIONED + ("libcuda.so.1", "libnccl.so.2", "libnvidia-ml.so.1")}
    for path in elf_files(site):
        need = needed(path)
        for name, ver in dyn_undefined(path):
            if ver in lists:
                lists[ver].add(name)
            elif ver is None and "libcuda.so.1" in need and name in decl:
                lists["libcuda.so.1"].add(name)
            elif ver is None and "libnccl.so.2" in need and name.startswith("nccl"):
                lists["libnccl.so.2"].add(name)
        if os.path.basename(path).startswith(("libc10_cuda", "libtorch_cuda", "libtorch_python")):
            strings = subprocess.run(["strings", path], capture_output=True, text=True).stdout
            lists["libnvidia-ml.so.1"] |= set(re.findall(r"^nvml[A-Z][A-Za-z0-9_]+$", strings, re.M))
            for s in set(re.findall(r"^cu[A-Z][A-Za-z0-9_]+$", strings, re.M)):
                s = aliases.get(s, s)
                if s in decl:
                    lists["libcuda.so.1"].add(s)
    for lib in VERSIONED:
        real = os.path.join(site, "nvidia", "cu13", "lib", lib)
        if os.path.exists(real):
            lists[lib] |= set(dyn_functions(real, lib))
    cuda_py = os.path.join(site, "torch", "cuda")
    for f in sorted(os.listdir(cuda_py)):
        if f.endswith(".py"):
            text = open(os.path.join(cuda_py, f)).read()
            lists["libnvidia-ml.so.1"] |= set(re.findall(r"\b(nvml[A-Z][A-Za-z0-9_]+)\(", text))
    # What the platform itself needs from its own driver, beyond the wheel:
    # the runtime's entry-point lookups and nvcc-built programs' static cudart.
    for extra in ("cuGetProcAddress_v2", "cuGetExportTable", "cuDriverGetVersion", "cuInit",
                  "cuDeviceGetCount", "cuDeviceGetName", "cuDeviceTotalMem_v2", "cuMemAlloc_v2",
                  "cuMemFree_v2", "cuMemGetInfo_v2", "cuMemcpy", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2",
                  "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuCtxSynchronize",
                  "cuDevicePrimaryCtxRelease_v2", "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate",
                  "cuMemMap", "cuMemUnmap", "cuMemRelease", "cuMemSetAccess"):
        lists["libcuda.so.1"].add(extra)
    for name, syms in lists.items():
        with open(os.path.join(outdir, name + ".syms"), "w") as fh:
            fh.write("# generated by simcuda/gen_symbols.py from the installed wheel; do not edit\n")
            for s in sorted(syms):
                fh.write(s + "\n")
        print(f"{name}: {len(syms)} symbols")
    with open(os.path.join(outdir, "driver_aliases.txt"), "w") as fh:
        fh.write("# generated by simcuda/gen_symbols.py from cuda.h; base-name mapped-name\n")
        for base in sorted(aliases):
            fh.write(f"{base} {aliases[base]}\n")


if __name__ == "__main__":
    main()
