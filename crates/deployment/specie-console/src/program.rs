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

/// What a pipe gives, up to `bytes_max` (lossy UTF-8); the rest is read and dropped, so that the
/// command never fails on a pipe closed under it.
async fn read_all(pipe: Option<impl tokio::io::AsyncRead + Unpin>, bytes_max: u64) -> String {
    let mut bytes = vec![];
    if let Some(mut pipe) = pipe {
        let _ = (&mut pipe).take(bytes_max).read_to_end(&mut bytes).await;
        let _ = tokio::io::copy(&mut pipe, &mut tokio::io::sink()).await;
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Runs `specie ARGS`; shows at most [`OUTPUT_BYTES_MAX`] of what it prints.
pub async fn run(program: &Path, args: Vec<String>) -> Outcome {
    run_showing(program, args, OUTPUT_BYTES_MAX).await
}

/// Runs `specie ARGS`, waiting for it at most [`ACTION_TIMEOUT`]. The command runs to its end
/// whatever happens to the page that asked for it (the browser gone, the wait over): stopping
/// a wallet's command halfway could leave a payment made and its string never shown.
pub async fn run_showing(program: &Path, args: Vec<String>, bytes_max: u64) -> Outcome {
    let command = format!("specie {}", args.join(" "));
    let mut child = match tokio::process::Command::new(program)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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
    let to_the_end =
        tokio::spawn(
            async move { tokio::join!(read_all(stdout, bytes_max), read_all(stderr, bytes_max), child.wait()) },
        );
    let (ok, output) = match tokio::time::timeout(ACTION_TIMEOUT, to_the_end).await {
        Ok(Ok((out, err, Ok(status)))) => (status.success(), format!("{out}{err}").trim_end().to_string()),
        Ok(Ok((_, _, Err(error)))) => (false, format!("the command failed to run: {error}")),
        Ok(Err(error)) => (false, format!("the command's task failed: {error}")),
        Err(_) => (
            false,
            format!(
                "no answer after {} s; the command goes on. Run Sync (`specie wallet sync`) in a while to learn how it ended",
                ACTION_TIMEOUT.as_secs()
            ),
        ),
    };
    Outcome { ok, command, output }
}
