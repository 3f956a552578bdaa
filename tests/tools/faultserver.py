#!/usr/bin/env python3
"""A small HTTP/1.1 server of our own for behaviours nginx will not produce
on demand (tests only, loopback only).  It serves a directory with
nginx-style autoindex pages (exact sizes, UTC minute dates), Range,
Last-Modified, ETag and keep-alive, and injects one fault chosen by --mode:

  normal        behave
  ignore-range  answer every Range request with 200 and the whole body
  wrong-range   answer Range requests with 206 and a Content-Range that
                starts one byte later than asked
  retry-after   answer the first --fail N GETs of each file (with --pages
                also of each index page) with 503 and Retry-After:
                --retry-after seconds
  stall         for the first GET of each file send half the body, then
                stop sending (the connection stays open) until --stall-for s
  short-body    for the first GET of each file close the connection after
                half of the announced Content-Length
  long-body     for the first GET of each file send 100 bytes more than
                Content-Length announces
  html-200      for the first GET of each file answer 200 with an HTML
                error page (text/html) instead of the file

Faults per path (any mode; repeatable): --fault PATH=KIND[,key=value...]
with KIND one of

  truncate      close the connection after at= body bytes
  long          send extra= bytes (default 100) past Content-Length
  cutpage       (a directory's PATH, ending in '/') its index page cut at
                at= percent (default 90), back to a line end unless
                midline=1, sent without Content-Length and the connection
                closed: a page cut short in transit
  lbetag        the same bytes and Last-Modified, but an ETag that
                alternates request by request (two backends behind a
                load balancer, each with its own)
  smuggle       right after the body, on the same kept-alive connection,
                a whole second response (200, Content-Length, body=
                bytes, default "EVIL!\n") that no request asked for: what
                the next request on the connection would read (a proxy
                that lost track of message lengths)
  reset         send at= body bytes, then reset the connection (RST)
  stall         send at= body bytes, then stop for for= seconds
  hold          send at= body bytes (default half), then write one line
                to the FIFO fifo= (its open waits for the test to read:
                the test then knows the transfer is under way) and wait
                for a line back on it before sending the rest: a run held
                mid-transfer for as long as the test needs, no sleeps
  ignore-range  answer a Range request with 200 and the whole file
  wrong-range   answer a Range request with a Content-Range one byte later
  html-200      answer 200 with an HTML error page
  status        answer code= (e.g. 500, 429, 410) with Retry-After:
                retry-after= seconds when given
  change        from GET number after= + 1 of PATH on, serve the bytes of
                the file with= (a path on disk: other content and mtime)
  rewrite       PATH rewritten in place during its transfer by the file
                with= (version B: same size, another mtime): GETs 1 to
                after= get PATH's headers and its first at= body bytes
                (default: half the response), then B's bytes at the same
                offsets; every later request (HEAD or GET) is B's

and times=K (apply K times only, counting the requests it matches;
default: always; for change: how many GETs see the new content),
range=A (apply only to requests whose Range starts at byte A; range=A-B:
only to requests for exactly bytes A-B) and
method=M (apply to M requests only; default GET).  Requests honour
If-Range (RFC 9110 section 13.1.5): a validator that no longer matches
gets 200 and the whole file.  Per-path GETs, HEADs, GETs of byte 0 alone
(Range: bytes=0-0, biomirror's check after ranges) and body bytes sent
are in the stats (gets, heads, checks, sent); a HEAD is answered as the next GET
would be, and is not counted among the GETs.

It counts connections: the most open at once and the total, written as
JSON to --stats after every change, with per-path GET counts.
"""
import argparse
import email.utils
import hashlib
import html
import json
import os
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from faultspec import parse_fault

LOCK = threading.Lock()
STATE = {"open": 0, "max_concurrent": 0, "total": 0, "gets": {},
         "heads": {}, "checks": {}, "ranges": 0, "requests": 0, "sent": {},
         "if_range": 0}
FAULTS = {}     # path -> list of dicts (kind, params)
ARGS = None


def save_stats():
    if ARGS.stats:
        tmp = ARGS.stats + ".tmp"
        with open(tmp, "w") as f:
            json.dump(STATE, f)
        os.replace(tmp, ARGS.stats)


