#!/usr/bin/env python3
"""bmclient.py: a test client of the bm:// protocol (docs/protocol.md),
stdlib only, written from the document, not from the server's code.

Commands (HOST PORT EXPORT first; --secret FILE for an export with one;
--src ADDR binds the client's address, e.g. 127.0.0.2):
  wait HOST PORT                  until a TCP connect succeeds (<= 10 s)
  list ... PATH [--digests]       TSV: type size mtime_ns mode path target
                                  (--digests: and "sha256:HEX" or "-")
  get ... OUTDIR [--conns N] SPEC...  SPEC = PATH or PATH@OFF+LEN; each
                                  item's digest is checked; files go to
                                  OUTDIR/PATH (ranges OUTDIR/PATH@OFF+LEN)
  version ... OFFER               prints "version V" the server agreed
  hostile ... CASE                one hostile request; prints what came
                                  back: "ERROR CODE text", "CLOSED", or
                                  "ok ..." when nothing was refused
  hold ... PATH                   session up, prints "ready SNAPSHOT"; on
                                  each line of stdin GETs PATH and prints
                                  "got SHA256"; BYE at end of input
Exit 0, or 1 with a message on stderr.
"""
import hashlib
import hmac
import os
import socket
import struct
import sys
import time

MAGIC = 0x424D5031
HELLO, WELCOME, AUTH, SESSION, ATTACH, ATTACHED = 1, 2, 3, 4, 5, 6
LIST, ENTRY, LIST_END, GET, FILE, DIGEST, GET_END, ERROR, BYE = range(7, 16)


class Refused(Exception):
    def __init__(self, code, msg, rid=0):
        super().__init__("ERROR %d %s" % (code, msg))
        self.code = code
        self.rid = rid


def s16(b):
    return struct.pack(">H", len(b)) + b


class Conn:
    def __init__(self, host, port, src=None, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        if rcvbuf:      # before connect: it bounds the TCP window
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if src:
            self.sock.bind((src, 0))
        self.sock.connect((host, port))
        self.buf = b""

    def send(self, typ, payload=b""):
        self.sock.sendall(struct.pack(">IB", len(payload), typ) + payload)

    def read(self, n):
        while len(self.buf) < n:
            d = self.sock.recv(max(65536, n - len(self.buf)))
            if not d:
                raise EOFError("connection closed")
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self):
        n, t = struct.unpack(">IB", self.read(5))
        p = self.read(n)
        if t == ERROR:
            rid, _ix, code, ml = struct.unpack(">IHHH", p[:10])
            raise Refused(code, p[10:10 + ml].decode("utf-8", "replace"),
                          rid)
        return t, p


def expect(c, want):
    t, p = c.frame()
    if t != want:
        raise RuntimeError("expected frame %d, got %d" % (want, t))
    return p


