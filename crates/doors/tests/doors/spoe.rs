//! The SPOE agent over a real loopback socket, driven the way HAProxy drives it: HELLO,
//! pipelined NOTIFY frames answered by ACK in order, DISCONNECT; and the refusals (a frame over
//! the negotiated size, a fragmented frame, a message without its client address).
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use netacl_doors::spoe::{start_spoe, SpoeConfig, MESSAGE_NAME};
use netacl_doors::RunningDoor;
use netacl_listener::ConnectionLimits;
use netacl_model::{AclId, Limits, RuleSet};
use serde_json::{json, Value};

use crate::rule;
use spop::{encode_varint_into, TypedData};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TIMEOUT: Duration = Duration::from_secs(5);

/// A running agent (stopped when dropped) and its address.
async fn agent() -> (RunningDoor, SocketAddr) {
    let enforcer = crate::enforcer();
    let rules = vec![
        rule(
            1,
            1,
            json!({"block": true}),
            json!({"match": {"ipv4_cidrs": ["192.0.2.0/24"]}}),
        ),
        rule(
            2,
            2,
            json!({"redirect": true, "redirect_uri": "https://example.test/moved"}),
            json!({"match": {"user_agents": ["moved/*"]}}),
        ),
        rule(
            3,
            3,
            json!({"log": true}),
            json!({"match": {"hostnames": ["logged.example.test"]}}),
        ),
    ];
    let rules = RuleSet::from_json(&Value::Array(rules), 1, &Limits::default()).unwrap();
    enforcer.apply_rules(&rules).unwrap();
    let config = SpoeConfig::new("127.0.0.1:0".parse().unwrap(), ConnectionLimits::default());
    let door = start_spoe(Arc::new(enforcer), config).await.unwrap();
    let addr = door.local_addr();
    (door, addr)
}

/// A frame as HAProxy writes it: length, type, flags, stream id, frame id, payload.
fn frame(kind: u8, flags: u32, stream: u64, id: u64, payload: &[u8]) -> Vec<u8> {
    let mut body = vec![kind];
    body.extend_from_slice(&flags.to_be_bytes());
    encode_varint_into(stream, &mut body);
    encode_varint_into(id, &mut body);
    body.extend_from_slice(payload);
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend(body);
    out
}

fn kv(out: &mut Vec<u8>, name: &str, value: TypedData) {
    encode_varint_into(name.len() as u64, out);
    out.extend_from_slice(name.as_bytes());
    value.to_bytes(out);
}

fn hello(max_frame_size: u32, healthcheck: bool) -> Vec<u8> {
    let mut p = Vec::new();
    kv(
        &mut p,
        "supported-versions",
        TypedData::String("2.0".into()),
    );
    kv(&mut p, "max-frame-size", TypedData::UInt32(max_frame_size));
    kv(
        &mut p,
        "capabilities",
        TypedData::String("pipelining,async".into()),
    );
    if healthcheck {
        kv(&mut p, "healthcheck", TypedData::Bool(true));
    }
    frame(1, 1, 0, 0, &p)
}

fn notify(stream: u64, id: u64, args: &[(&str, TypedData)]) -> Vec<u8> {
    let mut p = Vec::new();
    encode_varint_into(MESSAGE_NAME.len() as u64, &mut p);
    p.extend_from_slice(MESSAGE_NAME.as_bytes());
    p.push(args.len() as u8);
    for (name, value) in args {
        kv(&mut p, name, value.clone());
    }
    frame(3, 1, stream, id, &p)
}

fn request(src: [u8; 4], host: &str, ua: &str) -> Vec<(&'static str, TypedData)> {
    vec![
        ("src", TypedData::IPv4(Ipv4Addr::from(src))),
        ("method", TypedData::String("GET".into())),
        ("host", TypedData::String(host.into())),
        ("path", TypedData::String("/authorize?client_id=x".into())),
        ("ua", TypedData::String(ua.into())),
    ]
}

