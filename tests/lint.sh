#!/bin/sh
# Banned functions (STYLE.md rule 33) must not appear in the sources.
bad=$(grep -nE '\b(strcpy|strcat|sprintf|vsprintf|gets|atoi|atol|strtok)\s*\(' \
    agent/*.c agent/serve/*.c agent/serve/*.h manifest/*.c include/biomirror/*.h 2>/dev/null |
    grep -vE '\b(snprintf|vsnprintf|strtok_r)\s*\(' |
    grep -vE '(s|vs)nprintf')
if [ -n "$bad" ]; then
	echo "lint: banned functions used:" >&2
	echo "$bad" >&2
	exit 1
fi
# Only the transports (agent/xfer*.c) and the server (agent/serve/) own
# sockets (DESIGN.md); bmproto.c, the codec they share, holds none.
bad=$(grep -lE '\b(socket|accept4?|bind|listen|connect)\s*\(' \
    agent/*.c manifest/*.c 2>/dev/null | grep -vE '^agent/xfer[^/]*\.c$')
if [ -n "$bad" ]; then
	echo "lint: sockets outside the transports and agent/serve/:" >&2
	echo "$bad" >&2
	exit 1
fi
# The man pages render without a warning (groff -man -ww -z).
for page in docs/biomirror.1 docs/biomirror.conf.5; do
	out=$(groff -man -ww -z "$page" 2>&1) || out="$out (groff failed)"
	if [ -n "$out" ]; then
		echo "lint: $page: groff warnings:" >&2
		echo "$out" >&2
		exit 1
	fi
done
echo "lint: ok"
