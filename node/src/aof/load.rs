//! Start-up: loading the AOF directory (base and incr files, each command at its recorded time) and opening it for appending.

use super::*;

// ------------------------------------------------------------------------------------------
// Start-up: loading and opening

/// With `appendonly yes` and an AOF manifest present, loads the AOF (base, then incr files)
/// into the empty keyspace; true when it did (the RDB is then not loaded). A damaged file
/// is an error naming the file and offset; a torn last command is cut off with a warning
/// when `aof-load-truncated` is yes.
pub fn load_at_startup(server: &Arc<Server>) -> Result<bool, String> {
    let (on, truncated_ok, max_bulk) = {
        let c = server.config.read();
        (
            c.get_bool("appendonly"),
            c.get_bool("aof-load-truncated"),
            c.get_u64("proto-max-bulk-len"),
        )
    };
    if !on {
        return Ok(false);
    }
    let (dir, prefix) = aof_dir(server);
    let mpath = dir.join(manifest_name(&prefix));
    let text = match std::fs::read(&mpath) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(format!(
                "Fatal error: can't open the AOF manifest {} for reading: {e}",
                mpath.display()
            ))
        }
    };
    let m = Manifest::parse(&text).map_err(|e| {
        format!(
            "*** FATAL AOF MANIFEST FILE ERROR *** {}: {e}",
            mpath.display()
        )
    })?;
    let t0 = Instant::now();
    let files: Vec<&AofFile> = m.base.iter().chain(m.incrs.iter()).collect();
    for f in &files {
        if !dir.join(&f.name).exists() {
            return Err(format!(
                "The append log file {} doesn't exist (listed in the manifest)",
                f.name
            ));
        }
    }
    let mut total = 0u64;
    let mut base_size = 0u64;
    for (i, f) in files.iter().enumerate() {
        let last = i + 1 == files.len();
        let path = dir.join(&f.name);
        let size = load_file(server, &path, &f.name, last, truncated_ok, max_bulk)?;
        if f.kind == FileKind::Base {
            base_size = size;
            info!("DB loaded from base file {}", f.name);
        } else {
            info!("DB loaded from incr file {}", f.name);
        }
        total += size;
    }
    let aof = &server.aof;
    aof.current_size.store(total, Relaxed);
    aof.base_size.store(base_size, Relaxed);
    aof.rewrite_base_size.store(base_size, Relaxed);
    *aof.files.lock() = Files {
        dir,
        prefix,
        manifest: m,
        ..Files::default()
    };
    info!(
        "DB loaded from append only file: {:.3} seconds",
        t0.elapsed().as_secs_f64()
    );
    Ok(true)
}

/// Loads one AOF file (RDB or commands); returns its size after any truncation.
pub(super) fn load_file(
    server: &Arc<Server>,
    path: &Path,
    name: &str,
    last: bool,
    truncated_ok: bool,
    max_bulk: u64,
) -> Result<u64, String> {
    let mut f = File::open(path).map_err(|e| {
        format!("Fatal error: can't open the append log file {name} for reading: {e}")
    })?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len == 0 {
        return Ok(0);
    }
    let mut sig = [0u8; 5];
    let is_rdb = f.read_exact(&mut sig).is_ok() && &sig == b"REDIS";
    drop(f);
    let f = File::open(path).map_err(|e| format!("can't open {name}: {e}"))?;
    if is_rdb {
        crate::snapshot::load_from_opts(server, BufReader::with_capacity(1 << 20, f), true)
            .map_err(|e| {
                format!("Error reading the RDB base file {name}: {e}. AOF loading aborted")
            })?;
        return Ok(len);
    }
    let mut reader = CommandReader::new(BufReader::with_capacity(1 << 20, f), max_bulk);
    let mut rep = Replayer::new(server);
    let cut = loop {
        let at = reader.offset();
        match reader.next_item() {
            Ok(None) => {
                if rep.in_multi() {
                    warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
                    break Some(rep.multi_start);
                }
                break None;
            }
            Ok(Some(item)) => {
                if let Some(t) = item.now_ns() {
                    rep.now = t;
                } else if let Item::Command(args) = item {
                    rep.command(args, at).map_err(|e| {
                        format!("{e} reading the append only file {name} at offset {at}")
                    })?;
                }
            }
            Err(ReadError::Truncated { offset }) => {
                break Some(if rep.in_multi() {
                    rep.multi_start
                } else {
                    offset
                });
            }
            Err(ReadError::Corrupt { offset, msg }) => {
                return Err(format!(
                    "Bad file format reading the append only file {name} at offset {offset}: {msg}. Make a backup of your AOF file, then use redis-check-aof --fix <filename.manifest>"
                ));
            }
            Err(e @ ReadError::NewerFormat { .. }) => {
                return Err(format!(
                    "Can't load the append only file {name}: {e}. Exiting."
                ))
            }
            Err(ReadError::Io(e)) => {
                return Err(format!(
                    "Unrecoverable error reading the append only file {name}: {e}"
                ))
            }
        }
    };
    let Some(valid) = cut else {
        return Ok(len);
    };
    if !last {
        return Err(format!(
            "Unexpected end of file reading the append only file {name} at offset {valid}: only the last file may be truncated"
        ));
    }
    if !truncated_ok {
        return Err(format!(
            "Unexpected end of file reading the append only file {name} (last complete command ends at offset {valid} of {len}). You can: 1) Make a backup of your AOF file, then use redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
        ));
    }
    warn!("!!! Warning: short read while loading the AOF file {name}!!!");
    warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(valid))
        .map_err(|e| format!("Error truncating the AOF file {name}: {e}"))?;
    warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
    Ok(valid)
}

