//! A long-running process's start line (where its API listens), which a person starting it reads
//! on stderr and `specie cluster up` keeps in the member's log file. Under `--log-format json`
//! the line is a log event instead, so that a log file stays one JSON object per line.

/// The environment variable that carries `--log-format` (`json` or `text`) to this process and
/// to the processes it starts (a cluster's members).
pub const LOG_FORMAT_VARIABLE: &str = "SPECIE_LOG_FORMAT";

/// The `tracing` target of start lines, on at `info` in a role's default log filter.
pub const START_LOG: &str = "specie::start";

/// Writes `line`: as it is on stderr, or as an `info` event of [`START_LOG`] under JSON logs.
pub fn announce(line: std::fmt::Arguments<'_>) {
    if std::env::var(LOG_FORMAT_VARIABLE).is_ok_and(|format| format == "json") {
        tracing::info!(target: START_LOG, "{line}");
    } else {
        eprintln!("{line}");
    }
}
