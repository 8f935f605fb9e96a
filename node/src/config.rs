//! Configuration: redis.conf-style directives from a file and `--name value` flags, the
//! table of known directives with their types, defaults and mutability, and the checks
//! behind CONFIG GET / CONFIG SET.

use std::collections::BTreeMap;

use resp::{Limits, RequestKind, RequestParser};
use storage::pattern::glob_match;

/// How a directive's value is parsed.
#[derive(Clone, Copy)]
enum Kind {
    /// An integer within bounds.
    Int { min: i64, max: i64 },
    /// A byte size with optional unit (k, kb, m, mb, g, gb).
    Memory { min: u64, max: u64 },
    /// yes / no.
    Bool,
    /// Free text (one argument; may be empty).
    Str,
    /// One of a fixed set.
    Enum(&'static [&'static str]),
    /// Several space-separated words (bind).
    Words,
    /// `save` points: pairs of seconds and changes, or "" for none.
    SavePoints,
    /// Keyspace event classes (notify-keyspace-events).
    Events,
    /// A file name in the working directory, not a path (dbfilename).
    FileName,
    /// Space-separated percentiles from 0 to 100, possibly none
    /// (`latency-tracking-info-percentiles`).
    Percentiles,
    /// `client-output-buffer-limit`: groups of class, hard, soft, seconds, merged into the
    /// value in force ([`crate::obuf::merge`]).
    OutputLimits,
}

/// One known directive.
struct Directive {
    name: &'static str,
    kind: Kind,
    default: &'static str,
    mutable: bool,
}

const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning", "nothing"];