class Session:
    def __init__(self, host, port, export, secret=None, version=1, src=None,
                 mac_secret=None):
        self.host, self.port, self.src = host, port, src
        self.c = Conn(host, port, src)
        e = export.encode()
        self.c.send(HELLO, struct.pack(">IHI", MAGIC, version, 3) + s16(e))
        p = expect(self.c, WELCOME)
        self.version, self.features, auth = struct.unpack(">HIB", p[:7])
        ch = p[7:39]
        self.key = None
        if auth:
            sec = mac_secret if mac_secret is not None else secret
            if sec is None:
                raise RuntimeError("export needs a secret")
            nonce = os.urandom(32)
            mac = hmac.new(sec, b"bm1 client" + ch + nonce + e,
                           hashlib.sha256).digest()
            self.c.send(AUTH, nonce + mac)
        p = expect(self.c, SESSION)
        self.token = p[:32]
        proof = p[32:64]
        self.maxconn, self.maxq, self.idle, snap = struct.unpack(
            ">HIIq", p[64:82])
        self.snapshot = snap
        if auth:
            want = hmac.new(secret, b"bm1 server" + ch + nonce + e,
                            hashlib.sha256).digest()
            if not hmac.compare_digest(want, proof):
                raise RuntimeError("server proof is wrong")
            self.key = hmac.new(secret, b"bm1 key" + ch + nonce,
                                hashlib.sha256).digest()
        self.next_id = 1
        self.data = []

    def list(self, path):
        rid = self.next_id
        self.next_id += 1
        self.c.send(LIST, struct.pack(">I", rid) + s16(path.encode()))
        out = []
        while True:
            t, p = self.c.frame()
            if t == LIST_END:
                _i, n = struct.unpack(">IQ", p)
                if n != len(out):
                    raise RuntimeError("LIST_END count %d != %d" %
                                       (n, len(out)))
                return out
            if t != ENTRY:
                raise RuntimeError("unexpected frame %d in LIST" % t)
            o = 4
            (pl,) = struct.unpack(">H", p[o:o + 2])
            name = p[o + 2:o + 2 + pl]
            o += 2 + pl
            typ = chr(p[o])
            size, mt, mode = struct.unpack(">QqI", p[o + 1:o + 21])
            o += 21
            (tl,) = struct.unpack(">H", p[o:o + 2])
            target = p[o + 2:o + 2 + tl]
            o += 2 + tl
            dig = p[o + 1:o + 33].hex() if p[o] == 1 else None
            out.append((typ, size, mt, mode, name, target, dig))

    def attach(self, token=None, src=None, rcvbuf=None):
        d = Conn(self.host, self.port, src or self.src, rcvbuf)
        d.send(ATTACH, struct.pack(">IH", MAGIC, 1) + (token or self.token))
        expect(d, ATTACHED)
        self.data.append(d)
        return d

    def get(self, items, nconns=1):
        """items: [(path, off, len)] -> ({index: (bytes, (off, len, size,
        mtime_ns))}, {index: (code, msg)}, (id, done, failed)); every
        digest is checked.  The server spreads items over the data
        connections; item errors and GET_END come on the control one."""
        while len(self.data) < nconns:
            self.attach()
        return self.get_recv(self.get_send(items))

    def get_send(self, items):
        """Send a GET of items; its request id."""
        rid = self.next_id
        self.next_id += 1
        body = b"".join(s16(p.encode()) + struct.pack(">QQ", o, n)
                        for p, o, n in items)
        self.c.send(GET, struct.pack(">IH", rid, len(items)) + body)
        return rid

    def get_recv(self, rid):
        """Everything of GET rid, as get() returns it."""
        import selectors
        got, errs, ended = {}, {}, None
        self._last_end = None
        state = {id(d): None for d in self.data}
        sel = selectors.DefaultSelector()
        for conn in [self.c] + self.data:
            sel.register(conn.sock, selectors.EVENT_READ, conn)
        while ended is None or len(got) < ended[1]:
            if ended is None and self._step_ctl(rid, errs):
                ended = self._last_end
                continue
            if any(self._step_data(d, rid, got, state) for d in self.data):
                continue
            ev = sel.select(timeout=30)
            if not ev:
                raise RuntimeError("GET timed out")
            for k, _m in ev:
                d = k.data.sock.recv(1 << 20)
                if d:
                    k.data.buf += d
                    continue
                # A drain closes control after GET_END: data may follow.
                if k.data is not self.c or ended is None:
                    raise EOFError("connection closed")
                sel.unregister(k.data.sock)
        sel.close()
        return got, errs, ended

    @staticmethod
    def _take(conn):
        """A whole frame from conn's buffer, or None."""
        if len(conn.buf) < 5:
            return None
        n, t = struct.unpack(">IB", conn.buf[:5])
        if len(conn.buf) < 5 + n:
            return None
        p = conn.buf[5:5 + n]
        conn.buf = conn.buf[5 + n:]
        return t, p

    def _step_ctl(self, rid, errs):
        f = self._take(self.c)
        if f is None:
            return False
        t, p = f
        if t == ERROR:
            _i, ix, code, ml = struct.unpack(">IHHH", p[:10])
            msg = p[10:10 + ml].decode("utf-8", "replace")
            if ix == 0xFFFF:
                raise Refused(code, msg)
            errs[ix] = (code, msg)
        elif t == GET_END:
            self._last_end = struct.unpack(">IHH", p)
        else:
            raise RuntimeError("unexpected frame %d on control" % t)
        return True

    def _step_data(self, d, rid, got, state):
        st = state[id(d)]
        if st is None:
            f = self._take(d)
            if f is None:
                return False
            t, p = f
            if t != FILE:
                raise RuntimeError("expected FILE, got %d" % t)
            _fid, ix, off, ln, size, mt = struct.unpack(">IHQQQq", p)
            state[id(d)] = [ix, off, ln, size, mt, None]
            return True
        ix, off, ln, size, mt, data = st
        if data is None:
            if len(d.buf) < ln:
                return False
            st[5], d.buf = d.buf[:ln], d.buf[ln:]
            return True
        f = self._take(d)
        if f is None:
            return False
        t, p = f
        if t != DIGEST:
            raise RuntimeError("expected DIGEST, got %d" % t)
        _fid, _ix, kind = struct.unpack(">IHB", p[:7])
        if kind == 2:
            want = hmac.new(self.key, struct.pack(">IHQQ", rid, ix, off, ln)
                            + data, hashlib.sha256).digest()
        else:
            want = hashlib.sha256(data).digest()
        if (kind == 2) != (self.key is not None) or \
                not hmac.compare_digest(want, p[7:39]):
            raise RuntimeError("digest mismatch on item %d" % ix)
        got[ix] = (data, (off, ln, size, mt))
        state[id(d)] = None
        return True

    def bye(self):
        self.c.send(BYE)


