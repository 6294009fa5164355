//! Property tests: arbitrary and mutated input never makes the parser or the incremental
//! reader panic, and the reader agrees with the one-shot parser however the bytes are split.

use std::path::PathBuf;

use netacl_edge::fingerprint::{ja3, ja4, ClientHello, ClientHelloReader, Progress};
use proptest::prelude::*;

/// Valid ClientHellos to mutate: the project's own vectors.
fn seeds() -> Vec<Vec<u8>> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/tls/own-vectors.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            hex::decode(row["record_hex"].as_str().unwrap()).unwrap()
        })
        .collect()
}

/// Parses with both entry points; fingerprints whatever parses. Returns the one-shot result.
fn exercise(bytes: &[u8], split: usize) -> Option<ClientHello> {
    let parsed = ClientHello::parse(bytes).ok();
    if let Some(hello) = &parsed {
        let _ = (ja3(hello), ja4(hello));
    }
    let mut reader = ClientHelloReader::with_max_bytes(bytes.len().max(1) + 16);
    let (head, tail) = bytes.split_at(split.min(bytes.len()));
    let mut read = None;
    for segment in [head, tail] {
        match reader.push(segment) {
            Progress::NeedMore => {}
            Progress::Done(hello) => {
                read = Some(hello);
                break;
            }
            _ => break,
        }
    }
    assert_eq!(read, parsed, "reader and parser disagree");
    parsed
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, xor: u8 },
    Set { at: usize, value: u8 },
    Truncate { at: usize },
    Insert { at: usize, value: u8 },
    Remove { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Mutation::Set { at, value }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Mutation::Insert { at, value }),
        any::<usize>().prop_map(|at| Mutation::Remove { at }),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let len = bytes.len();
    match *mutation {
        Mutation::Flip { at, xor } => bytes[at % len] ^= xor,
        Mutation::Set { at, value } => bytes[at % len] = value,
        Mutation::Truncate { at } => bytes.truncate(at % len),
        Mutation::Insert { at, value } => bytes.insert(at % (len + 1), value),
        Mutation::Remove { at } => {
            bytes.remove(at % len);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), split in any::<usize>()) {
        exercise(&bytes, split);
    }

    #[test]
    fn arbitrary_bytes_behind_a_valid_header_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..1024),
        split in any::<usize>(),
    ) {
        // A handshake record header and a ClientHello header that fit the body, so that the
        // parser gets past the framing and into the fields.
        let mut bytes = vec![0x16, 0x03, 0x01];
        bytes.extend_from_slice(&u16::try_from(body.len() + 4).unwrap().to_be_bytes());
        bytes.push(1);
        bytes.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes()[1..]);
        bytes.extend_from_slice(&body);
        exercise(&bytes, split);
    }

    #[test]
    fn mutated_client_hellos_never_panic(
        seed in any::<prop::sample::Index>(),
        mutations in proptest::collection::vec(mutation(), 1..8),
        split in any::<usize>(),
    ) {
        let seeds = seeds();
        let mut bytes = seeds[seed.index(seeds.len())].clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        exercise(&bytes, split);
    }

    #[test]
    fn valid_hellos_read_the_same_however_split(
        seed in any::<prop::sample::Index>(),
        split in any::<usize>(),
    ) {
        let seeds = seeds();
        let bytes = &seeds[seed.index(seeds.len())];
        prop_assert!(exercise(bytes, split).is_some());
    }
}
