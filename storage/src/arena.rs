//! The heap bytes of collection elements ([`crate::inline::InlineBytes`]: list elements,
//! set members and hash fields longer than 22 bytes) come from a jemalloc arena of
//! their own, whose memory stays in base (4 KiB) pages.
//!
//! The rest of the heap is madvised into transparent huge pages (`thp:always`, set by the
//! `ember` binary): they cut the TLB misses of random key lookups. A long list only grows
//! at its ends, so huge pages buy its elements nothing, and every 2 MiB a growing list takes
//! costs a whole fresh huge page: on a VM that hands free memory back to its host (free page
//! reporting), about 4 ms of kernel time each, measured under RPUSH
//! (`benches/results/2026-12-05-perf-5.md`). Base pages come from smaller free blocks first,
//! as Redis's heap (no huge pages) does.
//!
//! The arena's extent hooks are jemalloc's own with one change: memory they map is madvised
//! `MADV_NOHUGEPAGE` (after jemalloc's `MADV_HUGEPAGE`). Each thread allocates through a
//! cache (tcache) of its own for this arena, destroyed when the thread ends. Where the arena
//! cannot be made, the bytes come from jemalloc's usual arenas; either way they are freed
//! with `sdallocx`, so they never go through the global allocator (which need not be
//! jemalloc: the crate's tests use the system's).

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::ptr::{self, NonNull};
use std::sync::OnceLock;

use tikv_jemalloc_sys as jem;

/// The arena's index, once made (`None`: it could not be; jemalloc's usual arenas serve).
static ARENA: OnceLock<Option<c_uint>> = OnceLock::new();

/// jemalloc's default extent `alloc` hook, which [`alloc_base_pages`] wraps.
static DEFAULT_ALLOC: OnceLock<ExtentAlloc> = OnceLock::new();

type ExtentAlloc = unsafe extern "C" fn(
    *mut jem::extent_hooks_t,
    *mut c_void,
    usize,
    usize,
    *mut bool,
    *mut bool,
    c_uint,
) -> *mut c_void;

/// The arena's `alloc` hook: jemalloc's own, then `MADV_NOHUGEPAGE` over what it mapped.
unsafe extern "C" fn alloc_base_pages(
    hooks: *mut jem::extent_hooks_t,
    new_addr: *mut c_void,
    size: usize,
    alignment: usize,
    zero: *mut bool,
    commit: *mut bool,
    arena_ind: c_uint,
) -> *mut c_void {
    let Some(default) = DEFAULT_ALLOC.get() else {
        return ptr::null_mut();
    };
    // SAFETY: jemalloc calls this hook with the arguments its default hook takes (the same
    // extent_hooks_t signature); they are passed on unchanged.
    let p = unsafe { default(hooks, new_addr, size, alignment, zero, commit, arena_ind) };
    if !p.is_null() {
        // SAFETY: `p..p + size` is the page-aligned mapping the default hook just returned;
        // madvise only sets the mapping's huge-page flag (a failure leaves huge pages on).
        unsafe { libc::madvise(p, size, libc::MADV_NOHUGEPAGE) };
    }
    p
}

/// `mallctl` reading a `T` (with `new` written, when given).
///
/// # Safety
/// `name` must be a mallctl whose value is a `T` (and whose new value is an `N`).
unsafe fn mallctl<T: Default, N>(name: &CStr, new: Option<&mut N>) -> Option<T> {
    let mut old = T::default();
    let mut old_len = std::mem::size_of::<T>();
    // A write-only mallctl (`T` = `()`) must be given no place for an old value.
    let (old_p, old_len_p) = if old_len == 0 {
        (ptr::null_mut(), ptr::null_mut())
    } else {
        (
            (&mut old as *mut T).cast::<c_void>(),
            &mut old_len as *mut usize,
        )
    };
    let (new_p, new_len) = match new {
        Some(n) => ((n as *mut N).cast::<c_void>(), std::mem::size_of::<N>()),
        None => (ptr::null_mut(), 0),
    };
    // SAFETY: `old` and `new` are valid for their sizes, which the caller matched to the
    // mallctl's value type.
    let rc = unsafe { jem::mallctl(name.as_ptr(), old_p, old_len_p, new_p, new_len) };
    (rc == 0).then_some(old)
}

/// Makes the arena: arena 0's extent hooks with [`alloc_base_pages`] as `alloc`.
fn make_arena() -> Option<c_uint> {
    // SAFETY: `arena.0.extent_hooks` is an `extent_hooks_t *`.
    let default = unsafe { mallctl::<usize, ()>(c"arena.0.extent_hooks", None)? };
    let default = default as *const jem::extent_hooks_t;
    if default.is_null() {
        return None;
    }
    // SAFETY: jemalloc returned a pointer to its (static) default hooks.
    let mut hooks = unsafe { *default };
    DEFAULT_ALLOC.set(hooks.alloc?).ok()?;
    hooks.alloc = Some(alloc_base_pages);
    // jemalloc keeps the pointer for the arena's life (the process's): leaked on purpose.
    let mut hooks: *mut jem::extent_hooks_t = Box::leak(Box::new(hooks));
    // SAFETY: `arenas.create` returns an `unsigned` and takes an `extent_hooks_t *`.
    unsafe { mallctl::<c_uint, _>(c"arenas.create", Some(&mut hooks)) }
}

/// The arena's index (made on first use), `None` when jemalloc would not make it.
fn arena() -> Option<c_uint> {
    *ARENA.get_or_init(make_arena)
}

/// A thread's flags for `mallocx`/`sdallocx`: the arena and the thread's own cache for it.
struct ThreadCache {
    flags: c_int,
    tcache: Option<c_uint>,
}

