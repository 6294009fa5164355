//! Running `netacl` with text on its standard input, for the CLI tests.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `command` with `stdin` on its standard input and collects its output. The input is
/// written from another thread while the output is read, so neither pipe fills up; a run that
/// exits before reading its input (it refused its arguments) closes the pipe under the write,
/// which is not an error here: its exit status and output are what the test checks.
pub fn run_with_stdin(mut command: Command, stdin: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn netacl");
    let mut pipe = child.stdin.take().expect("stdin");
    let input = stdin.to_owned();
    let writer = std::thread::spawn(move || match pipe.write_all(input.as_bytes()) {
        Ok(()) => {}
        Err(e) => assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "writing stdin: {e}"
        ),
    });
    let output = child.wait_with_output().expect("wait for netacl");
    writer.join().expect("stdin writer");
    output
}
