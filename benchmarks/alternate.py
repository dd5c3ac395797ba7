"""Commands run side by side in alternation: each one in turn runs for a short slice of wall
time while the others are stopped (SIGSTOP / SIGCONT), until all have exited; the result is each
command's CPU time (user + system, its waited-for children included).

Why: on this shared VM the same run's CPU time moves by 1.3-1.7x in slow phases that last from
tens of milliseconds to many seconds (../shared/docs/verdict-noise.md), so two runs one after
the other see different machines. Alternated in slices shorter than most phases, every command
sees the same mix of them. Measured on the millisecond suite (1,000 tests, 8 pairs): a
run after run ratio moved 0.74-1.28, the alternated one 0.87-0.95 for the same two commands.
Only the command's own process is stopped: a child it is forking may not be stopped mid-vfork,
or the parent would never reach its stop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

SLICE_S = 0.02  # wall time a command runs before the next one's turn


def _started_stopped(command: Sequence[str], cwd: Path, env: dict[str, str] | None) -> int:
    """The pid of `command`, stopped before it has run any of its own code."""
    shell = ["sh", "-c", 'kill -STOP $$; exec "$@"', "sh", *command]
    process = subprocess.Popen(
        shell, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, _ = os.wait4(process.pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        raise RuntimeError(f"{command[0]} exited before it ran: status {status}")
    return process.pid


def cpu_times(
    commands: Sequence[Sequence[str]],
    cwd: Path,
    env: dict[str, str] | None = None,
    slice_s: float = SLICE_S,
) -> list[float]:
    """Each command's CPU seconds, the commands run in alternation (in the order given; rotate
    it between calls). A command that exits other than 0 or 5 (pytest's "no test selected")
    raises, naming it, once the others are killed."""
    pids = [_started_stopped(command, cwd, env) for command in commands]
    spent: dict[int, float] = {}
    turn = 0
    while len(spent) < len(pids):
        pid = pids[turn % len(pids)]
        turn += 1
        if pid in spent:
            continue
        os.kill(pid, signal.SIGCONT)
        time.sleep(slice_s)
        os.kill(pid, signal.SIGSTOP)  # one that exited stays a zombie till wait4: no error
        _, status, usage = os.wait4(pid, os.WUNTRACED)
        if os.WIFSTOPPED(status):
            continue
        spent[pid] = usage.ru_utime + usage.ru_stime
        if os.waitstatus_to_exitcode(status) not in (0, 5):  # 5: pytest selected no test
            for other in pids:
                if other not in spent:
                    os.kill(other, signal.SIGKILL)  # a stopped process dies of it too
                    os.wait4(other, 0)
                    spent[other] = 0.0
            failed = commands[pids.index(pid)]
            raise RuntimeError(f"{' '.join(failed)} failed: status {status}")
    return [spent[pid] for pid in pids]