/// One frame from the agent: its type, stream id, frame id and payload bytes.
async fn read_frame(s: &mut TcpStream) -> (u8, u64, u64, Vec<u8>) {
    let mut len = [0u8; 4];
    tokio::time::timeout(TIMEOUT, s.read_exact(&mut len))
        .await
        .unwrap()
        .unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    tokio::time::timeout(TIMEOUT, s.read_exact(&mut body))
        .await
        .unwrap()
        .unwrap();
    let (rest, stream) = spop::decode_varint(&body[5..]).unwrap();
    let (rest, id) = spop::decode_varint(rest).unwrap();
    (body[0], stream, id, rest.to_vec())
}

/// The `set-var` actions of an ACK payload, as (name, string value).
fn set_vars(mut p: &[u8]) -> Vec<(String, String)> {
    let mut vars = Vec::new();
    while !p.is_empty() {
        assert_eq!(p[0], 1, "set-var");
        assert_eq!(p[1], 3, "three arguments");
        assert_eq!(p[2], 2, "txn scope");
        let (rest, len) = spop::decode_varint(&p[3..]).unwrap();
        let name = String::from_utf8(rest[..len as usize].to_vec()).unwrap();
        let rest = &rest[len as usize..];
        assert_eq!(rest[0] & 0x0f, 8, "a string value");
        let (rest, len) = spop::decode_varint(&rest[1..]).unwrap();
        vars.push((
            name,
            String::from_utf8(rest[..len as usize].to_vec()).unwrap(),
        ));
        p = &rest[len as usize..];
    }
    vars
}

fn var<'v>(vars: &'v [(String, String)], name: &str) -> Option<&'v str> {
    vars.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The value of an AGENT-DISCONNECT's `status-code`.
fn disconnect_status(p: &[u8]) -> u64 {
    let mut p = p;
    while !p.is_empty() {
        let (rest, len) = spop::decode_varint(p).unwrap();
        let name = &rest[..len as usize];
        let rest = &rest[len as usize..];
        let kind = rest[0] & 0x0f;
        let (rest, value) = match kind {
            3 => {
                let (r, v) = spop::decode_varint(&rest[1..]).unwrap();
                (r, v)
            }
            8 => {
                let (r, l) = spop::decode_varint(&rest[1..]).unwrap();
                (&r[l as usize..], u64::MAX)
            }
            other => panic!("unexpected type {other}"),
        };
        if name == b"status-code" {
            return value;
        }
        p = rest;
    }
    panic!("no status-code");
}

async fn connected(addr: SocketAddr, max_frame_size: u32) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&hello(max_frame_size, false)).await.unwrap();
    let (kind, ..) = read_frame(&mut s).await;
    assert_eq!(kind, 101, "AGENT-HELLO");
    s
}

#[tokio::test]
async fn pipelined_notifies_are_answered_in_order_with_the_decision() {
    let (_agent, addr) = agent().await;
    let mut s = connected(addr, 16380).await;
    // Three requests written at once (pipelining), answered by stream and frame id.
    let mut batch = notify(1, 1, &request([192, 0, 2, 9], "app.example.test", "curl/8"));
    batch.extend(notify(
        2,
        1,
        &request([198, 51, 100, 1], "app.example.test", "moved/1"),
    ));
    batch.extend(notify(
        3,
        1,
        &request([198, 51, 100, 1], "logged.example.test", "curl/8"),
    ));
    batch.extend(notify(
        4,
        7,
        &request([198, 51, 100, 1], "app.example.test", "curl/8"),
    ));
    s.write_all(&batch).await.unwrap();

    let (kind, stream, id, p) = read_frame(&mut s).await;
    assert_eq!((kind, stream, id), (103, 1, 1), "ACK of the first");
    let vars = set_vars(&p);
    assert_eq!(var(&vars, "action"), Some("block"));
    assert_eq!(
        var(&vars, "rule"),
        Some(AclId::from_random(1).to_string().as_str())
    );

    let (_, stream, _, p) = read_frame(&mut s).await;
    assert_eq!(stream, 2);
    let vars = set_vars(&p);
    assert_eq!(var(&vars, "action"), Some("redirect"));
    assert_eq!(var(&vars, "location"), Some("https://example.test/moved"));

    let (_, stream, _, p) = read_frame(&mut s).await;
    assert_eq!(stream, 3);
    let vars = set_vars(&p);
    assert_eq!(var(&vars, "action"), Some("allow"));
    assert_eq!(var(&vars, "decision"), Some("none"));
    assert_eq!(
        var(&vars, "monitored"),
        Some(AclId::from_random(3).to_string().as_str())
    );

    let (_, stream, id, p) = read_frame(&mut s).await;
    assert_eq!((stream, id), (4, 7));
    assert_eq!(var(&set_vars(&p), "action"), Some("allow"));

    // HAProxy says goodbye: the agent answers with status 0 and closes.
    let mut bye = Vec::new();
    kv(&mut bye, "status-code", TypedData::UInt32(0));
    kv(&mut bye, "message", TypedData::String("normal".into()));
    s.write_all(&frame(2, 1, 0, 0, &bye)).await.unwrap();
    let (kind, _, _, p) = read_frame(&mut s).await;
    assert_eq!(kind, 102, "AGENT-DISCONNECT");
    assert_eq!(disconnect_status(&p), 0);
}