static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "port",
        kind: Kind::Int { min: 0, max: 65535 },
        default: "6379",
        mutable: false,
    },
    Directive {
        name: "bind",
        kind: Kind::Words,
        default: "127.0.0.1 -::1",
        mutable: false,
    },
    Directive {
        name: "threads",
        kind: Kind::Int { min: 0, max: 1024 },
        default: "0",
        mutable: false,
    },
    Directive {
        name: "databases",
        kind: Kind::Int {
            min: 1,
            max: 1_000_000,
        },
        default: "16",
        mutable: false,
    },
    Directive {
        name: "requirepass",
        kind: Kind::Str,
        default: "",
        mutable: true,
    },
    Directive {
        name: "maxclients",
        kind: Kind::Int {
            min: 1,
            max: u32::MAX as i64,
        },
        default: "10000",
        mutable: true,
    },
    Directive {
        name: "timeout",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "tcp-keepalive",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        default: "300",
        mutable: true,
    },
    Directive {
        name: "busy-reply-threshold",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "5000",
        mutable: true,
    },
    Directive {
        name: "tcp-backlog",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        default: "511",
        mutable: false,
    },
    Directive {
        name: "save",
        kind: Kind::SavePoints,
        default: "3600 1 300 100 60 10000",
        mutable: true,
    },
    Directive {
        name: "dbfilename",
        kind: Kind::FileName,
        default: "dump.rdb",
        mutable: true,
    },
    Directive {
        name: "rdbcompression",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "rdbchecksum",
        kind: Kind::Bool,
        default: "yes",
        mutable: false,
    },
    Directive {
        name: "appendonly",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "appendfsync",
        kind: Kind::Enum(&["always", "everysec", "no"]),
        default: "everysec",
        mutable: true,
    },
    Directive {
        name: "appendfilename",
        kind: Kind::FileName,
        default: "appendonly.aof",
        mutable: false,
    },
    Directive {
        name: "appenddirname",
        kind: Kind::FileName,
        default: "appendonlydir",
        mutable: false,
    },
    Directive {
        name: "auto-aof-rewrite-percentage",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        default: "100",
        mutable: true,
    },
    Directive {
        name: "auto-aof-rewrite-min-size",
        kind: Kind::Memory {
            min: 0,
            max: i64::MAX as u64,
        },
        default: "67108864",
        mutable: true,
    },
    Directive {
        name: "aof-use-rdb-preamble",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "aof-load-truncated",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "daemonize",
        kind: Kind::Bool,
        default: "no",
        mutable: false,
    },
    Directive {
        name: "dir",
        kind: Kind::Str,
        default: "",
        mutable: true,
    },
    Directive {
        name: "loglevel",
        kind: Kind::Enum(LOGLEVELS),
        default: "notice",
        mutable: true,
    },
    Directive {
        name: "logfile",
        kind: Kind::Str,
        default: "",
        mutable: false,
    },
    Directive {
        name: "protected-mode",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "proto-max-bulk-len",
        kind: Kind::Memory {
            min: 1024 * 1024,
            max: i64::MAX as u64,
        },
        default: "536870912",
        mutable: true,
    },
    Directive {
        name: "client-query-buffer-limit",
        kind: Kind::Memory {
            min: 1024 * 1024,
            max: i64::MAX as u64,
        },
        default: "1073741824",
        mutable: true,
    },
    Directive {
        name: "notify-keyspace-events",
        kind: Kind::Events,
        default: "",
        mutable: true,
    },
    Directive {
        name: "hz",
        kind: Kind::Int { min: 1, max: 500 },
        default: "10",
        mutable: true,
    },
    Directive {
        // Redis's default is yes (fork copy-on-write); Ember never forks, so its heap uses
        // transparent huge pages unless this says otherwise.
        name: "disable-thp",
        kind: Kind::Bool,
        default: "no",
        mutable: false,
    },
    Directive {
        // As in Redis: jemalloc purges freed pages from a thread of its own, so memory
        // freed by one arena comes back to the system even when nothing allocates there.
        name: "jemalloc-bg-thread",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "compression",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "compression-threshold",
        kind: Kind::Memory {
            min: 0,
            max: i64::MAX as u64,
        },
        default: "512",
        mutable: true,
    },
    Directive {
        name: "maxmemory",
        kind: Kind::Memory {
            min: 0,
            max: i64::MAX as u64,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "maxmemory-policy",
        kind: Kind::Enum(crate::evict::POLICY_NAMES),
        default: "noeviction",
        mutable: true,
    },
    Directive {
        name: "maxmemory-samples",
        kind: Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
        default: "5",
        mutable: true,
    },
    Directive {
        name: "maxmemory-eviction-tenacity",
        kind: Kind::Int { min: 0, max: 100 },
        default: "10",
        mutable: true,
    },
    Directive {
        name: "lfu-log-factor",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        default: "10",
        mutable: true,
    },
    Directive {
        name: "cluster-enabled",
        kind: Kind::Bool,
        default: "no",
        mutable: false,
    },
    Directive {
        name: "cluster-bootstrap",
        kind: Kind::Str,
        default: "",
        mutable: false,
    },
    Directive {
        // A member's client address (host:port): this node joins that cluster instead of
        // bootstrapping one (see cluster::node).
        name: "cluster-join",
        kind: Kind::Str,
        default: "",
        mutable: false,
    },
    Directive {
        // Cluster mode: the password (and user) a node gives when it calls another node's
        // client port (cluster-join, CLUSTER JOIN / FORGET and FUNCTION writes forwarded
        // to the metadata group's leader), as Redis replicas use them with their master.
        name: "masterauth",
        kind: Kind::Str,
        default: "",
        mutable: true,
    },
    Directive {
        name: "masteruser",
        kind: Kind::Str,
        default: "",
        mutable: true,
    },
    Directive {
        name: "cluster-groups",
        kind: Kind::Int { min: 1, max: 16384 },
        default: "64",
        mutable: false,
    },
    Directive {
        name: "cluster-replicas",
        kind: Kind::Int { min: 1, max: 15 },
        default: "3",
        mutable: false,
    },
    Directive {
        name: "cluster-port",
        kind: Kind::Int { min: 0, max: 65535 },
        default: "0",
        mutable: false,
    },
    Directive {
        name: "cluster-announce-ip",
        kind: Kind::Str,
        default: "",
        mutable: false,
    },
    Directive {
        name: "cluster-node-timeout",
        kind: Kind::Int {
            min: 100,
            max: i32::MAX as i64,
        },
        default: "1000",
        mutable: false,
    },
    Directive {
        // Leaders drift to the survivors of a failover; with this on, a node that leads
        // fewer groups than its share takes groups back (see cluster::node::rebalance).
        name: "cluster-rebalance",
        kind: Kind::Bool,
        default: "yes",
        mutable: false,
    },
    Directive {
        name: "cluster-read-mode",
        kind: Kind::Enum(&["lease", "readindex"]),
        default: "lease",
        mutable: false,
    },
    Directive {
        name: "cluster-config-file",
        kind: Kind::FileName,
        default: "ember-raft",
        mutable: false,
    },
    Directive {
        name: "cluster-fsync",
        kind: Kind::Bool,
        default: "yes",
        mutable: false,
    },
    Directive {
        name: "tracking-table-max-keys",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "1000000",
        mutable: true,
    },
    Directive {
        name: "client-output-buffer-limit",
        kind: Kind::OutputLimits,
        default: crate::obuf::DEFAULT,
        mutable: true,
    },
    Directive {
        name: "lfu-decay-time",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        default: "1",
        mutable: true,
    },
    Directive {
        name: "latency-tracking",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "slowlog-max-len",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "128",
        mutable: true,
    },
    Directive {
        name: "slowlog-log-slower-than",
        kind: Kind::Int {
            min: -1,
            max: i64::MAX,
        },
        default: "10000",
        mutable: true,
    },
    Directive {
        name: "latency-monitor-threshold",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "latency-tracking-info-percentiles",
        kind: Kind::Percentiles,
        default: "50 99 99.9",
        mutable: true,
    },
];

