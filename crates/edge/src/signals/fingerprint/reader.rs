//! Reading a ClientHello from a socket: the incremental [`ClientHelloReader`], the async
//! [`read_client_hello`] and the [`Rewind`] stream that replays what was read.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::hello::{parse_body, RecordAssembler, MAX_HANDSHAKE_LEN, RECORD_HEADER_LEN};
use super::{ClientHello, ParseError};

/// The default cap on the bytes [`ClientHelloReader`] buffers: a maximal ClientHello
/// ([`MAX_HANDSHAKE_LEN`]) plus a record header for every 16 KiB fragment of it.
pub const DEFAULT_MAX_HELLO_BYTES: usize = MAX_HANDSHAKE_LEN + 4 + 5 * RECORD_HEADER_LEN;

/// What a [`ClientHelloReader`] needs after a [`push`](ClientHelloReader::push).
#[derive(Debug)]
#[non_exhaustive]
pub enum Progress {
    /// The ClientHello is not complete yet: push more bytes.
    NeedMore,
    /// The ClientHello is complete. Bytes pushed after it (such as a TLS 1.3 early-data record
    /// in the same segment) stay in the buffer.
    Done(ClientHello),
    /// The bytes are not a ClientHello, or it is larger than the cap. Further pushes fail with
    /// [`ParseError::ReaderFinished`].
    Failed(ParseError),
}

/// Reads a ClientHello from bytes as they arrive over TCP, in segments of any size.
///
/// Each byte is examined once: records are reassembled as they complete, and the message is
/// parsed once its last fragment arrives. Everything pushed is kept, so that it can be replayed
/// to the TLS library ([`buffered`](Self::buffered), [`Rewind`]).
///
/// The reader caps bytes, not time: a client that sends one byte a minute keeps it at
/// [`Progress::NeedMore`]. The caller adds the time cap, as [`read_client_hello`] does with
/// `tokio::time::timeout` around the whole read.
///
/// ```
/// use netacl_edge::fingerprint::{ClientHelloReader, Progress};
///
/// let mut reader = ClientHelloReader::new();
/// assert!(matches!(reader.push(&[0x16, 0x03, 0x01]), Progress::NeedMore));
///
/// let mut plain_http = ClientHelloReader::new();
/// assert!(matches!(plain_http.push(b"GET / HTTP/1.1\r\n"), Progress::Failed(_)));
/// ```
#[derive(Debug)]
pub struct ClientHelloReader {
    max_bytes: usize,
    buffer: Vec<u8>,
    assembler: RecordAssembler,
    finished: bool,
}

impl Default for ClientHelloReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientHelloReader {
    /// A reader capped at [`DEFAULT_MAX_HELLO_BYTES`].
    pub fn new() -> Self {
        Self::with_max_bytes(DEFAULT_MAX_HELLO_BYTES)
    }

    /// A reader that fails once `max_bytes` have been pushed without a complete ClientHello.
    pub fn with_max_bytes(max_bytes: usize) -> Self {
        ClientHelloReader {
            max_bytes,
            buffer: Vec::new(),
            assembler: RecordAssembler::default(),
            finished: false,
        }
    }

    /// Feeds the next bytes received.
    pub fn push(&mut self, bytes: &[u8]) -> Progress {
        if self.finished {
            return Progress::Failed(ParseError::ReaderFinished);
        }
        let room = self.max_bytes.saturating_sub(self.buffer.len());
        let (now, later) = bytes.split_at(bytes.len().min(room));
        self.buffer.extend_from_slice(now);
        let progress = match self.assembler.advance(&self.buffer) {
            Ok(Some((body, record_version))) => match parse_body(body, record_version) {
                Ok(hello) => {
                    // Keep what came after the cap too: it belongs to the connection.
                    self.buffer.extend_from_slice(later);
                    Progress::Done(hello)
                }
                Err(error) => Progress::Failed(error),
            },
            Ok(None) if !later.is_empty() || self.buffer.len() >= self.max_bytes => {
                Progress::Failed(ParseError::TooManyBytes {
                    max: self.max_bytes,
                })
            }
            Ok(None) => Progress::NeedMore,
            Err(error) => Progress::Failed(error),
        };
        self.finished = !matches!(progress, Progress::NeedMore);
        progress
    }

    /// The bytes pushed so far.
    pub fn buffered(&self) -> &[u8] {
        &self.buffer
    }

    /// Consumes the reader, returning the bytes pushed.
    pub fn into_buffered(self) -> Vec<u8> {
        self.buffer
    }
}

