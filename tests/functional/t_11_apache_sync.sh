#!/bin/bash
# Core sync against real Apache httpd (mod_autoindex FancyIndexing): see
# sync_suite.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
SERVER=apache
BIG_MB=200
. "$(dirname "$0")/sync_suite.sh"
echo "PASS"
