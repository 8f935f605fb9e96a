//! BGREWRITEAOF without fork: a new base walked shard by shard while writes go on, then the manifest swapped.

use super::*;

// ------------------------------------------------------------------------------------------
// Rewrite

/// How BGREWRITEAOF was answered.
pub enum Bg {
    /// Started.
    Started,
    /// One is already running.
    Running,
}

/// Starts a rewrite on its own thread (BGREWRITEAOF, `appendonly yes` at run time,
/// automatic rewrite).
pub fn bgrewrite(server: &Arc<Server>) -> Result<Bg, String> {
    let aof = &server.aof;
    if aof.rewriting.swap(true, Relaxed) {
        return Ok(Bg::Running);
    }
    let srv = server.clone();
    let spawned = std::thread::Builder::new()
        .name("ember-aofrw".into())
        .spawn(move || {
            // Turning the AOF on at run time: propagation starts with every worker
            // stopped between commands, so no write escapes both the log and the base.
            let want = srv.config.read().get_bool("appendonly");
            if want && !srv.aof.on.load(Relaxed) {
                let gates = srv.lock_gates();
                srv.aof.on.store(true, Relaxed);
                drop(gates);
            }
            let _ = rewrite_marked(&srv);
        });
    if let Err(e) = spawned {
        aof.rewriting.store(false, Relaxed);
        return Err(format!("can't start the rewrite thread: {e}"));
    }
    Ok(Bg::Started)
}

pub(super) fn fail(aof: &Aof) {
    aof.last_rewrite_ok.store(false, Relaxed);
    aof.failures.fetch_add(1, Relaxed);
    aof.last_rewrite_fail.store(now_s(), Relaxed);
}

/// A rewrite in the calling thread (start-up).
pub(super) fn rewrite(server: &Arc<Server>) -> Result<(), String> {
    if server.aof.rewriting.swap(true, Relaxed) {
        return Err("a rewrite is already running".into());
    }
    rewrite_marked(server)
}

/// The rewrite itself; `rewriting` is already set and is cleared here.
pub(super) fn rewrite_marked(server: &Arc<Server>) -> Result<(), String> {
    let aof = &server.aof;
    aof.abort.store(false, Relaxed);
    aof.rewrite_started.store(now_s(), Relaxed);
    let t0 = Instant::now();
    info!("Background append only file rewriting started");
    let r = rewrite_inner(server);
    aof.last_rewrite_secs
        .store(t0.elapsed().as_secs() as i64, Relaxed);
    match &r {
        Ok(()) => {
            aof.last_rewrite_ok.store(true, Relaxed);
            aof.rewrites.fetch_add(1, Relaxed);
            aof.failures.store(0, Relaxed);
            info!("Background AOF rewrite finished successfully");
        }
        Err(e) => {
            warn!("Background AOF rewrite failed: {e}");
            fail(aof);
        }
    }
    aof.rewriting.store(false, Relaxed);
    r
}

/// Undoes a rewrite that did not finish: forgets the next incr file and the temp base.
pub(super) fn cleanup(aof: &Aof, tmp: &Path) {
    aof.acquire();
    let next = {
        let mut f = aof.files.lock();
        aof.buf.lock().rewrite = None;
        f.next.take()
    };
    aof.release();
    if let Some((_, name, _)) = next {
        let dir = aof.files.lock().dir.clone();
        let _ = std::fs::remove_file(dir.join(name));
    }
    let _ = std::fs::remove_file(tmp);
}

