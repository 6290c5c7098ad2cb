"""vault/spare_cores.py: the spare cores a writer thread could use, from /proc/stat ticks
and this process's CPU time (formula in the module docstring)."""

from __future__ import annotations

import time

from tiervault.vault import spare_cores
from tiervault.vault.spare_cores import SPARE_FOR_THREAD, SpareCores


def stat_text(idle: int, busy: int, cpus: int) -> str:
    """A /proc/stat whose first line counts ``idle`` idle and ``busy`` user ticks."""
    lines = [f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0"]
    lines += [f"cpu{i} 1 0 0 1 0 0 0 0 0 0" for i in range(cpus)]
    return "\n".join(lines + ["intr 0", "ctxt 0"]) + "\n"


def test_spare_cores_is_the_idle_share_of_the_ticks_times_the_cpus(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    monkeypatch.setattr(spare_cores, "_STAT", str(stat))
    stat.write_text(stat_text(idle=1_000, busy=1_000, cpus=4))
    cores = SpareCores()
    time.sleep(0.01)  # one thread sleeping: the process ran far less than one core
    stat.write_text(stat_text(idle=1_030, busy=1_070, cpus=4))  # 30 of 100 ticks idle
    assert abs(cores.spare() - 0.3 * 4) < 1e-9
    stat.write_text(stat_text(idle=1_030, busy=1_170, cpus=4))  # then nothing idle
    assert cores.spare() == 0.0
    stat.write_text(stat_text(idle=1_030, busy=1_270, cpus=4))
    assert cores.threaded() is False  # still nothing idle
    stat.write_text(stat_text(idle=1_130, busy=1_270, cpus=4))
    assert cores.threaded() is True  # all 4 idle
    assert cores.spare() is None  # no tick since: unknown


def test_without_proc_stat_the_writer_thread_is_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(spare_cores, "_STAT", str(tmp_path / "missing"))
    cores = SpareCores()
    assert cores.spare() is None
    assert cores.threaded() is True


def test_the_real_proc_stat_gives_a_count_of_cores(tmp_path):
    cores = SpareCores()
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:  # this thread busy for a while: ticks move
        pass
    spare = cores.spare()
    assert spare is not None and 0.0 <= spare <= 512
    assert isinstance(cores.threaded(), bool) and SPARE_FOR_THREAD > 0
