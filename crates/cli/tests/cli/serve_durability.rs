//! Durability of the real binary: creates stream in while the server is killed with SIGKILL; it
//! restarts on the same data directory, and every rule whose 201 was received is there,
//! unchanged. Deletes make room (a tenant holds at most 100 priorities). Bounded: 24 kill cycles,
//! at most 150 s in all.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::serve_support::{request, Server};
use serde_json::{json, Value};

const CYCLES: usize = 24;
const DOMAIN: &str = "durability.test";

/// What the client knows for each priority.
#[derive(Debug, Clone)]
enum Slot {
    /// A 201 (or a later listing) told us this record exists.
    Acknowledged(Value),
    /// A write was in flight when the server died: the record may or may not exist.
    Uncertain,
}

fn body(priority: u64, serial: u64) -> Value {
    json!({
        "description": format!("durability {serial}"),
        "active": !serial.is_multiple_of(3),
        "priority": priority,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"ipv4_cidrs": [format!("10.{}.{}.0/24", serial % 250, priority)]}}
    })
}

/// Writes until `stop` or the first I/O failure (the kill). Returns how many 201s it saw.
fn writer(
    addr: std::net::SocketAddr,
    token: String,
    slots: Arc<Mutex<BTreeMap<u64, Slot>>>,
    stop: Arc<AtomicBool>,
    serial: Arc<Mutex<u64>>,
) -> u64 {
    let mut created = 0;
    let mut priority = {
        let s = *serial.lock().expect("serial");
        s % 100 + 1
    };
    while !stop.load(Ordering::SeqCst) {
        let existing = slots.lock().expect("slots").get(&priority).cloned();
        if let Some(Slot::Acknowledged(record)) = existing {
            let id = record["id"].as_str().expect("id").to_owned();
            slots
                .lock()
                .expect("slots")
                .insert(priority, Slot::Uncertain);
            match request(
                addr,
                "DELETE",
                &format!("/api/v2/network-acls/{id}"),
                Some(&token),
                None,
            ) {
                Ok(answer) => {
                    assert_eq!(answer.status, 204, "{}", answer.text);
                    slots.lock().expect("slots").remove(&priority);
                }
                Err(_) => return created,
            }
        } else if existing.is_some() {
            // Uncertain slots are resolved by the listing after the restart.
            priority = priority % 100 + 1;
            continue;
        }
        let n = {
            let mut s = serial.lock().expect("serial");
            *s += 1;
            *s
        };
        let sent = body(priority, n);
        slots
            .lock()
            .expect("slots")
            .insert(priority, Slot::Uncertain);
        match request(
            addr,
            "POST",
            "/api/v2/network-acls",
            Some(&token),
            Some(&sent),
        ) {
            Ok(answer) => {
                assert_eq!(answer.status, 201, "{}", answer.text);
                let record = answer.json();
                for field in ["description", "active", "priority", "rule"] {
                    assert_eq!(record[field], sent[field]);
                }
                slots
                    .lock()
                    .expect("slots")
                    .insert(priority, Slot::Acknowledged(record));
                created += 1;
            }
            Err(_) => return created,
        }
        priority = priority % 100 + 1;
    }
    created
}

fn list_all(server: &Server, token: &str) -> Vec<Value> {
    let answer = request(
        server.addr,
        "GET",
        "/api/v2/network-acls?per_page=100&include_totals=true",
        Some(token),
        None,
    )
    .expect("list");
    assert_eq!(answer.status, 200, "{}", answer.text);
    let body = answer.json();
    let acls = body["network_acls"].as_array().expect("array").clone();
    assert_eq!(body["total"], json!(acls.len()));
    acls
}

#[test]
fn acknowledged_creates_survive_sigkill() {
    let started = Instant::now();
    let budget = Duration::from_secs(150);
    let dir = tempfile::tempdir().expect("tempdir");
    let slots: Arc<Mutex<BTreeMap<u64, Slot>>> = Arc::default();
    let serial = Arc::new(Mutex::new(0u64));
    let mut total_created = 0;
    let mut cycles = 0;
    // One token for every cycle: the signing key is durable too.
    let mut token: Option<String> = None;

    while cycles < CYCLES && started.elapsed() < budget {
        let server = Server::start(
            dir.path(),
            "127.0.0.1:0",
            DOMAIN,
            &["--rate-limit-burst", "0"],
        );
        let token = token.get_or_insert_with(|| server.token()).clone();

        // Check: every acknowledged record is there, unchanged; everything there is known.
        let listed = list_all(&server, &token);
        let mut by_priority = BTreeMap::new();
        for record in listed {
            let priority = record["priority"].as_u64().expect("priority");
            assert!(
                by_priority.insert(priority, record).is_none(),
                "duplicate priority"
            );
        }
        {
            let mut slots = slots.lock().expect("slots");
            for (priority, slot) in slots.iter() {
                if let Slot::Acknowledged(record) = slot {
                    assert_eq!(
                        by_priority.get(priority),
                        Some(record),
                        "cycle {cycles}: acknowledged record at priority {priority} lost or changed"
                    );
                }
            }
            for priority in by_priority.keys() {
                assert!(
                    slots.contains_key(priority),
                    "cycle {cycles}: record at priority {priority} was never written"
                );
            }
            // Resolve the uncertain slots from what the server holds.
            *slots = by_priority
                .into_iter()
                .map(|(p, record)| (p, Slot::Acknowledged(record)))
                .collect();
        }

        // Stream creates in, kill the server mid-stream.
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let (slots, stop, serial, token) = (
                Arc::clone(&slots),
                Arc::clone(&stop),
                Arc::clone(&serial),
                token.clone(),
            );
            let addr = server.addr;
            std::thread::spawn(move || writer(addr, token, slots, stop, serial))
        };
        std::thread::sleep(Duration::from_millis(150 + (cycles as u64 * 37) % 200));
        server.kill();
        stop.store(true, Ordering::SeqCst);
        total_created += handle.join().expect("writer");
        cycles += 1;
    }
    assert!(
        cycles >= 20,
        "only {cycles} kill cycles fitted in the time budget"
    );
    assert!(
        total_created >= CYCLES as u64,
        "only {total_created} creates were acknowledged"
    );

    // A last start verifies the final cycle's writes.
    let server = Server::start(
        dir.path(),
        "127.0.0.1:0",
        DOMAIN,
        &["--rate-limit-burst", "0"],
    );
    let token = token.expect("token");
    let listed = list_all(&server, &token);
    let slots = slots.lock().expect("slots");
    for (priority, slot) in slots.iter() {
        if let Slot::Acknowledged(record) = slot {
            assert!(
                listed.contains(record),
                "final: priority {priority} lost or changed"
            );
        }
    }
    eprintln!(
        "{cycles} SIGKILL cycles, {total_created} acknowledged creates, {} records at the end",
        listed.len()
    );
    server.kill();
}
