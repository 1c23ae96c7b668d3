#include <stdio.h>
int main(void) { puts("offkv demo: the cache is being built"); return 0; }
