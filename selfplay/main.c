/* main.c - `selfplay`: the self-play / training loop of one run (driver.h). */
#include "selfplay/driver.h"

int main(int argc, char **argv) { return sp_main(argc, argv, 1); }
