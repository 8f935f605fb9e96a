//! `ember [config-file] [--option value ...]`: starts a node, like redis-server.

use tikv_jemallocator::Jemalloc;
use tracing_subscriber::{layer::SubscriberExt, reload, util::SubscriberInitExt, EnvFilter};

#[global_allocator]
static GLOBAL: Jemalloc = Jemalloc;

/// jemalloc's built-in options: its extents are madvised into transparent huge pages
/// (the kernel's `madvise` mode is enough), which cuts the TLB misses of random key
/// lookups in a big keyspace. Ember never forks, so huge pages cost no copy-on-write.
/// `disable-thp yes` turns them off for the process; `_RJEM_MALLOC_CONF` overrides this.
///
/// `lg_extent_max_active_fit:16`: freed pages are reused for a new slab even from a free
/// extent up to 2^16 times its size (jemalloc's default, 2^6, keeps big free extents whole).
/// Deleting many big lists frees their elements' slabs together, into extents of many
/// megabytes; with the default, the lists grown next took fresh pages beside them instead
/// (one time in six: 0.062 page faults per LPUSH, all of them, and 0.6 GB more RSS), with
/// this option never in six (0.000-0.014; `benches/results/2026-12-06-perf-12.md`).
///
/// `slab_sizes:...:3`: the power-of-two classes from 128 to 2048 bytes, whose slabs are
/// one page by default, get slabs of three pages (12 KiB: 96 regions of 128 bytes down to 6
/// of 2048), so a growing collection takes a new slab, with its extent split, metadata
/// and page map updates, three times less often. Under LPUSH of 256-byte elements after a
/// cleanup, jemalloc's share of the server's CPU fell from 17% to 7%
/// (`benches/results/2026-12-07-perf-15.md`). Three pages, not four: a freed slab under
/// 16 KiB stays whole among the free extents and serves the next slab without a split,
/// where bigger ones are merged on free and split again (four and eight pages: no gain).
// SAFETY: jemalloc reads this symbol once, at its initialisation, as a `const char *` to a
// NUL-terminated string: a `&[u8; N]` is a thin pointer to static bytes ending in NUL.
// Tested by tests/python/test_memory.py::test_transparent_huge_pages and
// ::test_allocator_options.
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8; 122] =
    b"thp:always,metadata_thp:auto,lg_extent_max_active_fit:16,slab_sizes:128-128:3|256-256:3|512-512:3|1024-1024:3|2048-2048:3\0";

/// Maps a Redis loglevel to a tracing filter.
fn filter_for(level: &str) -> EnvFilter {
    EnvFilter::new(match level {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "off",
    })
}

/// `daemonize yes`, as redis-server: the process forks, the parent exits, and the child
/// goes on in a new session with its standard input and output on /dev/null (without a
/// `logfile`, Redis's log then goes nowhere too). Called before any thread exists.
fn daemonize() {
    // SAFETY: fork, setsid, open and dup2 are plain syscalls. Nothing but this thread runs
    // yet (no runtime, no logger, no allocator background thread: jemalloc starts that only
    // when the configuration is applied, later), so the child's copy of the heap and of
    // every lock is consistent. The path is a NUL-terminated literal. Tested by
    // tests/python/test_server.py::test_daemonize_and_pidfile.
    unsafe {
        match libc::fork() {
            -1 => {
                eprintln!("Can't daemonize: fork failed");
                std::process::exit(1);
            }
            0 => {}
            _ => std::process::exit(0),
        }
        libc::setsid();
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if fd != -1 {
            libc::dup2(fd, libc::STDIN_FILENO);
            libc::dup2(fd, libc::STDOUT_FILENO);
            libc::dup2(fd, libc::STDERR_FILENO);
            if fd > libc::STDERR_FILENO {
                libc::close(fd);
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-v" || a == "--version") {
        println!("Ember server v={}", env!("CARGO_PKG_VERSION"));
        return;
    }
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("Usage: ember [/path/to/ember.conf] [--option value ...]\n\nOptions are redis.conf directives, e.g. --port 6380 --threads 4 --requirepass secret");
        return;
    }
    let config = match node::config::Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("\n{e}");
            std::process::exit(1);
        }
    };
    if config.get_bool("daemonize") {
        daemonize();
    }
    let (filter, handle) = reload::Layer::new(filter_for(config.get("loglevel")));
    let logfile = config.get("logfile").to_string();
    let registry = tracing_subscriber::registry().with(filter);
    if logfile.is_empty() {
        // Colour only on a terminal: stdout redirected to a file (a supervisor, a test
        // harness) gets plain lines.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
        registry
            .with(tracing_subscriber::fmt::layer().with_ansi(ansi))
            .init();
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&logfile)
        {
            Ok(f) => registry
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_ansi(false)
                        .with_writer(std::sync::Mutex::new(f)),
                )
                .init(),
            Err(e) => {
                eprintln!("Can't open the log file: {e}");
                std::process::exit(1);
            }
        }
    }
    for name in config.inert_set() {
        node::config::note_inert(name);
    }
    // `pidfile`, as redis-server: the process id, written at start-up, removed at exit.
    let pidfile = config.get("pidfile").to_string();
    if !pidfile.is_empty() {
        if let Err(e) = std::fs::write(&pidfile, format!("{}\n", std::process::id())) {
            tracing::warn!("Failed to write PID file {pidfile}: {e}");
        }
    }
    let reload: node::server::LogReload = Box::new(move |level: &str| {
        let _ = handle.reload(filter_for(level));
    });
    let config_file = args.first().filter(|a| !a.starts_with("--")).cloned();
    let result = node::server::run(config, config_file, Some(reload));
    if !pidfile.is_empty() {
        let _ = std::fs::remove_file(&pidfile);
    }
    if let Err(e) = result {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
