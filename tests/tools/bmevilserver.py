#!/usr/bin/env python3
"""bmevilserver.py --port N: a hostile bm:// server (docs/protocol.md),
stdlib only: one anonymous export (any name) where LIST of path SCENARIO
answers that scenario's entries, inconsistent on purpose (source =
bm://HOST:PORT/pub/SCENARIO/); every GET item is
served (5 bytes: b"good\\n" for ok.txt, b"AAAA\\n" for any other name) with
its true SHA-256, then GET_END.  Prints "GET path" per item served.

Scenarios (besides ok.txt, a file, in each):
  dup      file a listed twice
  filedir  file a, then directory a, then file a/x
  dirfile  directory a, file a/x, then file a
  linkesc  esc -> /etc with esc/passwd, up -> .. with up/pwned
  linkin   directory d, esc -> d, esc/x (x listed before the link: linkin2)
  linkup   s/t/l -> .. with s/t/l/t -> .. and s/t/l/t/l/pwn
  mtimes   a at -2**63 ns, b at 2**63-1 ns, c at -1 ns
"""
import argparse
import hashlib
import os
import socket
import struct
import threading

MT = 1600000000 * 10**9
SCENARIOS = {
    "dup": [("a", "f", MT, ""), ("a", "f", MT + 1, "")],
    "filedir": [("a", "f", MT, ""), ("a", "d", MT, ""), ("a/x", "f", MT, "")],
    "dirfile": [("a", "d", MT, ""), ("a/x", "f", MT, ""), ("a", "f", MT, "")],
    "linkesc": [("esc", "l", MT, "/etc"), ("esc/passwd", "f", MT, ""),
                ("up", "l", MT, ".."), ("up/pwned", "f", MT, "")],
    "linkin": [("d", "d", MT, ""), ("esc", "l", MT, "d"), ("esc/x", "f", MT, "")],
    "linkin2": [("esc/x", "f", MT, ""), ("d", "d", MT, ""), ("esc", "l", MT, "d")],
    "linkup": [("s", "d", MT, ""), ("s/t", "d", MT, ""), ("s/t/l", "l", MT, ".."),
               ("s/t/l/t", "l", MT, ".."), ("s/t/l/t/l/pwn", "f", MT, "")],
    "mtimes": [("a", "f", -2**63, ""), ("b", "f", 2**63 - 1, ""),
               ("c", "f", -1, "")],
}


def s16(b):
    return struct.pack(">H", len(b)) + b


def frame(t, p=b""):
    return struct.pack(">IB", len(p), t) + p


def body(path):
    return b"good\n" if path == b"ok.txt" else b"AAAA\n"


class Session:
    def __init__(self):
        self.cv = threading.Condition()
        self.queue = []		# (control, lock, rid, index, path, left):
        # left = [items not yet sent, items asked for] of the GET


class Server:
    def __init__(self):
        # b"SCENARIO/path": mtime of a file, as first listed (the entry a
        # client keeps of a name listed twice)
        self.mtime = {}
        for sc, tree in SCENARIOS.items():
            for p, t, m, _ in tree:
                if t == "f":
                    self.mtime.setdefault((sc + "/" + p).encode(), m)
        self.lock = threading.Lock()
        self.sessions = {}	# token: Session

    def entries(self, rid, sc):
        tree = [("ok.txt", "f", MT, "")] + SCENARIOS.get(sc, [])
        out = b""
        for p, t, m, tg in tree:
            size = len(tg) if t == "l" else 0 if t == "d" else 5
            mode = 0o777 if t == "l" else 0o755 if t == "d" else 0o644
            out += frame(8, struct.pack(">I", rid) + s16(p.encode()) +
                         t.encode() + struct.pack(">QqI", size, m, mode) +
                         s16(tg.encode()) + b"\0")
        return out + frame(9, struct.pack(">IQ", rid, len(tree)))

    def control(self, c, first):
        lock = threading.Lock()
        if first[0] != 1:
            return
        token, ses = os.urandom(32), Session()
        with self.lock:
            self.sessions[token] = ses
        c.sendall(frame(2, struct.pack(">HIB", 1, 2, 0) + b"\0" * 32) +
                  frame(4, token + b"\0" * 32 +
                        struct.pack(">HIIq", 4, 65536, 300, -1)))
        while True:
            t, p = rframe(c)
            if t == 7:
                rid, pl = struct.unpack(">IH", p[:6])
                sc = p[6:6 + pl].decode().strip("/")
                with lock:
                    c.sendall(self.entries(rid, sc))
            elif t == 10:
                rid, n = struct.unpack(">IH", p[:6])
                o, left = 6, [n, n]
                with ses.cv:
                    for i in range(n):
                        (pl,) = struct.unpack(">H", p[o:o + 2])
                        path = p[o + 2:o + 2 + pl]
                        o += 2 + pl + 16
                        ses.queue.append((c, lock, rid, i, path, left))
                    ses.cv.notify_all()
            elif t == 15:
                return

    def data(self, d, token):
        with self.lock:
            ses = self.sessions.get(token)
        if ses is None:
            return
        d.sendall(frame(6))
        while True:
            with ses.cv:
                while not ses.queue:
                    ses.cv.wait()
                c, lock, rid, i, path, left = ses.queue.pop(0)
            b = body(path.split(b"/")[-1])
            mt = self.mtime.get(path, MT)
            d.sendall(frame(11, struct.pack(">IHQQQq", rid, i, 0, len(b),
                                            len(b), mt)) + b +
                      frame(12, struct.pack(">IHB", rid, i, 1) +
                            hashlib.sha256(b).digest()))
            with lock:
                print("GET", path.decode(errors="replace"), flush=True)
                left[0] -= 1
                if left[0] == 0:
                    c.sendall(frame(13, struct.pack(">IHH", rid, left[1], 0)))


def rd(s, n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            raise EOFError
        b += d
    return b


def rframe(s):
    n, t = struct.unpack(">IB", rd(s, 5))
    return t, rd(s, n)


def conn(srv, s):
    try:
        t, p = rframe(s)
        if t == 5:
            srv.data(s, p[6:38])
        else:
            srv.control(s, (t, p))
    except (EOFError, OSError):
        pass
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    a = ap.parse_args()
    srv = Server()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", a.port))
    ls.listen(16)
    print("listening", flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=conn, args=(srv, c), daemon=True).start()


if __name__ == "__main__":
    main()
