#!/usr/bin/python3
"""A small GridFTP server of our own for MODE E faults a real
globus-gridftp-server will not produce on demand (tests only, loopback
only, Python 3 standard library).  It serves --root read-only to anyone
on 127.0.0.1:--port and speaks what biomirror's MODE E engine and its
libcurl listing send:

  USER PASS SYST FEAT PWD CWD TYPE MODE (E, S) DCAU OPTS PORT EPRT EPSV
  PASV REST MLSD LIST SIZE MDTM RETR NOOP QUIT

(LIST, in stream mode only, in `ls -l` form with the year: for a client
that finds no MLST in FEAT.)

FEAT lists DCAU, PARALLEL, MLST/MLSD, SIZE and MDTM (a GridFTP server to
biomirror).  MLSD answers with the facts globus-gridftp-server sends
(Type=cdir/pdir/file/dir; Modify; Size; Perm; Unique): in stream mode
over a passive connection, in MODE E as blocks over the PORT connection
(as RETR below; of the faults only intruder, keyed by the directory's
path, "" for the root).  RETR in MODE E goes over the PORT/EPRT address: the
server connects (GFD.20 section 3.4: the sender is active), replies 150,
or 125 when the data connection of an earlier RETR is still open, sends
the file in blocks of a 17-byte header (descriptor, 64-bit count, 64-bit
offset, network order) and at most 256 KiB of payload, then the EOF|EOD
block (0x48, count 0, offset = EOD count 1) and "226 Transfer Complete.";
the data connection stays open for the next RETR.  RETR in MODE S sends
the file on a passive (or PORT) connection and closes it.

Faults per path (relative to --root, as in the stats; repeatable):
--fault PATH=KIND[,key=value...], or --faults FILE (JSON: {"PATH":
[{"kind": KIND, key: value, ...}, ...]}).  Each applies to the first
times= RETRs of PATH (default 1: once, then behave):

  cut       close the data connection after at= payload bytes (default
            half the file) and reply 426, after delay= seconds (default
            0) unless the client closed the control connection by then
  errors    send the block holding byte at= (default 0) with descriptor
            0x20 (suspected errors)
  gap       send the block holding byte at= (default 262144, the second
            block) at its offset plus skip= (default 4096)
  eod2      announce EOF with an EOD count of count= (default 2)
  stall     send at= payload bytes (default half the file), then nothing
            until the client closes the control connection or for=
            seconds (default 30) pass; the connections stay open
  long      send extra= bytes (default 100) past the file's size, as one
            more block before EOF
  close     end the file with descriptor 0x4c (EOF, EOD and CLOSE: the
            sender closes the data connection) and close it; the next
            RETR opens a new one
  noeof     end the file with an EOD block (0x08) that is no EOF block
            (no EOF is ever sent: the sender breaks GFD.20)
  intruder  before the data connection of this RETR, connect to the
            client's PORT address from from= (default 127.0.0.2; bound
            before connect) and send a whole fake file of the right size
            (bytes 'X') and EOF; then connect from 127.0.0.1 with the
            right data.  A RETR that reuses an open data connection
            sends the intruder all the same (the client is not accepting
            then: it waits in the backlog) and goes on with 125

--refuse-mode-e: reply "500 MODE E not supported." to every MODE E (the
whole run).
--feat refuse: reply "500 'FEAT': command not understood." to every FEAT;
--feat drop: close the control connection at the first FEAT, without a
reply (later FEATs are answered).
--feat split: the usual FEAT reply sent a few bytes at a time (a reply
split across many packets); --feat r4xx: reply "451 FEAT: local error."
to the first FEAT (later FEATs are answered); --feat long, --feat huge: a 211- reply with about 8 KiB,
or 1 MiB, of made-up feature lines before the usual ones; --feat midclose: at the first FEAT
send the first two lines of the reply and close the control connection
(later FEATs are answered).
--feat nomlst: a FEAT reply of a plain FTP server (SIZE, REST STREAM,
MDTM; no MLST, no DCAU): the client lists with LIST.
--refuse-login: reply "530 Login incorrect." to every PASS.
--listing DIR=FILE (repeatable): LIST and MLSD of DIR (relative to
--root, "" for the root) send FILE's bytes as they are instead of a
listing made from the tree (a hostile listing: any name bytes, sizes
and duplicates); RETR, SIZE and MDTM still serve the tree.

Statistics (JSON, rewritten after every change, --stats): retrs per path
(both modes), stream_retrs (per path, the REST offset of each RETR in
stream mode, 0 without REST), faults (fired per path and kind, "PATH kind"), control connections (open,
total, max_concurrent), data_conns (data connections the server opened
for MODE E, intruders excluded), reused (RETRs answered 125), intruders
(connections from the intruder address that connected; intruders_reused:
of them, those made while a data connection was open), mode_e (MODE E
commands accepted), mode_e_refused, mlsd_e (MLSD answered in MODE E),
feat (FEAT commands received), lists (LIST answered).

--await-pipeline SECS: before the 226 of a MODE E RETR, wait up to SECS
for the client's next command; one that comes (sent before that reply:
pipelined) is counted in pipelined_retrs (statistics) if it is a RETR.  Always:
early counts per command name those that had come whole (in the read
of an earlier command) when the one before them was answered.
"""
import argparse
import json
import os
import posixpath
import select
import socket
import struct
import sys
import threading
import time

