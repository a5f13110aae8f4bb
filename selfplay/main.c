/* main.c - `selfplay`: the self-play / training loop of one run (driver.h). */
#include "compat/version.h"
#include "nn/backend.h"
#include "selfplay/driver.h"

int main(int argc, char **argv) {
    if (koma_version_asked(argc, argv, "selfplay")) return 0;
    nn_cpu_blas_reexec_if_generic(argv);
    return sp_main(argc, argv, 1);
}
