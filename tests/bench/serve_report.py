#!/usr/bin/env python3
# tests/bench/serve_report.py: the report of tests/bench/serve.sh, from its
# raw.csv (rows "tool,case,ms,server CPU s,client CPU s", one per run):
# medians of wall seconds per case and tool, each tool's ratio to bm://,
# the medians of client and server CPU seconds, bm://'s server CPU per GiB
# served, and every raw run in round order.
#   serve_report.py RAW.CSV RUNS A_BYTES B_BYTES (du -sb: the files' bytes)
# CPU is counted in clock ticks (10 ms): --quick's runs are too short
# for its CPU columns to say much.
import csv
import statistics
import sys

raw, runs_n, a_b, b_b = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
wall, scpu, ccpu = {}, {}, {}
for tool, case, ms, s, c in csv.reader(open(raw)):
    wall.setdefault(case, {}).setdefault(tool, []).append(int(ms) / 1000)
    scpu.setdefault(case, {}).setdefault(tool, []).append(float(s))
    ccpu.setdefault(case, {}).setdefault(tool, []).append(float(c))
# "CASE + flush": the run and the sync(1) after it, round by round (rsync
# and HTTP leave dirty pages behind; biomirror syncs before it publishes).
for case in [k for k in wall if k.endswith(" flush")]:
    base = case[:-len(" flush")]
    fl = wall.pop(case)
    scpu.pop(case)
    ccpu.pop(case)
    wall[base + " + flush"] = {t: [a + b for a, b in zip(wall[base][t], v)]
                               for t, v in fl.items()}
gib = {"A": int(a_b) / 2**30, "B": int(b_b) / 2**30}
tools = ["bm", "old", "rsync", "http"]
names = {"bm": "bm://", "old": "old bm:// (--baseline)",
         "rsync": "rsync -a rsync://", "http": "biomirror over HTTP"}
present = [t for t in tools if any(t in v for v in wall.values())]
med = statistics.median


def cell(v, fmt="%.3f"):
    return fmt % med(v) if v else "-"


print("# medians of %s rounds: wall seconds (x: that tool's time over "
      "bm://'s)" % runs_n)
print("| case | " + " | ".join(names[t] for t in present) + " |")
print("|---" * (len(present) + 1) + "|")
for case, t in wall.items():
    row = []
    for k in present:
        if k not in t:
            row.append("-")
        elif k != "bm" and "bm" in t and med(t["bm"]) > 0:
            row.append("%.3f (%.2fx)" % (med(t[k]), med(t[k]) / med(t["bm"])))
        else:
            row.append(cell(t[k]))
    print("| %s | %s |" % (case, " | ".join(row)))
print()
print("# medians: CPU seconds, client / server (the server: biomirror serve,"
      " rsync's daemon and its children, nginx's worker); bm:// server "
      "CPU s per GiB served")
print("| case | " + " | ".join(names[t] for t in present) +
      " | bm:// server s/GiB |")
print("|---" * (len(present) + 2) + "|")
for case, t in ccpu.items():
    row = ["%s / %s" % (cell(t[k], "%.2f"), cell(scpu[case][k], "%.2f"))
           if k in t else "-" for k in present]
    per = "-"
    if "bm" in scpu[case] and "no change" not in case:
        per = "%.2f" % (med(scpu[case]["bm"]) / gib[case[0]])
    print("| %s | %s | %s |" % (case, " | ".join(row), per))
print()
print("raw (wall s / client CPU s, in round order):")
for case, t in wall.items():
    for k in present:
        if k in t:
            c = ccpu.get(case, {}).get(k)
            print("  %s %s: %s" % (case, k, " ".join(
                "%.3f" % v if c is None else "%.3f/%.2f" % (v, c[i])
                for i, v in enumerate(t[k]))))
