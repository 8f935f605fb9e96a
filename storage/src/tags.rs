//! Key tags (Ember only): labels attached to keys, for listing or deleting every key with a
//! tag (cache invalidation by tag).
//!
//! Tags are key metadata kept beside a [`crate::Table`]'s hash table in a [`TagIndex`] (key → its
//! tags, tag → its keys), created when a table's first tag is set, so untagged keys cost
//! nothing but one flag byte in the entry's padding. The table keeps the index in step
//! with its keys: every removal (DEL, expiry, a collection becoming empty, FLUSH) drops the
//! key's tags, overwriting a live key's value keeps them. The index may name keys whose
//! deadline has passed but which are not reaped yet; readers filter them out.
//!
//! [`Keyspace`] gets the database-wide operations here (TAG.MEMBERS, TAG.COUNT, TAG.LIST,
//! TAG.DELKEYS), which visit the shards one at a time.

use hashbrown::{HashMap, HashSet};

use crate::keyspace::Keyspace;
use crate::table::Entry;

/// One table's tags: both directions, kept consistent.
#[derive(Debug, Default)]
pub struct TagIndex {
    /// Key → its tags, sorted bytewise, no duplicates, never empty.
    by_key: HashMap<Box<[u8]>, Vec<Box<[u8]>>>,
    /// Tag → keys carrying it, never empty.
    by_tag: HashMap<Box<[u8]>, HashSet<Box<[u8]>>>,
}

impl TagIndex {
    /// True when no key has a tag.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The tags of `key`, sorted bytewise (empty when none).
    pub fn tags_of(&self, key: &[u8]) -> &[Box<[u8]>] {
        self.by_key.get(key).map_or(&[], |v| &v[..])
    }

    /// Adds `tag` to `key`; false when the key already had it.
    pub fn add(&mut self, key: &[u8], tag: &[u8]) -> bool {
        let tags = self.by_key.entry_ref(key).or_default();
        let Err(pos) = tags.binary_search_by(|t| (**t).cmp(tag)) else {
            return false;
        };
        tags.insert(pos, tag.into());
        self.by_tag.entry_ref(tag).or_default().insert(key.into());
        true
    }

    /// Removes `tag` from `key`; false when the key did not have it.
    pub fn remove(&mut self, key: &[u8], tag: &[u8]) -> bool {
        let Some(tags) = self.by_key.get_mut(key) else {
            return false;
        };
        let Ok(pos) = tags.binary_search_by(|t| (**t).cmp(tag)) else {
            return false;
        };
        tags.remove(pos);
        if tags.is_empty() {
            self.by_key.remove(key);
        }
        self.unlink_tag(key, tag);
        true
    }

    /// Removes every tag of `key` and returns them (sorted).
    pub fn remove_key(&mut self, key: &[u8]) -> Vec<Box<[u8]>> {
        let tags = self.by_key.remove(key).unwrap_or_default();
        for t in &tags {
            self.unlink_tag(key, t);
        }
        tags
    }

    fn unlink_tag(&mut self, key: &[u8], tag: &[u8]) {
        if let Some(keys) = self.by_tag.get_mut(tag) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_tag.remove(tag);
            }
        }
    }

    /// The keys carrying `tag` (including expired keys not reaped yet).
    pub fn keys_with(&self, tag: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
        self.by_tag.get(tag).into_iter().flatten().map(|k| &k[..])
    }

    /// Every tag with its keys (including expired keys not reaped yet).
    pub fn tags(&self) -> impl Iterator<Item = (&[u8], impl Iterator<Item = &[u8]> + '_)> + '_ {
        self.by_tag
            .iter()
            .map(|(t, keys)| (&t[..], keys.iter().map(|k| &k[..])))
    }
}

/// A page of a cursor walk over a tag's keys ([`Keyspace::tag_members_page`]).
#[derive(Debug, Default)]
pub struct TagPage {
    /// The shard to continue from; 0 when the walk is complete.
    pub cursor: u64,
    /// Live keys with the tag in the shards visited.
    pub keys: Vec<Vec<u8>>,
}

impl Keyspace {
    /// Every live key of `db` carrying `tag` (TAG.MEMBERS), in no particular order.
    pub fn tag_members(&self, db: usize, tag: &[u8], now: u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for i in 0..self.shard_count() {
            self.with_table(i, db, |t| {
                out.extend(t.tagged_keys(tag, now).map(<[u8]>::to_vec));
            });
        }
        out
    }

    /// One page of a walk over the live keys of `db` carrying `tag`: the cursor is a shard
    /// index; shards are visited from `cursor` until at least `count` keys are gathered, so
    /// a key tagged for the whole walk is returned exactly once (keys never change shard).
    pub fn tag_members_page(
        &self,
        db: usize,
        tag: &[u8],
        cursor: u64,
        count: usize,
        now: u64,
    ) -> TagPage {
        let n = self.shard_count();
        let mut page = TagPage::default();
        let Ok(mut i) = usize::try_from(cursor) else {
            return page;
        };
        while i < n && page.keys.len() < count.max(1) {
            self.with_table(i, db, |t| {
                page.keys
                    .extend(t.tagged_keys(tag, now).map(<[u8]>::to_vec));
            });
            i += 1;
        }
        page.cursor = if i < n { i as u64 } else { 0 };
        page
    }

