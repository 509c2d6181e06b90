"""bench/machine.py — one line naming the machine a Python benchmark ran on, for the
first line of its output: /proc/cpuinfo's model name, family and model, the SIMD
level the loaded libkdalab.so dispatches to, and the CPUs this process may use.

It asks the loaded library and /proc directly rather than `bin/kdalab info`, so a
benchmark run where only the library travelled (a lent machine) still says where
it ran.
"""

import ctypes
import os
import platform

from kdalab import _lib


def _cpuinfo():
    """The first value of each /proc/cpuinfo key (Linux); {} where it is absent."""
    out = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() not in out:
                    out[key.strip()] = value.strip()
    except OSError:
        pass
    return out


def describe():
    """'<model name>, cpu_family F model M, simd_level L, N cpus' for this process."""
    c = _cpuinfo()
    lib = _lib.lib
    lib.kdalab_simd_get_level.restype = ctypes.c_int
    lib.kdalab_simd_level_name.restype = ctypes.c_char_p
    lib.kdalab_simd_level_name.argtypes = [ctypes.c_int]
    level = lib.kdalab_simd_level_name(lib.kdalab_simd_get_level()).decode()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return "%s, cpu_family %s model %s, simd_level %s, %d cpus" % (
        c.get("model name", platform.processor() or "unknown cpu"), c.get("cpu family", "?"),
        c.get("model", "?"), level, cpus)