pub(super) fn rewrite_inner(server: &Arc<Server>) -> Result<(), String> {
    let aof = &server.aof;
    let (preamble, compress) = {
        let c = server.config.read();
        (
            c.get_bool("aof-use-rdb-preamble"),
            c.get_bool("rdbcompression"),
        )
    };
    let ks = &server.keyspace;
    let shards = ks.shard_count();
    // With `appendonly no` (BGREWRITEAOF), only a base and a manifest naming it are written.
    let live = aof.on.load(Relaxed);
    let dir = {
        let mut f = aof.files.lock();
        if f.prefix.is_empty() {
            (f.dir, f.prefix) = aof_dir(server);
        }
        f.dir.clone()
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("Can't create the AOF directory {}: {e}", dir.display()))?;
    let tmp = dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    // Start: drain the old incr file, open the next one, start the filtered stream.
    aof.acquire();
    let started = (|| -> std::io::Result<Vec<Vec<u8>>> {
        let mut f = aof.files.lock();
        aof.write_locked(&mut f);
        let seq = f.manifest.last_incr_seq().max(f.manifest.base_seq()) + 1;
        let name = incr_name(&f.prefix, seq);
        let file = File::create(f.dir.join(&name))?;
        f.next = Some((file, name, seq));
        aof.buf.lock().rewrite = Some(RewriteBuf {
            out: Stream::fresh(),
            visited: vec![false; shards],
            nvisited: 0,
            failed: None,
        });
        Ok(server.scripting.func.lock().library_codes())
    })();
    aof.release();
    let libs = match started {
        Ok(l) => l,
        Err(e) => {
            cleanup(aof, &tmp);
            return Err(format!("can't open the new incr file: {e}"));
        }
    };
    let walked = walk(server, &tmp, &libs, preamble, compress);
    if let Err(e) = walked {
        cleanup(aof, &tmp);
        return Err(e);
    }
    // Finish: swap the files under the token.
    aof.acquire();
    let done = (|| -> Result<Vec<String>, String> {
        if aof.abort.load(Relaxed) {
            return Err("rewrite aborted".into());
        }
        if let Some(why) = aof
            .buf
            .lock()
            .rewrite
            .as_ref()
            .and_then(|r| r.failed.clone())
        {
            return Err(why);
        }
        let mut f = aof.files.lock();
        aof.write_locked(&mut f);
        let f = &mut *f;
        let Some((next, next_name, incr_seq)) = f.next.take() else {
            return Err("the new incr file is gone".into());
        };
        next.sync_all()
            .map_err(|e| format!("fsync of the new incr file: {e}"))?;
        let base_seq = f.manifest.base_seq() + 1;
        let bname = base_name(&f.prefix, base_seq, preamble);
        std::fs::rename(&tmp, f.dir.join(&bname))
            .map_err(|e| format!("can't rename the new base: {e}"))?;
        let mut m = Manifest {
            base: Some(AofFile {
                name: bname.clone(),
                seq: base_seq,
                kind: FileKind::Base,
            }),
            history: Vec::new(),
            incrs: if live {
                vec![AofFile {
                    name: next_name.clone(),
                    seq: incr_seq,
                    kind: FileKind::Incr,
                }]
            } else {
                Vec::new()
            },
        };
        if let Err(e) = write_manifest(&f.dir, &f.prefix, &m) {
            let _ = std::fs::remove_file(f.dir.join(&bname));
            f.next = Some((next, next_name, incr_seq));
            return Err(format!("can't write the manifest: {e}"));
        }
        let old: Vec<String> = f
            .manifest
            .base
            .iter()
            .chain(f.manifest.history.iter())
            .chain(f.manifest.incrs.iter())
            .map(|x| x.name.clone())
            .filter(|n| *n != bname && *n != next_name)
            .collect();
        std::mem::swap(&mut f.manifest, &mut m);
        let base_len = file_len(&f.dir.join(&bname));
        aof.base_size.store(base_len, Relaxed);
        if !live {
            drop(next);
            let _ = std::fs::remove_file(f.dir.join(&next_name));
            aof.buf.lock().rewrite = None;
            return Ok(old);
        }
        let next_len = file_len(&f.dir.join(&next_name));
        f.incr = Some(next);
        f.incr_len = next_len;
        let mut b = aof.buf.lock();
        let rw = b.rewrite.take();
        b.main = Stream {
            data: Vec::new(),
            db: rw.as_ref().and_then(|r| r.out.db),
            now: rw.as_ref().map_or(0, |r| r.out.now),
            marked: rw.as_ref().is_some_and(|r| r.out.marked),
        };
        b.main_on = true;
        aof.current_size.store(base_len + next_len, Relaxed);
        aof.rewrite_base_size.store(base_len + next_len, Relaxed);
        Ok(old)
    })();
    aof.release();
    match done {
        Ok(old) => {
            for n in old {
                let _ = std::fs::remove_file(dir.join(n));
            }
            Ok(())
        }
        Err(e) => {
            cleanup(aof, &tmp);
            Err(e)
        }
    }
}