/// Redis 7.0's directives that Ember accepts, keeps and shows (CONFIG GET, CONFIG REWRITE)
/// but does not act on: encoding thresholds of structures Ember does not have, replication
/// and defragmentation knobs, process-title and syslog settings. A configuration that sets
/// one is logged once ([`note_inert`]). Generated from the `static_configs` table of Redis
/// 7.0.15's `config.c` (names, bounds, defaults, mutability), less the directives Ember has
/// in [`DIRECTIVES`] and those it must not pretend to honour: `aclfile`, `unixsocket`,
/// `replicaof` and the TLS ones stay unknown (fatal), as in a Redis built without them.
static ACCEPTED: &[Directive] = &[
    Directive {
        name: "io-threads-do-reads",
        kind: Kind::Bool,
        default: "no",
        mutable: false,
    },
    Directive {
        name: "always-show-logo",
        kind: Kind::Bool,
        default: "no",
        mutable: false,
    },
    Directive {
        name: "rdb-del-sync-files",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "activerehashing",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "stop-writes-on-bgsave-error",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "set-proc-title",
        kind: Kind::Bool,
        default: "yes",
        mutable: false,
    },
    Directive {
        name: "dynamic-hz",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "lazyfree-lazy-eviction",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "lazyfree-lazy-expire",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "lazyfree-lazy-server-del",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "lazyfree-lazy-user-del",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "lazyfree-lazy-user-flush",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "repl-disable-tcp-nodelay",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "repl-diskless-sync",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "aof-rewrite-incremental-fsync",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "no-appendfsync-on-rewrite",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "cluster-require-full-coverage",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "rdb-save-incremental-fsync",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "aof-timestamp-enabled",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "cluster-replica-no-failover",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "replica-lazy-flush",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "replica-serve-stale-data",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "replica-read-only",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "replica-ignore-maxmemory",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "activedefrag",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "syslog-enabled",
        kind: Kind::Bool,
        default: "no",
        mutable: false,
    },
    Directive {
        name: "cluster-allow-reads-when-down",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "cluster-allow-pubsubshard-when-down",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "crash-log-enabled",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "crash-memcheck-enabled",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "use-exit-on-panic",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "cluster-allow-replica-migration",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "replica-announced",
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
    },
    Directive {
        name: "aof-disable-auto-gc",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "replica-ignore-disk-write-errors",
        kind: Kind::Bool,
        default: "no",
        mutable: true,
    },
    Directive {
        name: "pidfile",
        kind: Kind::Str,
        default: "",
        mutable: false,
    },
    Directive {
        name: "replica-announce-ip",
        kind: Kind::Str,
        default: "",
        mutable: true,
    },
    Directive {
        name: "cluster-announce-hostname",
        kind: Kind::Str,
        default: "",
        mutable: true,
    },
    Directive {
        name: "syslog-ident",
        kind: Kind::Str,
        default: "redis",
        mutable: false,
    },
    Directive {
        name: "server_cpulist",
        kind: Kind::Str,
        default: "",
        mutable: false,
    },
    Directive {
        name: "bio_cpulist",
        kind: Kind::Str,
        default: "",
        mutable: false,
    },
    Directive {
        name: "aof_rewrite_cpulist",
        kind: Kind::Str,
        default: "",
        mutable: false,
    },
    Directive {
        name: "bgsave_cpulist",
        kind: Kind::Str,
        default: "",
        mutable: false,
    },
    Directive {
        name: "ignore-warnings",
        kind: Kind::Str,
        default: "",
        mutable: true,
    },
    Directive {
        name: "proc-title-template",
        kind: Kind::Str,
        default: "{title} {listen-addr} {server-mode}",
        mutable: true,
    },
    Directive {
        name: "bind-source-addr",
        kind: Kind::Str,
        default: "",
        mutable: true,
    },
    Directive {
        name: "supervised",
        kind: Kind::Enum(&["upstart", "systemd", "auto", "no"]),
        default: "no",
        mutable: false,
    },
    Directive {
        name: "syslog-facility",
        kind: Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        default: "local0",
        mutable: false,
    },
    Directive {
        name: "repl-diskless-load",
        kind: Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        default: "disabled",
        mutable: true,
    },
    Directive {
        name: "oom-score-adj",
        kind: Kind::Enum(&["no", "yes", "relative", "absolute"]),
        default: "no",
        mutable: true,
    },
    Directive {
        name: "acl-pubsub-default",
        kind: Kind::Enum(&["allchannels", "resetchannels"]),
        default: "resetchannels",
        mutable: true,
    },
    Directive {
        name: "sanitize-dump-payload",
        kind: Kind::Enum(&["no", "yes", "clients"]),
        default: "no",
        mutable: true,
    },
    Directive {
        name: "enable-protected-configs",
        kind: Kind::Enum(&["no", "yes", "local"]),
        default: "no",
        mutable: false,
    },
    Directive {
        name: "enable-debug-command",
        kind: Kind::Enum(&["no", "yes", "local"]),
        default: "no",
        mutable: false,
    },
    Directive {
        name: "enable-module-command",
        kind: Kind::Enum(&["no", "yes", "local"]),
        default: "no",
        mutable: false,
    },
    Directive {
        name: "cluster-preferred-endpoint-type",
        kind: Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        default: "ip",
        mutable: true,
    },
    Directive {
        name: "propagation-error-behavior",
        kind: Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        default: "ignore",
        mutable: true,
    },
    Directive {
        name: "shutdown-on-sigint",
        kind: Kind::Words,
        default: "default",
        mutable: true,
    },
    Directive {
        name: "shutdown-on-sigterm",
        kind: Kind::Words,
        default: "default",
        mutable: true,
    },
    Directive {
        name: "io-threads",
        kind: Kind::Int { min: 1, max: 128 },
        default: "1",
        mutable: false,
    },
    Directive {
        name: "cluster-replica-validity-factor",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "10",
        mutable: true,
    },
    Directive {
        name: "list-max-listpack-size",
        kind: Kind::Int {
            min: -2147483648,
            max: 2147483647,
        },
        default: "-2",
        mutable: true,
    },
    Directive {
        name: "cluster-migration-barrier",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "1",
        mutable: true,
    },
    Directive {
        name: "active-defrag-cycle-min",
        kind: Kind::Int { min: 1, max: 99 },
        default: "1",
        mutable: true,
    },
    Directive {
        name: "active-defrag-cycle-max",
        kind: Kind::Int { min: 1, max: 99 },
        default: "25",
        mutable: true,
    },
    Directive {
        name: "active-defrag-threshold-lower",
        kind: Kind::Int { min: 0, max: 1000 },
        default: "10",
        mutable: true,
    },
    Directive {
        name: "active-defrag-threshold-upper",
        kind: Kind::Int { min: 0, max: 1000 },
        default: "100",
        mutable: true,
    },
    Directive {
        name: "replica-priority",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "100",
        mutable: true,
    },
    Directive {
        name: "repl-diskless-sync-delay",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "5",
        mutable: true,
    },
    Directive {
        name: "replica-announce-port",
        kind: Kind::Int { min: 0, max: 65535 },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "cluster-announce-bus-port",
        kind: Kind::Int { min: 0, max: 65535 },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "cluster-announce-port",
        kind: Kind::Int { min: 0, max: 65535 },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "cluster-announce-tls-port",
        kind: Kind::Int { min: 0, max: 65535 },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "repl-timeout",
        kind: Kind::Int {
            min: 1,
            max: 2147483647,
        },
        default: "60",
        mutable: true,
    },
    Directive {
        name: "repl-ping-replica-period",
        kind: Kind::Int {
            min: 1,
            max: 2147483647,
        },
        default: "10",
        mutable: true,
    },
    Directive {
        name: "list-compress-depth",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "rdb-key-save-delay",
        kind: Kind::Int {
            min: -2147483648,
            max: 2147483647,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "key-load-delay",
        kind: Kind::Int {
            min: -2147483648,
            max: 2147483647,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "active-expire-effort",
        kind: Kind::Int { min: 1, max: 10 },
        default: "1",
        mutable: true,
    },
    Directive {
        name: "min-replicas-to-write",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "min-replicas-max-lag",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "10",
        mutable: true,
    },
    Directive {
        name: "watchdog-period",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "shutdown-timeout",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "10",
        mutable: true,
    },
    Directive {
        name: "repl-diskless-sync-max-replicas",
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "unixsocketperm",
        kind: Kind::Str,
        default: "0",
        mutable: false,
    },
    Directive {
        name: "socket-mark-id",
        kind: Kind::Int {
            min: 0,
            max: 4294967295,
        },
        default: "0",
        mutable: false,
    },
    Directive {
        name: "active-defrag-max-scan-fields",
        kind: Kind::Int {
            min: 1,
            max: i64::MAX,
        },
        default: "1000",
        mutable: true,
    },
    Directive {
        name: "acllog-max-len",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "128",
        mutable: true,
    },
    Directive {
        name: "stream-node-max-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "100",
        mutable: true,
    },
    Directive {
        name: "repl-backlog-size",
        kind: Kind::Memory {
            min: 1,
            max: u64::MAX,
        },
        default: "1048576",
        mutable: true,
    },
    Directive {
        name: "cluster-link-sendbuf-limit",
        kind: Kind::Memory {
            min: 0,
            max: u64::MAX,
        },
        default: "0",
        mutable: true,
    },
    Directive {
        name: "hash-max-listpack-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "512",
        mutable: true,
    },
    Directive {
        name: "set-max-intset-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "512",
        mutable: true,
    },
    Directive {
        name: "zset-max-listpack-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "128",
        mutable: true,
    },
    Directive {
        name: "active-defrag-ignore-bytes",
        kind: Kind::Memory {
            min: 1,
            max: u64::MAX,
        },
        default: "104857600",
        mutable: true,
    },
    Directive {
        name: "hash-max-listpack-value",
        kind: Kind::Memory {
            min: 0,
            max: u64::MAX,
        },
        default: "64",
        mutable: true,
    },
    Directive {
        name: "stream-node-max-bytes",
        kind: Kind::Memory {
            min: 0,
            max: u64::MAX,
        },
        default: "4096",
        mutable: true,
    },
    Directive {
        name: "zset-max-listpack-value",
        kind: Kind::Memory {
            min: 0,
            max: u64::MAX,
        },
        default: "64",
        mutable: true,
    },
    Directive {
        name: "hll-sparse-max-bytes",
        kind: Kind::Memory {
            min: 0,
            max: u64::MAX,
        },
        default: "3000",
        mutable: true,
    },
    Directive {
        name: "maxmemory-clients",
        kind: Kind::Str,
        default: "0",
        mutable: true,
    },
    Directive {
        name: "repl-backlog-ttl",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "3600",
        mutable: true,
    },
    Directive {
        name: "loading-process-events-interval-bytes",
        kind: Kind::Int {
            min: 1024,
            max: 2147483647,
        },
        default: "2097152",
        mutable: true,
    },
    Directive {
        name: "oom-score-adj-values",
        kind: Kind::Words,
        default: "0 200 800",
        mutable: true,
    },
];

/// Redis's older names of directives (`slave-*`, `*-ziplist-*`, `lua-time-limit`): the
/// directive they stand for.
static ALIASES: &[(&str, &str)] = &[
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-read-only", "replica-read-only"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("slave-announce-ip", "replica-announce-ip"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("slave-priority", "replica-priority"),
    ("slave-announce-port", "replica-announce-port"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("lua-time-limit", "busy-reply-threshold"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
];

/// Directives CONFIG GET shows only when asked by their exact name, not to a pattern
/// (Redis's HIDDEN_CONFIG).
const HIDDEN: &[&str] = &[
    "use-exit-on-panic",
    "rdb-key-save-delay",
    "key-load-delay",
    "watchdog-period",
    "loading-process-events-interval-bytes",
];

/// The directive an alias stands for (or `name` itself).
fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(a, _)| a.eq_ignore_ascii_case(name))
        .map_or(name, |(_, n)| n)
}

fn directive(name: &str) -> Option<&'static Directive> {
    let name = canonical(name);
    DIRECTIVES
        .iter()
        .chain(ACCEPTED)
        .find(|d| d.name.eq_ignore_ascii_case(name))
}

/// True when `name` (or its alias) is a directive Ember accepts and keeps without acting on
/// it ([`ACCEPTED`]; `pidfile` is written, so it is not one).
pub fn is_inert(name: &str) -> bool {
    let name = canonical(name);
    name != "pidfile" && ACCEPTED.iter().any(|d| d.name.eq_ignore_ascii_case(name))
}

/// Logs, once per directive and process, that `name` is accepted and has no effect.
pub fn note_inert(name: &str) {
    static NOTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if !is_inert(name) {
        return;
    }
    let name = canonical(name).to_ascii_lowercase();
    let mut noted = NOTED.lock().unwrap_or_else(|e| e.into_inner());
    if !noted.contains(&name) {
        tracing::info!(
            "Directive '{name}' is accepted and kept for compatibility with Redis; it has no effect in Ember"
        );
        noted.push(name);
    }
}

/// Parses a Redis memory value: `1gb`, `512mb`, `100k` (1000), `100kb` (1024), `42`.
pub fn parse_memory(s: &str) -> Option<u64> {
    let l = s.to_ascii_lowercase();
    let (num, mul): (&str, u64) = if let Some(n) = l.strip_suffix("gb") {
        (n, 1 << 30)
    } else if let Some(n) = l.strip_suffix("mb") {
        (n, 1 << 20)
    } else if let Some(n) = l.strip_suffix("kb") {
        (n, 1 << 10)
    } else if let Some(n) = l.strip_suffix('g') {
        (n, 1_000_000_000)
    } else if let Some(n) = l.strip_suffix('m') {
        (n, 1_000_000)
    } else if let Some(n) = l.strip_suffix('k') {
        (n, 1000)
    } else if let Some(n) = l.strip_suffix('b') {
        (n, 1)
    } else {
        (&l, 1)
    };
    if num.is_empty() || !num.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// The node's configuration: normalised text of every directive.
#[derive(Clone, Debug)]
pub struct Config {
    values: BTreeMap<&'static str, String>,
    /// The directives set from a file or flags, in order (for [`Config::inert_set`]).
    set: Vec<&'static str>,
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("*** FATAL CONFIG FILE ERROR (Ember {version}) ***\nReading the configuration file, at line {line}\n>>> '{text}'\n{msg}")]
pub struct ConfigError {
    version: &'static str,
    line: usize,
    text: String,
    msg: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            values: DIRECTIVES
                .iter()
                .chain(ACCEPTED)
                .map(|d| (d.name, d.default.to_string()))
                .collect(),
            set: Vec::new(),
        }
    }
}