/// Runs an AOF's commands as a client that never blocks and whose replies are dropped,
/// each at the time its annotation gives (0, where nothing expires, before any).
pub(super) struct Replayer<'s> {
    server: &'s Arc<Server>,
    client: Client,
    now: u64,
    multi: Option<Vec<(Vec<Vec<u8>>, u64)>>,
    multi_start: u64,
}

impl<'s> Replayer<'s> {
    pub(super) fn new(server: &'s Arc<Server>) -> Self {
        let addr: std::net::SocketAddr = ([0, 0, 0, 0], 0).into();
        let mut client = Client::new(Arc::new(ClientInfo::new(0, addr, addr, -1)), true);
        client.block_mode = BlockMode::NoBlock;
        Replayer {
            server,
            client,
            now: 0,
            multi: None,
            multi_start: 0,
        }
    }

    pub(super) fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    pub(super) fn command(&mut self, args: Vec<Vec<u8>>, at: u64) -> Result<(), String> {
        if effects::opens_block(&args[0]) {
            self.multi = Some(Vec::new());
            self.multi_start = at;
            return Ok(());
        }
        if effects::closes_block(&args[0]) {
            for (a, at) in self.multi.take().unwrap_or_default() {
                self.run(a, at)?;
            }
            return Ok(());
        }
        if let Some(q) = self.multi.as_mut() {
            q.push((args, at));
            return Ok(());
        }
        self.run(args, at)
    }

    pub(super) fn run(&mut self, args: Vec<Vec<u8>>, _at: u64) -> Result<(), String> {
        let mut owned = OwnedArgs::default();
        for a in &args {
            owned.push(a);
        }
        let a = owned.args();
        let reg = &self.server.registry;
        let show = || String::from_utf8_lossy(&args[0]).into_owned();
        let idx = reg.resolve(&a).map_err(|why| match why {
            Unresolved::Unknown => format!("Unknown command '{}'", show()),
            _ => format!("Unknown subcommand of '{}'", show()),
        })?;
        let spec = reg.entry(idx).spec;
        if !spec.arity_ok(a.len()) {
            return Err(format!("Wrong number of arguments for '{}'", show()));
        }
        let Some(h) = spec.handler else {
            return Ok(());
        };
        let mut out = ReplyWriter::new(Protocol::Resp2);
        let mut ctx = Ctx {
            server: self.server,
            client: &mut self.client,
            out: &mut out,
            stats: &self.server.workers[0],
            now: self.now,
            rng: CmdRng::Thread,
            park: None,
        };
        // Errors are ignored, as Redis ignores the replies of AOF commands.
        let _ = h(&mut ctx, a);
        self.client.block_request = None;
        self.client.ready_keys.clear();
        drop(storage::events::take());
        Ok(())
    }
}

/// After loading: with `appendonly yes`, opens the AOF for appending (creating the base,
/// an incr file and the manifest when there is none yet) and turns propagation on, before
/// any client connects. Starts the background thread either way.
pub fn start(server: &Arc<Server>) -> Result<(), String> {
    let (on, policy) = {
        let c = server.config.read();
        (c.get_bool("appendonly"), policy_of(c.get("appendfsync")))
    };
    let aof = &server.aof;
    aof.policy.store(policy, Relaxed);
    spawn_thread(server)?;
    if !on {
        return Ok(());
    }
    let (dir, prefix) = aof_dir(server);
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("Can't create the AOF directory {}: {e}", dir.display()))?;
    let has_manifest = aof.files.lock().manifest != Manifest::default();
    if has_manifest {
        open_for_append(server).map_err(|e| format!("Can't open the append-only file: {e}"))?;
        aof.on.store(true, Relaxed);
        return Ok(());
    }
    // No AOF yet: write a base of what is loaded (nothing runs concurrently yet).
    {
        let mut f = aof.files.lock();
        f.dir = dir;
        f.prefix = prefix;
    }
    aof.on.store(true, Relaxed);
    info!("Creating AOF base file on server start");
    rewrite(server).map_err(|e| format!("Can't create the AOF base file: {e}"))
}

/// Opens the last incr file of the loaded manifest for appending (creating one when the
/// manifest has none).
pub(super) fn open_for_append(server: &Server) -> std::io::Result<()> {
    let aof = &server.aof;
    let mut f = aof.files.lock();
    let f = &mut *f;
    if f.manifest.incrs.is_empty() {
        let seq = f.manifest.last_incr_seq().max(f.manifest.base_seq()) + 1;
        let name = incr_name(&f.prefix, seq);
        File::create(f.dir.join(&name))?;
        f.manifest.incrs.push(AofFile {
            name,
            seq,
            kind: FileKind::Incr,
        });
        write_manifest(&f.dir, &f.prefix, &f.manifest)?;
    }
    let last = f
        .manifest
        .incrs
        .last()
        .map(|i| i.name.clone())
        .unwrap_or_default();
    let path = f.dir.join(&last);
    let file = OpenOptions::new().append(true).create(true).open(&path)?;
    f.incr_len = file_len(&path);
    f.incr = Some(file);
    let mut b = aof.buf.lock();
    b.main = Stream::fresh();
    b.main_on = true;
    Ok(())
}
