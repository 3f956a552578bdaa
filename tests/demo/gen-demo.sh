#!/bin/sh
# gen-demo.sh OUTDIR: write a small tree shaped like NCBI's blast/db into
# OUTDIR (about 3 MB, deterministic: the same bytes and mtimes every time).
#
#   README                              text, like NCBI's
#   demo_nt.NN.tar.gz (+ .md5)          3 volumes of a nucleotide db
#   demo_nt-nucl-metadata.json          NCBI's v1.1 BLAST db metadata
#   demo_nr.NN.tar.gz (+ .md5)          2 volumes of a protein db
#   demo_nr-prot-metadata.json
#   demo_16S_ribosomal_RNA.tar.gz (+ .md5, metadata)   a one-volume db
#   taxdb.tar.gz (+ .md5)
#   FASTA/demo_pdbaa.gz (+ .md5)        a subdirectory, like blast/db/FASTA
#
# Each .tar.gz is a real tar (members with fixed mtimes, owner 0) compressed
# with gzip (no name, mtime 0); each .md5 sidecar is in NCBI's (md5sum's)
# format "DIGEST  NAME".  The sequences are random, not NCBI data.
set -u
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
mkdir -p "$1" || exit 1
exec python3 - "$1" <<'EOF'
import calendar, gzip, hashlib, io, json, os, random, sys, tarfile

out = sys.argv[1]
rng = random.Random(1990)
NUC = bytes(b"ACGT"[i % 4] for i in range(256))
AA = bytes(b"ACDEFGHIKLMNPQRSTVWY"[i % 20] for i in range(256))


def when(s):
    """'2024-03-04 09:15:07' (UTC) -> epoch seconds."""
    return calendar.timegm(tuple(int(x) for x in
                                 s.replace("-", " ").replace(":", " ").split()) + (0, 0, 0))


def fasta(prefix, n, length, table):
    """FASTA-ish text: n records of about length letters, 80 per line."""
    parts, letters = [], 0
    for i in range(n):
        ln = length + rng.randrange(length // 2)
        seq = rng.randbytes(ln).translate(table)
        letters += ln
        parts.append(b">%s_%06d.1 demo sequence %d\n" % (prefix.encode(), i, i))
        parts.extend(seq[j:j + 80] + b"\n" for j in range(0, ln, 80))
    return b"".join(parts), letters


def write(rel, data, mtime):
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, (mtime, mtime))


def targz(members, mtime):
    """A deterministic .tar.gz of [(name, bytes)]."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in sorted(members):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode = len(data), mtime, 0o644
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            tf.addfile(ti, io.BytesIO(data))
    z = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=z, mtime=0,
                       compresslevel=6) as g:
        g.write(raw.getvalue())
    return z.getvalue()


def publish(rel, data, mtime):
    """The file and its .md5 sidecar (one minute later, as NCBI does)."""
    write(rel, data, mtime)
    digest = hashlib.md5(data).hexdigest()
    write(rel + ".md5", ("%s  %s\n" % (digest, os.path.basename(rel))).encode(),
          mtime + 60)


def database(name, kind, volumes, nseq, seqlen, date, description):
    ext = "n" if kind == "nucl" else "p"
    table = NUC if kind == "nucl" else AA
    t0 = when(date)
    files, letters, seqs, total, cache = [], 0, 0, 0, 0
    for v in range(volumes):
        vol = "%s.%02d" % (name, v) if volumes > 1 else name
        text, n = fasta(vol, nseq + v * 3, seqlen, table)
        headers = b"".join(l[1:] + b"\n" for l in text.split(b"\n") if l.startswith(b">"))
        index = b"BLASTDB demo index\nvolume %s\nsequences %d\nletters %d\n" % (
            vol.encode(), nseq + v * 3, n)
        members = [(vol + "." + ext + "sq", text),
                   (vol + "." + ext + "hr", headers),
                   (vol + "." + ext + "in", index)]
        mt = t0 + v * 97 + 13
        publish(vol + ".tar.gz", targz(members, mt - 3600), mt)
        files.append(vol + ".tar.gz")
        letters += n
        seqs += nseq + v * 3
        total += sum(len(d) for _, d in members)
        cache += len(text)
    meta = {
        "dbname": name,
        "version": "1.1",
        "dbtype": "Nucleotide" if kind == "nucl" else "Protein",
        "db-version": 5,
        "description": description,
        "number-of-letters": letters,
        "number-of-sequences": seqs,
        "last-updated": date.split()[0] + "T00:00:00",
        "number-of-volumes": volumes,
        "bytes-total": total,
        "bytes-to-cache": cache,
        "files": files,
    }
    write("%s-%s-metadata.json" % (name, kind),
          (json.dumps(meta, indent=2) + "\n").encode(), t0 + 1200)


database("demo_nt", "nucl", 3, 260, 4000, "2024-03-04 09:15:07",
         "Demo nucleotide collection (generated, not NCBI data)")
database("demo_nr", "prot", 2, 900, 600, "2024-03-02 21:40:51",
         "Demo non-redundant protein sequences (generated, not NCBI data)")
database("demo_16S_ribosomal_RNA", "nucl", 1, 120, 1400, "2024-02-27 06:03:29",
         "Demo 16S ribosomal RNA (generated, not NCBI data)")

tax = [("taxdb.btd", b"".join(b"%d\tDemo species %d\tdemo %d\tEukaryota\n" % (i, i, i)
                              for i in range(1, 3000))),
       ("taxdb.bti", b"BLAST taxonomy index (demo)\nentries 2999\n")]
publish("taxdb.tar.gz", targz(tax, when("2024-03-01 00:00:00")), when("2024-03-01 04:12:55"))

pdb, _ = fasta("pdb", 150, 300, AA)
z = io.BytesIO()
with gzip.GzipFile(filename="", mode="wb", fileobj=z, mtime=0) as g:
    g.write(pdb)
publish("FASTA/demo_pdbaa.gz", z.getvalue(), when("2024-02-29 17:45:33"))
os.utime(os.path.join(out, "FASTA"), (when("2024-02-29 17:46:33"),) * 2)

write("README", b"""BLAST databases (biomirror demo)
================================

This tree imitates https://ftp.ncbi.nlm.nih.gov/blast/db/ in miniature.  Its
sequences are random; it exists to show biomirror keeping a copy current.

- NAME.NN.tar.gz    one volume of a multi-volume BLAST database
- NAME.NN.tar.gz.md5  its MD5 digest ("DIGEST  NAME", as md5sum prints it)
- NAME-TYPE-metadata.json  database metadata (format version 1.1): the
  volumes, the number of letters and sequences, the date of the last update
- taxdb.tar.gz      taxonomy names used by BLAST output
- FASTA/            the same data as FASTA

Download every volume of a database and check it with its .md5 file before
use; never use a database while some of its volumes are old and some new.
""", when("2024-01-15 10:00:00"))
EOF
