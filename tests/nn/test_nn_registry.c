/* test_nn_registry.c - nn/registry.c, the one resolver of backend names that
 * selfplay, train, the inference server and koma share: cpu, cuda and auto
 * (cuda exactly when a device is present), "" as auto, an unknown name
 * refused with the list of names, and opening each kind (cuda without a
 * device: an error naming the device, never a crash). */
#include "nn_test.h"

#include "nn/backend_cuda.h"
#include "nn/registry.h"

int main(void) {
    nn_backend_kind_t k = (nn_backend_kind_t)-1;
    char err[256];
    CHECK(nn_backend_resolve("cpu", &k, err, sizeof err) == 0 && k == NN_BACKEND_KIND_CPU);
    CHECK(nn_backend_resolve("cuda", &k, err, sizeof err) == 0 && k == NN_BACKEND_KIND_CUDA);
    nn_backend_kind_t want = nn_cuda_device_count() > 0 ? NN_BACKEND_KIND_CUDA : NN_BACKEND_KIND_CPU;
    CHECK(nn_backend_resolve("auto", &k, err, sizeof err) == 0 && k == want);
    CHECK(nn_backend_resolve("", &k, err, sizeof err) == 0 && k == want);
    CHECK(nn_backend_resolve(NULL, &k, err, sizeof err) == 0 && k == want);
    CHECK(nn_backend_resolve("auto", NULL, err, sizeof err) == 0);
    err[0] = 0;
    CHECK(nn_backend_resolve("gpu", &k, err, sizeof err) == -1);
    CHECKF(strcmp(err, "'gpu' is not cpu, cuda or auto") == 0, "message: %s", err);
    CHECK(nn_backend_resolve("CPU", NULL, err, sizeof err) == -1);
    CHECK(strcmp(nn_backend_kind_name(NN_BACKEND_KIND_CPU), "cpu") == 0);
    CHECK(strcmp(nn_backend_kind_name(NN_BACKEND_KIND_CUDA), "cuda") == 0);
    nn_backend_t *be = nn_backend_open(NN_BACKEND_KIND_CPU, 1, 0, 0, err, sizeof err);
    CHECK(be && strcmp(be->name, "cpu") == 0);
    nn_backend_free(be);
    if (nn_cuda_device_count() == 0) {
        err[0] = 0;
        be = nn_backend_open(NN_BACKEND_KIND_CUDA, 1, 0, 0, err, sizeof err);
        CHECKF(be == NULL && strstr(err, "cuda backend (device 0)"), "cuda without a device: %s", err);
        nn_backend_free(be);
    }
    return t_done("test_nn_registry");
}
