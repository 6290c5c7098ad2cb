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


class FakeClock:
    """``time`` for spare_cores: each sample advances the wall clock by ``wall`` seconds
    and this process's CPU by ``cpu`` (a real clock under a loaded test run can show the
    process above one core between two samples: other tests' threads)."""

    def __init__(self, wall: float = 1.0, cpu: float = 0.5) -> None:
        self.wall_step, self.cpu_step = wall, cpu
        self.wall = self.cpu = 0.0

    def perf_counter(self) -> float:
        self.wall += self.wall_step
        return self.wall

    def process_time(self) -> float:
        self.cpu += self.cpu_step
        return self.cpu


def test_spare_cores_is_the_idle_share_of_the_ticks_times_the_cpus(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    monkeypatch.setattr(spare_cores, "_STAT", str(stat))
    monkeypatch.setattr(spare_cores, "time", FakeClock(wall=1.0, cpu=0.5))  # half a core: no extra
    stat.write_text(stat_text(idle=1_000, busy=1_000, cpus=4))
    cores = SpareCores()
    stat.write_text(stat_text(idle=1_030, busy=1_070, cpus=4))  # 30 of 100 ticks idle
    assert abs(cores.spare() - 0.3 * 4) < 1e-9
    stat.write_text(stat_text(idle=1_030, busy=1_170, cpus=4))  # then nothing idle
    assert cores.spare() == 0.0
    stat.write_text(stat_text(idle=1_030, busy=1_270, cpus=4))
    assert cores.threaded() is False  # still nothing idle
    stat.write_text(stat_text(idle=1_130, busy=1_270, cpus=4))
    assert cores.threaded() is True  # all 4 idle
    assert cores.spare() is None  # no tick since: unknown


def test_a_process_above_one_core_counts_its_extra_as_spare(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    monkeypatch.setattr(spare_cores, "_STAT", str(stat))
    monkeypatch.setattr(spare_cores, "time", FakeClock(wall=1.0, cpu=1.75))  # its writer thread ran
    stat.write_text(stat_text(idle=1_000, busy=1_000, cpus=2))
    cores = SpareCores()
    stat.write_text(stat_text(idle=1_000, busy=1_100, cpus=2))  # nothing idle
    assert abs(cores.spare() - 0.75) < 1e-9
    stat.write_text(stat_text(idle=1_000, busy=1_200, cpus=2))
    assert cores.threaded() is True  # 0.75 >= SPARE_FOR_THREAD


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