def parse_common(argv):
    opts = {"secret": None, "src": None, "conns": 1, "digests": False}
    rest = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--digests":
            opts["digests"] = True
            i += 1
            continue
        if a in ("--secret", "--src", "--conns"):
            opts[a[2:]] = argv[i + 1]
            i += 2
            continue
        rest.append(a)
        i += 1
    if opts["secret"]:
        with open(opts["secret"], "rb") as f:
            opts["secret"] = f.read().rstrip(b"\r\n")
    opts["conns"] = int(opts["conns"])
    return opts, rest


def cmd_get(s, outdir, specs, conns):
    items = []
    for sp in specs:
        if "@" in sp:
            p, r = sp.rsplit("@", 1)
            o, n = r.split("+")
            items.append((p, int(o), int(n)))
        else:
            items.append((sp, 0, 0))
    got = {}
    for i in range(0, len(items), 1000):
        part = items[i:i + 1000]
        g, errs, ended = s.get(part, conns)
        for ix, v in g.items():
            got[i + ix] = v
        for ix, (code, msg) in sorted(errs.items()):
            print("error %s %d %s" % (part[ix][0], code, msg))
    nbytes = 0
    for ix, (p, o, n) in enumerate(items):
        if ix not in got:
            print("missing %s" % p)
            continue
        data, (off, ln, size, mt) = got[ix]
        name = p if (o == 0 and n == 0) else "%s@%d+%d" % (p, o, n)
        dst = os.path.join(outdir, name)
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        with open(dst, "wb") as f:
            f.write(data)
        if o == 0 and n == 0:
            os.utime(dst, ns=(mt, mt))
        nbytes += len(data)
    print("ok %d items %d bytes" % (len(got), nbytes))


