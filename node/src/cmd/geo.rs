//! Geospatial commands: points stored as 52-bit geohash scores in sorted sets.
//!
//! GEOADD, GEOPOS, GEODIST, GEOHASH, GEOSEARCH, GEOSEARCHSTORE, GEORADIUS,
//! GEORADIUSBYMEMBER and their `_RO` forms. The geohash arithmetic is a faithful port of
//! Redis's `geohash.c` / `geohash_helper.c`, and the search of `geo.c` (9-area neighbour
//! scan, haversine distance, Redis's partial quicksort for `COUNT`), so results match
//! redis-server's bit for bit.

use resp::{Args, Protocol};
use storage::zset::{AddResult, ZSet};
use storage::Value;

use crate::cmd::util::{is, parse_float, parse_i64};
use crate::cmd::zsets::{as_zset, read};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const G: Group = Group::Geo;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("geoadd", -5, WRITE | DENYOOM, (1, 1, 1), G, geoadd).doc(
        "Adds one or more members to a geospatial index. The key is created if it doesn't exist.",
        "3.2.0",
    ),
    CommandSpec::new("geopos", -2, READONLY, (1, 1, 1), G, geopos)
        .doc("Returns the longitude and latitude of members from a geospatial index.", "3.2.0"),
    CommandSpec::new("geodist", -4, READONLY, (1, 1, 1), G, geodist)
        .doc("Returns the distance between two members of a geospatial index.", "3.2.0"),
    CommandSpec::new("geohash", -2, READONLY, (1, 1, 1), G, geohash)
        .doc("Returns members from a geospatial index as geohash strings.", "3.2.0"),
    CommandSpec::new("geosearch", -7, READONLY, (1, 1, 1), G, geosearch).doc(
        "Queries a geospatial index for members inside an area of a box or a circle.",
        "6.2.0",
    ),
    CommandSpec::new("geosearchstore", -8, WRITE | DENYOOM, (1, 2, 1), G, geosearchstore).doc(
        "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.",
        "6.2.0",
    ),
    CommandSpec::new("georadius", -6, WRITE | DENYOOM | MOVABLE_KEYS, (1, 1, 1), G, georadius)
        .doc(
            "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.",
            "3.2.0",
        )
        .keys_by(store_key),
    CommandSpec::new(
        "georadiusbymember",
        -5,
        WRITE | DENYOOM | MOVABLE_KEYS,
        (1, 1, 1),
        G,
        georadiusbymember,
    )
    .doc(
        "Queries a geospatial index for members within a distance from a member, optionally stores the result.",
        "3.2.0",
    )
    .keys_by(store_key),
    CommandSpec::new("georadius_ro", -6, READONLY, (1, 1, 1), G, georadius_ro).doc(
        "Returns members from a geospatial index that are within a distance from a coordinate.",
        "3.2.10",
    ),
    CommandSpec::new("georadiusbymember_ro", -5, READONLY, (1, 1, 1), G, georadiusbymember_ro)
        .doc(
            "Returns members from a geospatial index that are within a distance from a member.",
            "3.2.10",
        ),
];

/// The STORE and STOREDIST destinations of GEORADIUS and GEORADIUSBYMEMBER, found as
/// Redis 7's key specs do: the first STORE, then the first STOREDIST, after the fixed
/// arguments (from 6 for GEORADIUS, 5 for GEORADIUSBYMEMBER).
fn store_key(args: &Args<'_>) -> Vec<usize> {
    let start = if is(args.arg(0), "georadius") { 6 } else { 5 };
    let find = |word: &str| (start..args.len().saturating_sub(1)).find(|&i| is(args.arg(i), word));
    ["store", "storedist"]
        .into_iter()
        .filter_map(|w| find(w).map(|i| i + 1))
        .collect()
}
// ------------------------------------------------------------------------------------------
// geohash.c

/// Longitude limits of the index.
const GEO_LONG_MIN: f64 = -180.0;
const GEO_LONG_MAX: f64 = 180.0;
/// Latitude limits of the index (EPSG:900913).
const GEO_LAT_MIN: f64 = -85.05112878;
const GEO_LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate of a stored score (26 + 26 = 52).
const GEO_STEP_MAX: u8 = 26;

/// Earth's quadratic mean radius for WGS-84, in meters.
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

/// A coordinate range.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Range {
    min: f64,
    max: f64,
}

/// Geohash bits with their step (bits per coordinate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct HashBits {
    bits: u64,
    step: u8,
}

impl HashBits {
    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// The cell a geohash covers.
#[derive(Clone, Copy, Debug)]
struct Area {
    longitude: Range,
    latitude: Range,
}

const LONG_RANGE: Range = Range {
    min: GEO_LONG_MIN,
    max: GEO_LONG_MAX,
};
const LAT_RANGE: Range = Range {
    min: GEO_LAT_MIN,
    max: GEO_LAT_MAX,
};

/// Interleaves the low 32 bits of x (even positions) and y (odd positions).
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let mut x = xlo as u64;
    let mut y = ylo as u64;
    for k in (0..5).rev() {
        x = (x | (x << S[k])) & B[k];
        y = (y | (y << S[k])) & B[k];
    }
    x | (y << 1)
}

