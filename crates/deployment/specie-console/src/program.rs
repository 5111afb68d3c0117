//! Running the `specie` program's own commands for the console (the wallets' actions, the
//! auditor's reading, the supply audit): no shell, a time limit, bounded output.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

/// The longest a command may run before it is stopped (a payment waits up to 30 s for the node,
/// a FastPay payment asks every authority, an auditor reads the whole ledger).
const ACTION_TIMEOUT: Duration = Duration::from_secs(150);
/// The most output a page shows of a command.
const OUTPUT_BYTES_MAX: u64 = 64 * 1024;

/// What a command printed, and whether it succeeded.
#[derive(Debug)]
pub struct Outcome {
    pub ok: bool,
    /// The command, as a person would type it (for the page, and to repeat it by hand).
    pub command: String,
    pub output: String,
}

/// What a pipe gives, up to [`OUTPUT_BYTES_MAX`] (lossy UTF-8).
async fn read_all(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let mut bytes = vec![];
    if let Some(pipe) = pipe {
        let _ = pipe.take(OUTPUT_BYTES_MAX).read_to_end(&mut bytes).await;
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Runs `specie ARGS`, for at most [`ACTION_TIMEOUT`].
pub async fn run(program: &Path, args: Vec<String>) -> Outcome {
    let command = format!("specie {}", args.join(" "));
    let mut child = match tokio::process::Command::new(program)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            return Outcome {
                ok: false,
                command,
                output: format!("cannot run {}: {error}", program.display()),
            }
        }
    };
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let finished = tokio::time::timeout(ACTION_TIMEOUT, async {
        tokio::join!(read_all(stdout), read_all(stderr), child.wait())
    })
    .await;
    match finished {
        Ok((out, err, Ok(status))) => Outcome {
            ok: status.success(),
            command,
            output: format!("{out}{err}").trim_end().to_string(),
        },
        Ok((_, _, Err(error))) => Outcome {
            ok: false,
            command,
            output: format!("the command failed to run: {error}"),
        },
        Err(_) => Outcome {
            ok: false,
            command,
            output: format!(
                "stopped after {} s without an answer: run `specie wallet sync` (the Sync button) to learn what happened",
                ACTION_TIMEOUT.as_secs()
            ),
        },
    }
}
