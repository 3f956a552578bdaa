#!/usr/bin/env python3
"""Strict checker of the Prometheus text exposition format (0.0.4).

Usage: promparse.py FILE

Checks every line of FILE against
https://prometheus.io/docs/instrumenting/exposition_formats/ and exits 1
with "FILE:LINE: reason" at the first violation.  Stricter than
Prometheus where biomirror promises more: every metric has exactly one
"# HELP" and one "# TYPE" line, both before its first sample; the samples
of a metric form one group; no series appears twice; no timestamps.

On success prints one line per sample, sorted: NAME LABELS VALUE, where
LABELS is "k=v,k=v" with label values unescaped ("-" when there are
none) and VALUE is the value as written.
"""
import math
import re
import sys

METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?"
                   r"|[Nn][Aa][Nn]|[Ii][Nn][Ff](?:[Ii][Nn][Ii][Tt][Yy])?)")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class Bad(Exception):
    pass


def unescape(s, allowed):
    """Undo backslash escapes; allowed is the set of escaped characters."""
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            if i + 1 >= len(s) or s[i + 1] not in allowed:
                raise Bad("bad escape in %r" % s)
            out.append("\n" if s[i + 1] == "n" else s[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_labels(s, i):
    """Parse {k="v",...} starting at s[i] == '{'; return (labels, next i)."""
    labels = {}
    i += 1
    while True:
        if i < len(s) and s[i] == "}":
            return labels, i + 1
        m = LABEL.match(s, i)
        if not m:
            raise Bad("bad label name at column %d" % (i + 1))
        name = m.group(0)
        if name.startswith("__"):
            raise Bad("reserved label name %s" % name)
        if name in labels:
            raise Bad("label %s given twice" % name)
        i = m.end()
        if s[i:i + 2] != '="':
            raise Bad('expected =" after label %s' % name)
        i += 2
        j = i
        while j < len(s) and s[j] != '"':
            j += 2 if s[j] == "\\" else 1
        if j >= len(s):
            raise Bad("unterminated label value")
        labels[name] = unescape(s[i:j], {"\\", '"', "n"})
        i = j + 1
        if i < len(s) and s[i] == ",":
            i += 1
        elif i < len(s) and s[i] == "}":
            continue
        else:
            raise Bad("expected , or } after a label value")


def check(path):
    raw = open(path, "rb").read()
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise Bad("0: not UTF-8: %s" % e)
    if not text.endswith("\n"):
        raise Bad("0: the last line does not end with a line feed")
    helps, types, done, series, out = {}, {}, set(), set(), []
    sampled = set()
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        try:
            if line.strip() == "":
                continue
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 2 and parts[1] in ("HELP", "TYPE"):
                    if len(parts) < 3 or not METRIC.fullmatch(parts[2]):
                        raise Bad("bad metric name in %s line" % parts[1])
                    name = parts[2]
                    if name in sampled:
                        raise Bad("%s of %s after its samples" % (parts[1], name))
                    if parts[1] == "HELP":
                        if name in helps:
                            raise Bad("second HELP for " + name)
                        helps[name] = unescape(parts[3] if len(parts) > 3 else "",
                                               {"\\", "n"})
                    else:
                        if name in types:
                            raise Bad("second TYPE for " + name)
                        if len(parts) != 4 or parts[3] not in TYPES:
                            raise Bad("bad TYPE line")
                        types[name] = parts[3]
                continue
            m = METRIC.match(line)
            if not m:
                raise Bad("bad metric name")
            name, i = m.group(0), m.end()
            labels = {}
            if i < len(line) and line[i] == "{":
                labels, i = parse_labels(line, i)
            if i >= len(line) or line[i] != " ":
                raise Bad("expected one space before the value")
            rest = line[i + 1:].split(" ")
            if len(rest) != 1:
                raise Bad("unexpected timestamp or trailing text")
            if not FLOAT.fullmatch(rest[0]):
                raise Bad("value %r is not a float" % rest[0])
            v = float(rest[0])
            if math.isnan(v) or math.isinf(v):
                raise Bad("value %r: biomirror writes finite values" % rest[0])
            if name not in helps or name not in types:
                raise Bad("sample of %s before its HELP and TYPE" % name)
            if current != name:
                if name in done:
                    raise Bad("samples of %s are not one group" % name)
                if current is not None:
                    done.add(current)
                current = name
            key = (name, tuple(sorted(labels.items())))
            if key in series:
                raise Bad("series given twice")
            series.add(key)
            sampled.add(name)
            lab = ",".join("%s=%s" % kv for kv in sorted(labels.items())) or "-"
            out.append("%s %s %s" % (name, lab, rest[0]))
        except Bad as e:
            raise Bad("%d: %s: %r" % (n, e, line))
    for name in helps.keys() | types.keys():
        if not any(k[0] == name for k in series):
            raise Bad("0: %s has HELP/TYPE but no sample" % name)
    return sorted(out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: promparse.py FILE")
    try:
        lines = check(sys.argv[1])
    except (Bad, OSError) as e:
        sys.stderr.write("%s:%s\n" % (sys.argv[1], e))
        sys.exit(1)
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
