//! A throwaway PostgreSQL server: finding its binaries, the user it runs as, its settings, starting and stopping it.

use super::*;

/// The directory name with the highest version number (`15` > `9.6`); others are ignored.
pub(crate) fn newest_version(names: impl IntoIterator<Item = String>) -> Option<String> {
    names
        .into_iter()
        .filter_map(|name| {
            let key: Option<Vec<u32>> = name.split('.').map(|part| part.parse().ok()).collect();
            Some((key?, name))
        })
        .max()
        .map(|(_, name)| name)
}

/// `MemTotal` of /proc/meminfo, in bytes.
pub(crate) fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// postgresql.conf settings: the usual benchmarking recommendations (memory sized to the machine,
/// no checkpoint inside a measurement), every durability setting left on.
pub(crate) fn server_settings(
    max_clients: usize,
    ram_bytes: Option<u64>,
    commit_delay_us: u32,
) -> Vec<(&'static str, String)> {
    const MIB: u64 = 1 << 20;
    let ram = ram_bytes.unwrap_or(4096 * MIB);
    let shared_buffers_mib = (ram / 4 / MIB).clamp(128, 16 * 1024);
    let effective_cache_mib = (ram / 2 / MIB).max(256);
    vec![
        // Durability: every commit reaches the disk before the client hears of it.
        ("fsync", "on".into()),
        ("synchronous_commit", "on".into()),
        ("full_page_writes", "on".into()),
        // Group commit: a committing backend may wait this long for others to share its WAL flush.
        ("commit_delay", commit_delay_us.to_string()),
        ("commit_siblings", "5".into()),
        // Memory and connections.
        ("max_connections", (max_clients + 10).to_string()),
        ("shared_buffers", format!("{shared_buffers_mib}MB")),
        ("effective_cache_size", format!("{effective_cache_mib}MB")),
        ("wal_buffers", "64MB".into()),
        ("maintenance_work_mem", "1GB".into()),
        // No checkpoint forced inside a measurement (one runs after the preload).
        ("max_wal_size", "16GB".into()),
        ("min_wal_size", "1GB".into()),
        ("checkpoint_timeout", "30min".into()),
        ("checkpoint_completion_target", "0.9".into()),
        // A single server without replicas or archiving: minimal WAL (still crash safe) lets the
        // preload skip the WAL.
        ("wal_level", "minimal".into()),
        ("max_wal_senders", "0".into()),
        // Single-row plans: never worth compiling.
        ("jit", "off".into()),
    ]
}

/// Finds initdb, pg_ctl and postgres: `--pg-bin`, else PATH, else the newest Debian/Ubuntu install.
pub(crate) fn locate_binaries(explicit: Option<&Path>) -> BenchResult<PathBuf> {
    if let Some(dir) = explicit {
        ensure_that!(
            has_server_binaries(dir),
            "--pg-bin {} does not hold initdb, pg_ctl and postgres: {INSTALL}",
            dir.display()
        );
        return Ok(dir.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            // pg_ctl starts the postgres beside its real path: follow symbolic links.
            let Ok(initdb) = dir.join("initdb").canonicalize() else {
                continue;
            };
            if let Some(real_dir) = initdb.parent().filter(|d| has_server_binaries(d)) {
                return Ok(real_dir.to_path_buf());
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(DEBIAN_PG_LIB) {
        let versions = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| has_server_binaries(&Path::new(DEBIAN_PG_LIB).join(name).join("bin")));
        if let Some(newest) = newest_version(versions) {
            return Ok(Path::new(DEBIAN_PG_LIB).join(newest).join("bin"));
        }
    }
    fail!("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH or in {DEBIAN_PG_LIB}/*/bin: {INSTALL}")
}

pub(crate) fn has_server_binaries(dir: &Path) -> bool {
    ["initdb", "pg_ctl", "postgres"]
        .iter()
        .all(|name| dir.join(name).is_file())
}

/// Numeric output of `id ARGS`.
pub(crate) fn id(args: &[&str]) -> BenchResult<u32> {
    let output = Command::new("id")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .step("cannot run `id`")?;
    ensure_that!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&output.stdout).trim().parse()?)
}

/// Who runs the server's programs: this process's user, or (as root) another one through runuser.
pub(crate) struct RunAs {
    pub(crate) user: Option<SystemUser>,
}

pub(crate) struct SystemUser {
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) runuser: PathBuf,
}

/// `name` on PATH, else in the system directories (which a root PATH may leave out).
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

impl RunAs {
    pub(crate) fn detect(pg_user: &str) -> BenchResult<RunAs> {
        if id(&["-u"])? != 0 {
            return Ok(RunAs { user: None });
        }
        let lookup = |flag: &str| {
            id(&[flag, pg_user]).with_step(|| {
                format!(
                    "this command runs as root, PostgreSQL refuses to, so the throwaway server runs as the system \
                     user `{pg_user}` (--pg-user), which was not found; create it (the postgresql package does) with \
                     `useradd --system --user-group --no-create-home --shell /usr/sbin/nologin {pg_user}`, \
                     pass --pg-user NAME, or run as a user other than root"
                )
            })
        };
        let (uid, gid) = (lookup("-u")?, lookup("-g")?);
        ensure_that!(
            uid != 0,
            "--pg-user {pg_user} is root: PostgreSQL refuses to run as root"
        );
        let runuser = find_program("runuser").step(
            "this command runs as root and needs runuser (util-linux) to start PostgreSQL as --pg-user: not found",
        )?;
        Ok(RunAs {
            user: Some(SystemUser {
                name: pg_user.to_string(),
                uid,
                gid,
                runuser,
            }),
        })
    }