impl Config {
    /// The normalised value of a known directive ("" for unknown names).
    pub fn get(&self, name: &str) -> &str {
        let name = canonical(name);
        if let Some(v) = self.values.get(name) {
            return v;
        }
        self.values
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// The directives set so far (file, flags, CONFIG SET) that Ember keeps without acting
    /// on them ([`is_inert`]), each once.
    pub fn inert_set(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self.set.iter().copied().filter(|n| is_inert(n)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// An integer or memory directive.
    pub fn get_u64(&self, name: &str) -> u64 {
        self.get(name).parse().unwrap_or(0)
    }

    /// A yes/no directive.
    pub fn get_bool(&self, name: &str) -> bool {
        self.get(name) == "yes"
    }

    /// (name, value) of every directive matching the glob `pattern`, case-insensitively.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> = self
            .values
            .iter()
            .filter(|(k, _)| glob_match(pattern, k.as_bytes(), true))
            // Redis's hidden configs answer only to their exact name.
            .filter(|(k, _)| !HIDDEN.contains(k) || k.as_bytes().eq_ignore_ascii_case(pattern))
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        // An alias asked by its exact name answers under that name, as in Redis.
        if let Some((alias, name)) = ALIASES
            .iter()
            .find(|(a, _)| a.as_bytes().eq_ignore_ascii_case(pattern))
        {
            out.push((alias, self.get(name).to_string()));
        }
        out
    }

    /// True when `name` is a known directive.
    pub fn is_known(name: &str) -> bool {
        directive(name).is_some()
    }

    /// Sets a directive from its arguments. `runtime` applies CONFIG SET rules (immutable
    /// directives refused). The error text is the part after Redis's
    /// "CONFIG SET failed (possibly related to argument 'x') - ".
    pub fn set(&mut self, name: &str, args: &[String], runtime: bool) -> Result<(), String> {
        let d = directive(name)
            .ok_or_else(|| "Bad directive or wrong number of arguments".to_string())?;
        if runtime && !d.mutable {
            return Err("can't set immutable config".into());
        }
        let value = normalise(d, args, self.get(d.name))?;
        self.values.insert(d.name, value);
        if !self.set.contains(&d.name) {
            self.set.push(d.name);
        }
        Ok(())
    }

    /// Parses redis.conf-style text: one directive per line, `#` comments, quoted args.
    pub fn apply_text(&mut self, text: &str) -> Result<(), ConfigError> {
        let mut parser = RequestParser::new(Limits {
            max_inline_len: usize::MAX,
            ..Limits::default()
        });
        let mut spans = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |msg: String| ConfigError {
                version: env!("CARGO_PKG_VERSION"),
                line: i + 1,
                text: line.to_string(),
                msg,
            };
            let mut bytes = line.as_bytes().to_vec();
            bytes.push(b'\n');
            parser.reset();
            let args: Vec<String> = match parser.parse(&bytes, &mut spans) {
                Ok(Some((_, RequestKind::Inline))) => spans
                    .iter()
                    .map(|&(s, e)| String::from_utf8_lossy(&parser.inline_buf()[s..e]).into_owned())
                    .collect(),
                _ => return Err(fail("Unbalanced quotes in configuration line".into())),
            };
            let Some((name, rest)) = args.split_first() else {
                continue;
            };
            if rest.is_empty()
                && !matches!(
                    directive(name).map(|d| d.kind),
                    Some(Kind::Str | Kind::Events)
                )
            {
                return Err(fail("Bad directive or wrong number of arguments".into()));
            }
            self.set(name, rest, false).map_err(fail)?;
        }
        Ok(())
    }

    /// Builds a configuration from command-line arguments: `[config-file] [--name value ...]`,
    /// like redis-server (flags are applied after the file).
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut cfg = Config::default();
        let mut rest = args;
        if let Some(first) = rest.first() {
            if !first.starts_with("--") {
                let text = std::fs::read_to_string(first)
                    .map_err(|e| format!("Fatal error, can't open config file '{first}': {e}"))?;
                cfg.apply_text(&text).map_err(|e| e.to_string())?;
                rest = &rest[1..];
            }
        }
        let mut text = String::new();
        for a in rest {
            if let Some(name) = a.strip_prefix("--") {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(name);
            } else {
                text.push(' ');
                text.push_str(&quote(a));
            }
        }
        cfg.apply_text(&text).map_err(|e| e.to_string())?;
        Ok(cfg)
    }
}

