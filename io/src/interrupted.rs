//! libzmq calls that a signal interrupted, tried again.
//!
//! libzmq waits on its internal mailboxes with `poll(2)`, which a caught signal interrupts whatever
//! `SA_RESTART` says; the call then fails with `EINTR` and has done nothing. A process that catches signals —
//! the conformance runner catches `SIGCHLD` for the implementations it spawns, the reference peer `SIGINT` and
//! `SIGTERM` — sees that on any `bind`, `connect`, `send`, `recv` or `poll`. Every libzmq call of this crate (and
//! of the tap) goes through [`retry`], so a signal costs a second attempt, never a lost message, a failed bind
//! or a stopped thread.

use mooncake_wire::limits::MAX_EINTR_RETRIES;

/// Runs `call` until it does not fail with `EINTR`, at most [`MAX_EINTR_RETRIES`] times more; any other result
/// (and the last `EINTR`) is returned as it is.
///
/// ```
/// let ctx = zmq::Context::new();
/// let s = mooncake_io::interrupted::retry(|| ctx.socket(zmq::PULL)).unwrap();
/// mooncake_io::interrupted::retry(|| s.bind("inproc://retry-example")).unwrap();
/// ```
pub fn retry<T>(mut call: impl FnMut() -> zmq::Result<T>) -> zmq::Result<T> {
    for _ in 0..MAX_EINTR_RETRIES {
        match call() {
            Err(zmq::Error::EINTR) => continue,
            done => return done,
        }
    }
    call()
}

/// Sends `frames` as one message. Each frame is tried again on its own: a retry of the whole message would queue
/// again the frames before the interrupted one.
pub fn send_frames<F: AsRef<[u8]>>(socket: &zmq::Socket, frames: &[F], flags: i32) -> zmq::Result<()> {
    for (i, frame) in frames.iter().enumerate() {
        let more = if i + 1 < frames.len() { zmq::SNDMORE } else { 0 };
        retry(|| socket.send(frame.as_ref(), flags | more))?;
    }
    Ok(())
}

/// Receives one whole message, each frame tried again on its own (a frame once received is never lost to a
/// signal that interrupts the next one).
pub fn recv_frames(socket: &zmq::Socket, flags: i32) -> zmq::Result<Vec<Vec<u8>>> {
    let mut frames = vec![retry(|| socket.recv_bytes(flags))?];
    while retry(|| socket.get_rcvmore())? {
        frames.push(retry(|| socket.recv_bytes(flags))?);
    }
    Ok(frames)
}
