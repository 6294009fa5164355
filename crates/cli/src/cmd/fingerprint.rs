//! `netacl fingerprint`: JA3/JA4 of TLS ClientHello records given as hex, one a line.
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use netacl_edge::fingerprint::{ja3, ja4, ClientHello};
use serde_json::json;

/// Arguments of `netacl fingerprint`.
///
/// Each input line holds the TLS record(s) carrying one ClientHello, as hex (whitespace and `:`
/// between digits are ignored; blank lines and lines starting with `#` are skipped). Each
/// output line is `{"ja3": ..., "ja3_string": ..., "ja4": ..., "sni": ...}` (`sni` null when
/// absent), or `{"error": ...}` for a line that is not a ClientHello. The exit status is 1 when
/// any line failed, after all lines were processed.
#[derive(clap::Args)]
pub struct Args {
    /// Read from FILE instead of standard input.
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
}

/// Runs `netacl fingerprint`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let input: Box<dyn BufRead> = match &args.input {
        Some(path) => Box::new(BufReader::new(
            File::open(path).with_context(|| format!("opening {}", path.display()))?,
        )),
        None => Box::new(io::stdin().lock()),
    };
    let stdout = io::stdout().lock();
    let mut out = BufWriter::new(stdout);
    let mut failed = false;
    for (index, line) in input.lines().enumerate() {
        let line = line.context("reading the input")?;
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let result = match fingerprint_line(text) {
            Ok(value) => value,
            Err(message) => {
                failed = true;
                json!({ "error": format!("line {}: {message}", index + 1) })
            }
        };
        serde_json::to_writer(&mut out, &result).context("writing the output")?;
        out.write_all(b"\n").context("writing the output")?;
    }
    out.flush().context("writing the output")?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn fingerprint_line(text: &str) -> Result<serde_json::Value, String> {
    let bytes = decode_hex(text)?;
    let hello = ClientHello::parse(&bytes).map_err(|e| e.to_string())?;
    let ja3 = ja3(&hello);
    Ok(json!({
        "ja3": ja3.hash,
        "ja3_string": ja3.string,
        "ja4": ja4(&hello),
        "sni": hello.server_name(),
    }))
}

/// Hex digits to bytes, ignoring whitespace and `:` separators.
fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::with_capacity(text.len() / 2);
    let mut high: Option<u8> = None;
    for (position, c) in text.chars().enumerate() {
        if c.is_whitespace() || c == ':' {
            continue;
        }
        let Some(nibble) = c.to_digit(16) else {
            return Err(format!("not a hex digit at column {}: {c:?}", position + 1));
        };
        // to_digit(16) is below 16.
        let nibble = nibble as u8;
        match high.take() {
            None => high = Some(nibble),
            Some(h) => bytes.push(h << 4 | nibble),
        }
    }
    if high.is_some() {
        return Err("odd number of hex digits".to_owned());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_decoding() {
        assert_eq!(
            decode_hex("16 03:01ff").unwrap(),
            vec![0x16, 0x03, 0x01, 0xff]
        );
        assert!(decode_hex("160").unwrap_err().contains("odd"));
        assert!(decode_hex("16zz").unwrap_err().contains("column 3"));
    }
}