impl ThreadCache {
    fn new() -> Self {
        let Some(arena) = arena() else {
            return ThreadCache {
                flags: 0,
                tcache: None,
            };
        };
        // SAFETY: `tcache.create` returns an `unsigned`.
        let tcache = unsafe { mallctl::<c_uint, ()>(c"tcache.create", None) };
        let cache = match tcache {
            Some(tc) => jem::MALLOCX_TCACHE(tc as usize),
            None => jem::MALLOCX_TCACHE_NONE,
        };
        ThreadCache {
            flags: jem::MALLOCX_ARENA(arena as usize) | cache,
            tcache,
        }
    }
}

impl Drop for ThreadCache {
    fn drop(&mut self) {
        if let Some(mut tc) = self.tcache.take() {
            // SAFETY: `tcache.destroy` takes an `unsigned`; this thread's cache is not used
            // again (later frees on this thread find the thread-local gone: no cache).
            unsafe { mallctl::<(), _>(c"tcache.destroy", Some(&mut tc)) };
        }
    }
}

thread_local! {
    static CACHE: ThreadCache = ThreadCache::new();
}

/// This thread's flags: its cache, or none once the thread-local is gone (thread exit).
#[inline]
fn flags() -> c_int {
    CACHE
        .try_with(|c| c.flags)
        .unwrap_or_else(|_| match arena() {
            Some(a) => jem::MALLOCX_ARENA(a as usize) | jem::MALLOCX_TCACHE_NONE,
            None => 0,
        })
}

/// A copy of `v` (not empty) in the arena; freed with [`free`] and the same length.
#[inline]
pub(crate) fn copy(v: &[u8]) -> NonNull<u8> {
    debug_assert!(!v.is_empty(), "mallocx of 0 bytes is undefined");
    // SAFETY: mallocx with a non-zero size and flags naming an arena and cache that exist.
    let p = unsafe { jem::mallocx(v.len(), flags()) }.cast::<u8>();
    let Some(p) = NonNull::new(p) else {
        std::alloc::handle_alloc_error(std::alloc::Layout::array::<u8>(v.len()).expect("len"))
    };
    // SAFETY: `p` is a fresh allocation of `v.len()` bytes, so disjoint from `v`.
    unsafe { ptr::copy_nonoverlapping(v.as_ptr(), p.as_ptr(), v.len()) };
    p
}

/// Frees what [`copy`] returned.
///
/// # Safety
/// `p` must come from [`copy`] with `len` bytes, and not be used again.
#[inline]
pub(crate) unsafe fn free(p: NonNull<u8>, len: usize) {
    // SAFETY: the caller passes a live jemalloc allocation of `len` bytes; any thread's
    // cache may take it back (jemalloc returns it to its own arena).
    unsafe { jem::sdallocx(p.as_ptr().cast::<c_void>(), len, flags()) }
}

/// The arena that owns `p` (jemalloc's `arenas.lookup`).
#[cfg(test)]
fn arena_of(p: NonNull<u8>) -> Option<c_uint> {
    let mut p = p.as_ptr().cast::<c_void>();
    // SAFETY: `arenas.lookup` takes a pointer and returns an `unsigned`.
    unsafe { mallctl::<c_uint, _>(c"arenas.lookup", Some(&mut p)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_come_from_the_arena_and_go_back() {
        let a = arena().expect("jemalloc makes the arena");
        let v: Vec<u8> = (0..=255).collect();
        let p = copy(&v);
        assert_eq!(arena_of(p), Some(a));
        // SAFETY: `p` holds the 256 bytes `copy` wrote.
        assert_eq!(
            unsafe { std::slice::from_raw_parts(p.as_ptr(), v.len()) },
            &v[..]
        );
        // A free on another thread (its own cache) is taken back.
        let addr = p.as_ptr() as usize;
        std::thread::spawn(move || {
            let p = NonNull::new(addr as *mut u8).expect("not null");
            // SAFETY: the bytes `copy` returned above, freed once.
            unsafe { free(p, 256) };
        })
        .join()
        .expect("thread");
        assert!(CACHE.with(|c| c.tcache.is_some()));
    }

    /// The arena's mappings are marked `nh` (no huge pages) in /proc/self/smaps: fails
    /// with [`alloc_base_pages`] not madvising.
    #[test]
    fn the_arena_maps_base_pages() {
        // Enough to make the arena map memory beyond its first extents.
        let elems: Vec<NonNull<u8>> = (0..40_000).map(|_| copy(&[7u8; 200])).collect();
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        for p in [elems[0], elems[elems.len() / 2], elems[elems.len() - 1]] {
            let at = p.as_ptr() as usize;
            let flags = vma_flags(&smaps, at).expect("the pointer's mapping");
            assert!(
                flags.split(' ').any(|f| f == "nh"),
                "{at:#x}: VmFlags {flags}"
            );
        }
        for p in elems {
            // SAFETY: each came from `copy` with 200 bytes, freed once.
            unsafe { free(p, 200) };
        }
    }

    /// The VmFlags of the mapping holding `at`.
    fn vma_flags(smaps: &str, at: usize) -> Option<String> {
        let mut inside = false;
        for line in smaps.lines() {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                if inside {
                    return Some(flags.trim().to_string());
                }
            } else if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = lo <= at && at < hi;
                    }
                }
            }
        }
        None
    }

    /// Threads that end give their cache back: more threads than jemalloc has cache
    /// identifiers (4,094) each still get one.
    #[test]
    fn ended_threads_give_their_cache_back() {
        for _ in 0..5_000 {
            let has = std::thread::spawn(|| {
                // SAFETY: freed once, with its length.
                unsafe { free(copy(b"a list element of some length"), 29) };
                CACHE.with(|c| c.tcache.is_some())
            })
            .join()
            .expect("thread");
            assert!(has, "a thread got no cache of its own");
        }
    }
}
