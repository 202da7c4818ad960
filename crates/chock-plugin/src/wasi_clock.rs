//! `wasi:io/poll`, `wasi:clocks` and `wasi:random`: what Rust's standard library reaches for when a
//! plugin reads the time, sleeps, or builds a `HashMap` (whose hasher is seeded from randomness).
//!
//! None of them reaches anything outside the store, so none is an act: the time and random bytes
//! are the host's, read-only. What they must not do is let a plugin hold the host past its call:
//! a pollable is a timer in the store's [`Timers`], and waiting on one never outlasts the call's
//! deadline (the wait ends in the same trap the epoch deadline raises, so the call is `timed_out`).
//! A request for more random bytes than the call's memory cap is a trap, before the host allocates.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use wasmtime::component::{ComponentType, Linker, Lower, Resource, ResourceType};
use wasmtime::{StoreContextMut, Trap};

use crate::wasi::{WasiHost, name};

/// Timers one store may hold at once; a plugin that makes more without dropping them traps.
const MAX_TIMERS: usize = 4096;

/// `wasi:io/poll.pollable`. Rep 0 is always ready (a stream's); rep `n` is timer `n - 1`.
#[derive(Debug)]
pub struct Pollable;

/// The deadlines of a store's pollables.
#[derive(Debug, Default)]
pub struct Timers {
    slots: Vec<Option<Instant>>,
    free: Vec<usize>,
}

impl Timers {
    fn add(&mut self, at: Instant) -> wasmtime::Result<u32> {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(at);
                slot
            }
            None if self.slots.len() < MAX_TIMERS => {
                self.slots.push(Some(at));
                self.slots.len() - 1
            }
            None => wasmtime::bail!("the plugin holds {MAX_TIMERS} timers; it may hold no more"),
        };
        Ok(u32::try_from(slot + 1).expect("MAX_TIMERS fits in u32"))
    }

    /// When pollable `rep` is ready (`None`: now).
    fn at(&self, rep: u32) -> Option<Instant> {
        let slot = usize::try_from(rep).ok()?.checked_sub(1)?;
        self.slots.get(slot).copied().flatten()
    }

    fn remove(&mut self, rep: u32) {
        let Some(slot) = usize::try_from(rep).ok().and_then(|r| r.checked_sub(1)) else {
            return;
        };
        if let Some(held @ Some(_)) = self.slots.get_mut(slot) {
            *held = None;
            self.free.push(slot);
        }
    }
}

/// The origin of `wasi:clocks/monotonic-clock`'s instants: the first use in this process.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Waits until `at` or the call's deadline, whichever comes first; past the deadline the call
/// ends as its epoch deadline would have ended it.
fn wait_until(at: Instant, deadline: Instant) -> wasmtime::Result<()> {
    let now = Instant::now();
    if at <= now {
        return Ok(());
    }
    if at >= deadline {
        std::thread::sleep(deadline.saturating_duration_since(now));
        return Err(wasmtime::Error::new(Trap::Interrupt));
    }
    std::thread::sleep(at - now);
    Ok(())
}

/// `wasi:clocks/wall-clock.datetime`.
#[derive(ComponentType, Lower, Clone, Copy)]
#[component(record)]
struct Datetime {
    seconds: u64,
    nanoseconds: u32,
}

/// More random bytes asked for than the call's memory could hold: the call ends as a memory-cap
/// trap, before the host allocates them.
#[derive(Debug, thiserror::Error)]
#[error("the plugin asked for {asked} random bytes; its memory cap is {cap} bytes")]
pub struct TooManyBytes {
    asked: u64,
    cap: u64,
}

fn random_bytes(len: u64, cap: u64) -> wasmtime::Result<Vec<u8>> {
    if len > cap {
        return Err(wasmtime::Error::new(TooManyBytes { asked: len, cap }));
    }
    let mut bytes = vec![0; usize::try_from(len)?];
    getrandom::fill(&mut bytes).map_err(|e| wasmtime::format_err!("getrandom: {e}"))?;
    Ok(bytes)
}