def hostile(host, port, export, case, opts):
    sec = opts["secret"]
    if case == "wrong-secret":
        Session(host, port, export, secret=sec, src=opts["src"],
                mac_secret=b"not the secret")
        return "ok session"
    if case == "forged-token":
        s = Session(host, port, export, secret=sec, src=opts["src"])
        s.attach(token=os.urandom(32))
        return "ok attached"
    if case == "stranger":
        s = Session(host, port, export, secret=sec, src=opts["src"])
        s.attach(src="127.0.0.2")
        return "ok attached"
    if case == "oversized":
        s = Session(host, port, export, secret=sec, src=opts["src"])
        s.c.sock.sendall(struct.pack(">IB", 65537, LIST) + b"x" * 64)
        s.c.frame()
        return "ok frame"
    if case == "oversized-first":
        c = Conn(host, port)
        c.sock.sendall(struct.pack(">IB", 1 << 30, HELLO))
        c.frame()
        return "ok frame"
    if case.startswith("get:") or case.startswith("list:"):
        s = Session(host, port, export, secret=sec, src=opts["src"])
        what, path = case.split(":", 1)
        if what == "list":
            s.list(path)
            return "ok listed"
        got, errs, _end = s.get([(path, 0, 0)])
        if 0 in errs:
            return "ERROR %d %s" % errs[0]
        return "ok got %d bytes" % len(got[0][0])
    if case == "too-many-conns":
        s = Session(host, port, export, secret=sec, src=opts["src"])
        for _ in range(s.maxconn + 1):
            s.attach()
        return "ok attached %d" % (s.maxconn + 1)
    if case == "too-many-clients":
        keep = []
        while len(keep) < 64:
            keep.append(Session(host, port, export, secret=sec, src=opts["src"]))
        return "ok 64 sessions"
    if case == "unknown-type":      # a type no version defines, mid-session
        s = Session(host, port, export, secret=sec, src=opts["src"])
        s.c.send(16)
        s.c.frame()
        return "ok frame"
    if case == "noexport-raw":      # an export name of raw bytes
        c = Conn(host, port, opts["src"])
        c.send(HELLO, struct.pack(">IHI", MAGIC, 1, 3) + s16(b"\xff\x00bad"))
        c.frame()
        return "ok frame"
    if case == "prehello":          # connect, send nothing
        c = Conn(host, port, opts["src"])
        c.sock.settimeout(5)
        c.frame()
        return "ok frame"
    if case == "slow-frame":        # one LIST frame over 1.4 s, in 3 parts
        s = Session(host, port, export, secret=sec, src=opts["src"])
        m = struct.pack(">IB", 6, LIST) + struct.pack(">I", 1) + s16(b"")
        for part, pause in ((m[:4], 0.7), (m[4:5], 0.7), (m[5:], 0)):
            s.c.sock.sendall(part)
            time.sleep(pause)
        while s.c.frame()[0] != LIST_END:
            pass
        return "ok listed"
    if case.startswith("queue-bytes:"):
        # GETs of 16 items of 4,015-byte paths (no data connection: they
        # stay queued), then a LIST round trip; which GETs were refused
        s = Session(host, port, export, secret=sec, src=opts["src"])
        path = b"/".join([b"x" * 250] * 16)
        item = s16(path) + struct.pack(">QQ", 0, 0)
        n = int(case.split(":", 1)[1])
        for rid in range(1, n + 1):
            s.c.send(GET, struct.pack(">IH", rid, 16) + item * 16)
        s.c.send(LIST, struct.pack(">I", n + 1) + s16(b"sub"))
        refused, codes = [], set()
        while True:
            try:
                t, _p = s.c.frame()
            except Refused as r:
                refused.append(str(r.rid))
                codes.add(str(r))
                continue
            if t == LIST_END:
                break
        if not refused:
            return "ok none refused"
        return "refused %s (%s)" % (",".join(refused), "; ".join(sorted(codes)))
    if case == "idle":
        s = Session(host, port, export, secret=sec, src=opts["src"])
        t0 = time.monotonic()
        try:
            s.c.frame()
        finally:
            sys.stderr.write("idle: %.1f s\n" % (time.monotonic() - t0))
        return "ok frame"
    raise SystemExit("unknown case " + case)


def main(argv):
    if not argv:
        raise SystemExit(__doc__)
    cmd = argv[0]
    opts, a = parse_common(argv[1:])
    if cmd == "wait":
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10:
            try:
                socket.create_connection((a[0], int(a[1])), timeout=1).close()
                return 0
            except OSError:
                time.sleep(0.05)
        raise SystemExit("nothing listens on %s:%s" % (a[0], a[1]))
    host, port, export = a[0], int(a[1]), a[2]
    if cmd == "hostile":
        try:
            print(hostile(host, port, export, a[3], opts))
        except Refused as r:
            print(str(r))
        except (EOFError, ConnectionError):
            print("CLOSED")
        return 0
    if cmd == "version":
        s = Session(host, port, export, secret=opts["secret"],
                    version=int(a[3]))
        print("version %d" % s.version)
        s.bye()
        return 0
    s = Session(host, port, export, secret=opts["secret"], src=opts["src"])
    if cmd == "list":
        for typ, size, mt, mode, name, target, dig in s.list(a[3]):
            sys.stdout.buffer.write(b"%s\t%d\t%d\t%o\t%s\t%s" % (
                typ.encode(), size, mt, mode, name, target))
            if opts["digests"]:
                sys.stdout.buffer.write(b"\t" + (b"sha256:" +
                                        dig.encode() if dig else b"-"))
            sys.stdout.buffer.write(b"\n")
    elif cmd == "get":
        cmd_get(s, a[3], a[4:], opts["conns"])
    elif cmd == "hold":
        print("ready %d" % s.snapshot, flush=True)
        for _line in sys.stdin:
            g, _e, _end = s.get([(a[3], 0, 0)])
            if 0 not in g:
                print("missing", flush=True)
            else:
                print("got %s" % hashlib.sha256(g[0][0]).hexdigest(),
                      flush=True)
    else:
        raise SystemExit("unknown command " + cmd)
    s.bye()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Refused as r:
        sys.stderr.write("bmclient: %s\n" % r)
        sys.exit(1)