from faultspec import parse_fault

BLOCK = 256 * 1024
HOSTILE = ("noconnect", "early226", "hugecount", "backwards",
           "dataafter", "splithdr", "earlydata", "nocrlf", "longreply",
           "r421", "mline1xx")
LOCK = threading.Lock()
LOGLOCK = threading.Lock()
STATE = {"retrs": {}, "stream_retrs": {}, "faults": {}, "open": 0, "total": 0,
         "max_concurrent": 0, "data_conns": 0, "reused": 0,
         "intruders": 0, "intruders_reused": 0, "mode_e": 0, "mode_e_refused": 0,
         "mlsd_e": 0, "feat": 0, "lists": 0, "pipelined_retrs": 0,
         "early": {}}
FAULTS = {}     # path -> list of dicts (kind, params, applied)
ARGS = None


def save():
    """Write STATE to --stats (the caller holds LOCK)."""
    tmp = ARGS.stats + ".tmp"
    with open(tmp, "w") as f:
        json.dump(STATE, f, sort_keys=True)
    os.replace(tmp, ARGS.stats)


def log(*a):
    with LOGLOCK:
        print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def take_fault(rel):
    """The fault that applies to this RETR of rel (counted), or None."""
    with LOCK:
        for f in FAULTS.get(rel, []):
            if f.get("applied", 0) >= int(f.get("times", 1)):
                continue
            f["applied"] = f.get("applied", 0) + 1
            key = "%s %s" % (rel, f["kind"])
            STATE["faults"][key] = STATE["faults"].get(key, 0) + 1
            save()
            return f
    return None


def header(desc, count, offset):
    return struct.pack(">BQQ", desc, count, offset)