fn random_u64() -> wasmtime::Result<u64> {
    getrandom::u64().map_err(|e| wasmtime::format_err!("getrandom: {e}"))
}

/// The next value of a store's insecure generator (SplitMix64).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Defines `pollable` in `instance` with the destructor that frees its timer.
pub(crate) fn define_pollable<T: WasiHost + 'static>(
    instance: &mut wasmtime::component::LinkerInstance<'_, T>,
) -> wasmtime::Result<()> {
    instance.resource(
        "pollable",
        ResourceType::host::<Pollable>(),
        |mut store: StoreContextMut<'_, T>, rep| {
            store.data_mut().timers().remove(rep);
            Ok(())
        },
    )
}

/// A pollable for `at`.
fn timer<T: WasiHost>(
    store: &mut StoreContextMut<'_, T>,
    at: Instant,
) -> wasmtime::Result<(Resource<Pollable>,)> {
    let rep = store.data_mut().timers().add(at)?;
    Ok((Resource::new_own(rep),))
}

/// Adds `wasi:io/poll`, `wasi:clocks/{monotonic-clock,wall-clock}` and
/// `wasi:random/{random,insecure,insecure-seed}` to `linker`.
pub fn add_to_linker<T: WasiHost + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    {
        let mut poll = linker.instance(&name("wasi:io/poll"))?;
        define_pollable(&mut poll)?;
        poll.func_wrap(
            "[method]pollable.ready",
            |store: StoreContextMut<'_, T>, (p,): (Resource<Pollable>,)| {
                let at = store.data().timers_ref().at(p.rep());
                Ok((at.is_none_or(|at| at <= Instant::now()),))
            },
        )?;
        poll.func_wrap(
            "[method]pollable.block",
            |store: StoreContextMut<'_, T>, (p,): (Resource<Pollable>,)| match store
                .data()
                .timers_ref()
                .at(p.rep())
            {
                Some(at) => wait_until(at, store.data().deadline()),
                None => Ok(()),
            },
        )?;
        poll.func_wrap(
            "poll",
            |store: StoreContextMut<'_, T>, (ps,): (Vec<Resource<Pollable>>,)| {
                if ps.is_empty() {
                    wasmtime::bail!("poll was given no pollable");
                }
                let ats: Vec<Option<Instant>> = ps
                    .iter()
                    .map(|p| store.data().timers_ref().at(p.rep()))
                    .collect();
                let first = ats.iter().map(|at| at.unwrap_or_else(Instant::now)).min();
                wait_until(first.expect("not empty"), store.data().deadline())?;
                let now = Instant::now();
                let ready = ats
                    .iter()
                    .enumerate()
                    .filter(|(_, at)| at.is_none_or(|at| at <= now))
                    .filter_map(|(i, _)| u32::try_from(i).ok())
                    .collect::<Vec<u32>>();
                Ok((ready,))
            },
        )?;
    }
    {
        let mut clock = linker.instance(&name("wasi:clocks/monotonic-clock"))?;
        define_pollable(&mut clock)?;
        clock.func_wrap("now", |_, (): ()| Ok((nanos(origin().elapsed()),)))?;
        clock.func_wrap("resolution", |_, (): ()| Ok((1u64,)))?;
        clock.func_wrap(
            "subscribe-instant",
            |mut store: StoreContextMut<'_, T>, (when,): (u64,)| {
                let far = store.data().deadline() + Duration::from_secs(1);
                let at = origin()
                    .checked_add(Duration::from_nanos(when))
                    .map_or(far, |at| at.min(far));
                timer(&mut store, at)
            },
        )?;
        clock.func_wrap(
            "subscribe-duration",
            |mut store: StoreContextMut<'_, T>, (wait,): (u64,)| {
                let far = store.data().deadline() + Duration::from_secs(1);
                let at = Instant::now()
                    .checked_add(Duration::from_nanos(wait))
                    .map_or(far, |at| at.min(far));
                timer(&mut store, at)
            },
        )?;
    }
    {
        let mut wall = linker.instance(&name("wasi:clocks/wall-clock"))?;
        wall.func_wrap("now", |_, (): ()| {
            let since = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            Ok((Datetime {
                seconds: since.as_secs(),
                nanoseconds: since.subsec_nanos(),
            },))
        })?;
        wall.func_wrap("resolution", |_, (): ()| {
            Ok((Datetime {
                seconds: 0,
                nanoseconds: 1,
            },))
        })?;
    }
    {
        let mut random = linker.instance(&name("wasi:random/random"))?;
        random.func_wrap(
            "get-random-bytes",
            |store: StoreContextMut<'_, T>, (len,): (u64,)| {
                Ok((random_bytes(len, store.data().byte_cap())?,))
            },
        )?;
        random.func_wrap("get-random-u64", |_, (): ()| Ok((random_u64()?,)))?;
    }
    {
        let mut insecure = linker.instance(&name("wasi:random/insecure"))?;
        insecure.func_wrap(
            "get-insecure-random-bytes",
            |mut store: StoreContextMut<'_, T>, (len,): (u64,)| {
                let cap = store.data().byte_cap();
                if len > cap {
                    return Err(wasmtime::Error::new(TooManyBytes { asked: len, cap }));
                }
                let state = store.data_mut().insecure();
                let mut bytes = Vec::with_capacity(usize::try_from(len)?);
                while bytes.len() < bytes.capacity() {
                    let take = (bytes.capacity() - bytes.len()).min(8);
                    bytes.extend_from_slice(&splitmix(state).to_le_bytes()[..take]);
                }
                Ok((bytes,))
            },
        )?;
        insecure.func_wrap(
            "get-insecure-random-u64",
            |mut store: StoreContextMut<'_, T>, (): ()| {
                Ok((splitmix(store.data_mut().insecure()),))
            },
        )?;
    }
    linker
        .instance(&name("wasi:random/insecure-seed"))?
        .func_wrap("insecure-seed", |_, (): ()| {
            Ok(((random_u64()?, random_u64()?),))
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_reuse_freed_slots_and_rep_zero_is_always_ready() {
        let mut timers = Timers::default();
        let now = Instant::now();
        let a = timers.add(now).unwrap();
        let b = timers.add(now + Duration::from_secs(5)).unwrap();
        assert_eq!((a, b), (1, 2));
        assert_eq!(timers.at(0), None);
        assert_eq!(timers.at(b), Some(now + Duration::from_secs(5)));
        timers.remove(a);
        timers.remove(a);
        assert_eq!(timers.add(now).unwrap(), 1, "the freed slot, once");
        assert_eq!(timers.add(now).unwrap(), 3);
    }

    #[test]
    fn a_store_cannot_hold_more_timers_than_the_cap() {
        let mut timers = Timers::default();
        for _ in 0..MAX_TIMERS {
            timers.add(Instant::now()).unwrap();
        }
        assert!(timers.add(Instant::now()).is_err());
    }

    #[test]
    fn a_wait_never_outlasts_the_call() {
        let deadline = Instant::now() + Duration::from_millis(30);
        let started = Instant::now();
        let err = wait_until(Instant::now() + Duration::from_secs(3600), deadline).unwrap_err();
        assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::Interrupt));
        assert!(started.elapsed() < Duration::from_secs(3600));
    }

    #[test]
    fn random_bytes_past_the_cap_are_refused_before_any_allocation() {
        let err = random_bytes(u64::MAX, 1 << 20).unwrap_err();
        assert!(err.downcast_ref::<TooManyBytes>().is_some(), "{err:#}");
        assert_eq!(random_bytes(16, 1 << 20).unwrap().len(), 16);
    }
}