    /// How many live keys of `db` carry `tag` (TAG.COUNT).
    pub fn tag_count(&self, db: usize, tag: &[u8], now: u64) -> usize {
        (0..self.shard_count())
            .map(|i| self.with_table(i, db, |t| t.tagged_keys(tag, now).count()))
            .sum()
    }

    /// Every tag of `db` that at least one live key carries, each once (TAG.LIST).
    pub fn tag_names(&self, db: usize, now: u64) -> Vec<Vec<u8>> {
        let mut all: HashSet<Vec<u8>> = HashSet::new();
        for i in 0..self.shard_count() {
            self.with_table(i, db, |t| {
                for tag in t.tag_names(now) {
                    if !all.contains(tag) {
                        all.insert(tag.to_vec());
                    }
                }
            });
        }
        all.into_iter().collect()
    }

    /// Removes every live key of `db` carrying `tag`, one shard at a time (TAG.DELKEYS);
    /// returns the removed keys with their entries, to be dropped after the locks.
    pub fn delete_tagged(&self, db: usize, tag: &[u8], now: u64) -> Vec<(Vec<u8>, Entry)> {
        let mut out = Vec::new();
        for i in 0..self.shard_count() {
            self.with_table(i, db, |t| out.extend(t.remove_tagged(tag, now)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{RString, Value};

    fn sv(v: &str) -> Value {
        Value::String(RString::from_bytes(v.as_bytes()))
    }

    #[test]
    fn index_keeps_both_directions_in_step() {
        let mut ix = TagIndex::default();
        assert!(ix.add(b"k1", b"b"));
        assert!(ix.add(b"k1", b"a"));
        assert!(!ix.add(b"k1", b"a"));
        assert!(ix.add(b"k2", b"a"));
        let tags: Vec<&[u8]> = ix.tags_of(b"k1").iter().map(|t| &t[..]).collect();
        assert_eq!(tags, [&b"a"[..], b"b"]);
        let mut keys: Vec<&[u8]> = ix.keys_with(b"a").collect();
        keys.sort();
        assert_eq!(keys, [&b"k1"[..], b"k2"]);
        assert!(ix.remove(b"k1", b"a"));
        assert!(!ix.remove(b"k1", b"a"));
        assert_eq!(ix.keys_with(b"a").collect::<Vec<_>>(), [&b"k2"[..]]);
        assert_eq!(ix.remove_key(b"k1").len(), 1);
        assert_eq!(ix.keys_with(b"b").count(), 0);
        assert_eq!(ix.tags().count(), 1);
        ix.remove_key(b"k2");
        assert!(ix.is_empty());
        assert_eq!(ix.tags().count(), 0);
    }

    #[test]
    fn keyspace_members_pages_count_list_and_delete() {
        let ks = Keyspace::new(2, 16);
        for i in 0..500u32 {
            let k = format!("k{i}");
            let mut g = ks.lock(0, k.as_bytes(), 1);
            g.insert(sv("v"), 0);
            let h = g.hash();
            let t = g.table_of(0);
            let tag: &[u8] = if i.is_multiple_of(2) { b"even" } else { b"odd" };
            assert_eq!(t.add_tags(h, k.as_bytes(), [tag, b"all"], 1), Some(2));
        }
        assert_eq!(ks.tag_count(0, b"even", 1), 250);
        assert_eq!(ks.tag_count(1, b"even", 1), 0);
        assert_eq!(ks.tag_members(0, b"all", 1).len(), 500);
        let mut names = ks.tag_names(0, 1);
        names.sort();
        assert_eq!(names, [b"all".to_vec(), b"even".to_vec(), b"odd".to_vec()]);

        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut calls = 0;
        loop {
            let p = ks.tag_members_page(0, b"odd", cursor, 20, 1);
            for k in p.keys {
                assert!(seen.insert(k), "a key twice");
            }
            calls += 1;
            cursor = p.cursor;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 250);
        assert!(calls > 1);
        assert!(ks
            .tag_members_page(0, b"odd", 1 << 40, 20, 1)
            .keys
            .is_empty());

        let gone = ks.delete_tagged(0, b"even", 1);
        assert_eq!(gone.len(), 250);
        assert_eq!(ks.db_size(0), 250);
        assert_eq!(ks.tag_count(0, b"even", 1), 0);
        assert_eq!(ks.tag_count(0, b"all", 1), 250);
        let mut names = ks.tag_names(0, 1);
        names.sort();
        assert_eq!(names, [b"all".to_vec(), b"odd".to_vec()]);
    }
}
