//! CPU time from `getrusage`: the whole process, and the thread that drives the load.

use std::time::Duration;

/// User + system CPU time of `who` (`RUSAGE_SELF` or `RUSAGE_THREAD`).
fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage only writes into it.
    let status = unsafe { libc::getrusage(who, &mut usage) };
    if status != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32).saturating_mul(1_000));
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// CPU time used so far by this process (every thread, those ended included) and by the
/// calling thread alone.
#[derive(Clone, Copy, Debug)]
pub struct CpuClock {
    process: Duration,
    this_thread: Duration,
}

/// CPU seconds used between two readings of a [`CpuClock`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuUsed {
    pub process_s: f64,
    /// The calling thread's part of `process_s`.
    pub this_thread_s: f64,
}

impl CpuUsed {
    /// Everything but the calling thread: while a phase runs, the committee's shard threads.
    pub fn others_s(&self) -> f64 {
        (self.process_s - self.this_thread_s).max(0.0)
    }
}

impl CpuClock {
    pub fn now() -> CpuClock {
        CpuClock {
            process: cpu_time(libc::RUSAGE_SELF),
            this_thread: cpu_time(libc::RUSAGE_THREAD),
        }
    }

    /// CPU time of the calling thread alone.
    pub fn this_thread() -> Duration {
        cpu_time(libc::RUSAGE_THREAD)
    }

    /// What was used since `self` (read on the same thread). The thread is read first here,
    /// as [`CpuClock::now`] reads it last, so the thread's interval lies within the process's
    /// and its part never exceeds the whole.
    pub fn used(&self) -> CpuUsed {
        let this_thread = cpu_time(libc::RUSAGE_THREAD);
        let process = cpu_time(libc::RUSAGE_SELF);
        CpuUsed {
            process_s: process.saturating_sub(self.process).as_secs_f64(),
            this_thread_s: this_thread.saturating_sub(self.this_thread).as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_in_this_threads_and_the_process_cpu_time() {
        let clock = CpuClock::now();
        let mut x = 0u64;
        while clock.used().this_thread_s < 0.02 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let used = clock.used();
        assert!(used.this_thread_s >= 0.02);
        assert!(used.process_s >= used.this_thread_s, "{used:?}");
    }
}
