/* par.h - OpenMP where the build has it (internal to nn/).
 *
 * NN_OMP(directive) is `#pragma omp directive` when the compiler builds with
 * OpenMP (koma_nn links OpenMP::OpenMP_C where it is found, see
 * nn/CMakeLists.txt) and nothing otherwise: the TSan build and the Windows
 * cross build run the same loops on one thread, without "unknown pragma"
 * warnings. Loops under it must give the same result on any thread count
 * except for the order of floating-point sums (static schedules: the same
 * thread count gives the same bits).
 */
#ifndef KOMA_NN_PAR_H
#define KOMA_NN_PAR_H

#ifdef _OPENMP
#include <omp.h>
#define NN_OMP(directive) _Pragma(#directive)
#define NN_THREAD_NUM() omp_get_thread_num()
#else
#define NN_OMP(directive)
#define NN_THREAD_NUM() 0
#endif

/* Elementwise work below this many floats runs on the calling thread: waking
 * a team costs more than it saves. */
#define NN_PAR_MIN 32768

#endif
