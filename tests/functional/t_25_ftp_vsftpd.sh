#!/bin/bash
# FTP sync against real vsftpd, listed with LIST (vsftpd has no MLSD): see ftp_suite.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
SERVER=vsftpd
. "$(dirname "$0")/ftp_suite.sh"
echo "PASS"
