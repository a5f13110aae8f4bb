# blas-env.sh - sourced by demo.sh and test.sh. Debian 12's OpenBLAS 0.3.21
# does not recognise recent Intel CPUs and falls back to SSE3 kernels; where
# the CPU has the AVX-512 subsets the SkylakeX kernels need, select them
# (2.5-4x faster convolutions, see docs/BENCHMARKS.md). A value the user set wins.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -r /proc/cpuinfo ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  case "$flags" in
    *avx512f*) case "$flags" in *avx512bw*) case "$flags" in *avx512dq*) case "$flags" in *avx512vl*)
      export OPENBLAS_CORETYPE=SkylakeX ;; esac ;; esac ;; esac ;;
  esac
fi
