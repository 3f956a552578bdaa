#!/usr/bin/python3
"""A small FTP server of our own for faults vsftpd will not produce on
demand (tests only, loopback only).  It is Debian's pyftpdlib (package
python3-pyftpdlib: anonymous, read-only, FEAT with MLST, MLSD, SIZE,
MDTM, REST) with one fault chosen by --mode:

  normal      behave
  drop        for the first RETR of each file close the data connection
              after half of the bytes it would send (reply 426)
  short       for the first RETR of each file send half of the bytes and
              then reply 226 as if the transfer were complete (a lying
              server)
  norest      refuse REST (502): ranged transfers must fall back to one
              stream
  busy        answer the first --busy N logins with 421 (too many
              connections) before USER
  listshort   list every file of at least 32 MiB 10 bytes shorter than it
              is (LIST, MLSD; SIZE and RETR stay true): a file that grew
              after the listing
  rewrite     a file rewritten in place during its transfer: for a path
              that also exists under --rewrite-with DIR (version B, same
              size, another mtime), RETRs 1..--rewrite-after N send
              --rewrite-at K bytes of the file (version A) and then the
              rest from B; MDTM and SIZE after the N-th RETR, and later
              RETRs, are B's
  users530    a per-host session limit answered with 530 at PASS, in
              ProFTPD's words ("530 Sorry, the maximum number of clients
              (N) from your host are already connected."): at most
              --busy N sessions logged in at once
  deny530     every PASS refused with "530 Login authentication failed."
              (Pure-FTPd's words for a wrong password)
  no150       MDTM is not understood (500), and the first RETR of each
              file is answered "226 Transfer complete." at once, without
              a 150 or any data (a confused server: libcurl's "RETR
              response: 226")

--list-tz TZ (any mode): the server runs in the POSIX or IANA zone TZ and
lists local time in LIST (no MLSD, MLST), as servers that list local time
do, while MDTM stays UTC (RFC 3659); restarted with another TZ it is a
server whose offset moved (a daylight-saving change).

Statistics (JSON, rewritten after every change, --stats): retrs, mdtms
and sizes (MDTM and SIZE commands) per path, retr_at (per path, the REST
offset of each RETR, 0 without REST), rests (REST commands
accepted), max_concurrent and total control connections, busy (421s
sent, refused530 (530s sent), logins (PASS
taken), max_logged_in (most sessions logged in at once).
"""
import argparse
import json
import logging
import os
import threading
import time

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.filesystems import AbstractedFS
from pyftpdlib.handlers import DTPHandler, FTPHandler
from pyftpdlib.servers import FTPServer

LOCK = threading.Lock()
STATE = {"retrs": {}, "retr_at": {}, "mdtms": {}, "sizes": {}, "rests": 0, "open": 0,
         "max_concurrent": 0, "total": 0, "busy": 0, "refused530": 0,
         "logins": 0, "logged_in": 0, "max_logged_in": 0}
ARGS = None


def save():
    tmp = ARGS.stats + ".tmp"
    with open(tmp, "w") as f:
        json.dump(STATE, f)
    os.replace(tmp, ARGS.stats)


class FaultDTP(DTPHandler):
    """Sends at most cmd_channel.fault_limit bytes when a fault is armed."""

    def send(self, data):
        limit = getattr(self.cmd_channel, "fault_limit", None)
        if limit is not None and self.tot_bytes_sent + len(data) > limit:
            data = data[:max(0, limit - self.tot_bytes_sent)]
            if data:
                return DTPHandler.send(self, data)
            self.cmd_channel.fault_limit = None
            if ARGS.mode == "drop":
                self._resp = ("426 Connection closed; transfer aborted.",
                              logging.info)
            else:
                self._resp = ("226 Transfer complete.", logging.info)
            self.close()
            return 0
        return DTPHandler.send(self, data)


class MixFile:
    """A file read from fa for k bytes past the first read, then from fb
    at the same offsets: an in-place rewrite during a transfer."""

    def __init__(self, fa, fb, k):
        self.fa, self.fb, self.k = fa, fb, k
        self.name = fa.name
        self.closed = False
        self.pos = 0
        self.switch = None

    def seek(self, pos):
        self.pos = pos

    def read(self, n):
        if self.switch is None:
            self.switch = self.pos + self.k
        f = self.fa
        if self.pos < self.switch:
            n = min(n, self.switch - self.pos)
        else:
            f = self.fb
        f.seek(self.pos)
        data = f.read(n)
        self.pos += len(data)
        return data

    def close(self):
        self.fa.close()
        self.fb.close()
        self.closed = True


def version_b(file):
    """The path of file's version B (mode rewrite), or None."""
    if ARGS.mode != "rewrite":
        return None
    b = os.path.join(ARGS.rewrite_with, os.path.relpath(file, ARGS.root))
    return b if os.path.isfile(b) else None


class ShortListFS(AbstractedFS):
    """Listings (LIST, MLSD: stat/lstat) show big files 10 bytes short."""

    @staticmethod
    def _short(st):
        if ARGS.mode != "listshort" or st.st_size < (32 << 20):
            return st
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev,
                               st.st_nlink, st.st_uid, st.st_gid,
                               st.st_size - 10, int(st.st_atime),
                               int(st.st_mtime), int(st.st_ctime)))

    def stat(self, path):
        return self._short(AbstractedFS.stat(self, path))

    def lstat(self, path):
        return self._short(AbstractedFS.lstat(self, path))

    def open(self, filename, mode):
        mix = getattr(self.cmd_channel, "mix_with", None)
        fd = AbstractedFS.open(self, filename, mode)
        if mix is None:
            return fd
        self.cmd_channel.mix_with = None
        return MixFile(fd, open(mix, "rb"), ARGS.rewrite_at)