    pub(crate) fn command(&self, program: &Path) -> Command {
        let mut command = match &self.user {
            Some(user) => {
                let mut command = Command::new(&user.runuser);
                command.args(["-u", &user.name, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        };
        command.stdin(Stdio::null()).process_group(0);
        command
    }

    pub(crate) fn describe(&self) -> String {
        match &self.user {
            Some(user) => format!("as user {} through runuser", user.name),
            None => "as the current user".to_string(),
        }
    }
}

/// Runs `command` to completion; its output becomes the error if it fails.
pub(crate) fn run_checked(command: &mut Command, what: &str) -> BenchResult<()> {
    let output = command.output().with_step(|| format!("cannot run {what}"))?;
    ensure_that!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// A throwaway PostgreSQL cluster in a temporary directory: stopped, then deleted, when dropped.
pub(crate) struct Cluster {
    pub(crate) bin: PathBuf,
    pub(crate) run_as: RunAs,
    pub(crate) data: PathBuf,
    pub(crate) socket_dir: PathBuf,
    pub(crate) port: u16,
    /// A start was attempted, so drop must stop the server.
    pub(crate) started: bool,
    /// Last field: removed after `Drop::drop` has stopped the server.
    pub(crate) dir: tempfile::TempDir,
}

impl Cluster {
    pub(crate) fn start(bin: &Path, run_as: RunAs, settings: &[(&str, String)]) -> BenchResult<Cluster> {
        let dir = tempfile::Builder::new()
            .prefix("specie-bench-pg-")
            .tempdir()
            .step("cannot create a temporary directory")?;
        if let Some(user) = &run_as.user {
            std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid))
                .with_step(|| format!("cannot give {} to {}", dir.path().display(), user.name))?;
        }
        let mut cluster = Cluster {
            bin: bin.to_path_buf(),
            run_as,
            data: dir.path().join("data"),
            socket_dir: dir.path().to_path_buf(),
            port: 0,
            started: false,
            dir,
        };
        run_checked(
            cluster.command("initdb").arg("-D").arg(&cluster.data).args([
                "-U",
                ROLE,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
            ]),
            "initdb",
        )?;
        cluster.port = free_port()?;
        let conf_path = cluster.data.join("postgresql.conf");
        let mut conf = OpenOptions::new()
            .append(true)
            .open(&conf_path)
            .with_step(|| format!("cannot open {}", conf_path.display()))?;
        writeln!(conf, "\n# specie bench postgres")?;
        let socket_dir = cluster.socket_dir.display().to_string();
        let local = [
            ("listen_addresses", "127.0.0.1".to_string()),
            ("port", cluster.port.to_string()),
            ("unix_socket_directories", socket_dir),
        ];
        for (name, value) in settings.iter().cloned().chain(local) {
            writeln!(conf, "{name} = '{}'", value.replace('\'', "''"))?;
        }
        drop(conf);
        cluster.started = true;
        let log = cluster.dir.path().join("postgres.log");
        let started = run_checked(
            cluster
                .command("pg_ctl")
                .arg("-D")
                .arg(&cluster.data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "120", "start"]),
            "pg_ctl start",
        );
        if let Err(error) = started {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(BenchError::Step {
                what: format!("the server did not start; its log:\n{log}"),
                source: Box::new(error),
            });
        }
        Ok(cluster)
    }

    pub(crate) fn command(&self, program: &str) -> Command {
        let mut command = self.run_as.command(&self.bin.join(program));
        command.current_dir(self.dir.path());
        command
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.started {
            return;
        }
        // Immediate: the data is deleted next, so no shutdown checkpoint is worth waiting for.
        let stopped = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "-t", "60", "stop"])
            .output()
            .is_ok_and(|output| output.status.success());
        let pid_file = self.data.join("postmaster.pid");
        if !stopped && pid_file.exists() {
            let pid = std::fs::read_to_string(&pid_file).unwrap_or_default();
            let pid = pid.lines().next().unwrap_or("").trim().to_string();
            eprintln!("warning: pg_ctl stop failed; killing postmaster {pid}");
            if !pid.is_empty() {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
        }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> BenchResult<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").step("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_server_version_is_chosen_numerically() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(newest_version(names(&["9.6", "13", "15", "README"])), Some("15".into()));
        assert_eq!(newest_version(names(&["9.6", "10"])), Some("10".into()));
        assert_eq!(newest_version(names(&["lib", ""])), None);
    }

    #[test]
    fn meminfo_total_is_read_in_bytes() {
        assert_eq!(
            mem_total("MemFree: 5 kB\nMemTotal:       24000000 kB\n"),
            Some(24_000_000 * 1024)
        );
        assert_eq!(mem_total("MemFree: 5 kB\n"), None);
    }

    #[test]
    fn settings_keep_every_commit_durable() {
        let settings = server_settings(64, Some(24 << 30), 0);
        let get = |name: &str| settings.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str());
        for name in ["fsync", "synchronous_commit", "full_page_writes"] {
            assert_eq!(get(name), Some("on"), "{name}");
        }
        assert_eq!(get("max_connections"), Some("74"));
        assert_eq!(get("shared_buffers"), Some("6144MB"));
        let small = server_settings(8, Some(256 << 20), 0);
        assert!(small.contains(&("shared_buffers", "128MB".to_string())));
    }
}
