//! The async runtime openraft runs on: tokio, except that the randomness openraft draws (its
//! election time-outs) comes from a per-thread generator that a simulation can seed. Everything
//! else is tokio's own, so with a single-threaded runtime and a paused clock a group of replicas
//! runs the same way every time for the same seed (see `specie-sim`'s replication world).

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use openraft::{AsyncRuntime, OptionalSend, TokioRuntime};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

type Tokio = TokioRuntime;

thread_local! {
    static ELECTION_RNG: RefCell<StdRng> = RefCell::new(StdRng::from_entropy());
}

/// Seeds the generator openraft draws election time-outs from, for replicas running on this
/// thread. Without it the generator is seeded from the OS, as `rand::thread_rng` would be.
pub fn seed_thread_rng(seed: u64) {
    ELECTION_RNG.with(|rng| *rng.borrow_mut() = StdRng::seed_from_u64(seed));
}

/// A handle on this thread's generator.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadRng;

impl RngCore for ThreadRng {
    fn next_u32(&mut self) -> u32 {
        ELECTION_RNG.with(|rng| rng.borrow_mut().next_u32())
    }

    fn next_u64(&mut self) -> u64 {
        ELECTION_RNG.with(|rng| rng.borrow_mut().next_u64())
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        ELECTION_RNG.with(|rng| rng.borrow_mut().fill_bytes(dest))
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        ELECTION_RNG.with(|rng| rng.borrow_mut().try_fill_bytes(dest))
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct SeededTokio;

impl AsyncRuntime for SeededTokio {
    type JoinError = <Tokio as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <Tokio as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <Tokio as AsyncRuntime>::Sleep;
    type Instant = <Tokio as AsyncRuntime>::Instant;
    type TimeoutError = <Tokio as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <Tokio as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = ThreadRng;
    type OneshotSender<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError = <Tokio as AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: OptionalSend> = <Tokio as AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        Tokio::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        Tokio::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        Tokio::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(duration: Duration, future: F) -> Self::Timeout<R, F> {
        Tokio::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(deadline: Self::Instant, future: F) -> Self::Timeout<R, F> {
        Tokio::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        Tokio::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        ThreadRng
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        Tokio::oneshot()
    }
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    #[test]
    fn a_seeded_thread_draws_the_same_election_time_outs() {
        let draw = || {
            (0..8)
                .map(|_| SeededTokio::thread_rng().gen_range(150..300u64))
                .collect::<Vec<_>>()
        };
        seed_thread_rng(7);
        let first = draw();
        seed_thread_rng(7);
        assert_eq!(draw(), first);
        seed_thread_rng(8);
        assert_ne!(draw(), first);
    }
}
