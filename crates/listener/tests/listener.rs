//! The gate on loopback: timeouts, caps, eviction and shutdown seen by real clients.
//!
//! Timeouts are short (hundreds of milliseconds) and every wait is bounded; a test asserts what
//! happened to a connection (answered, closed), never how long something took.
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use netacl_listener::{BodyError, ConnectionGate, ConnectionLimits, RequestBody};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The bound on every wait of these tests.
const WAIT: Duration = Duration::from_secs(10);

/// What the test service does: `/` answers at once, `/sleep/MS` after MS milliseconds,
/// `/body` reads the body (200 with its length, 408 when it timed out).
async fn handle(request: Request<RequestBody>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_owned();
    let answer = |status: StatusCode, text: String| {
        let mut response = Response::new(Full::new(Bytes::from(text)));
        *response.status_mut() = status;
        Ok(response)
    };
    if let Some(ms) = path.strip_prefix("/sleep/") {
        let ms: u64 = ms.parse().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        return answer(StatusCode::OK, "slept".into());
    }
    if path == "/body" {
        return match request.into_body().collect().await {
            Ok(body) => answer(StatusCode::OK, body.to_bytes().len().to_string()),
            Err(BodyError::TimedOut) => answer(StatusCode::REQUEST_TIMEOUT, "late".into()),
            Err(err) => answer(StatusCode::BAD_REQUEST, err.to_string()),
        };
    }
    answer(StatusCode::OK, "ok".into())
}

/// An answer streamed in 1 MiB frames (`count` of them): the response body stays in flight
/// while it is sent.
struct Chunks(usize);

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        if self.0 == 0 {
            return std::task::Poll::Ready(None);
        }
        self.0 -= 1;
        let frame = http_body::Frame::data(Bytes::from(vec![b'x'; 1 << 20]));
        std::task::Poll::Ready(Some(Ok(frame)))
    }
}

/// A server on 127.0.0.1 under `limits`.
async fn server(limits: ConnectionLimits) -> (SocketAddr, ConnectionGate) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = ConnectionGate::new(limits);
    let accepting = gate.clone();
    tokio::spawn(async move {
        while let Some((stream, _, admitted)) = accepting.accept(&listener).await {
            let service = hyper::service::service_fn(|request: Request<RequestBody>| async move {
                if request.uri().path() == "/stream" {
                    let body = http_body_util::Either::Left(Chunks(64));
                    return Ok::<_, Infallible>(Response::new(body));
                }
                let response = handle(request).await?;
                Ok(response.map(http_body_util::Either::Right))
            });
            tokio::spawn(admitted.serve(stream, service));
        }
    });
    (addr, gate)
}

fn limits() -> ConnectionLimits {
    let mut limits = ConnectionLimits::default();
    limits.header_read_timeout = Duration::from_millis(500);
    limits.idle_timeout = Duration::from_millis(800);
    limits.body_timeout = Duration::from_millis(600);
    limits
}

/// A connection from the loopback address `from` (Linux routes all of 127.0.0.0/8 to lo).
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(from.parse::<IpAddr>().unwrap(), 0))
        .unwrap();
    socket.connect(to).await.unwrap()
}

async fn connect(to: SocketAddr) -> TcpStream {
    connect_from("127.0.0.1", to).await
}

/// Sends a GET of `path` (kept alive).
async fn send(stream: &mut TcpStream, path: &str) {
    let head = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
}

/// Reads one response (its status and body; `Content-Length` framing); `None` when the
/// connection closed first.
async fn response<R: AsyncRead + Unpin>(stream: &mut R) -> Option<(u16, String)> {
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < end + 4 + length {
                    let n = stream.read(&mut chunk).await.ok()?;
                    if n == 0 {
                        return None;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + length]).to_string();
                return Some((status, body));
            }
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("an answer or a close within 10 s")
}

