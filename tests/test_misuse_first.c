/* The program's first call into the allocator is a bad free, made twice: HAKMEM_ON_ERROR must
 * already hold (tests/misuse.sh), and with "warn" the address is reported once. */
#include <stdio.h>
#include <stdlib.h>

#pragma GCC diagnostic ignored "-Wfree-nonheap-object"

int main(void) {
    int local = 0;
    int *volatile p = &local;
    free(p);
    free(p);
    puts("survived");
    return 0;
}
