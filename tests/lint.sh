#!/bin/sh
# Banned functions (STYLE.md rule 33) must not appear in the sources.
bad=$(grep -nE '\b(strcpy|strcat|sprintf|vsprintf|gets|atoi|atol|strtok)\s*\(' \
    agent/*.c manifest/*.c include/biomirror/*.h 2>/dev/null |
    grep -vE '\b(snprintf|vsnprintf|strtok_r)\s*\(' |
    grep -vE '(s|vs)nprintf')
if [ -n "$bad" ]; then
	echo "lint: banned functions used:" >&2
	echo "$bad" >&2
	exit 1
fi
echo "lint: ok"