class FaultFTP(FTPHandler):
    dtp_handler = FaultDTP
    abstracted_fs = ShortListFS
    use_sendfile = False

    def on_connect(self):
        with LOCK:
            STATE["open"] += 1
            STATE["total"] += 1
            STATE["max_concurrent"] = max(STATE["max_concurrent"],
                                          STATE["open"])
            save()

    def on_disconnect(self):
        with LOCK:
            STATE["open"] -= 1
            if getattr(self, "counted", False):
                STATE["logged_in"] -= 1
                self.counted = False
            save()

    def ftp_PASS(self, line):
        with LOCK:
            refuse = ARGS.mode == "deny530" or (
                ARGS.mode == "users530" and
                STATE["logged_in"] >= ARGS.busy)
            if refuse:
                STATE["refused530"] += 1
                save()
        if refuse and ARGS.mode == "deny530":
            self.respond("530 Login authentication failed.")
            return
        if refuse:
            self.respond("530 Sorry, the maximum number of clients (%d) "
                         "from your host are already connected." %
                         ARGS.busy)
            return
        return FTPHandler.ftp_PASS(self, line)

    def on_login(self, username):
        with LOCK:
            STATE["logins"] += 1
            STATE["logged_in"] += 1
            STATE["max_logged_in"] = max(STATE["max_logged_in"],
                                         STATE["logged_in"])
            self.counted = True
            save()

    def handle(self):
        with LOCK:
            busy = ARGS.mode == "busy" and STATE["busy"] < ARGS.busy
            if busy:
                STATE["busy"] += 1
                save()
        if busy:
            self.respond("421 Too many connections, try later.")
            self.close_when_done()
            return
        FTPHandler.handle(self)

    def ftp_REST(self, line):
        if ARGS.mode == "norest":
            self.respond("502 REST not implemented.")
            return
        with LOCK:
            STATE["rests"] += 1
            save()
        return FTPHandler.ftp_REST(self, line)

    def rewritten(self, file, key):
        """Count a command of kind key on file; the path it answers from
        (mode rewrite: version B after --rewrite-after RETRs)."""
        rel = os.path.relpath(file, ARGS.root)
        with LOCK:
            STATE[key][rel] = STATE[key].get(rel, 0) + 1
            retrs = STATE["retrs"].get(rel, 0)
            save()
        b = version_b(file)
        return b if b is not None and retrs >= ARGS.rewrite_after else file

    def ftp_MDTM(self, path):
        if ARGS.mode == "no150":
            self.respond("500 'MDTM': command not understood.")
            return
        # --list-tz: LIST in local time, MDTM in UTC all the same.
        self.use_gmt_times = True
        try:
            return FTPHandler.ftp_MDTM(self, self.rewritten(path, "mdtms"))
        finally:
            self.use_gmt_times = not ARGS.list_tz

    def ftp_SIZE(self, path):
        return FTPHandler.ftp_SIZE(self, self.rewritten(path, "sizes"))

    def ftp_RETR(self, file):
        rel = os.path.relpath(file, ARGS.root)
        with LOCK:
            n = STATE["retrs"].get(rel, 0)
            STATE["retrs"][rel] = n + 1
            STATE["retr_at"].setdefault(rel, []).append(
                self._restart_position or 0)
            save()
        self.fault_limit = None
        self.mix_with = None
        if ARGS.mode == "no150" and n == 0:
            self.respond("226 Transfer complete.")
            return
        if ARGS.mode in ("drop", "short") and n == 0:
            size = os.path.getsize(file) - (self._restart_position or 0)
            self.fault_limit = size // 2
        b = version_b(file)
        if b is not None and n >= ARGS.rewrite_after:
            file = b
        elif b is not None:
            self.mix_with = b
        return FTPHandler.ftp_RETR(self, file)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", default="normal",
                   choices=["normal", "drop", "short", "norest", "busy",
                            "listshort", "rewrite", "no150", "users530",
                            "deny530"])
    p.add_argument("--busy", type=int, default=2)
    p.add_argument("--rewrite-with", default="")
    p.add_argument("--rewrite-after", type=int, default=4)
    p.add_argument("--rewrite-at", type=int, default=4096)
    p.add_argument("--stats", required=True)
    p.add_argument("--pasv", default="")
    p.add_argument("--list-tz", default="")
    ARGS = p.parse_args()
    ARGS.root = os.path.realpath(ARGS.root)
    if ARGS.rewrite_with:
        ARGS.rewrite_with = os.path.realpath(ARGS.rewrite_with)
    auth = DummyAuthorizer()
    auth.add_anonymous(ARGS.root)
    FaultFTP.authorizer = auth
    FaultFTP.permit_foreign_addresses = False
    if ARGS.list_tz:
        os.environ["TZ"] = ARGS.list_tz
        time.tzset()
        FaultFTP.use_gmt_times = False
        FaultFTP.proto_cmds = {k: v for k, v in FTPHandler.proto_cmds.items()
                               if k not in ("MLSD", "MLST")}
    if ARGS.pasv:
        lo, hi = ARGS.pasv.split("-")
        FaultFTP.passive_ports = range(int(lo), int(hi) + 1)
    logging.basicConfig(level=logging.INFO)
    save()
    server = FTPServer(("127.0.0.1", ARGS.port), FaultFTP)
    server.serve_forever()


if __name__ == "__main__":
    main()
