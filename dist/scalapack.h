/* The BLACS, PBLAS and ScaLAPACK functions linattn calls, declared once: Debian's
 * libscalapack-openmpi ships no C header. Used by floor.c (pdgesvd, the rank-r floor) and
 * pblas.c (pdgemm, the dense baseline); docs/design.md §4.6. */
#ifndef LINATTN_SCALAPACK_H
#define LINATTN_SCALAPACK_H
#include <mpi.h>

extern void Cblacs_pinfo(int *mypnum, int *nprocs);
extern int Csys2blacs_handle(MPI_Comm comm);
extern void Cfree_blacs_system_handle(int handle);
extern void Cblacs_gridinit(int *ctxt, const char *order, int nprow, int npcol);
extern void Cblacs_gridinfo(int ctxt, int *nprow, int *npcol, int *myrow, int *mycol);
extern void Cblacs_gridexit(int ctxt);
extern void Cdgamx2d(int ctxt, const char *scope, const char *top, int m, int n, double *a,
                     int lda, int *ra, int *ca, int ldia, int rdest, int cdest);
extern void Cdgsum2d(int ctxt, const char *scope, const char *top, int m, int n, double *a,
                     int lda, int rdest, int cdest);
extern int numroc_(const int *n, const int *nb, const int *iproc, const int *isrc,
                   const int *nprocs);
extern void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
                      const int *irsrc, const int *icsrc, const int *ctxt, const int *lld,
                      int *info);
extern void pdgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
                    const double *alpha, const double *a, const int *ia, const int *ja,
                    const int *desca, const double *b, const int *ib, const int *jb,
                    const int *descb, const double *beta, double *c, const int *ic,
                    const int *jc, const int *descc);
extern void pdgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a,
                     const int *ia, const int *ja, const int *desca, double *s, double *u,
                     const int *iu, const int *ju, const int *descu, double *vt,
                     const int *ivt, const int *jvt, const int *descvt, double *work,
                     const int *lwork, int *info);
#endif