/// Whether the server closes the connection (EOF or reset) within [`WAIT`], reading and
/// discarding anything it sends first.
async fn closed<R: AsyncRead + Unpin>(stream: &mut R) -> bool {
    let read = async {
        let mut chunk = [0u8; 1024];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(WAIT, read).await.is_ok()
}

/// Whether the connection is still open: nothing to read and no close within `wait`.
async fn still_open(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut chunk = [0u8; 16];
    tokio::time::timeout(wait, stream.read(&mut chunk))
        .await
        .is_err()
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let mut limits = limits();
    limits.header_read_timeout = Duration::from_millis(300);
    limits.idle_timeout = Duration::from_millis(1500);
    let (addr, gate) = server(limits).await;
    let mut stream = connect(addr).await;
    send(&mut stream, "/").await;
    assert_eq!(response(&mut stream).await, Some((200, "ok".into())));
    // Longer than the header-read timeout, shorter than the idle timeout: still usable (hyper's
    // own header timeout would have closed it by now).
    assert!(still_open(&mut stream, Duration::from_millis(700)).await);
    send(&mut stream, "/").await;
    assert_eq!(response(&mut stream).await, Some((200, "ok".into())));
    assert!(closed(&mut stream).await, "closed after the idle timeout");
    assert_eq!(gate.stats().idle_timeouts, 1);
    assert_eq!(gate.stats().header_timeouts, 0);
}

#[tokio::test]
async fn a_half_sent_first_head_is_closed_after_the_header_read_timeout() {
    let mut limits = limits();
    limits.idle_timeout = Duration::from_secs(60);
    let (addr, gate) = server(limits).await;
    let mut stream = connect(addr).await;
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: te")
        .await
        .unwrap();
    assert!(closed(&mut stream).await);
    let mut silent = connect(addr).await;
    assert!(
        closed(&mut silent).await,
        "a connection that sends nothing too"
    );
    assert_eq!(gate.stats().header_timeouts, 2);
}

#[tokio::test]
async fn a_half_sent_later_head_is_closed_after_the_header_read_timeout_not_the_idle_one() {
    let mut limits = limits();
    limits.idle_timeout = Duration::from_secs(60);
    let (addr, gate) = server(limits).await;
    let mut stream = connect(addr).await;
    send(&mut stream, "/").await;
    assert_eq!(response(&mut stream).await, Some((200, "ok".into())));
    stream
        .write_all(b"GET / HTTP/1.1\r\nX-Slow: ")
        .await
        .unwrap();
    // Keep trickling header bytes: each one is progress, none completes the head.
    let trickle = async {
        for _ in 0..100 {
            if stream.write_all(b"a").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(3), trickle).await;
    assert!(closed(&mut stream).await);
    assert_eq!(gate.stats().header_timeouts, 1);
}

/// Sends a body of `length` bytes announced by `Content-Length`, `step` bytes every `every`.
async fn send_body<W: AsyncWrite + Unpin>(
    stream: &mut W,
    length: usize,
    step: usize,
    every: Duration,
) {
    let head = format!("POST /body HTTP/1.1\r\nHost: test\r\nContent-Length: {length}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut sent = 0;
    while sent < length {
        let n = step.min(length - sent);
        if stream.write_all(&vec![b'x'; n]).await.is_err() {
            return;
        }
        sent += n;
        if sent < length {
            tokio::time::sleep(every).await;
        }
    }
}

#[tokio::test]
async fn a_trickled_body_fails_after_its_deadline() {
    let (addr, gate) = server(limits()).await;
    let (mut reader, mut writer) = connect(addr).await.into_split();
    let trickle = tokio::spawn(async move {
        send_body(&mut writer, 1000, 1, Duration::from_millis(50)).await;
        writer
    });
    assert_eq!(response(&mut reader).await, Some((408, "late".into())));
    assert!(
        closed(&mut reader).await,
        "the connection does not wait for the rest"
    );
    trickle.abort();
    assert_eq!(gate.stats().body_timeouts, 1);
}

#[tokio::test]
async fn a_body_sent_at_a_decent_rate_is_not_cut() {
    let (addr, gate) = server(limits()).await;
    let (mut reader, mut writer) = connect(addr).await.into_split();
    // 64 KiB over about 1.3 s: longer than the 600 ms timeout, but every KiB buys a second.
    let sender = tokio::spawn(async move {
        send_body(&mut writer, 64 * 1024, 2048, Duration::from_millis(40)).await;
        writer
    });
    assert_eq!(response(&mut reader).await, Some((200, "65536".into())));
    let _ = sender.await;
    assert_eq!(gate.stats().body_timeouts, 0);
}

#[tokio::test]
async fn under_the_global_cap_idle_connections_make_room_and_busy_ones_are_kept() {
    let mut limits = limits();
    limits.max_connections = 3;
    limits.header_read_timeout = Duration::from_secs(30);
    limits.idle_timeout = Duration::from_secs(30);
    let (addr, gate) = server(limits).await;
    // One connection serving a long request, two half-sent ones.
    let mut busy = connect_from("127.0.0.2", addr).await;
    send(&mut busy, "/sleep/1500").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut half = Vec::new();
    for from in ["127.0.0.3", "127.0.0.4"] {
        let mut stream = connect_from(from, addr).await;
        stream.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        half.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Two new clients get in (and stay connected): each makes room by closing a half-sent
    // connection.
    let mut kept = Vec::new();
    for from in ["127.0.0.5", "127.0.0.6"] {
        let mut stream = connect_from(from, addr).await;
        send(&mut stream, "/").await;
        assert_eq!(
            response(&mut stream).await,
            Some((200, "ok".into())),
            "{from}"
        );
        kept.push(stream);
    }
    for stream in &mut half {
        assert!(closed(stream).await, "a half-sent connection was evicted");
    }
    assert_eq!(
        response(&mut busy).await,
        Some((200, "slept".into())),
        "the connection serving a request was never evicted"
    );
    assert_eq!(gate.stats().evicted_max_connections, 2);
}

#[tokio::test]
async fn a_client_that_does_not_read_its_answer_is_closed_after_the_idle_timeout() {
    let (addr, gate) = server(limits()).await;
    // 64 MiB streamed: more than the socket buffers hold (the client's is kept small), the
    // answer in flight all along; the client reads none of it.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    send(&mut stream, "/stream").await;
    let waited = tokio::time::timeout(WAIT, async {
        while gate.stats().send_timeouts == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "the stuck answer's connection was closed");
    assert_eq!(gate.stats().open, 0);
}

#[tokio::test]
async fn over_the_global_cap_with_every_connection_busy_a_new_one_is_closed() {
    let mut limits = limits();
    limits.max_connections = 2;
    let (addr, gate) = server(limits).await;
    let mut busy = Vec::new();
    for from in ["127.0.0.2", "127.0.0.3"] {
        let mut stream = connect_from(from, addr).await;
        send(&mut stream, "/sleep/1000").await;
        busy.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut refused = connect_from("127.0.0.4", addr).await;
    let _ = refused
        .write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        .await;
    assert_eq!(
        response(&mut refused).await,
        None,
        "closed without an answer"
    );
    for stream in &mut busy {
        assert_eq!(response(stream).await, Some((200, "slept".into())));
    }
    assert_eq!(gate.stats().refused_max_connections, 1);
}

#[tokio::test]
async fn over_its_own_cap_a_client_replaces_its_idle_connection_or_is_refused() {
    let mut limits = limits();
    limits.max_connections_per_client = 2;
    limits.header_read_timeout = Duration::from_secs(30);
    limits.idle_timeout = Duration::from_secs(30);
    let (addr, gate) = server(limits).await;
    let mut idle = connect_from("127.0.0.7", addr).await;
    send(&mut idle, "/").await;
    assert_eq!(response(&mut idle).await, Some((200, "ok".into())));
    let mut busy = connect_from("127.0.0.7", addr).await;
    send(&mut busy, "/sleep/1500").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A third connection from the same address replaces its idle one.
    let mut third = connect_from("127.0.0.7", addr).await;
    send(&mut third, "/sleep/1000").await;
    assert!(closed(&mut idle).await);
    // A fourth finds both busy: refused. Another address is not affected.
    let mut fourth = connect_from("127.0.0.7", addr).await;
    let _ = fourth
        .write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        .await;
    assert_eq!(response(&mut fourth).await, None);
    let mut other = connect_from("127.0.0.8", addr).await;
    send(&mut other, "/").await;
    assert_eq!(response(&mut other).await, Some((200, "ok".into())));
    assert_eq!(response(&mut busy).await, Some((200, "slept".into())));
    assert_eq!(response(&mut third).await, Some((200, "slept".into())));
    let stats = gate.stats();
    assert_eq!(stats.evicted_per_client, 1);
    assert_eq!(stats.refused_per_client, 1);
}

#[tokio::test]
async fn closing_the_gate_closes_idle_connections_and_lets_requests_in_flight_finish() {
    let (addr, gate) = server(limits()).await;
    let mut idle = connect(addr).await;
    send(&mut idle, "/").await;
    assert_eq!(response(&mut idle).await, Some((200, "ok".into())));
    let mut busy = connect(addr).await;
    send(&mut busy, "/sleep/700").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    gate.close();
    assert!(closed(&mut idle).await);
    assert_eq!(response(&mut busy).await, Some((200, "slept".into())));
    assert!(closed(&mut busy).await, "then closed");
    tokio::time::timeout(WAIT, gate.drained())
        .await
        .expect("every connection closed");
    assert!(TcpStream::connect(addr).await.is_err() || gate.is_closing());
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_after_the_idle_timeout() {
    let (addr, gate) = server(limits()).await;
    let stream = connect(addr).await;
    let (mut sender, connection) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let request = Request::builder()
        .uri(format!("http://{addr}/"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    tokio::time::timeout(WAIT, connection)
        .await
        .expect("the server ends the idle HTTP/2 connection")
        .unwrap()
        .ok();
    assert_eq!(gate.stats().idle_timeouts, 1);
}

/// What the gate does not rely on: hyper's own HTTP/1 header-read timeout (hyper 1.12) covers
/// the first request head and, on a kept-alive connection, the wait for the next request as
/// well, so it would close an idle kept-alive connection at the header timeout.
#[tokio::test]
async fn hypers_header_read_timeout_also_runs_between_kept_alive_requests() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_: Request<hyper::body::Incoming>| {
                    std::future::ready(Ok::<_, Infallible>(Response::new(Full::new(
                        Bytes::from_static(b"ok"),
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(Duration::from_millis(300))
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let mut first = connect(addr).await;
    first
        .write_all(b"GET / HTTP/1.1\r\nHost: te")
        .await
        .unwrap();
    assert!(closed(&mut first).await, "a half-sent first head");
    let mut kept = connect(addr).await;
    send(&mut kept, "/").await;
    assert_eq!(response(&mut kept).await, Some((200, "ok".into())));
    assert!(
        closed(&mut kept).await,
        "an idle kept-alive connection, sending nothing"
    );
}
