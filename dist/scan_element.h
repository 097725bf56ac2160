/* The scan element's packed layout (docs/design.md §4.1), written once: per head
 * [S|z (r (dv + 1)) | m | f | a] doubles (a: the cumulative log-decay, §1.2), the heads one
 * after another. Every message that carries
 * a scan state (the collectives of comm.c and scan.c, whole or in the pipelined scan's
 * pieces, the window halos of forward.c and backward.c) packs, unpacks and combines it
 * here. Not Collective; no MPI calls. */
#ifndef LINATTN_SCAN_ELEMENT_H
#define LINATTN_SCAN_ELEMENT_H
#include <stddef.h>
#include "linattn/core.h"

/* The doubles after S|z in a head's element or piece: m, f and a. */
#define LA_SCAN_EL_TAIL 3
/* Doubles per head of a state of feature width r and value width dv: r (dv + 1) + 3. */
size_t la_scan_el_doubles(int r, int dv);
/* buf [heads x la_scan_el_doubles] <- s. */
void la_scan_el_pack(const la_state *s, double *buf);
/* s <- buf (the flag as f != 0). */
void la_scan_el_unpack(const double *buf, la_state *s);
/* b <- a (+) b on count heads of per doubles, a from earlier ranks (§4.1, non-commutative):
 * the MPI operator's inout = in (+) inout, in place, allocating nothing. In a SimGrid build
 * the combine is charged its modelled time (docs/simulation.md). */
void la_scan_el_combine_right(const double *a, double *b, int count, size_t per);
/* The pipelined scan's pieces (scan.c): a piece of each head is its sz doubles [lo, lo + L)
 * followed by the head's (m, f, a), L + 3 doubles, the heads one after another; the operator
 * applies to pieces as to whole elements (la_scan_el_combine_right with per = L + 3).
 * piece [count x (L + 3)] <- the piece of el [count x per]. */
void la_scan_el_piece(const double *el, int count, size_t per, size_t lo, size_t L,
                      double *piece);
/* el [count x per] <- piece: its sz doubles [lo, lo + L) and its (m, f, a). */
void la_scan_el_unpiece(const double *piece, int count, size_t per, size_t lo, size_t L,
                        double *el);
/* dst <- src (the same shape). */
void la_scan_el_copy(la_state *dst, const la_state *src);
/* s <- s (+) buf, head by head. with_flags = 0: a plain sum (both flags taken as 0, s's flags
 * untouched), for the halo summaries of one segment. */
void la_scan_el_fold(la_state *s, const double *buf, int with_flags);

#endif
