/* BLAS access for core/. OpenBLAS is told to stay single-threaded inside our OpenMP
 * regions (issue 6: one BLAS thread per OpenMP thread). */
#ifndef LINATTN_LA_BLAS_H
#define LINATTN_LA_BLAS_H
#include <cblas.h>
void la_blas_single_thread(void);
#endif