class Session(threading.Thread):
    """One control connection."""

    def __init__(self, conn, peer):
        super().__init__(daemon=True)
        self.c = conn
        self.peer = peer
        self.buf = b""
        self.cwd = "/"
        self.mode_e = False
        self.port_addr = None       # (host, port) of PORT/EPRT
        self.pasv = None            # listening socket of PASV/EPSV
        self.dconn = None           # MODE E data connection, kept open
        self.rest = 0

    # --- control connection -------------------------------------------
    def reply(self, text):
        log(self.peer, "<", text.splitlines()[-1])
        self.c.sendall(text.encode("utf-8", "surrogateescape") + b"\r\n")

    def readline(self):
        if b"\n" in self.buf:
            name = self.buf.split(b"\n", 1)[0].split(b" ", 1)[0]
            name = name.strip().decode("ascii", "replace").upper()
            with LOCK:
                STATE["early"][name] = STATE["early"].get(name, 0) + 1
                save()
        while b"\n" not in self.buf:
            d = self.c.recv(4096)
            if not d:
                return None
            self.buf += d
        line, _, self.buf = self.buf.partition(b"\n")
        return line.rstrip(b"\r").decode("utf-8", "surrogateescape")

    def run(self):
        with LOCK:
            STATE["open"] += 1
            STATE["total"] += 1
            STATE["max_concurrent"] = max(STATE["max_concurrent"],
                                          STATE["open"])
            save()
        try:
            self.reply("220 modeefaultserver ready.")
            while True:
                line = self.readline()
                if line is None:
                    break
                log(self.peer, ">", line)
                cmd, _, arg = line.partition(" ")
                fn = getattr(self, "do_" + cmd.upper(), None)
                if fn is None:
                    self.reply("500 '%s': command not understood." % cmd)
                    continue
                if fn(arg) is False:
                    break
        except OSError as e:
            log(self.peer, "control connection:", e)
        finally:
            for s in (self.dconn, self.pasv, self.c):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass
            with LOCK:
                STATE["open"] -= 1
                save()

    # --- paths --------------------------------------------------------
    def vpath(self, arg):
        """Virtual absolute path of arg (relative to the cwd)."""
        p = posixpath.normpath(posixpath.join(self.cwd, arg or "."))
        return "/" + p.lstrip("/")

    def real(self, arg):
        return os.path.join(ARGS.root, self.vpath(arg).lstrip("/"))

    def rel(self, arg):
        return self.vpath(arg).lstrip("/")

    # --- commands -----------------------------------------------------
    def do_USER(self, arg):
        self.reply("331 Password required for %s." % arg)

    def do_PASS(self, arg):
        if ARGS.refuse_login:
            self.reply("530 Login incorrect.")
            return
        self.reply("230 User logged in.")

    def do_SYST(self, arg):
        self.reply("215 UNIX Type: L8")

    def do_FEAT(self, arg):
        with LOCK:
            STATE["feat"] += 1
            first = STATE["feat"] == 1
            save()
        if ARGS.feat == "refuse":
            self.reply("500 'FEAT': command not understood.")
            return
        if ARGS.feat == "drop" and first:
            log(self.peer, "FEAT: closing the control connection")
            return False
        if ARGS.feat == "r4xx" and first:
            self.reply("451 FEAT: local error.")
            return
        feats = ("211-Extensions supported\r\n"
                 " DCAU\r\n"
                 " PARALLEL\r\n"
                 " SIZE\r\n"
                 " MLST Type*;Size*;Modify*;Perm*;Unique*;\r\n"
                 " MLSD\r\n"
                 " REST STREAM\r\n"
                 " MDTM\r\n"
                 "211 End.\r\n").encode()
        if ARGS.feat == "nomlst":
            feats = (b"211-Extensions supported\r\n SIZE\r\n REST STREAM\r\n"
                     b" MDTM\r\n211 End.\r\n")
        if ARGS.feat == "midclose" and first:
            log(self.peer, "FEAT: closing the control connection mid-reply")
            self.c.sendall(b"".join(feats.split(b"\r\n")[:2]) + b"\r\n")
            return False
        if ARGS.feat in ("long", "huge"):
            pad = b"".join(b" X-FEATURE-%06d %s\r\n" % (i, b"y" * 40)
                           for i in range(150 if ARGS.feat == "long"
                                          else 20000))
            feats = feats.replace(b"\r\n", b"\r\n" + pad, 1)
        if ARGS.feat == "split":
            for i in range(0, len(feats), 7):
                self.c.sendall(feats[i:i + 7])
                time.sleep(0.002)
        else:
            self.c.sendall(feats)
        log(self.peer, "< FEAT reply (%d bytes)" % len(feats))

    def do_PWD(self, arg):
        self.reply('257 "%s" is current directory.' % self.cwd)

    def do_CWD(self, arg):
        if not os.path.isdir(self.real(arg)):
            self.reply("550 %s: No such file or directory." % arg)
            return
        self.cwd = self.vpath(arg)
        self.reply("250 CWD command successful.")

    def do_TYPE(self, arg):
        self.reply("200 Type set to %s." % arg)

    def do_MODE(self, arg):
        m = arg.strip().upper()
        if m == "E" and ARGS.refuse_mode_e:
            with LOCK:
                STATE["mode_e_refused"] += 1
                save()
            self.reply("500 MODE E not supported.")
            return
        if m not in ("E", "S"):
            self.reply("504 Mode %s not supported." % arg)
            return
        if m == "E":
            with LOCK:
                STATE["mode_e"] += 1
                save()
        self.mode_e = m == "E"
        self.reply("200 Mode set to %s." % m)

    def do_DCAU(self, arg):
        self.reply("200 DCAU %s." % arg)

    def do_OPTS(self, arg):
        self.reply("200 OPTS Command Successful.")

    def do_NOOP(self, arg):
        self.reply("200 NOOP command successful.")

    def do_REST(self, arg):
        try:
            self.rest = int(arg)
        except ValueError:
            self.reply("501 Bad REST.")
            return
        self.reply("350 Restarting at %d." % self.rest)

    def new_port(self, addr):
        if self.dconn is not None:
            self.dconn.close()
            self.dconn = None
        self.port_addr = addr

    def do_PORT(self, arg):
        try:
            v = [int(x) for x in arg.split(",")]
            host, port = "%d.%d.%d.%d" % tuple(v[:4]), v[4] * 256 + v[5]
        except (ValueError, TypeError, IndexError):
            self.reply("501 Bad PORT.")
            return
        self.new_port((host, port))
        self.reply("200 PORT Command successful.")

    def do_EPRT(self, arg):
        try:
            _, _, host, port, _ = arg.split(arg[0])
            port = int(port)
        except (ValueError, IndexError):
            self.reply("501 Bad EPRT.")
            return
        self.new_port((host, port))
        self.reply("200 EPRT Command successful.")

    def listen(self):
        if self.pasv is not None:
            self.pasv.close()
        self.pasv = socket.socket()
        self.pasv.bind(("127.0.0.1", 0))
        self.pasv.listen(1)
        self.port_addr = None
        return self.pasv.getsockname()[1]

    def do_EPSV(self, arg):
        self.reply("229 Entering Extended Passive Mode (|||%d|)"
                   % self.listen())

    def do_PASV(self, arg):
        p = self.listen()
        self.reply("227 Entering Passive Mode (127,0,0,1,%d,%d)"
                   % (p >> 8, p & 255))

    def stream_conn(self):
        """A stream mode data connection (passive, or to PORT)."""
        if self.pasv is not None:
            self.pasv.settimeout(10)
            d, _ = self.pasv.accept()
            self.pasv.close()
            self.pasv = None
            return d
        if self.port_addr is not None:
            return socket.create_connection(self.port_addr, 10)
        raise OSError("no data connection set up")

    def do_SIZE(self, arg):
        p = self.real(arg)
        if not os.path.isfile(p):
            self.reply("550 %s: No such file or directory." % arg)
            return
        self.reply("213 %d" % os.path.getsize(p))

    def do_MDTM(self, arg):
        p = self.real(arg)
        if not os.path.exists(p):
            self.reply("550 %s: No such file or directory." % arg)
            return
        self.reply("213 " + time.strftime(
            "%Y%m%d%H%M%S", time.gmtime(int(os.stat(p).st_mtime))))

    @staticmethod
    def facts(st, kind):
        return "Type=%s;Modify=%s;Size=%d;Perm=%s;Unique=%x-%x;" % (
            kind, time.strftime("%Y%m%d%H%M%S",
                                time.gmtime(int(st.st_mtime))),
            st.st_size, "el" if kind != "file" else "r", st.st_dev,
            st.st_ino)

    def canned(self, arg):
        """The --listing bytes for the directory arg, None if none."""
        rel = self.rel(arg).rstrip("/")
        if rel not in ARGS.listings:
            return None
        with open(ARGS.listings[rel], "rb") as f:
            return f.read()

    def do_MLSD(self, arg):
        p = self.real(arg)
        if not os.path.isdir(p):
            self.reply("550 %s: No such file or directory." % arg)
            return
        body = self.canned(arg)
        lines = [self.facts(os.stat(p), "cdir") + " " + self.vpath(arg),
                 self.facts(os.stat(os.path.dirname(p.rstrip("/")) or "/"),
                            "pdir") + " .."]
        for name in sorted(os.listdir(p)):
            st = os.lstat(os.path.join(p, name))
            kind = "dir" if os.path.isdir(os.path.join(p, name)) else "file"
            lines.append(self.facts(st, kind) + " " + name)
        if body is None:
            body = "".join(l + "\r\n" for l in lines).encode(
                "utf-8", "surrogateescape")
        if self.mode_e:
            # As globus-gridftp-server: the listing in MODE E blocks on
            # the (cached) data connection the server opens after PORT.
            with LOCK:
                STATE["mlsd_e"] += 1
                save()
            if self.port_addr is None:
                self.reply("425 No PORT: MODE E needs an active sender.")
                return
            # Only the intruder applies to a listing (its path: the
            # directory's, "" for the root).
            fault = take_fault(self.rel(arg))
            if fault and fault["kind"] == "intruder":
                self.intrude(fault, len(body))
            if not self.open_mode_e():
                return
            try:
                ok = self.send_blocks(body, None)
            except OSError:
                ok = False
                self.dconn.close()
                self.dconn = None
            self.reply("226 Transfer Complete." if ok else
                       "426 Data connection closed; transfer aborted.")
            return
        self.send_stream(body, "150 Beginning transfer.")

    def send_stream(self, body, preliminary):
        """A listing in stream mode: the 1xx reply, body over a passive
        (or PORT) connection closed after it, 226."""
        self.reply(preliminary)
        try:
            d = self.stream_conn()
            d.sendall(body)
            d.close()
        except OSError as e:
            self.reply("425 Cannot open data connection: %s" % e)
            return
        self.reply("226 Transfer Complete.")

    def do_LIST(self, arg):
        p = self.real(arg)
        if not os.path.isdir(p) or self.mode_e:
            self.reply("550 %s: cannot list here." % arg)
            return
        lines = []
        for name in sorted(os.listdir(p)):
            st = os.lstat(os.path.join(p, name))
            kind = "d" if os.path.isdir(os.path.join(p, name)) else "-"
            lines.append("%srw-r--r--   1 ftp      ftp      %10d %s %s" % (
                kind, st.st_size,
                time.strftime("%b %d  %Y", time.gmtime(st.st_mtime)), name))
        body = self.canned(arg)
        if body is None:
            body = "".join(l + "\r\n" for l in lines).encode(
                "utf-8", "surrogateescape")
        with LOCK:
            STATE["lists"] += 1
            save()
        self.send_stream(body, "150 Here comes the directory listing.")

    def do_QUIT(self, arg):
        self.reply("221 Goodbye.")
        return False

    # --- RETR ---------------------------------------------------------
    def do_RETR(self, arg):
        p = self.real(arg)
        rel = self.rel(arg)
        if not os.path.isfile(p):
            self.reply("550 %s: No such file or directory." % arg)
            return
        with LOCK:
            STATE["retrs"][rel] = STATE["retrs"].get(rel, 0) + 1
            save()
        with open(p, "rb") as f:
            data = f.read()
        rest, self.rest = self.rest, 0
        if not self.mode_e:
            with LOCK:
                STATE["stream_retrs"].setdefault(rel, []).append(rest)
                save()
            self.reply("150 Opening BINARY mode data connection.")
            try:
                d = self.stream_conn()
                d.sendall(data[rest:])
                d.close()
            except OSError as e:
                self.reply("426 Data connection: %s" % e)
                return
            self.reply("226 Transfer Complete.")
            return
        if self.port_addr is None:
            self.reply("425 No PORT: MODE E needs an active sender.")
            return
        fault = take_fault(rel)
        kind = fault["kind"] if fault else None
        log(self.peer, "RETR", rel, "fault", kind)
        if kind == "intruder":
            self.intrude(fault, len(data))
        if kind in HOSTILE:
            return self.hostile(kind, fault, data)
        if not self.open_mode_e():
            return
        try:
            ok = self.send_blocks(data, fault)
        except OSError as e:
            log(self.peer, "data connection:", e)
            ok = False
            if self.dconn is not None:
                self.dconn.close()
                self.dconn = None
        if ok:
            if ARGS.await_pipeline > 0:
                self.await_pipeline()
            self.reply("226 Transfer Complete.")
        elif ok is not None:
            if kind == "cut" and float(fault.get("delay", 0)) > 0 and \
                    not self.wait_client(float(fault["delay"])):
                return      # the client left first
            self.reply("426 Data connection closed; transfer aborted.")

    def await_pipeline(self):
        """--await-pipeline: the next command, if it comes before the
        226, read into the buffer and counted when it is a RETR."""
        end = time.monotonic() + ARGS.await_pipeline
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.c], [], [], left)[0]:
                return
            d = self.c.recv(4096)
            if not d:
                return
            self.buf += d
        if self.buf.upper().startswith(b"RETR "):
            with LOCK:
                STATE["pipelined_retrs"] += 1
                save()

    def open_mode_e(self):
        """The 1xx of a MODE E transfer: reuse the data connection (125)
        or open one to the PORT address (150).  False: 425 sent."""
        if self.dconn is not None:
            with LOCK:
                STATE["reused"] += 1
                save()
            self.reply("125 Beginning transfer; reusing existing data "
                       "connection.")
            return True
        self.reply("150 Beginning transfer.")
        try:
            self.dconn = socket.create_connection(self.port_addr, 10)
        except OSError as e:
            self.dconn = None
            self.reply("425 Cannot open data connection: %s" % e)
            return False
        with LOCK:
            STATE["data_conns"] += 1
            save()
        return True

    def dc(self):
        if self.dconn is None:
            self.dconn = socket.create_connection(self.port_addr, 10)
        return self.dconn

    def hostile(self, kind, fault, data):
        """Break-test faults: protocol abuse by a hostile server."""
        size = len(data)
        good = header(0, size, 0) + data + header(0x48, 0, 1)
        if kind == "noconnect":         # 150, never a data connection
            self.reply("150 Beginning transfer.")
            self.stall(float(fault.get("for", 30)))
        elif kind == "early226":        # 226 first, then close, no data
            self.reply("150 Beginning transfer.")
            self.reply("226 Transfer Complete.")
            time.sleep(0.3)
            self.dc().close()
            self.dconn = None
        elif kind == "hugecount":       # count 2^62, data then silence
            self.reply("150 Beginning transfer.")
            self.dc().sendall(header(0, 1 << 62, 0) + data)
            self.stall(float(fault.get("for", 30)))
        elif kind == "backwards":       # second block goes back
            self.reply("150 Beginning transfer.")
            h = size // 2
            self.dc().sendall(header(0, h, 0) + data[:h] +
                              header(0, size - h, 0) + data[h:] +
                              header(0x48, 0, 1))
            self.reply("226 Transfer Complete.")
        elif kind == "dataafter":       # a block after EOF|EOD
            self.reply("150 Beginning transfer.")
            self.dc().sendall(good + header(0, 4, size) + b"MORE")
            self.reply("226 Transfer Complete.")
        elif kind == "splithdr":        # headers split across reads
            self.reply("150 Beginning transfer.")
            for i in range(0, len(good), 5):
                self.dc().sendall(good[i:i + 5])
                time.sleep(0.002)
            self.reply("226 Transfer Complete.")
        elif kind == "earlydata":       # all data before the 1xx
            self.dc().sendall(good)
            time.sleep(0.3)
            self.reply("150 Beginning transfer.")
            self.reply("226 Transfer Complete.")
        elif kind == "nocrlf":          # replies end with LF only
            self.dc()
            self.c.sendall(b"150 Beginning transfer.\n")
            self.dconn.sendall(good)
            self.c.sendall(b"226 Transfer Complete.\n")
        elif kind == "longreply":       # a 1xx of more than 8 KiB
            self.dc()
            lines = "".join(" marker %05d %s\r\n" % (i, "x" * 60)
                            for i in range(150))
            self.reply("112-Perf Marker\r\n" + lines + "112 End.")
            self.reply("150 Beginning transfer.")
            self.dconn.sendall(good)
            self.reply("226 Transfer Complete.")
        elif kind == "r421":            # 421 mid-transfer, then close
            self.reply("150 Beginning transfer.")
            self.dc().sendall(header(0, size, 0) + data[:size // 2])
            self.reply("421 Service not available, closing.")
            return False
        elif kind == "mline1xx":        # multi-line 1xx then 226 at once
            self.dc()
            self.c.sendall(b"150-Beginning\r\n150-more\r\n150 go\r\n")
            self.dconn.sendall(good)
            self.c.sendall(b"226-Transfer\r\n226 Complete.\r\n")
        return None

    def intrude(self, fault, size):
        """Connect from another address and send a fake file."""
        src = fault.get("from", "127.0.0.2")
        s = socket.socket()
        try:
            s.bind((src, 0))
            s.settimeout(1)
            s.connect(self.port_addr)
            with LOCK:
                STATE["intruders"] += 1
                if self.dconn is not None:
                    STATE["intruders_reused"] += 1
                save()
            fake = header(0, size, 0) + b"X" * size + header(0x48, 0, 1)
            s.sendall(fake)
            time.sleep(0.2)
        except OSError as e:
            log(self.peer, "intruder:", e)
        finally:
            s.close()

    def send_blocks(self, data, fault):
        """Send data as MODE E blocks on self.dconn, with fault applied.
        True: all sent; False: data connection closed (426 due); None:
        stalled until the client left (no reply)."""
        kind = fault["kind"] if fault else None
        size = len(data)
        at = int(fault.get("at", {"errors": 0, "gap": BLOCK}.get(
            kind, size // 2))) if fault else 0
        d = self.dconn
        off = 0
        sent = 0
        while off < size:
            n = min(BLOCK, size - off)
            desc, hoff = 0, off
            if kind == "errors" and off <= at < off + n:
                desc = 0x20
            if kind == "gap" and off <= at < off + n:
                hoff = off + int(fault.get("skip", 4096))
            chunk = data[off:off + n]
            if kind in ("cut", "stall") and sent + n > at:
                chunk = chunk[:at - sent]
                d.sendall(header(desc, n, hoff) + chunk)
                if kind == "cut":
                    d.close()
                    self.dconn = None
                    return False
                self.stall(float(fault.get("for", 30)))
                return None
            d.sendall(header(desc, n, hoff) + chunk)
            sent += n
            off += n
        if kind == "long":
            extra = int(fault.get("extra", 100))
            d.sendall(header(0, extra, size) + b"L" * extra)
        eods = int(fault.get("count", 2)) if kind == "eod2" else 1
        if kind == "noeof":
            d.sendall(header(0x08, 0, 0))
            return True
        d.sendall(header(0x4c if kind == "close" else 0x48, 0, eods))
        if kind == "close":
            d.close()
            self.dconn = None
        return True

    def wait_client(self, secs):
        """Wait secs, or less if the client closes the control connection
        (False then; commands that come meanwhile are kept for later)."""
        end = time.monotonic() + secs
        while time.monotonic() < end:
            r, _, _ = select.select([self.c], [], [], 0.1)
            if r:
                try:
                    more = self.c.recv(4096)
                except OSError:
                    more = b""
                if not more:
                    return False
                self.buf += more
        return True

    def stall(self, secs):
        """Send nothing until the client closes the control connection or
        secs pass; then drop the data connection."""
        self.wait_client(secs)
        log(self.peer, "stall over")
        if self.dconn is not None:
            self.dconn.close()
            self.dconn = None


def load_faults():
    for spec in ARGS.fault:
        path, f = parse_fault(spec)
        FAULTS.setdefault(path, []).append(f)
    if ARGS.faults:
        with open(ARGS.faults) as fh:
            for path, lst in json.load(fh).items():
                FAULTS.setdefault(path, []).extend(
                    lst if isinstance(lst, list) else [lst])
    kinds = ("cut", "errors", "gap", "eod2", "stall", "long", "close",
             "noeof", "intruder") + HOSTILE
    for path, lst in FAULTS.items():
        for f in lst:
            if f["kind"] not in kinds:
                sys.exit("unknown fault kind %r for %s" % (f["kind"], path))


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--fault", action="append", default=[],
                   metavar="PATH=KIND[,key=value...]")
    p.add_argument("--faults", metavar="FILE", help="faults as JSON")
    p.add_argument("--refuse-mode-e", action="store_true")
    p.add_argument("--feat", choices=("ok", "refuse", "drop", "split", "r4xx",
                                      "long", "huge", "midclose", "nomlst"),
                   default="ok")
    p.add_argument("--listing", action="append", default=[],
                   metavar="DIR=FILE")
    p.add_argument("--refuse-login", action="store_true")
    p.add_argument("--await-pipeline", type=float, default=0,
                   metavar="SECS")
    ARGS = p.parse_args()
    ARGS.root = os.path.realpath(ARGS.root)
    ARGS.listings = {}
    for spec in ARGS.listing:
        d, _, f = spec.partition("=")
        ARGS.listings[d.strip("/")] = os.path.realpath(f)
    load_faults()
    with LOCK:
        save()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", ARGS.port))
    srv.listen(64)
    log("listening on 127.0.0.1:%d, root %s, faults %s" % (
        ARGS.port, ARGS.root, json.dumps(FAULTS)))
    while True:
        conn, peer = srv.accept()
        Session(conn, "%s:%d" % peer).start()


if __name__ == "__main__":
    main()