/// Where the new base goes.
pub(super) enum Sink {
    Rdb(rdb::Writer<std::io::BufWriter<File>>),
    Text(std::io::BufWriter<File>),
}

/// Writes the new base to `tmp`: functions, then each shard under the order token.
pub(super) fn walk(
    server: &Server,
    tmp: &Path,
    libs: &[Vec<u8>],
    preamble: bool,
    compress: bool,
) -> Result<(), String> {
    let aof = &server.aof;
    let ks = &server.keyspace;
    let io = |e: std::io::Error| format!("can't write the new base: {e}");
    let file = File::create(tmp).map_err(io)?;
    let out = std::io::BufWriter::with_capacity(1 << 20, file);
    // The RDB preamble, or RESTORE commands (`aof-use-rdb-preamble no`).
    let mut text = Vec::new();
    let mut w = if preamble {
        let mut w = rdb::Writer::new(out, compress).map_err(io)?;
        w.aux(
            b"redis-ver",
            crate::cmd::connection::REDIS_COMPAT_VERSION.as_bytes(),
        )
        .map_err(io)?;
        w.aux(b"redis-bits", b"64").map_err(io)?;
        w.aux(b"ctime", now_s().to_string().as_bytes())
            .map_err(io)?;
        w.aux(b"used-mem", b"0").map_err(io)?;
        w.aux(b"aof-base", b"1").map_err(io)?;
        for code in libs {
            w.function(code).map_err(io)?;
        }
        Sink::Rdb(w)
    } else {
        encode_format(&mut text);
        for code in libs {
            encode_command(&mut text, &effects::function_load(code));
        }
        Sink::Text(out)
    };
    let mut text_db: Option<usize> = None;
    for shard in 0..ks.shard_count() {
        if aof.abort.load(Relaxed) {
            return Err("rewrite aborted".into());
        }
        let mut parts: Vec<(usize, u64, u64, Vec<u8>)> = Vec::new();
        aof.acquire();
        ks.with_shard(shard, |sh| {
            for db in 0..ks.db_count() {
                let t = sh.table_ref(db);
                if t.is_empty() {
                    continue;
                }
                let mut buf = Vec::new();
                // Every key physically present, expired or not: the keys' state as the
                // commands after this visit see it (see `load_from_opts`).
                t.for_each_live(0, |k, e| {
                    let tags = t.tags_of(k);
                    let at = e.expire_at().unwrap_or(0);
                    if preamble {
                        let tags: Vec<&[u8]> = tags.iter().map(|t| &t[..]).collect();
                        rdb::encode_key(&mut buf, k, &e.value, at, &tags, compress);
                    } else {
                        let mut eff = Effect::new(db, 0);
                        let ms = if at.is_multiple_of(NS_PER_MS) {
                            at / NS_PER_MS
                        } else {
                            0
                        };
                        eff.cmd(&effects::restore(k, ms, rdb::dump_payload(&e.value)));
                        if at != 0 && ms == 0 {
                            ttl_cmd(&mut eff, k, at);
                        }
                        if !tags.is_empty() {
                            eff.cmd(&effects::tags(k, tags));
                        }
                        buf.extend_from_slice(&eff.resp);
                    }
                });
                parts.push((db, t.len() as u64, t.volatile_len() as u64, buf));
            }
        });
        if let Some(rw) = aof.buf.lock().rewrite.as_mut() {
            rw.visited[shard] = true;
            rw.nvisited += 1;
        }
        aof.release();
        for (db, n, vol, bytes) in parts {
            match &mut w {
                Sink::Rdb(w) => {
                    w.select_db(db, n, vol).map_err(io)?;
                    w.write_raw(&bytes).map_err(io)?;
                }
                Sink::Text(out) => {
                    if text_db != Some(db) {
                        encode_command(&mut text, &effects::select(db));
                        text_db = Some(db);
                    }
                    text.extend_from_slice(&bytes);
                    if text.len() > 1 << 20 {
                        out.write_all(&text).map_err(io)?;
                        text.clear();
                    }
                }
            }
        }
    }
    let out = match w {
        Sink::Rdb(w) => w.finish().map_err(io)?,
        Sink::Text(mut out) => {
            out.write_all(&text).map_err(io)?;
            out
        }
    };
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok(())
}
