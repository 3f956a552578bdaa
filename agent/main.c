/* Placeholder until the CLI lands. */
#include <stdio.h>
int main(void) { puts("biomirror"); return 0; }
