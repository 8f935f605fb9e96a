//! Appending to the in-memory streams and writing them to the incr file before replies leave (the order of writes, fsync policies, the rewrite's filtered stream).

use super::*;

// ------------------------------------------------------------------------------------------
// Appending and writing

impl Aof {
    /// Whether commands are being appended.
    pub fn on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// Takes the order token (blocks while another thread holds it).
    pub(super) fn acquire(&self) {
        let mut held = self.token.lock();
        while *held {
            self.token_cv.wait(&mut held);
        }
        *held = true;
    }

    /// Gives the order token back.
    pub(super) fn release(&self) {
        *self.token.lock() = false;
        self.token_cv.notify_one();
    }

    /// Appends one command's effects (or those of an EXEC/script) to the buffers. Called
    /// with the order token held.
    pub(super) fn append(&self, server: &Server, effects: &[Effect]) {
        let refs: Vec<&Effect> = effects.iter().collect();
        let class = {
            let mut b = self.buf.lock();
            if b.main_on {
                let before = b.main.data.len();
                b.main.emit(&refs);
                let added = (b.main.data.len() - before) as u64;
                self.appended.fetch_add(added, Release);
            }
            match b.rewrite.as_mut() {
                None => return,
                Some(rw) => classify(server, rw, effects),
            }
        };
        // The token is held: the walk cannot move on while the state is read.
        let extra = match class {
            Class::Skip => return,
            Class::Include => None,
            Class::Restore(keys) => {
                let mut e = Effect::new(effects[0].db, effects[0].now);
                for (db, k) in &keys {
                    restore_state(server, &mut e, *db, k);
                }
                Some(e)
            }
        };
        let mut b = self.buf.lock();
        if let Some(rw) = b.rewrite.as_mut() {
            match &extra {
                None => rw.out.emit(&refs),
                Some(e) => rw.out.emit(&[e]),
            }
        }
    }

    /// Before replies are sent: writes what was appended (and, with `appendfsync always`,
    /// fsyncs it). One relaxed load when the AOF is off.
    #[inline]
    pub fn before_reply(&self) {
        if !self.on.load(Relaxed) {
            return;
        }
        let target = self.appended.load(Acquire);
        if self.policy.load(Relaxed) == FSYNC_ALWAYS {
            if self.synced.load(Acquire) < target {
                self.sync_to(target);
            }
        } else if self.written.load(Acquire) < target {
            let mut f = self.files.lock();
            if self.written.load(Acquire) < target {
                self.write_locked(&mut f);
            }
        }
    }

    /// Writes and fsyncs everything appended up to at least `target` (group commit).
    pub(super) fn sync_to(&self, target: u64) {
        let mut f = self.files.lock();
        if self.synced.load(Acquire) >= target {
            return;
        }
        let upto = self.write_locked(&mut f);
        if let Some(file) = &f.incr {
            if let Err(e) = file.sync_data() {
                // As Redis: an acknowledged write could not be made durable.
                tracing::error!(
                    "Can't persist AOF for fsync error when the AOF fsync policy is 'always': {e}. Exiting..."
                );
                std::process::exit(1);
            }
        }
        self.synced.fetch_max(upto, Release);
    }

    /// Moves the buffers to the files (caller holds `files`); returns the main-stream
    /// offset now written.
    pub(super) fn write_locked(&self, f: &mut Files) -> u64 {
        let (main, next, upto) = {
            let mut b = self.buf.lock();
            let main = std::mem::take(&mut b.main.data);
            let next = b
                .rewrite
                .as_mut()
                .map(|rw| std::mem::take(&mut rw.out.data))
                .unwrap_or_default();
            (main, next, self.appended.load(Acquire))
        };
        if !next.is_empty() {
            if let Some((file, _, _)) = f.next.as_mut() {
                if let Err(e) = file.write_all(&next) {
                    warn!("Error writing the AOF rewrite's incr file: {e}");
                    if let Some(rw) = self.buf.lock().rewrite.as_mut() {
                        rw.failed = Some(format!("can't write the new incr file: {e}"));
                    }
                }
            }
        }
        if !main.is_empty() {
            if let Some(file) = f.incr.as_mut() {
                match file.write_all(&main) {
                    Ok(()) => {
                        f.incr_len += main.len() as u64;
                        self.current_size.fetch_add(main.len() as u64, Relaxed);
                        if self.write_failed.swap(false, Relaxed) {
                            warn!("AOF write error looks solved, Ember can write again.");
                        }
                    }
                    Err(e) => {
                        warn!("Error writing to the AOF file: {e}");
                        // Drop a partial write, keep the data for the next try.
                        let _ = file.set_len(f.incr_len);
                        let mut b = self.buf.lock();
                        let rest = std::mem::take(&mut b.main.data);
                        b.main.data = main;
                        b.main.data.extend_from_slice(&rest);
                        self.write_failed.store(true, Relaxed);
                        if self.policy.load(Relaxed) == FSYNC_ALWAYS {
                            tracing::error!("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
                            std::process::exit(1);
                        }
                        return self.written.load(Acquire);
                    }
                }
            }
        }
        self.written.fetch_max(upto, Release);
        upto
    }

    /// Writes the buffers and fsyncs the incr file (everysec tick, shutdown).
    pub(super) fn flush_and_sync(&self) {
        let (upto, file) = {
            let mut f = self.files.lock();
            let upto = self.write_locked(&mut f);
            (upto, f.incr.as_ref().and_then(|f| f.try_clone().ok()))
        };
        if let Some(file) = file {
            match file.sync_data() {
                Ok(()) => {
                    self.synced.fetch_max(upto, Release);
                }
                Err(e) => warn!("AOF fsync failed: {e}"),
            }
        }
    }
}

pub(super) enum Class {
    Include,
    Skip,
    Restore(Vec<(usize, Vec<u8>)>),
}

/// Where a command goes during a rewrite (see the module documentation).
pub(super) fn classify(server: &Server, rw: &mut RewriteBuf, effects: &[Effect]) -> Class {
    let total = rw.visited.len();
    let mut keys: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut meta = false;
    for e in effects {
        match e.scope {
            Reach::Global => {
                if rw.nvisited == 0 {
                    return Class::Skip;
                }
                if rw.nvisited == total {
                    return Class::Include;
                }
                rw.failed = Some("a keyspace-wide write ran during the rewrite".into());
                return Class::Skip;
            }
            Reach::Meta => meta = true,
            Reach::Keys => keys.extend(e.keys.iter().cloned()),
        }
    }
    if keys.is_empty() {
        return Class::Include;
    }
    let ks = &server.keyspace;
    let (seen, unseen): (Vec<_>, Vec<_>) = keys
        .into_iter()
        .partition(|(_, k)| rw.visited[ks.shard_of(k)]);
    if unseen.is_empty() {
        Class::Include
    } else if seen.is_empty() && !meta {
        Class::Skip
    } else if meta {
        // FUNCTION LOAD in a transaction that also reaches unvisited keys: rare enough
        // to start over.
        rw.failed = Some("a function change ran in a transaction during the rewrite".into());
        Class::Skip
    } else {
        let mut seen = seen;
        seen.sort();
        seen.dedup();
        Class::Restore(seen)
    }
}
