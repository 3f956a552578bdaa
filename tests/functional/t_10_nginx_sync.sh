#!/bin/bash
# Core sync against real nginx (autoindex html): see sync_suite.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sync_lib.sh"
bm_setup
SERVER=nginx
. "$(dirname "$0")/sync_suite.sh"
echo "PASS"