/// Why [`read_client_hello`] found no ClientHello.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadHelloError {
    /// Reading the stream failed.
    #[error("reading the ClientHello: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection before the ClientHello was complete.
    #[error("the connection closed before the ClientHello was complete")]
    Closed,
    /// The ClientHello was not complete within the time allowed.
    #[error("no complete ClientHello within {0:?}")]
    Timeout(Duration),
    /// The bytes are not a ClientHello, or exceed the byte cap.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

/// A failed [`read_client_hello`]: the error and the bytes consumed from the stream before it,
/// for a caller that wants to log them or hand them on regardless.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ReadHelloFailure {
    /// What went wrong.
    #[source]
    pub error: ReadHelloError,
    /// The bytes read from the stream.
    pub consumed: Vec<u8>,
}

/// Reads a ClientHello from `stream` (a `tokio::net::TcpStream` or any async reader), reading
/// at most `max_bytes` and for at most `timeout` in all. Returns the ClientHello and every byte
/// read, which the caller replays to the TLS library with [`Rewind::new`].
///
/// # Errors
///
/// [`ReadHelloFailure`], carrying the bytes read, when the stream fails, closes, is too slow,
/// or does not carry a ClientHello within `max_bytes`.
pub async fn read_client_hello<S>(
    stream: &mut S,
    max_bytes: usize,
    timeout: Duration,
) -> Result<(ClientHello, Vec<u8>), ReadHelloFailure>
where
    S: AsyncRead + Unpin + ?Sized,
{
    let mut reader = ClientHelloReader::with_max_bytes(max_bytes);
    let outcome = tokio::time::timeout(timeout, read_into(stream, &mut reader)).await;
    let result = match outcome {
        Ok(result) => result,
        Err(_elapsed) => Err(ReadHelloError::Timeout(timeout)),
    };
    let consumed = reader.into_buffered();
    match result {
        Ok(hello) => Ok((hello, consumed)),
        Err(error) => Err(ReadHelloFailure { error, consumed }),
    }
}

async fn read_into<S>(
    stream: &mut S,
    reader: &mut ClientHelloReader,
) -> Result<ClientHello, ReadHelloError>
where
    S: AsyncRead + Unpin + ?Sized,
{
    let mut chunk = [0u8; 4096];
    loop {
        // Never read past the cap: the stream's later bytes stay in the socket.
        let want = chunk
            .len()
            .min(reader.max_bytes.saturating_sub(reader.buffer.len()))
            .max(1);
        let n = stream.read(&mut chunk[..want]).await?;
        if n == 0 {
            return Err(ReadHelloError::Closed);
        }
        match reader.push(&chunk[..n]) {
            Progress::NeedMore => {}
            Progress::Done(hello) => return Ok(hello),
            Progress::Failed(error) => return Err(error.into()),
        }
    }
}

/// A stream that first yields bytes already read from `inner`, then reads `inner`; writes go
/// straight to `inner`. Hand it to the TLS acceptor after [`read_client_hello`] so the
/// handshake sees the whole ClientHello.
#[derive(Debug)]
pub struct Rewind<S> {
    prefix: Vec<u8>,
    position: usize,
    inner: S,
}

impl<S> Rewind<S> {
    /// Wraps `inner`, replaying `prefix` first.
    pub fn new(prefix: Vec<u8>, inner: S) -> Self {
        Rewind {
            prefix,
            position: 0,
            inner,
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped stream, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped stream and the replay bytes not yet read.
    pub fn into_parts(self) -> (S, Vec<u8>) {
        let mut prefix = self.prefix;
        prefix.drain(..self.position.min(prefix.len()));
        (self.inner, prefix)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let pending = this.prefix.get(this.position..).unwrap_or_default();
        if !pending.is_empty() {
            let n = pending.len().min(buf.remaining());
            buf.put_slice(&pending[..n]);
            this.position += n;
            if this.position >= this.prefix.len() {
                this.prefix = Vec::new();
                this.position = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_counts_every_byte_pushed() {
        let mut reader = ClientHelloReader::with_max_bytes(8);
        assert!(matches!(
            reader.push(&[0x16, 0x03, 0x01, 0x00, 0x40, 0x01]),
            Progress::NeedMore
        ));
        assert!(matches!(
            reader.push(&[0, 0, 0x3c]),
            Progress::Failed(ParseError::TooManyBytes { max: 8 })
        ));
        assert!(matches!(
            reader.push(&[0]),
            Progress::Failed(ParseError::ReaderFinished)
        ));
        assert_eq!(reader.buffered().len(), 8);
    }

    #[tokio::test]
    async fn rewind_replays_then_reads_on() {
        let inner: &[u8] = b" world";
        let mut stream = Rewind::new(b"hello".to_vec(), inner);
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "hello world");
    }
}
