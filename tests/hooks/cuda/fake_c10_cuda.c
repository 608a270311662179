/* tests/hooks/cuda/fake_c10_cuda.c: built as libc10_cuda.so, the name of
 * PyTorch's CUDA library, which holds PyTorch's own caching allocator.
 * sem_app framework loads it to play a program under PyTorch: tidemark's
 * cache mode must then stay out of the way (hooks/preload/cuda_common.c).
 * It needs no code of its own; one symbol keeps it a real library. */
int tdm_fake_c10_cuda_marker(void);
int tdm_fake_c10_cuda_marker(void)
{
    return 1;
}
