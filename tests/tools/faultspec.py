"""The --fault PATH=KIND[,key=value...] syntax shared by the fault servers
(faultserver.py, modeefaultserver.py): one spec to (path, fault dict)."""


def parse_fault(spec):
    """'PATH=KIND,k=v,...' -> (PATH, {"kind": KIND, "k": "v", ...}); the
    values stay strings, each server reads the keys its kinds take."""
    path, _, rest = spec.partition("=")
    parts = rest.split(",")
    fault = {"kind": parts[0]}
    for kv in parts[1:]:
        k, _, v = kv.partition("=")
        fault[k] = v
    return path, fault
