// Counts the threads a process makes (LD_PRELOAD; tests/e2e/e2e_threads.sh): pthread_create
// passes through, and at exit the count goes to the file named by SPKDDP_COUNT_THREADS_OUT.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // (RTLD_NEXT)
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_long g_made;

typedef int create_fn(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
    static create_fn *real;
    if (!real) real = (create_fn *)dlsym(RTLD_NEXT, "pthread_create");
    if (!real) return 1;  // (EPERM: no pthread_create to pass to)
    atomic_fetch_add(&g_made, 1);
    return real(t, attr, start, arg);
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("SPKDDP_COUNT_THREADS_OUT");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f) return;
    fprintf(f, "%ld\n", atomic_load(&g_made));
    fclose(f);
}