#[tokio::test]
async fn a_health_check_gets_the_hello_and_the_frame_size_is_negotiated_down() {
    let (_agent, addr) = agent().await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&hello(1024, true)).await.unwrap();
    let (kind, _, _, p) = read_frame(&mut s).await;
    assert_eq!(kind, 101);
    // The agent announces the smaller of the two sizes.
    let mut expected = Vec::new();
    kv(&mut expected, "max-frame-size", TypedData::UInt32(1024));
    assert!(p.windows(expected.len()).any(|w| w == expected.as_slice()));
    // A health check's connection is closed after the HELLO.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(TIMEOUT, s.read_to_end(&mut rest))
        .await
        .unwrap();
    assert_eq!(read.unwrap(), 0);
}

#[tokio::test]
async fn refusals_are_disconnects_with_a_status_never_an_allow() {
    let (_agent, addr) = agent().await;
    // A frame longer than the negotiated 1,024 bytes: "frame is too big" (3).
    let mut s = connected(addr, 1024).await;
    let mut args = request([198, 51, 100, 1], "app.example.test", "curl/8");
    args.push(("ua", TypedData::String("x".repeat(2000))));
    s.write_all(&notify(1, 1, &args)).await.unwrap();
    let (kind, _, _, p) = read_frame(&mut s).await;
    assert_eq!((kind, disconnect_status(&p)), (102, 3));

    // A fragmented NOTIFY (FIN not set): "fragmentation not supported" (10).
    let mut s = connected(addr, 16380).await;
    let mut fragment = notify(1, 1, &request([198, 51, 100, 1], "a.test", "curl/8"));
    fragment[8] = 0; // the flags' last byte: FIN cleared
    s.write_all(&fragment).await.unwrap();
    let (kind, _, _, p) = read_frame(&mut s).await;
    assert_eq!((kind, disconnect_status(&p)), (102, 10));

    // A good NOTIFY and a bad one in one write: the first is answered (its ACK goes out before
    // the DISCONNECT, although the agent writes the ACKs of frames read together at once).
    let mut s = connected(addr, 16380).await;
    let mut bad = request([198, 51, 100, 1], "a.test", "curl/8");
    bad.remove(0);
    let mut both = notify(1, 7, &request([198, 51, 100, 1], "a.test", "curl/8"));
    both.extend(notify(2, 8, &bad));
    s.write_all(&both).await.unwrap();
    let (kind, stream, id, _) = read_frame(&mut s).await;
    assert_eq!(
        (kind, stream, id),
        (103, 1, 7),
        "the good frame's ACK first"
    );
    let (kind, _, _, p) = read_frame(&mut s).await;
    assert_eq!((kind, disconnect_status(&p)), (102, 4));

    // A message without `src`: "invalid frame received" (4).
    let mut s = connected(addr, 16380).await;
    let mut args = request([198, 51, 100, 1], "a.test", "curl/8");
    args.remove(0);
    s.write_all(&notify(1, 1, &args)).await.unwrap();
    let (kind, _, _, p) = read_frame(&mut s).await;
    assert_eq!((kind, disconnect_status(&p)), (102, 4));

    // Garbage instead of a HELLO.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&frame(3, 1, 0, 0, b"\x01")).await.unwrap();
    let (kind, _, _, p) = read_frame(&mut s).await;
    assert_eq!((kind, disconnect_status(&p)), (102, 4));
}
