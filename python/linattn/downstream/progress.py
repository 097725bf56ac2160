"""A progress line with rate and ETA on stderr, as `linattn --progress` prints it (program/job.c
la_job_progress): one line per update, at most one a second (and always the last), from rank 0
only; on when stderr is a terminal or --progress was given.

Work is counted in weighted units (a run of the capacity task at N weighs N^2: its cost per
step grows about as N^2), so the ETA assumes the remaining units take as long per unit as the finished
ones did.
"""
import os
import sys
import time


class Progress:
    def __init__(self, what, total, *, enabled=None, rank=0, stream=None, interval=1.0):
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = self.stream.isatty()
        self.enabled = bool(enabled) and rank == 0
        self.what, self.total = what, float(total)
        self.done = 0.0
        self.t0 = time.monotonic()
        self.last = -1e30
        self.interval = interval

    def advance(self, units):
        """Finished `units` of work (no line)."""
        self.done += units

    def update(self, partial=0.0, note="", force=False):
        """Print a line: `partial` units of the current item are done besides self.done."""
        if not self.enabled:
            return
        now = time.monotonic()
        done = min(self.done + partial, self.total)
        if not force and done < self.total and now - self.last < self.interval:
            return
        self.last = now
        el = now - self.t0
        rate = done / el if el > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else float("nan")
        pct = 100.0 * done / self.total if self.total > 0 else 100.0
        eta_s = "ETA %.0f s" % eta if eta == eta else "ETA ?"
        self.stream.write("linattn.downstream: %s %5.1f%%  %.3g units/s  %s%s\n"
                          % (self.what, pct, rate, eta_s, ("  (" + note + ")") if note else ""))
        self.stream.flush()


def rank():
    """This process's rank under mpirun/srun (0 without MPI)."""
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0