def nginx_index(rel, path):
    rows = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        st = os.stat(full)
        t = time.strftime("%d-%b-%Y %H:%M", time.gmtime(st.st_mtime))
        q = urllib.parse.quote(name)
        if os.path.isdir(full):
            rows.append('<a href="%s/">%s/</a> %s %19s' %
                        (q, html.escape(name), t, "-"))
        else:
            rows.append('<a href="%s">%s</a> %s %19d' %
                        (q, html.escape(name), t, st.st_size))
    body = ("<html>\r\n<head><title>Index of %s</title></head>\r\n"
            "<body>\r\n<h1>Index of %s</h1><hr><pre>"
            '<a href="../">../</a>\r\n%s\r\n</pre><hr></body>\r\n</html>\r\n'
            % (html.escape(rel), html.escape(rel), "\r\n".join(rows)))
    return body.encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        with LOCK:
            STATE["open"] += 1
            STATE["total"] += 1
            STATE["max_concurrent"] = max(STATE["max_concurrent"],
                                          STATE["open"])
            save_stats()

    def finish(self):
        try:
            super().finish()
        finally:
            with LOCK:
                STATE["open"] -= 1
                save_stats()

    def log_message(self, fmt, *args):
        if ARGS.log:
            sys.stderr.write("faultserver: " + (fmt % args) + "\n")

    def send_plain(self, code, body, ctype="text/plain", extra=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        rel = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        path = os.path.normpath(os.path.join(ARGS.root, rel.lstrip("/")))
        if not path.startswith(os.path.normpath(ARGS.root)):
            return self.send_plain(403, b"forbidden\n")
        with LOCK:
            STATE["requests"] += 1
            n = STATE["gets"].get(rel, 0) + 1
            if self.command == "HEAD":
                STATE["heads"][rel] = STATE["heads"].get(rel, 0) + 1
            else:
                STATE["gets"][rel] = n
            if self.headers.get("Range"):
                STATE["ranges"] += 1
            if self.headers.get("Range") == "bytes=0-0" and \
                    self.command == "GET":
                STATE["checks"][rel] = STATE["checks"].get(rel, 0) + 1
            save_stats()
        for spec in ARGS.redirect:
            src, _, dst = spec.partition("=")
            if rel == src:
                return self.send_plain(302, b"", extra={"Location": dst})
        if os.path.isdir(path):
            if not rel.endswith("/"):
                return self.send_plain(301, b"", extra={"Location": rel + "/"})
            if ARGS.mode == "retry-after" and ARGS.pages and n <= ARGS.fail:
                return self.send_plain(
                    503, b"busy\n",
                    extra={"Retry-After": str(ARGS.retry_after)})
            page = nginx_index(rel, path)
            cut = [f for f in FAULTS.get(rel, []) if f["kind"] == "cutpage"]
            if cut and self.command == "GET":
                # at= percent of the page, back to a line end unless
                # midline=1; no Content-Length, then the connection
                # closes: a page cut short in transit.
                at = len(page) * int(cut[0].get("at", 90)) // 100
                while cut[0].get("midline") != "1" and at > 0 and \
                        page[at - 1:at] != b"\n":
                    at -= 1
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(page[:at])
                self.close_connection = True
                return
            return self.send_plain(200, page, "text/html")
        if not os.path.isfile(path):
            return self.send_plain(404, b"not found\n")
        self.send_file(path, n, rel)

    def fault_for(self, rel, n, rng_start, rng_spec=None):
        """The path fault that applies to GET number n of rel, or None."""
        for f in FAULTS.get(rel, []):
            if f["kind"] in ("change", "rewrite"):
                continue
            if f.get("method", "GET") != self.command:
                continue
            if "range" in f and "-" in f["range"]:
                if rng_spec != f["range"]:
                    continue
            elif "range" in f and rng_start != int(f["range"]):
                continue
            with LOCK:
                if "times" in f and f.get("applied", 0) >= int(f["times"]):
                    continue
                f["applied"] = f.get("applied", 0) + 1
            return f
        return None

    def rewrite_for(self, rel, n):
        """(path of B to serve whole, path of B to mix in) for request
        number n of rel: a rewrite fault's version B, else None."""
        for f in FAULTS.get(rel, []):
            if f["kind"] == "rewrite":
                if n > int(f.get("after", 1)):
                    return f["with"], None
                return None, f
        return None, None

    def changed_path(self, rel, n, path):
        for f in FAULTS.get(rel, []):
            if f["kind"] != "change":
                continue
            after = int(f.get("after", 1))
            if n > after and ("times" not in f or n <= after + int(f["times"])):
                return f["with"]
        return path

    def count_sent(self, rel, nbytes):
        with LOCK:
            STATE["sent"][rel] = STATE["sent"].get(rel, 0) + nbytes
            save_stats()

    def send_file(self, path, n, rel="/"):
        path = self.changed_path(rel, n, path)
        whole, mix = self.rewrite_for(rel, n)
        if whole is not None:
            path = whole
        st = os.stat(path)
        size = st.st_size
        lm = email.utils.formatdate(st.st_mtime, usegmt=True)
        etag = '"%x-%x"' % (int(st.st_mtime), size)
        if any(f["kind"] == "lbetag" for f in FAULTS.get(rel, [])):
            # Two backends behind a load balancer, each with its own ETag
            # for the same bytes: they take turns, request by request.
            etag = '"%x-%x-%s"' % (int(st.st_mtime), size, "ab"[n % 2])
        mode = ARGS.mode
        first = n == 1
        rng = self.headers.get("Range")
        rng_start = rng_spec = None
        if rng and rng.startswith("bytes="):
            rng_spec = rng[6:]
            rng_start = int(rng_spec.partition("-")[0])
        fault = self.fault_for(rel, n, rng_start, rng_spec)
        kind = fault["kind"] if fault else None
        if mode == "retry-after" and n <= ARGS.fail:
            return self.send_plain(503, b"busy\n",
                                   extra={"Retry-After": str(ARGS.retry_after)})
        if kind == "status":
            extra = {}
            if "retry-after" in fault:
                extra["Retry-After"] = fault["retry-after"]
            return self.send_plain(int(fault["code"]), b"<html>error</html>\n",
                                   "text/html", extra)
        if (mode == "html-200" and first) or kind == "html-200":
            return self.send_plain(200, b"<html><body>Error: try later"
                                   b"</body></html>\n", "text/html")
        ifr = self.headers.get("If-Range")
        if ifr and rng:
            with LOCK:
                STATE["if_range"] += 1
            if ifr != etag and ifr != lm:
                rng = None      # the validator no longer matches: 200
        inm = self.headers.get("If-None-Match")
        if inm and inm == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        start, end, code = 0, size - 1, 200
        if (rng and mode != "ignore-range" and kind != "ignore-range" and
                rng.startswith("bytes=")):
            a, _, b = rng[6:].partition("-")
            start = int(a)
            end = min(int(b), size - 1) if b else size - 1
            code = 206
        length = end - start + 1
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Last-Modified", lm)
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length))
        if kind == "long":
            length_sent = length + int(fault.get("extra", 100))
        else:
            length_sent = length
        if code == 206:
            s = start + 1 if (mode == "wrong-range" or
                              kind == "wrong-range") else start
            self.send_header("Content-Range", "bytes %d-%d/%d" %
                             (s, s + length - 1, size))
        self.end_headers()
        if self.command == "HEAD":
            return
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(length)
        if mix is not None:
            at = int(mix.get("at", length // 2))
            with open(mix["with"], "rb") as f:
                f.seek(start + at)
                data = data[:at] + f.read(max(0, length - at))
        if kind in ("truncate", "reset", "stall"):
            at = int(fault.get("at", length // 2))
            self.wfile.write(data[:at])
            self.wfile.flush()
            self.count_sent(rel, min(at, len(data)))
            if kind == "stall":
                time.sleep(float(fault.get("for", 30)))
            if kind == "reset":
                # SO_LINGER 0 and a close of the fd itself: an RST, no FIN.
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER,
                    struct.pack("ii", 1, 0))
                os.close(self.connection.detach())
            self.close_connection = True
            return
        if kind == "hold":
            at = int(fault.get("at", length // 2))
            self.wfile.write(data[:at])
            self.wfile.flush()
            self.count_sent(rel, min(at, len(data)))
            with open(fault["fifo"], "w") as f:
                f.write("held %s\n" % rel)
            with open(fault["fifo"]) as f:
                f.readline()
            data = data[at:]
        if kind == "long":
            data += b"X" * (length_sent - length)
            self.close_connection = True
        if kind == "smuggle":
            body = fault.get("body", "EVIL!\n").encode().decode(
                "unicode_escape").encode()
            data += (b"HTTP/1.1 200 OK\r\nContent-Type: "
                     b"application/octet-stream\r\nLast-Modified: " +
                     lm.encode() + b"\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        self.count_sent(rel, len(data))
        if mode in ("stall", "short-body") and first:
            self.wfile.write(data[:length // 2])
            self.wfile.flush()
            if mode == "stall":
                time.sleep(ARGS.stall_for)
            self.close_connection = True
            return
        if mode == "long-body" and first:
            data += b"X" * 100
            self.close_connection = True
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", default="normal")
    p.add_argument("--fail", type=int, default=2)
    p.add_argument("--retry-after", type=int, default=1)
    p.add_argument("--stall-for", type=float, default=30)
    p.add_argument("--pages", action="store_true",
                   help="apply retry-after to index pages too")
    p.add_argument("--redirect", action="append", default=[],
                   metavar="PATH=LOCATION",
                   help="answer GET PATH with 302 Location: LOCATION")
    p.add_argument("--fault", action="append", default=[],
                   metavar="PATH=KIND[,key=value...]",
                   help="a fault for one path (see the top of this file)")
    p.add_argument("--stats")
    p.add_argument("--log", action="store_true")
    ARGS = p.parse_args()
    ARGS.root = os.path.abspath(ARGS.root)
    for spec in ARGS.fault:
        path, f = parse_fault(spec)
        FAULTS.setdefault(path, []).append(f)
    save_stats()
    srv = Server(("127.0.0.1", ARGS.port), Handler)
    srv.serve_forever()


if __name__ == "__main__":
    main()
