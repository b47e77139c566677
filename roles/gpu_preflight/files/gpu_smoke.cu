// One-second checked workload per GPU: every device runs a fused multiply-add loop whose exact
// result is known, for about the requested seconds, and must return it. Exit 0 only if all do.
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cuda_runtime.h>

__global__ void fma_loop(float *out, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = 0.0f;
    for (int k = 0; k < iters; ++k) x = fmaf(x, 1.0f, 1.0f);  // x counts iterations exactly
    out[i] = x;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { printf("no CUDA device\n"); return 2; }
    const int threads = 256, blocks = 1024, iters = 4096;
    int bad = 0;
    for (int d = 0; d < n; ++d) {
        cudaSetDevice(d);
        float *buf = nullptr;
        if (cudaMalloc(&buf, sizeof(float) * threads * blocks) != cudaSuccess) { printf("GPU %d: cudaMalloc failed\n", d); ++bad; continue; }
        auto start = std::chrono::steady_clock::now();
        long launches = 0;
        cudaError_t err = cudaSuccess;
        do {
            fma_loop<<<blocks, threads>>>(buf, iters);
            err = cudaDeviceSynchronize();
            ++launches;
        } while (err == cudaSuccess && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds);
        float probe[2] = {0, 0};
        if (err == cudaSuccess) err = cudaMemcpy(probe, buf, sizeof(probe), cudaMemcpyDeviceToHost);
        if (err != cudaSuccess || probe[0] != (float)iters || probe[1] != (float)iters) {
            printf("GPU %d: FAILED (%s, got %g)\n", d, cudaGetErrorString(err), probe[0]);
            ++bad;
        } else {
            printf("GPU %d: ok (%ld launches)\n", d, launches);
        }
        cudaFree(buf);
    }
    return bad ? 1 : 0;
}