/// Quotes an argument so the line splitter gives it back unchanged.
fn quote(a: &str) -> String {
    let mut s = String::from("\"");
    for c in a.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// The value `args` set `d` to, given its `current` one (which only
/// `client-output-buffer-limit` builds on).
fn normalise(d: &Directive, args: &[String], current: &str) -> Result<String, String> {
    let one = || -> Result<&str, String> {
        match args {
            [a] => Ok(a.as_str()),
            [] => Ok(""),
            _ => Err("wrong number of arguments".into()),
        }
    };
    match d.kind {
        Kind::Int { min, max } => {
            let v: i64 = one()?
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if v < min || v > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(v.to_string())
        }
        Kind::Memory { min, max } => {
            let v = parse_memory(one()?)
                .ok_or_else(|| "argument must be a memory value".to_string())?;
            if v < min || v > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(v.to_string())
        }
        Kind::Bool => match one()?.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Str => Ok(one()?.to_string()),
        Kind::FileName => {
            let v = one()?;
            if v.contains('/') || v.is_empty() {
                return Err(format!("{} can't be a path, just a filename", d.name));
            }
            Ok(v.to_string())
        }
        Kind::Enum(opts) => {
            let v = one()?.to_ascii_lowercase();
            if opts.contains(&v.as_str()) {
                Ok(v)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    opts.join(", ")
                ))
            }
        }
        Kind::Words => {
            let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
            if words.is_empty() {
                return Err("wrong number of arguments".into());
            }
            Ok(words.join(" "))
        }
        Kind::Percentiles => {
            let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
            for w in &words {
                match w.parse::<f64>() {
                    Ok(v) if (0.0..=100.0).contains(&v) => {}
                    Ok(_) => {
                        return Err(
                            "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into(),
                        )
                    }
                    Err(_) => return Err("Invalid latency-tracking-info-percentiles parameters".into()),
                }
            }
            Ok(words.join(" "))
        }
        Kind::SavePoints => {
            let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
            if !words.len().is_multiple_of(2) || words.iter().any(|w| w.parse::<u64>().is_err()) {
                return Err("Invalid save parameters".into());
            }
            Ok(words.join(" "))
        }
        // Kept as given: the canonical text Redis shows drops `n` next to `A`, so it could
        // not be read back; CONFIG GET shows the canonical form.
        Kind::Events => {
            let v = one()?;
            crate::notify::parse_flags(v)
                .map(|_| v.to_string())
                .ok_or_else(|| crate::notify::INVALID.to_string())
        }
        Kind::OutputLimits => {
            let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
            crate::obuf::merge(current, &words)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn defaults_and_flags() {
        let c = Config::from_args(&argv(&[
            "--port",
            "7001",
            "--save",
            "",
            "--appendonly",
            "no",
        ]))
        .unwrap();
        assert_eq!(c.get("port"), "7001");
        assert_eq!(c.get("save"), "");
        assert_eq!(c.get_u64("proto-max-bulk-len"), 512 * 1024 * 1024);
        assert!(c.get_bool("protected-mode"));
        let c = Config::from_args(&argv(&["--bind", "127.0.0.1", "::1"])).unwrap();
        assert_eq!(c.get("bind"), "127.0.0.1 ::1");
    }

    #[test]
    fn file_errors_name_the_line() {
        let mut c = Config::default();
        let e = c
            .apply_text("port 7000\n# comment\nbogus-directive 1\n")
            .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("at line 3"), "{msg}");
        assert!(msg.contains("bogus-directive 1"), "{msg}");
        assert!(c.apply_text("port notanumber").is_err());
        assert!(c.apply_text("appendfsync sometimes").is_err());
        assert!(c.apply_text("appenddirname a/b").is_err());
        c.apply_text("appendonly yes\nappendfsync always\nauto-aof-rewrite-min-size 1mb")
            .unwrap();
        assert!(c.get_bool("appendonly"));
        assert_eq!(c.get("appendfsync"), "always");
        assert_eq!(c.get_u64("auto-aof-rewrite-min-size"), 1 << 20);
        c.apply_text("maxclients 5\nrequirepass \"a b\"\nproto-max-bulk-len 2mb")
            .unwrap();
        assert_eq!(c.get("maxclients"), "5");
        assert_eq!(c.get("requirepass"), "a b");
        assert_eq!(c.get("proto-max-bulk-len"), "2097152");
    }

    #[test]
    fn runtime_rules() {
        let mut c = Config::default();
        assert_eq!(
            c.set("databases", &argv(&["4"]), true).unwrap_err(),
            "can't set immutable config"
        );
        assert!(c.set("maxclients", &argv(&["x"]), true).is_err());
        c.set("loglevel", &argv(&["WARNING"]), true).unwrap();
        assert_eq!(c.get("loglevel"), "warning");
        let m = c.matching(b"maxc*");
        assert_eq!(m, vec![("maxclients", "10000".to_string())]);
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("100k"), Some(100_000));
        assert_eq!(parse_memory("x"), None);
    }

    #[test]
    fn redis_directives_are_kept_with_their_bounds_and_aliases() {
        let mut c = Config::default();
        assert_eq!(c.get("hash-max-listpack-entries"), "512");
        assert_eq!(c.get("hash-max-ziplist-entries"), "512", "alias");
        c.set("slave-read-only", &argv(&["no"]), false).unwrap();
        assert_eq!(c.get("replica-read-only"), "no");
        c.set("list-max-listpack-size", &argv(&["-5"]), true)
            .unwrap();
        assert!(c.set("active-expire-effort", &argv(&["11"]), true).is_err());
        assert!(
            c.set("io-threads", &argv(&["4"]), true).is_err(),
            "immutable"
        );
        c.set("repl-backlog-size", &argv(&["2mb"]), true).unwrap();
        assert_eq!(c.get("repl-backlog-size"), "2097152");
        assert_eq!(
            c.matching(b"lua-time-limit"),
            vec![("lua-time-limit", "5000".to_string())]
        );
        assert_eq!(
            c.inert_set(),
            vec![
                "list-max-listpack-size",
                "repl-backlog-size",
                "replica-read-only"
            ]
        );
        assert!(is_inert("slave-read-only") && !is_inert("pidfile") && !is_inert("maxmemory"));
        for missing in ["aclfile", "unixsocket", "replicaof", "tls-port"] {
            assert!(!Config::is_known(missing), "{missing}");
        }
    }

    #[test]
    fn hidden_directives_answer_only_their_exact_name() {
        let c = Config::default();
        assert!(c.matching(b"*").iter().all(|(k, _)| !HIDDEN.contains(k)));
        assert!(c.matching(b"key-load-*").is_empty());
        assert_eq!(c.matching(b"KEY-LOAD-DELAY").len(), 1);
        for h in HIDDEN {
            assert!(Config::is_known(h), "{h}");
        }
    }

    #[test]
    fn accepted_defaults_normalise_to_themselves() {
        // Every kept directive's default is a value it accepts, unchanged.
        for d in ACCEPTED {
            let mut c = Config::default();
            let args: Vec<String> = match d.kind {
                Kind::Words => d.default.split(' ').map(str::to_string).collect(),
                _ => vec![d.default.to_string()],
            };
            c.set(d.name, &args, false)
                .unwrap_or_else(|e| panic!("{}: {e}", d.name));
            assert_eq!(c.get(d.name), d.default, "{}", d.name);
        }
    }
}