/// Reverses [`interleave64`]: x in the low 32 bits, y in the high 32 bits.
fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = interleaved;
    let mut y = interleaved >> 1;
    for k in 0..6 {
        x = (x | (x >> S[k])) & B[k];
        y = (y | (y >> S[k])) & B[k];
    }
    x | (y << 32)
}

/// `geohashEncode`: the cell of `step` bits per coordinate holding (lon, lat).
fn encode(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<HashBits> {
    if step > 32 || step == 0 {
        return None;
    }
    if !(GEO_LONG_MIN..=GEO_LONG_MAX).contains(&longitude)
        || !(GEO_LAT_MIN..=GEO_LAT_MAX).contains(&latitude)
    {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    long_offset *= scale;
    Some(HashBits {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// `geohashDecode`: the cell covered by `hash`.
fn decode(long_range: Range, lat_range: Range, hash: HashBits) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let step = hash.step;
    let sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = sep as u32;
    let ilono = (sep >> 32) as u32;
    let div = (1u64 << step) as f64;
    Some(Area {
        latitude: Range {
            min: lat_range.min + (ilato as f64 / div) * lat_scale,
            max: lat_range.min + (ilato.wrapping_add(1) as f64 / div) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (ilono as f64 / div) * long_scale,
            max: long_range.min + (ilono.wrapping_add(1) as f64 / div) * long_scale,
        },
    })
}

/// The centre of a cell, clamped to the index limits (`geohashDecodeAreaToLongLat`).
fn area_center(a: &Area) -> [f64; 2] {
    let lon = ((a.longitude.min + a.longitude.max) / 2.0).clamp(GEO_LONG_MIN, GEO_LONG_MAX);
    let lat = ((a.latitude.min + a.latitude.max) / 2.0).clamp(GEO_LAT_MIN, GEO_LAT_MAX);
    [lon, lat]
}

/// C's `(uint64_t)score` as x86-64 compilers emit it (negative values wrap, values out
/// of range give the "integer indefinite" pattern), so odd scores decode as in Redis.
fn c_double_to_u64(v: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let signed = |x: f64| -> u64 {
        if x > -TWO63 - 1.0 && x < TWO63 {
            (x as i64) as u64
        } else {
            1 << 63
        }
    };
    if v < TWO63 {
        signed(v)
    } else {
        signed(v - TWO63) ^ (1 << 63)
    }
}

/// `decodeGeohash`: the (lon, lat) a stored score stands for.
fn decode_score(score: f64) -> Option<[f64; 2]> {
    let hash = HashBits {
        bits: c_double_to_u64(score),
        step: GEO_STEP_MAX,
    };
    decode(LONG_RANGE, LAT_RANGE, hash).map(|a| area_center(&a))
}

/// The 52-bit score of (lon, lat), which must be within the limits.
fn encode_score(lon: f64, lat: f64) -> Option<u64> {
    encode(LONG_RANGE, LAT_RANGE, lon, lat, GEO_STEP_MAX).map(align52)
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 || hash.step == 0 || hash.step > 32 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let shift = 64 - hash.step as u32 * 2;
    let zz = 0x5555555555555555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> shift;
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 || hash.step == 0 || hash.step > 32 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let shift = 64 - hash.step as u32 * 2;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> shift;
    hash.bits = x | y;
}

/// The eight neighbours of a cell.
#[derive(Clone, Copy, Debug, Default)]
struct Neighbors {
    north: HashBits,
    east: HashBits,
    west: HashBits,
    south: HashBits,
    north_east: HashBits,
    south_east: HashBits,
    north_west: HashBits,
    south_west: HashBits,
}

fn neighbors(hash: &HashBits) -> Neighbors {
    let mv = |dx: i8, dy: i8| {
        let mut h = *hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    Neighbors {
        east: mv(1, 0),
        west: mv(-1, 0),
        south: mv(0, -1),
        north: mv(0, 1),
        north_west: mv(-1, 1),
        north_east: mv(1, 1),
        south_east: mv(1, -1),
        south_west: mv(-1, -1),
    }
}

// ------------------------------------------------------------------------------------------
// geohash_helper.c

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// The step (bits per coordinate) of the 9 search cells for a radius query.
fn estimate_steps_by_radius(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The search area: a circle or an axis-aligned box around a centre.
#[derive(Clone, Copy, Debug)]
enum ShapeKind {
    Circle { radius: f64 },
    Rect { width: f64, height: f64 },
}

/// A search area with its centre and the unit conversion factor to meters.
#[derive(Clone, Copy, Debug)]
struct Shape {
    xy: [f64; 2],
    conversion: f64,
    kind: ShapeKind,
}

/// `geohashBoundingBox`: [min lon, min lat, max lon, max lat].
fn bounding_box(shape: &Shape) -> [f64; 4] {
    let [longitude, latitude] = shape.xy;
    let (h, w) = match shape.kind {
        ShapeKind::Circle { radius } => (radius, radius),
        ShapeKind::Rect { width, height } => (height / 2.0, width / 2.0),
    };
    let height = shape.conversion * h;
    let width = shape.conversion * w;
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let long_delta_top =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
    let long_delta_bottom =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
    let southern = latitude < 0.0;
    [
        if southern {
            longitude - long_delta_bottom
        } else {
            longitude - long_delta_top
        },
        latitude - lat_delta,
        if southern {
            longitude + long_delta_bottom
        } else {
            longitude + long_delta_top
        },
        latitude + lat_delta,
    ]
}

/// The centre cell and its (pruned) neighbours covering a search.
struct SearchAreas {
    hash: HashBits,
    neighbors: Neighbors,
}

/// `geohashCalculateAreasByShapeWGS84`.
fn areas_by_shape(shape: &Shape) -> SearchAreas {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape);
    let [longitude, latitude] = shape.xy;
    let radius_meters = match shape.kind {
        ShapeKind::Circle { radius } => radius,
        ShapeKind::Rect { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * shape.conversion;
    let mut steps = estimate_steps_by_radius(radius_meters, latitude);
    let calc = |steps: u8| {
        let hash = encode(LONG_RANGE, LAT_RANGE, longitude, latitude, steps).unwrap_or_default();
        let n = neighbors(&hash);
        let area = decode(LONG_RANGE, LAT_RANGE, hash);
        (hash, n, area)
    };
    let (mut hash, mut nb, mut area) = calc(steps);
    let dec = |h: HashBits| decode(LONG_RANGE, LAT_RANGE, h);
    let mut decrease_step = false;
    if let Some(north) = dec(nb.north) {
        if north.latitude.max < max_lat {
            decrease_step = true;
        }
    }
    if let Some(south) = dec(nb.south) {
        if south.latitude.min > min_lat {
            decrease_step = true;
        }
    }
    if let Some(east) = dec(nb.east) {
        if east.longitude.max < max_lon {
            decrease_step = true;
        }
    }
    if let Some(west) = dec(nb.west) {
        if west.longitude.min > min_lon {
            decrease_step = true;
        }
    }
    if steps > 1 && decrease_step {
        steps -= 1;
        (hash, nb, area) = calc(steps);
    }
    if steps >= 2 {
        if let Some(area) = area {
            let z = HashBits::default();
            if area.latitude.min < min_lat {
                nb.south = z;
                nb.south_west = z;
                nb.south_east = z;
            }
            if area.latitude.max > max_lat {
                nb.north = z;
                nb.north_east = z;
                nb.north_west = z;
            }
            if area.longitude.min < min_lon {
                nb.west = z;
                nb.south_west = z;
                nb.north_west = z;
            }
            if area.longitude.max > max_lon {
                nb.east = z;
                nb.south_east = z;
                nb.north_east = z;
            }
        }
    }
    SearchAreas {
        hash,
        neighbors: nb,
    }
}

/// `geohashAlign52Bits`.
fn align52(hash: HashBits) -> u64 {
    hash.bits << (52 - hash.step as u32 * 2)
}

/// Distance along a meridian between two latitudes.
fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// Haversine great-circle distance in meters (`geohashGetDistance`).
fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// `geohashGetDistanceIfInRectangle`: the distance to (x2, y2) when it lies in the box of
/// `width_m` × `height_m` centred on (x1, y1).
fn distance_if_in_rectangle(
    width_m: f64,
    height_m: f64,
    x1: f64,
    y1: f64,
    x2: f64,
    y2: f64,
) -> Option<f64> {
    if lat_distance(y2, y1) > height_m / 2.0 {
        return None;
    }
    if distance(x2, y2, x1, y2) > width_m / 2.0 {
        return None;
    }
    Some(distance(x1, y1, x2, y2))
}

// ------------------------------------------------------------------------------------------
// geo.c search

/// A point found by a search.
#[derive(Clone, Debug)]
struct GeoPoint {
    lon: f64,
    lat: f64,
    dist: f64,
    score: f64,
    member: Vec<u8>,
}

/// `geoWithinShape`: the decoded position and distance of `score` when inside `shape`.
fn within_shape(shape: &Shape, score: f64) -> Option<([f64; 2], f64)> {
    let xy = decode_score(score)?;
    let d = match shape.kind {
        ShapeKind::Circle { radius } => {
            let d = distance(shape.xy[0], shape.xy[1], xy[0], xy[1]);
            if d > radius * shape.conversion {
                return None;
            }
            d
        }
        ShapeKind::Rect { width, height } => distance_if_in_rectangle(
            width * shape.conversion,
            height * shape.conversion,
            shape.xy[0],
            shape.xy[1],
            xy[0],
            xy[1],
        )?,
    };
    Some((xy, d))
}

/// `geoGetPointsInRange`: appends the members with scores in `[min, max)` inside `shape`.
fn points_in_range(
    z: &ZSet,
    min: f64,
    max: f64,
    shape: &Shape,
    ga: &mut Vec<GeoPoint>,
    limit: usize,
) {
    let start = z.partition_point(|s, _| s < min);
    for (m, s) in z.range(start, z.len()) {
        if s >= max {
            break;
        }
        if let Some((xy, d)) = within_shape(shape, s) {
            ga.push(GeoPoint {
                lon: xy[0],
                lat: xy[1],
                dist: d,
                score: s,
                member: m.to_vec(),
            });
        }
        if !ga.is_empty() && limit != 0 && ga.len() >= limit {
            break;
        }
    }
}

/// `membersOfAllNeighbors`: scans the centre cell and its neighbours.
fn members_of_all_neighbors(
    z: &ZSet,
    areas: &SearchAreas,
    shape: &Shape,
    limit: usize,
) -> Vec<GeoPoint> {
    let n = &areas.neighbors;
    let cells = [
        areas.hash,
        n.north,
        n.south,
        n.east,
        n.west,
        n.north_east,
        n.north_west,
        n.south_east,
        n.south_west,
    ];
    let mut ga = Vec::new();
    let mut last_processed = 0usize;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_zero() {
            continue;
        }
        if last_processed != 0 && *cell == cells[last_processed] {
            continue;
        }
        if !ga.is_empty() && limit != 0 && ga.len() >= limit {
            break;
        }
        let min = align52(*cell);
        let max = align52(HashBits {
            bits: cell.bits.wrapping_add(1),
            step: cell.step,
        });
        points_in_range(z, min as f64, max as f64, shape, &mut ga, limit);
        last_processed = i;
    }
    ga
}

/// Redis's `pqsort` (NetBSD qsort with a partial range, without the switch to insertion
/// sort that Redis dropped): sorts enough of `a` that the
/// items of ranks `lrange..=rrange` are in place, with the same (unstable) tie order.
fn pqsort<T>(
    a: &mut [T],
    cmp: &impl Fn(&T, &T) -> std::cmp::Ordering,
    lrange: usize,
    rrange: usize,
) {
    pqsort_inner(a, 0, a.len(), cmp, lrange, rrange);
}

fn pqsort_inner<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: &impl Fn(&T, &T) -> std::cmp::Ordering,
    lrange: usize,
    rrange: usize,
) {
    use std::cmp::Ordering::*;
    let c = |v: &[T], i: usize, j: usize| cmp(&v[i], &v[j]);
    let med3 = |v: &[T], x: usize, y: usize, z: usize| -> usize {
        if c(v, x, y) == Less {
            if c(v, y, z) == Less {
                y
            } else if c(v, x, z) == Less {
                z
            } else {
                x
            }
        } else if c(v, y, z) == Greater {
            y
        } else if c(v, x, z) == Less {
            x
        } else {
            z
        }
    };
    let vecswap = |v: &mut [T], x: usize, y: usize, k: usize| {
        for t in 0..k {
            v.swap(x + t, y + t);
        }
    };
    let insertion = |v: &mut [T], a: usize, n: usize| {
        for pm in a + 1..a + n {
            let mut pl = pm;
            while pl > a && c(v, pl - 1, pl) == Greater {
                v.swap(pl, pl - 1);
                pl -= 1;
            }
        }
    };
    loop {
        if n < 7 {
            insertion(v, a, n);
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d);
                pm = med3(v, pm - d, pm, pm + d);
                pn = med3(v, pn - 2 * d, pn - d, pn);
            }
            pm = med3(v, pl, pm, pn);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        // pc/pd may step below `a + 1`; keep them as signed positions.
        let (mut pc, mut pd) = ((a + n - 1) as isize, (a + n - 1) as isize);
        loop {
            while pb as isize <= pc {
                let r = c(v, pb, a);
                if r == Greater {
                    break;
                }
                if r == Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb as isize <= pc {
                let r = c(v, pc as usize, a);
                if r == Less {
                    break;
                }
                if r == Equal {
                    v.swap(pc as usize, pd as usize);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb as isize > pc {
                break;
            }
            v.swap(pb, pc as usize);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let (pc, pd) = (pc as usize, pd as usize);
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 {
            let (l, rr) = (a, a + r - 1);
            if !((lrange < l && rrange < l) || (lrange > rr && rrange > rr)) {
                pqsort_inner(v, a, r, cmp, lrange, rrange);
            }
        }
        let r = pd - pc;
        if r > 1 {
            a = pn - r;
            n = r;
            let (l, rr) = (a, a + r - 1);
            if !((lrange < l && rrange < l) || (lrange > rr && rrange > rr)) {
                continue;
            }
        }
        return;
    }
}

// ------------------------------------------------------------------------------------------
// Argument helpers

/// Redis's `getDoubleFromObject`: a float, refusing overflow (`1e400`) but taking `inf`.
fn get_double(b: &[u8]) -> Option<f64> {
    let v = parse_float(b)?;
    if v.is_infinite() && !b.iter().any(|c| c.eq_ignore_ascii_case(&b'i')) {
        return None;
    }
    Some(v)
}

/// `extractLongLatOrReply`.
fn extract_lon_lat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], CmdError> {
    let x = get_double(lon).ok_or(CmdError::NotFloat)?;
    let y = get_double(lat).ok_or(CmdError::NotFloat)?;
    if !(GEO_LONG_MIN..=GEO_LONG_MAX).contains(&x) || !(GEO_LAT_MIN..=GEO_LAT_MAX).contains(&y) {
        return Err(CmdError::err(format!(
            "invalid longitude,latitude pair {x:.6},{y:.6}"
        )));
    }
    Ok([x, y])
}

/// `extractUnitOrReply`: the factor converting the unit to meters.
fn extract_unit(u: &[u8]) -> Result<f64, CmdError> {
    if is(u, "m") {
        Ok(1.0)
    } else if is(u, "km") {
        Ok(1000.0)
    } else if is(u, "ft") {
        Ok(0.3048)
    } else if is(u, "mi") {
        Ok(1609.34)
    } else {
        Err(CmdError::err(
            "unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

/// `extractDistanceOrReply`: (radius, conversion).
fn extract_distance(r: &[u8], unit: &[u8]) -> Result<(f64, f64), CmdError> {
    let d = get_double(r).ok_or_else(|| CmdError::err("need numeric radius"))?;
    if d < 0.0 {
        return Err(CmdError::err("radius cannot be negative"));
    }
    Ok((d, extract_unit(unit)?))
}

/// `extractBoxOrReply`: (width, height, conversion).
fn extract_box(w: &[u8], h: &[u8], unit: &[u8]) -> Result<(f64, f64, f64), CmdError> {
    let w = get_double(w).ok_or_else(|| CmdError::err("need numeric width"))?;
    let h = get_double(h).ok_or_else(|| CmdError::err("need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::err("height or width cannot be negative"));
    }
    Ok((w, h, extract_unit(unit)?))
}

/// The sorted set held by `v`, or WRONGTYPE.
/// `addReplyDoubleDistance`: a bulk string with 4 decimals.
fn reply_distance(ctx: &mut Ctx<'_>, d: f64) {
    ctx.out.bulk(format!("{d:.4}").as_bytes());
}

/// `ld2string(.., LD_STR_HUMAN)`: 17 decimals, trailing zeros trimmed.
fn human_double(v: f64) -> String {
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// `addReplyHumanLongDouble`: a bulk string in RESP2, a double in RESP3.
fn reply_human_double(ctx: &mut Ctx<'_>, v: f64) {
    let s = human_double(v);
    if ctx.out.protocol() == Protocol::Resp3 {
        let buf = ctx.out.buffer_mut();
        buf.push(b',');
        buf.extend_from_slice(s.as_bytes());
        buf.extend_from_slice(b"\r\n");
    } else {
        ctx.out.bulk(s.as_bytes());
    }
}

// ------------------------------------------------------------------------------------------
// Commands

fn geoadd(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut i = 2;
    while i < args.len() {
        let a = args.arg(i);
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "ch") {
            ch = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = args.len() - i;
    if !rest.is_multiple_of(3) || (xx && nx) {
        return Err(CmdError::Syntax);
    }
    let mut pairs = Vec::with_capacity(rest / 3);
    let mut max_len = 0;
    for j in (i..args.len()).step_by(3) {
        let xy = extract_lon_lat(args.arg(j), args.arg(j + 1))?;
        let score = encode_score(xy[0], xy[1]).unwrap_or(0) as f64;
        let m = args.arg(j + 2);
        max_len = max_len.max(m.len());
        pairs.push((score, m));
    }
    if pairs.is_empty() {
        // ZADD with no score/member pair.
        return Err(CmdError::Syntax);
    }
    let key = args.arg(1);
    let ks = ctx.ks();
    let mut g = ks.lock(ctx.db(), key, ctx.now);
    match g.get() {
        Some(e) => {
            as_zset(&e.value)?;
        }
        None => {
            if xx {
                drop(g);
                ctx.out.int(0);
                return Ok(());
            }
            g.insert(
                Value::ZSet(Box::new(ZSet::with_hint(pairs.len(), max_len))),
                0,
            );
        }
    }
    let Some(e) = g.get() else {
        return Err(CmdError::err("internal error"));
    };
    let Value::ZSet(z) = &mut e.value else {
        return Err(CmdError::WrongType);
    };
    let (mut added, mut updated) = (0i64, 0i64);
    for (s, m) in pairs {
        let exists = z.score(m).is_some();
        if (nx && exists) || (xx && !exists) {
            continue;
        }
        match z.add(m, s) {
            AddResult::Added => added += 1,
            AddResult::Updated(_) => updated += 1,
            AddResult::Unchanged => {}
        }
    }
    let empty = z.is_empty();
    if empty {
        g.remove();
    }
    drop(g);
    if added + updated > 0 {
        // GEOADD runs as ZADD in Redis.
        ctx.notify(crate::notify::ZSET, "zadd", key);
    }
    ctx.out.int(if ch { added + updated } else { added });
    Ok(())
}

fn geopos(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    read(ctx, args.arg(1), |ctx, z| {
        ctx.out.array(args.len() - 2);
        for m in args.slice(2).iter() {
            match z.and_then(|z| z.score(m)).and_then(decode_score) {
                None => ctx.out.null_array(),
                Some(xy) => {
                    ctx.out.array(2);
                    reply_human_double(ctx, xy[0]);
                    reply_human_double(ctx, xy[1]);
                }
            }
        }
        Ok(())
    })
}

fn geodist(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut to_meter = 1.0;
    if args.len() == 5 {
        to_meter = extract_unit(args.arg(4))?;
    } else if args.len() > 5 {
        return Err(CmdError::Syntax);
    }
    read(ctx, args.arg(1), |ctx, z| {
        let Some(z) = z else {
            ctx.out.null();
            return Ok(());
        };
        let (Some(s1), Some(s2)) = (z.score(args.arg(2)), z.score(args.arg(3))) else {
            ctx.out.null();
            return Ok(());
        };
        match (decode_score(s1), decode_score(s2)) {
            (Some(a), Some(b)) => reply_distance(ctx, distance(a[0], a[1], b[0], b[1]) / to_meter),
            _ => ctx.out.null(),
        }
        Ok(())
    })
}

fn geohash(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    read(ctx, args.arg(1), |ctx, z| {
        ctx.out.array(args.len() - 2);
        for m in args.slice(2).iter() {
            match z.and_then(|z| z.score(m)).and_then(decode_score) {
                None => ctx.out.null(),
                Some(xy) => {
                    let std_lon = Range {
                        min: -180.0,
                        max: 180.0,
                    };
                    let std_lat = Range {
                        min: -90.0,
                        max: 90.0,
                    };
                    let bits = encode(std_lon, std_lat, xy[0], xy[1], 26)
                        .map(|h| h.bits)
                        .unwrap_or(0);
                    let mut buf = [0u8; 11];
                    for (k, b) in buf.iter_mut().enumerate() {
                        let idx = if k == 10 {
                            0
                        } else {
                            (bits >> (52 - (k + 1) * 5)) & 0x1f
                        };
                        *b = ALPHABET[idx as usize];
                    }
                    ctx.out.bulk(&buf);
                }
            }
        }
        Ok(())
    })
}

/// Which command form runs [`georadius_generic`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS / GEORADIUS_RO: centre from coordinates.
    Coords,
    /// GEORADIUSBYMEMBER / GEORADIUSBYMEMBER_RO: centre from a member.
    Member,
    /// GEOSEARCH / GEOSEARCHSTORE.
    Search,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A parsed search request.
struct Query {
    shape: Shape,
    store: Option<usize>,
    storedist: bool,
    withdist: bool,
    withhash: bool,
    withcoords: bool,
    sort: Sort,
    any: bool,
    count: usize,
}

/// What the parser may look members up in: nothing (a syntax pre-scan), or the source.
#[derive(Clone, Copy)]
enum Source<'z> {
    Prescan,
    Set(Option<&'z ZSet>),
}

impl Source<'_> {
    /// The position of `member`; Ok(None) in a pre-scan or when the key is missing.
    fn member_pos(&self, member: &[u8]) -> Result<Option<[f64; 2]>, CmdError> {
        match self {
            Source::Prescan | Source::Set(None) => Ok(None),
            Source::Set(Some(z)) => z
                .score(member)
                .and_then(decode_score)
                .map(Some)
                .ok_or_else(|| CmdError::err("could not decode requested zset member")),
        }
    }

    fn missing(&self) -> bool {
        matches!(self, Source::Set(None))
    }
}

/// Parses the arguments as Redis's `georadiusGeneric`, in its order of checks.
fn parse_query(
    args: Args<'_>,
    form: Form,
    store_form: bool,
    nostore: bool,
    src: Source<'_>,
) -> Result<Query, CmdError> {
    let mut shape = Shape {
        xy: [0.0, 0.0],
        conversion: 1.0,
        kind: ShapeKind::Circle { radius: 0.0 },
    };
    let mut store = None;
    let base = match form {
        Form::Coords => {
            shape.xy = extract_lon_lat(args.arg(2), args.arg(3))?;
            let (r, c) = extract_distance(args.arg(4), args.arg(5))?;
            shape.kind = ShapeKind::Circle { radius: r };
            shape.conversion = c;
            6
        }
        Form::Member => {
            if !src.missing() {
                if let Some(xy) = src.member_pos(args.arg(2))? {
                    shape.xy = xy;
                }
                let (r, c) = extract_distance(args.arg(3), args.arg(4))?;
                shape.kind = ShapeKind::Circle { radius: r };
                shape.conversion = c;
            }
            5
        }
        Form::Search => {
            if store_form {
                store = Some(1);
                3
            } else {
                2
            }
        }
    };
    let search = form == Form::Search;
    let mut q = Query {
        shape,
        store,
        storedist: false,
        withdist: false,
        withhash: false,
        withcoords: false,
        sort: Sort::None,
        any: false,
        count: 0,
    };
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let remaining = args.len().saturating_sub(base);
    let mut i = 0;
    while i < remaining {
        let at = |k: usize| args.arg(base + k);
        let a = at(i);
        if is(a, "withdist") {
            q.withdist = true;
        } else if is(a, "withhash") {
            q.withhash = true;
        } else if is(a, "withcoord") {
            q.withcoords = true;
        } else if is(a, "any") {
            q.any = true;
        } else if is(a, "asc") {
            q.sort = Sort::Asc;
        } else if is(a, "desc") {
            q.sort = Sort::Desc;
        } else if is(a, "count") && i + 1 < remaining {
            let c = parse_i64(at(i + 1))?;
            if c <= 0 {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            q.count = usize::try_from(c).unwrap_or(usize::MAX);
            i += 1;
        } else if is(a, "store") && i + 1 < remaining && !nostore && !search {
            q.store = Some(base + i + 1);
            q.storedist = false;
            i += 1;
        } else if is(a, "storedist") && i + 1 < remaining && !nostore && !search {
            q.store = Some(base + i + 1);
            q.storedist = true;
            i += 1;
        } else if is(a, "storedist") && search && store_form {
            q.storedist = true;
        } else if is(a, "frommember") && i + 1 < remaining && search && !fromloc {
            if let Some(xy) = src.member_pos(at(i + 1))? {
                q.shape.xy = xy;
            }
            frommember = true;
            i += 1;
        } else if is(a, "fromlonlat") && i + 2 < remaining && search && !frommember {
            q.shape.xy = extract_lon_lat(at(i + 1), at(i + 2))?;
            fromloc = true;
            i += 2;
        } else if is(a, "byradius") && i + 2 < remaining && search && !bybox {
            let (r, c) = extract_distance(at(i + 1), at(i + 2))?;
            q.shape.kind = ShapeKind::Circle { radius: r };
            q.shape.conversion = c;
            byradius = true;
            i += 2;
        } else if is(a, "bybox") && i + 3 < remaining && search && !byradius {
            let (w, h, c) = extract_box(at(i + 1), at(i + 2), at(i + 3))?;
            q.shape.kind = ShapeKind::Rect {
                width: w,
                height: h,
            };
            q.shape.conversion = c;
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if q.store.is_some() && (q.withdist || q.withhash || q.withcoords) {
        return Err(CmdError::err(if store_form {
            "GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        } else {
            "STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        }));
    }
    let name = String::from_utf8_lossy(args.arg(0)).into_owned();
    if search && !(frommember || fromloc) {
        return Err(CmdError::err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if search && !(byradius || bybox) {
        return Err(CmdError::err(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if q.any && q.count == 0 {
        return Err(CmdError::err("the ANY argument requires COUNT argument"));
    }
    Ok(q)
}

/// Runs the search of `q` over `z`: the points to return, in order.
fn run_search(z: &ZSet, q: &Query) -> Vec<GeoPoint> {
    let mut sort = q.sort;
    if q.count != 0 && sort == Sort::None && !q.any {
        sort = Sort::Asc;
    }
    let areas = areas_by_shape(&q.shape);
    let mut ga = members_of_all_neighbors(z, &areas, &q.shape, if q.any { q.count } else { 0 });
    let len = ga.len();
    let returned = if q.count == 0 || len < q.count {
        len
    } else {
        q.count
    };
    let asc = |a: &GeoPoint, b: &GeoPoint| {
        a.dist
            .partial_cmp(&b.dist)
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    match sort {
        Sort::None => {}
        Sort::Asc if returned == len => ga.sort_by(asc),
        Sort::Desc if returned == len => ga.sort_by(|a, b| asc(b, a)),
        Sort::Asc => pqsort(&mut ga, &asc, 0, returned - 1),
        Sort::Desc => pqsort(&mut ga, &|a, b| asc(b, a), 0, returned - 1),
    }
    ga.truncate(returned);
    ga
}

/// `georadiusGeneric`: all of GEORADIUS*, GEOSEARCH and GEOSEARCHSTORE.
fn georadius_generic(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    form: Form,
    store_form: bool,
    nostore: bool,
) -> CmdResult {
    let src_key = args.arg(if store_form { 2 } else { 1 });
    // Find the destination (if any) first, so that both keys are locked together.
    let dst = parse_query(args, form, store_form, nostore, Source::Prescan)
        .ok()
        .and_then(|q| q.store)
        .map(|i| args.arg(i));
    let db = ctx.db();
    let mut keys = vec![src_key];
    keys.extend(dst);
    let mut g = ctx.lock_keys(keys);
    let (q, points) = {
        let z = match g.get(db, src_key) {
            Some(e) => Some(as_zset(&e.value)?),
            None => None,
        };
        ctx.hit_key(z.is_some(), src_key);
        let q = parse_query(args, form, store_form, nostore, Source::Set(z))?;
        let points = z.map(|z| run_search(z, &q));
        (q, points)
    };
    let Some(store_at) = q.store else {
        drop(g);
        let points = points.unwrap_or_default();
        let opts = q.withdist as usize + q.withcoords as usize + q.withhash as usize;
        ctx.out.array(points.len());
        for p in points {
            if opts > 0 {
                ctx.out.array(opts + 1);
            }
            ctx.out.bulk(&p.member);
            if q.withdist {
                reply_distance(ctx, p.dist / q.shape.conversion);
            }
            if q.withhash {
                ctx.out.int(p.score as i64);
            }
            if q.withcoords {
                ctx.out.array(2);
                reply_human_double(ctx, p.lon);
                reply_human_double(ctx, p.lat);
            }
        }
        return Ok(());
    };
    let dst = args.arg(store_at);
    let points = points.unwrap_or_default();
    if points.is_empty() {
        if g.remove(db, dst).is_some() {
            ctx.notify(crate::notify::GENERIC, "del", dst);
        }
    } else {
        let max_len = points.iter().map(|p| p.member.len()).max().unwrap_or(0);
        let mut z = ZSet::with_hint(points.len(), max_len);
        for p in &points {
            let s = if q.storedist {
                p.dist / q.shape.conversion
            } else {
                p.score
            };
            z.add(&p.member, s);
        }
        g.insert(db, dst, Value::ZSet(Box::new(z)), 0);
        let event = if form == Form::Search {
            "geosearchstore"
        } else {
            "georadiusstore"
        };
        ctx.notify(crate::notify::ZSET, event, dst);
    }
    drop(g);
    ctx.out.int(points.len() as i64);
    Ok(())
}

fn geosearch(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    georadius_generic(ctx, args, Form::Search, false, true)
}

fn geosearchstore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    georadius_generic(ctx, args, Form::Search, true, false)
}

fn georadius(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    georadius_generic(ctx, args, Form::Coords, false, false)
}

fn georadiusbymember(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    georadius_generic(ctx, args, Form::Member, false, false)
}

fn georadius_ro(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    georadius_generic(ctx, args, Form::Coords, false, true)
}

fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    georadius_generic(ctx, args, Form::Member, false, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_roundtrip() {
        for (x, y) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ffffff, 0x1234567),
            (12345, 54321),
        ] {
            let v = interleave64(x, y);
            let d = deinterleave64(v);
            assert_eq!(d as u32, x);
            assert_eq!((d >> 32) as u32, y);
        }
    }

    #[test]
    fn encode_known_scores() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo" 15.087269 37.502669 "Catania"
        assert_eq!(encode_score(13.361389, 38.115556), Some(3479099956230698));
        assert_eq!(encode_score(15.087269, 37.502669), Some(3479447370796909));
        assert_eq!(encode_score(181.0, 0.0), None);
        assert_eq!(encode_score(0.0, 86.0), None);
    }

    #[test]
    fn decode_cell_centre() {
        let xy = decode_score(3479099956230698.0).unwrap();
        assert_eq!(human_double(xy[0]), "13.36138933897018433");
        assert_eq!(human_double(xy[1]), "38.11555639549629859");
    }

    #[test]
    fn distance_matches_redis() {
        let a = decode_score(3479099956230698.0).unwrap();
        let b = decode_score(3479447370796909.0).unwrap();
        let d = distance(a[0], a[1], b[0], b[1]);
        assert_eq!(format!("{d:.4}"), "166274.1516");
        assert_eq!(format!("{:.4}", d / 1000.0), "166.2742");
        assert_eq!(distance(1.0, 2.0, 1.0, 2.0), 0.0);
    }

    #[test]
    fn steps_and_human_format() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(1e9, 0.0), 1);
        assert_eq!(human_double(-0.0), "0");
        assert_eq!(human_double(1.5), "1.5");
        assert_eq!(human_double(2.0), "2");
    }

    #[test]
    fn c_casts_of_odd_scores() {
        assert_eq!(c_double_to_u64(-1.0), u64::MAX);
        assert_eq!(c_double_to_u64(1e300), 0);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
        assert_eq!(c_double_to_u64(f64::NEG_INFINITY), 1 << 63);
        assert_eq!(c_double_to_u64(-1e19), 1 << 63);
        assert_eq!(c_double_to_u64(1.8e19), 18_000_000_000_000_000_000);
        assert_eq!(c_double_to_u64(123.75), 123);
    }

    #[test]
    fn pqsort_orders_prefix() {
        let mut v: Vec<i32> = (0..200).map(|i| (i * 7919) % 211).collect();
        let mut s = v.clone();
        s.sort();
        pqsort(&mut v, &|a: &i32, b: &i32| a.cmp(b), 0, 9);
        assert_eq!(&v[..10], &s[..10]);
        let mut w: Vec<i32> = (0..100).map(|i| (i * 31) % 101).collect();
        pqsort(&mut w, &|a: &i32, b: &i32| a.cmp(b), 0, 99);
        let mut ws = w.clone();
        ws.sort();
        assert_eq!(w, ws);
    }
}
