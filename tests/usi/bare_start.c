/* bare_start.c - a program that only starts and says so: test_usi_start's
 * measure of what starting a process costs on this machine at this moment
 * (it links nothing of Koma). */
#include <stdio.h>

int main(void) {
    printf("noop\n");
    return 0;
}
